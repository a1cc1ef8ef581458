"""A measured search over NCCL knobs against NCCL's own defaults that does not invent wins.

One *run* is one nccl-tests job of one collective over all hosts (sizes 8 B to 8 GiB), so every
run measures all message-size ranges at once. Per collective the sweep has three stages:

1. **Screening**: baseline (NCCL's defaults) and candidates alternate, ``B c1 B c2 B ... ck B``
   (ABAB). Each candidate run is compared with the mean of the two baseline runs around it, so
   a machine that drifts slowly moves both sides of the comparison alike.
2. **Confirmation**: the best screened candidate of each size range is measured again with
   *fresh* runs, again alternating with the baseline (``B f B f ... B``). Only these fresh runs
   decide: the runs that selected a candidate are never reused to judge it (that reuse is what
   turns noise into "wins"). The gain's confidence interval is corrected (Bonferroni) for every
   candidate, size range and collective compared; a win needs its whole interval above zero.
3. **Baseline re-run**: the defaults are measured again at the end. When they moved (Welch's
   test, and by more than ``MOVED_MIN``) since the start, the machine changed under the sweep
   and every win of that collective is refused.

Gains are ratios of geometric means of bus bandwidth over the sizes of a range, so each size
counts alike. Winners that NCCL's tuner plugin can express (an algorithm and a protocol, from
2.28) become per-collective, per-size rows of its CSV; anything else becomes an environment
variable only when it wins somewhere and is measurably slower nowhere.

The candidates are ``candidates.py``'s, the results ``sweep_result.py``'s, the measurement
through ``bench nccl`` is ``bench_measure.py`` and saving for ``--bench`` is ``saved_sweep.py``.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from clusterctl.errors import UsageError
from clusterctl.nccl.grammar import PER_COLLECTIVE_SINCE
from clusterctl.nccl.tune.candidates import TUNER_CSV_SINCE, Candidate, Validator, candidate_space, valid_only
from clusterctl.nccl.tune.derive import TunedSetting, Tuning
from clusterctl.nccl.tune.stats import Interval, mean_interval, welch_p_value
from clusterctl.nccl.tune.sweep_result import (
    SIZE_RANGES,
    Measure,
    MeasuredRun,
    RangeOutcome,
    SweepResult,
    UnreadRow,
    range_levels,
)
from clusterctl.nccl.versions import NcclVersion, try_parse_version

#: nccl-tests binary stem -> the collective name NCCL's example tuner plugin reads.
COLLECTIVES: dict[str, str] = {
    "all_reduce": "allreduce",
    "all_gather": "allgather",
    "reduce_scatter": "reducescatter",
    "broadcast": "broadcast",
    "reduce": "reduce",
}

#: The example tuner plugin's algorithm names (plugins/tuner/example/README.md).
TUNER_ALGOS: dict[str, str] = {
    "Tree": "tree", "Ring": "ring", "CollnetDirect": "collnet_direct", "CollnetChain": "collnet_chain",
    "NVLS": "nvls", "NVLSTree": "nvls_tree", "PAT": "pat",
}

DEFAULT_BUDGET = 120
DEFAULT_BASELINE_REPEATS = 3
#: Fresh baseline/candidate pairs that confirm a screened winner (fewer when the budget is short).
CONFIRM_PAIRS = 10
MIN_CONFIRM_PAIRS = 4
#: Best screened candidates per size range that are screened a second time before choosing finalists.
RESCREEN = 3
#: Family-wise error rate of the wins one sweep reports.
ALPHA = 0.05
#: The baseline "moved" when start and end differ at this significance and by more than MOVED_MIN.
MOVED_ALPHA = 0.01
MOVED_MIN = 0.01
#: A global setting must not lose more than this anywhere it was measured (log-ratio, ~0.5%).
SLOWER_MIN = 0.005

def candidates_for(tuning: Tuning, *, validate: Validator | None = None) -> list[Candidate]:
    """The candidate space for a tuning: the common knobs, then what the topology made worth measuring.

    ``tuning.sweep_candidates`` holds settings derive would not write unmeasured (NCCL_NET_GDR_LEVEL=PHB
    where GPUs reach their NIC through the CPU, the socket knobs on TCP fabrics).
    """
    version = try_parse_version(tuning.nccl_version) if tuning.nccl_version else None
    common = candidate_space(version, validate=validate, nvswitch=tuning.nvswitch,
                             one_gpu_per_node=tuning.one_gpu_per_node)
    extra = valid_only((Candidate(tuple(env)) for env in tuning.sweep_candidates), version, validate)
    return list(dict.fromkeys([*common, *extra]))

@dataclass
class Runs:
    """Every run of one configuration of one collective: per size range, the log level of each run."""

    per_range: dict[str, list[float]] = field(default_factory=dict)

    @classmethod
    def of(cls, log: Sequence[tuple[str | None, dict[str, float]]], label: str | None) -> Runs:
        """The runs of one configuration (``None``: the baseline) in a collective's log."""
        runs = cls()
        for run_label, levels in log:
            if run_label == label:
                for name, level in levels.items():
                    runs.per_range.setdefault(name, []).append(level)
        return runs

    @property
    def count(self) -> int:
        return max((len(v) for v in self.per_range.values()), default=0)

    def gbps(self, name: str) -> float | None:
        """Geometric mean bus bandwidth of a range over the runs."""
        values = self.per_range.get(name)
        return math.exp(statistics.fmean(values)) if values else None

    def noise(self, name: str) -> float:
        """Relative run-to-run standard deviation; 0 for one run."""
        values = self.per_range.get(name) or []
        return math.expm1(statistics.stdev(values)) if len(values) >= 2 else 0.0

@dataclass
class _Sequence:
    """One collective's runs in the order they ran."""

    collective: str
    measure: Measure
    used: int = 0
    #: (config label or None for the baseline, levels)
    log: list[tuple[str | None, dict[str, float]]] = field(default_factory=list)
    unread: list[UnreadRow] = field(default_factory=list)

    def run(self, candidate: Candidate | None) -> dict[str, float]:
        measured = self.measure(dict(candidate.env) if candidate else {})
        run = measured if isinstance(measured, MeasuredRun) else MeasuredRun(measured)
        levels = range_levels(run.busbw)
        self.log.append((candidate.label if candidate else None, levels))
        self.used += 1
        self.unread.extend(UnreadRow(self.collective, candidate.label if candidate else "defaults", self.used, host,
                                     warning.line, warning.message) for host, warning in run.unread)
        return levels


def _abab(seq: _Sequence, items: Sequence[Candidate]) -> list[tuple[Candidate, dict[str, float]]]:
    """Run ``B i1 B i2 ... B``; each item's per-range difference to the mean of its two neighbours."""
    before = seq.run(None)
    out: list[tuple[Candidate, dict[str, float]]] = []
    for item in items:
        levels = seq.run(item)
        after = seq.run(None)
        diffs = {
            name: levels[name] - (before[name] + after[name]) / 2.0
            for name in levels if name in before and name in after
        }
        out.append((item, diffs))
        before = after
    return out

def full_grid_size(candidates: Sequence[Candidate], repeats: int) -> int:
    """Runs for every combination of every knob's values, each repeated like the baseline."""
    values: dict[str, set[str]] = {}
    for c in candidates:
        for k, v in c.env:
            values.setdefault(k, set()).add(v)
    return math.prod(len(found) + 1 for found in values.values()) * repeats  # +1: the knob left at its default


@dataclass(frozen=True)
class _Plan:
    candidates: int
    #: Candidates per size range that get a second screening pass (0: none).
    rescreen: int
    pairs: int

    def cost(self, repeats: int) -> int:
        ranges = len(SIZE_RANGES)
        second = min(self.candidates, self.rescreen * ranges)
        return ((2 * self.candidates + 1) + (2 * second + 1 if second else 0)
                + (2 * min(self.candidates, ranges) * self.pairs + 1) + repeats)


def _plan(budget: int, collectives: int, candidates: int, repeats: int) -> _Plan:
    """The most thorough sweep that fits in ``budget`` runs, or a usage error."""
    per = budget // collectives
    options = [_Plan(candidates, RESCREEN, pairs) for pairs in range(CONFIRM_PAIRS, MIN_CONFIRM_PAIRS - 1, -1)]
    options += [_Plan(candidates, 0, pairs) for pairs in range(CONFIRM_PAIRS, MIN_CONFIRM_PAIRS - 1, -1)]
    options += [_Plan(k, 0, MIN_CONFIRM_PAIRS) for k in range(candidates - 1, 0, -1)]
    for option in options:
        if option.cost(repeats) <= per:
            return option
    least = collectives * _Plan(1, 0, MIN_CONFIRM_PAIRS).cost(repeats)
    full = collectives * options[0].cost(repeats)
    raise UsageError(
        f"--budget {budget} is too small for {collectives} collective(s): screening one candidate, "
        f"confirming it with fresh runs and re-running the baseline takes {least} runs",
        hint=f"Give at least {least}; {full} tries every candidate as thoroughly as the sweep can.",
    )


def run_sweep(
    measure: Measure | Mapping[str, Measure],
    candidates: Sequence[Candidate],
    *,
    budget: int = DEFAULT_BUDGET,
    baseline_repeats: int = DEFAULT_BASELINE_REPEATS,
    nccl_version: str | None = None,
) -> SweepResult:
    """Screen, confirm with fresh interleaved runs, re-check the baseline; at most ``budget`` runs.

    ``measure`` is one collective's measurement (all-reduce), or a mapping of nccl-tests
    collective (``all_reduce``, ``all_gather``...) -> its measurement.
    """
    if baseline_repeats < 2:
        raise UsageError("the baseline needs at least 2 runs to measure noise")
    measures: dict[str, Measure] = dict(measure) if isinstance(measure, Mapping) else {"all_reduce": measure}
    unknown = [c for c in measures if c not in COLLECTIVES]
    if unknown:
        raise UsageError(f"unknown collective {unknown[0]!r}", hint=f"Use {', '.join(COLLECTIVES)}.")
    if not candidates:
        raise UsageError("nothing to sweep: no candidate is valid for this NCCL version")
    plan = _plan(budget, len(measures), len(candidates), baseline_repeats)
    tried = plan.candidates
    pool = list(candidates)[:tried]
    notes: list[str] = []
    if tried < len(candidates):
        notes.append(f"budget allows {tried} of {len(candidates)} candidates; raise --budget to try them all")
    if plan.pairs < CONFIRM_PAIRS or not plan.rescreen:
        second = "" if plan.rescreen else " and no second screening"
        notes.append(f"budget allows {plan.pairs} confirmation pairs{second}; "
                     "small true gains may go unconfirmed (raise --budget)")
    # Bonferroni: every candidate x size range x collective is a comparison the sweep could report.
    comparisons = len(pool) * len(SIZE_RANGES) * len(measures)
    confidence = 1.0 - ALPHA / comparisons
    version = try_parse_version(nccl_version) if nccl_version else None

    confirmed: dict[tuple[str, str], tuple[Candidate, Interval]] = {}
    intervals: dict[Candidate, dict[tuple[str, str], Interval]] = {}
    sequences = [_Sequence(COLLECTIVES[op], op_measure) for op, op_measure in measures.items()]
    swept = [(seq, _sweep_collective(seq, pool, plan, baseline_repeats, confidence)) for seq in sequences]
    for seq, result in swept:
        for (name, cand), interval in result.intervals.items():
            intervals.setdefault(cand, {})[(seq.collective, name)] = interval
        confirmed.update({(seq.collective, name): pair for name, pair in result.winners.items()})
        notes.extend(result.notes)
    settings, rows, placement_notes = _place_winners(confirmed, intervals, version)
    notes.extend(placement_notes)
    return SweepResult(
        budget=budget,
        runs_used=sum(seq.used for seq, _ in swept),
        full_grid_runs=full_grid_size(candidates, baseline_repeats) * len(measures),
        candidates_tried=len(pool),
        candidates_total=len(candidates),
        ranges=tuple(outcome for _, result in swept for outcome in result.outcomes),
        settings=settings,
        tuner_rows=tuple(rows),
        notes=tuple(dict.fromkeys(notes)),
        table=tuple(swept[0][1].table),  # the first collective's
        confidence=round(confidence, 6),
        unread_rows=tuple(row for seq, _ in swept for row in seq.unread),
    )


@dataclass
class _CollectiveResult:
    outcomes: list[RangeOutcome]
    winners: dict[str, tuple[Candidate, Interval]]
    intervals: dict[tuple[str, Candidate], Interval]
    notes: list[str]
    table: list[tuple[str, dict[str, float], int]]


def _sweep_collective(
    seq: _Sequence, pool: list[Candidate], plan: _Plan, repeats: int, confidence: float
) -> _CollectiveResult:
    op = seq.collective
    # 1. screening: one ABAB pass over every candidate, a second over the best few of each range
    screened: dict[Candidate, list[dict[str, float]]] = {}
    for cand, diffs in _abab(seq, pool):
        screened.setdefault(cand, []).append(diffs)
    baseline = Runs.of(seq.log, None)
    start = [levels for label, levels in seq.log if label is None][:repeats]
    names = [n for n, _, _ in SIZE_RANGES if baseline.gbps(n) is not None]

    def ranked(name: str) -> list[Candidate]:
        scored = [(statistics.fmean(v), c) for c, runs in screened.items()
                  if (v := [d[name] for d in runs if name in d])]
        return [c for score, c in sorted(scored, key=lambda item: item[0], reverse=True) if score > 0]

    if plan.rescreen:
        again = list(dict.fromkeys(c for name in names for c in ranked(name)[: plan.rescreen]))
        for cand, diffs in _abab(seq, again):
            screened[cand].append(diffs)
    finalists = list(dict.fromkeys(c for name in names for c in ranked(name)[:1]))
    # 2. confirmation: fresh ABAB pairs for each finalist; only these runs judge it
    fresh: dict[Candidate, list[dict[str, float]]] = {c: [] for c in finalists}
    if finalists:
        for cand, diffs in _abab(seq, finalists * plan.pairs):
            fresh[cand].append(diffs)
    confirming = seq.log[-(2 * len(finalists) * plan.pairs + 1):]
    candidate_runs = {c: Runs.of(confirming, c.label) for c in finalists}
    # 3. the baseline again, at the end
    end = [seq.run(None) for _ in range(repeats)]
    intervals = {(name, cand): interval for cand, diffs in fresh.items() for name in names
                 if (interval := mean_interval([d[name] for d in diffs if name in d], confidence)) is not None}
    outcomes: list[RangeOutcome] = []
    winners: dict[str, tuple[Candidate, Interval]] = {}
    notes: list[str] = []
    for name in names:
        change, moved = _baseline_change(start, end, name)
        tested = [(cand, iv) for (n, cand), iv in intervals.items() if n == name]
        best_pair = max(tested, key=lambda item: item[1].estimate, default=None)
        wins = [(c, iv) for c, iv in tested if iv.low > 0]
        winner = max(wins, key=lambda item: item[1].estimate, default=None)
        verdict = ""
        if winner is not None and moved:
            verdict = (f"baseline moved {change:+.1%} during the sweep (start vs end): "
                       f"{winner[0].label} refused; re-run on a quiet machine")
            notes.append(f"{op} {name} messages: {verdict}")
            winner = None
        elif winner is None:
            verdict = "no candidate's corrected interval lies above the defaults"
            notes.append(f"{op} {name} messages: NCCL's defaults are best ({verdict})")
            if moved:
                notes.append(f"{op} {name} messages: the baseline moved {change:+.1%} between the start and the end "
                             "of the sweep; interleaved runs kept that drift out of the comparisons")
        if winner is not None:
            winners[name] = winner
        shown = winner or best_pair
        base_gbps = baseline.gbps(name) or 0.0
        # No candidate confirmed in this range: the defaults, with no gain and no fresh runs.
        label, interval = (shown[0].label, shown[1]) if shown else ("defaults", Interval(0.0, 0.0, 0.0, 0))
        outcomes.append(RangeOutcome(
            range=name,
            baseline_gbps=round(base_gbps, 2),
            noise=round(baseline.noise(name), 4),
            best_label=label,
            best_gbps=round((candidate_runs[shown[0]].gbps(name) if shown else None) or base_gbps, 2),
            significant=winner is not None,
            best_runs=interval.n,
            collective=op,
            gain=round(math.expm1(interval.estimate), 4),
            ci_low=round(math.expm1(interval.low), 4),
            ci_high=round(math.expm1(interval.high), 4),
            baseline_moved=round(change, 4),
            verdict=verdict,
        ))
    screen_runs = {c.label: Runs.of(seq.log, c.label) for c in pool}
    table = [("defaults", {n: round(baseline.gbps(n) or 0.0, 2) for n in names}, baseline.count)]
    table += [(label, {n: round(r.gbps(n) or 0.0, 2) for n in names}, r.count) for label, r in screen_runs.items()]
    return _CollectiveResult(outcomes, winners, intervals, notes, table)


def _baseline_change(start: Sequence[Mapping[str, float]], end: Sequence[Mapping[str, float]], name: str
                     ) -> tuple[float, bool]:
    """The baseline's relative change from start to end, and whether it moved: significant and above MOVED_MIN."""
    a = [s[name] for s in start if name in s]
    b = [e[name] for e in end if name in e]
    change = math.expm1(statistics.fmean(b) - statistics.fmean(a)) if a and b else 0.0
    return change, abs(change) > MOVED_MIN and welch_p_value(a, b) < MOVED_ALPHA


# --- where winners go --------------------------------------------------------------------------


def _slower(interval: Interval) -> bool:
    """Measurably slower: the whole interval below zero by more than SLOWER_MIN, or a clear loss."""
    return (interval.high < 0 and interval.estimate < -SLOWER_MIN) or interval.estimate < -2 * SLOWER_MIN


def _tuner_pair(cand: Candidate) -> tuple[str, str] | None:
    algo, proto = cand.get("NCCL_ALGO"), cand.get("NCCL_PROTO")
    if algo is None or proto is None or len(cand.env) != 2 or algo not in TUNER_ALGOS:
        return None
    return TUNER_ALGOS[algo], proto.lower()


def _place_winners(
    confirmed: Mapping[tuple[str, str], tuple[Candidate, Interval]],
    intervals: Mapping[Candidate, Mapping[tuple[str, str], Interval]],
    version: NcclVersion | None,
) -> tuple[tuple[TunedSetting, ...], list[tuple[str, str, str, str]], list[str]]:
    """Tuner rows for what the tuner plugin can express; one global setting for the rest, if safe."""
    rows: list[tuple[str, str, str, str]] = []
    notes: list[str] = []
    rest: dict[tuple[str, str], tuple[Candidate, Interval]] = {}
    tuner = version is not None and version >= TUNER_CSV_SINCE
    for (op, name), (cand, interval) in confirmed.items():
        pair = _tuner_pair(cand)
        if tuner and pair is not None:
            rows.append((op, name, *pair))
        else:
            rest[(op, name)] = (cand, interval)
    if not rest:
        return (), rows, notes
    # A global variable applies to every collective and size: keep it only where it is slower nowhere.
    safe = []
    for (op, name), (cand, interval) in rest.items():
        slower = [key for key, iv in intervals.get(cand, {}).items() if _slower(iv)]
        if slower:
            where = ", ".join(f"{o} {n}" for o, n in sorted(slower))
            notes.append(f"{cand.label} wins on {op} {name} messages but is slower on {where}: not set globally"
                         + ("" if tuner else "; NCCL's tuner plugin (2.28+) could apply it per size"))
        else:
            safe.append(((op, name), cand, interval))
    if not safe:
        return (), rows, notes
    (op, name), chosen, interval = max(safe, key=lambda item: item[2].low)
    reason = (
        f"measured: {op} {name} messages +{math.expm1(interval.estimate):.1%} busbw "
        f"(corrected interval {math.expm1(interval.low):+.1%} to {math.expm1(interval.high):+.1%}, "
        f"{interval.n} fresh interleaved pairs), no measured collective or size range slower"
    )
    settings = []
    for k, v in chosen.env:
        value = v
        if k in ("NCCL_ALGO", "NCCL_PROTO") and version is not None and version >= PER_COLLECTIVE_SINCE:
            ops = sorted({o for (o, _n), (c, _i) in rest.items() if c == chosen})
            value = ";".join(f"{o}:{v.lower()}" for o in ops)
        settings.append(TunedSetting(k, value, reason, source="sweep"))
    return tuple(settings), rows, notes
