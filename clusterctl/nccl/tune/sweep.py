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
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from clusterctl.errors import ClusterctlError, UsageError
from clusterctl.nccl.tune.derive import TunedSetting, Tuning
from clusterctl.nccl.tune.stats import Interval, mean_interval, welch_p_value
from clusterctl.nccl.versions import NcclVersion, try_parse_version

if TYPE_CHECKING:
    from clusterctl.bench.nccl_tests import NcclRun
    from clusterctl.fanout import Runner
    from clusterctl.inventory.model import Host

#: (name, smallest bytes, largest bytes or None = no limit): every measured size belongs to one.
SIZE_RANGES: tuple[tuple[str, int, int | None], ...] = (
    ("small", 0, 64 * 1024 - 1),
    ("medium", 64 * 1024, 64 * 1024 * 1024),
    ("large", 64 * 1024 * 1024 + 1, None),
)
#: The tuner CSV's max_bytes for the open-ended range: the plugin reads it with strtoull into size_t.
TUNER_MAX_BYTES = 18446744073709551615
#: nccl-tests binary stem -> the collective name NCCL's example tuner plugin reads.
COLLECTIVES: dict[str, str] = {
    "all_reduce": "allreduce",
    "all_gather": "allgather",
    "reduce_scatter": "reducescatter",
    "broadcast": "broadcast",
    "reduce": "reduce",
}
#: Channel knobs were renamed in 2.17 (NCCL_MIN/MAX_NCHANNELS -> NCCL_MIN/MAX_CTAS).
CTAS_SINCE = NcclVersion(2, 17, 0)
#: The example tuner plugin's CSV format (plugins/tuner/example, NCCL_TUNER_CONFIG_FILE) dates from 2.28.
TUNER_CSV_SINCE = NcclVersion(2, 28, 0)
#: NCCL_ALGO/NCCL_PROTO per-collective form ("allreduce:tree") dates from 2.24.
PER_COLLECTIVE_SINCE = NcclVersion(2, 24, 0)
#: First release whose ncclAlgoStr has each algorithm (src/graph/tuning.cc, src/enqueue.cc by tag).
ALGO_SINCE: dict[str, NcclVersion] = {
    "NVLS": NcclVersion(2, 17, 0),
    "NVLSTree": NcclVersion(2, 18, 0),
    "PAT": NcclVersion(2, 23, 0),
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

#: env -> bus bandwidth (GB/s) per message size in bytes, for one run on all hosts.
Measure = Callable[[Mapping[str, str]], Mapping[int, float]]
#: (name, value, nccl version) -> is it a valid setting there (the lint knowledge base answers).
Validator = Callable[[str, str, "NcclVersion | None"], bool]


@dataclass(frozen=True)
class Candidate:
    env: tuple[tuple[str, str], ...]

    @property
    def label(self) -> str:
        return " ".join(f"{k}={v}" for k, v in self.env) or "defaults"

    def get(self, name: str) -> str | None:
        return dict(self.env).get(name)


def candidate_space(
    version: NcclVersion | None,
    *,
    validate: Validator | None = None,
    nvswitch: bool = False,
    collnet: bool = False,
    one_gpu_per_node: bool = False,
) -> list[Candidate]:
    """One-knob variations of the defaults (plus algorithm/protocol pairs where a tuner CSV can use them).

    ``nvswitch`` adds NVLS/NVLSTree (NCCL picks them itself on NVSwitch systems, so they are worth
    measuring there), ``collnet`` the CollNet algorithms (SHARP), ``one_gpu_per_node`` PAT (NCCL
    runs PAT only with one GPU per node).
    """
    algos = ["Ring", "Tree"]
    if nvswitch:
        algos += ["NVLS", "NVLSTree"]
    if collnet:
        algos += ["CollnetDirect", "CollnetChain"]
    if one_gpu_per_node:
        algos += ["PAT"]
    algos = [a for a in algos if a not in ALGO_SINCE or version is None or version >= ALGO_SINCE[a]]
    protos = ("LL", "LL128", "Simple")
    options: list[tuple[tuple[str, str], ...]] = []
    options += [(("NCCL_ALGO", a),) for a in algos]
    options += [(("NCCL_PROTO", p),) for p in protos]
    if version is not None and version >= TUNER_CSV_SINCE:
        options += [(("NCCL_ALGO", a), ("NCCL_PROTO", p)) for a in ("Ring", "Tree") for p in protos]
    if version is None or version >= CTAS_SINCE:
        options += [(("NCCL_MIN_CTAS", "32"),), (("NCCL_MAX_CTAS", "8"),)]
    else:
        options += [(("NCCL_MIN_NCHANNELS", "32"),), (("NCCL_MAX_NCHANNELS", "8"),)]
    options += [(("NCCL_BUFFSIZE", str(n)),) for n in (2097152, 8388608, 16777216)]
    options += [(("NCCL_NTHREADS", "256"),)]
    out = [Candidate(env) for env in options]
    if validate is not None:
        out = [c for c in out if all(validate(k, v, version) for k, v in c.env)]
    return out


def candidates_for(tuning: Tuning, *, validate: Validator | None = None) -> list[Candidate]:
    """The candidate space for a tuning: the common knobs, then what the topology made worth measuring.

    ``tuning.sweep_candidates`` holds settings derive would not write unmeasured (NCCL_NET_GDR_LEVEL=PHB
    where GPUs reach their NIC through the CPU, the socket knobs on TCP fabrics).
    """
    version = try_parse_version(tuning.nccl_version) if tuning.nccl_version else None
    out = candidate_space(version, validate=validate, nvswitch=tuning.nvswitch,
                          one_gpu_per_node=tuning.one_gpu_per_node)
    seen = {c.env for c in out}
    for env in tuning.sweep_candidates:
        candidate = Candidate(tuple(env))
        if candidate.env in seen:
            continue
        if validate is None or all(validate(k, v, version) for k, v in candidate.env):
            out.append(candidate)
            seen.add(candidate.env)
    return out


def socket_candidates(version: NcclVersion | None, *, validate: Validator | None = None) -> list[Candidate]:
    """NCCL's TCP socket transport knobs, each pair within its limit of 64 sockets per peer.

    src/transport/net_socket.cc: NCCL_SOCKET_NTHREADS is capped at 16 (MAX_THREADS) and
    NCCL_SOCKET_NTHREADS * NCCL_NSOCKS_PERTHREAD at 64 (MAX_SOCKETS); above that NCCL lowers
    NCCL_NSOCKS_PERTHREAD itself with a warning.
    """
    pairs = [(2, 8), (4, 4), (4, 8), (8, 4), (8, 8), (16, 4)]
    out = [
        Candidate((("NCCL_SOCKET_NTHREADS", str(t)), ("NCCL_NSOCKS_PERTHREAD", str(k))))
        for t, k in pairs if t * k <= 64
    ]
    if validate is not None:
        out = [c for c in out if all(validate(k, v, version) for k, v in c.env)]
    return out


def lint_validator() -> Validator:
    """Validity from the lint knowledge base: a value lint warns about, or NCCL's default, is not swept."""
    from clusterctl.nccl.lint import lint_settings
    from clusterctl.nccl.sources import Setting

    def validate(name: str, value: str, version: NcclVersion | None) -> bool:
        findings = lint_settings([Setting(name, value, "<sweep>", 1)], nccl_version=version)
        return not any(f.severity in ("error", "warning") or f.code == "DEFAULT_VALUE" for f in findings)

    return validate


# --- measurements ----------------------------------------------------------------------------


def range_of(size: int) -> str:
    for name, low, high in SIZE_RANGES:
        if size >= low and (high is None or size <= high):
            return name
    raise ValueError(f"negative message size {size}")


def range_levels(busbw: Mapping[int, float]) -> dict[str, float]:
    """Per size range, the mean of log(bus bandwidth) over its sizes (zero or missing sizes skipped)."""
    sums: dict[str, list[float]] = {}
    for size, bw in busbw.items():
        if bw and bw > 0:
            sums.setdefault(range_of(size), []).append(math.log(bw))
    return {name: statistics.fmean(values) for name, values in sums.items()}


@dataclass
class Runs:
    """Every run of one configuration of one collective: per size range, the log level of each run."""

    per_range: dict[str, list[float]] = field(default_factory=dict)

    def add_levels(self, levels: Mapping[str, float]) -> None:
        for name, level in levels.items():
            self.per_range.setdefault(name, []).append(level)

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

    def run(self, candidate: Candidate | None) -> dict[str, float]:
        levels = range_levels(self.measure(dict(candidate.env) if candidate else {}))
        self.log.append((candidate.label if candidate else None, levels))
        self.used += 1
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


# --- results -------------------------------------------------------------------------------


@dataclass(frozen=True)
class RangeOutcome:
    range: str
    baseline_gbps: float
    #: Relative run-to-run noise (standard deviation) of the baseline.
    noise: float
    best_label: str
    best_gbps: float
    #: True when the confirmed gain's corrected interval lies above zero and the baseline held still.
    significant: bool
    #: Fresh runs behind ``best_gbps`` (the confirmation pairs).
    best_runs: int
    collective: str = "allreduce"
    #: Confirmed relative gain and its corrected confidence interval (0 when nothing was confirmed).
    gain: float = 0.0
    ci_low: float = 0.0
    ci_high: float = 0.0
    #: Relative change of the baseline between the start and the end of the sweep.
    baseline_moved: float = 0.0
    #: Why the defaults were kept, when they were.
    verdict: str = ""


@dataclass(frozen=True)
class SweepResult:
    budget: int
    runs_used: int
    #: Runs a full grid over the same knobs with the same repeats would have needed.
    full_grid_runs: int
    candidates_tried: int
    candidates_total: int
    ranges: tuple[RangeOutcome, ...]
    #: Settings to put in every file: one candidate that wins somewhere and is slower nowhere.
    settings: tuple[TunedSetting, ...]
    #: Per-collective, per-range winners with an algorithm and protocol, for the tuner CSV:
    #: (collective, range, algo, proto) with the plugin's lower-case names.
    tuner_rows: tuple[tuple[str, str, str, str], ...]
    notes: tuple[str, ...]
    #: (label, per-range geometric-mean GB/s, runs) for every configuration measured, baseline first
    #: (the first collective's).
    table: tuple[tuple[str, dict[str, float], int], ...] = ()
    #: The confidence level of each interval after the correction, e.g. 0.9992.
    confidence: float = 0.0


def full_grid_size(candidates: Sequence[Candidate], repeats: int) -> int:
    """Runs for every combination of every knob's values, each repeated like the baseline."""
    values: dict[str, set[str]] = {}
    for c in candidates:
        for k, v in c.env:
            values.setdefault(k, set()).add(v)
    combos = 1
    for found in values.values():
        combos *= len(found) + 1  # +1: the knob left at its default
    return combos * repeats


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

    outcomes: list[RangeOutcome] = []
    confirmed: dict[tuple[str, str], tuple[Candidate, Interval]] = {}
    intervals: dict[Candidate, dict[tuple[str, str], Interval]] = {}
    table: list[tuple[str, dict[str, float], int]] = []
    used = 0
    for op, op_measure in measures.items():
        seq = _Sequence(COLLECTIVES[op], op_measure)
        result = _sweep_collective(seq, pool, plan, baseline_repeats, confidence)
        used += seq.used
        outcomes.extend(result.outcomes)
        for (name, cand), interval in result.intervals.items():
            intervals.setdefault(cand, {})[(seq.collective, name)] = interval
        for name, pair in result.winners.items():
            confirmed[(seq.collective, name)] = pair
        notes.extend(result.notes)
        if not table:
            table = result.table
    settings, rows, placement_notes = _place_winners(confirmed, intervals, version)
    notes.extend(placement_notes)
    return SweepResult(
        budget=budget,
        runs_used=used,
        full_grid_runs=full_grid_size(candidates, baseline_repeats) * len(measures),
        candidates_tried=len(pool),
        candidates_total=len(candidates),
        ranges=tuple(outcomes),
        settings=settings,
        tuner_rows=tuple(rows),
        notes=tuple(dict.fromkeys(notes)),
        table=tuple(table),
        confidence=round(confidence, 6),
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
    baseline = Runs()
    for label, levels in seq.log:
        if label is None:
            baseline.add_levels(levels)
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
    finalists: list[Candidate] = []
    for name in names:
        best = ranked(name)[:1]
        if best and best[0] not in finalists:
            finalists.append(best[0])
    # 2. confirmation: fresh ABAB pairs for each finalist; only these runs judge it
    fresh: dict[Candidate, list[dict[str, float]]] = {c: [] for c in finalists}
    candidate_runs: dict[Candidate, Runs] = {c: Runs() for c in finalists}
    if finalists:
        for cand, diffs in _abab(seq, finalists * plan.pairs):
            fresh[cand].append(diffs)
        for label, levels in seq.log[-(2 * len(finalists) * plan.pairs + 1):]:
            for cand in finalists:
                if cand.label == label:
                    candidate_runs[cand].add_levels(levels)
    # 3. the baseline again, at the end
    end = [seq.run(None) for _ in range(repeats)]
    intervals: dict[tuple[str, Candidate], Interval] = {}
    for cand, diff_list in fresh.items():
        for name in names:
            values = [d[name] for d in diff_list if name in d]
            interval = mean_interval(values, confidence)
            if interval is not None:
                intervals[(name, cand)] = interval
    outcomes: list[RangeOutcome] = []
    winners: dict[str, tuple[Candidate, Interval]] = {}
    notes: list[str] = []
    for name in names:
        moved = _moved(start, end, name)
        tested = [(cand, iv) for (n, cand), iv in intervals.items() if n == name]
        best_pair = max(tested, key=lambda item: item[1].estimate, default=None)
        wins = [(c, iv) for c, iv in tested if iv.low > 0]
        winner = max(wins, key=lambda item: item[1].estimate, default=None)
        verdict = ""
        if winner is not None and moved is not None:
            verdict = (f"baseline moved {moved:+.1%} during the sweep (start vs end): "
                       f"{winner[0].label} refused; re-run on a quiet machine")
            notes.append(f"{op} {name} messages: {verdict}")
            winner = None
        elif winner is None:
            verdict = "no candidate's corrected interval lies above the defaults"
            notes.append(f"{op} {name} messages: NCCL's defaults are best ({verdict})")
            if moved is not None:
                notes.append(f"{op} {name} messages: the baseline moved {moved:+.1%} between the start and the end "
                             "of the sweep; interleaved runs kept that drift out of the comparisons")
        if winner is not None:
            winners[name] = winner
        shown = winner or best_pair
        base_gbps = baseline.gbps(name) or 0.0
        shown_gbps = base_gbps
        if shown is not None:
            shown_gbps = candidate_runs[shown[0]].gbps(name) or base_gbps
        outcomes.append(RangeOutcome(
            range=name,
            baseline_gbps=round(base_gbps, 2),
            noise=round(baseline.noise(name), 4),
            best_label=shown[0].label if shown else "defaults",
            best_gbps=round(shown_gbps, 2),
            significant=winner is not None,
            best_runs=shown[1].n if shown else 0,
            collective=op,
            gain=round(math.expm1(shown[1].estimate), 4) if shown else 0.0,
            ci_low=round(math.expm1(shown[1].low), 4) if shown else 0.0,
            ci_high=round(math.expm1(shown[1].high), 4) if shown else 0.0,
            baseline_moved=round(_change(start, end, name), 4),
            verdict=verdict,
        ))
    screen_runs: dict[str, Runs] = {c.label: Runs() for c in pool}
    for label, levels in seq.log:
        if label is not None and label in screen_runs:
            screen_runs[label].add_levels(levels)
    table = [("defaults", {n: round(baseline.gbps(n) or 0.0, 2) for n in names}, baseline.count)]
    table += [(label, {n: round(r.gbps(n) or 0.0, 2) for n in names}, r.count) for label, r in screen_runs.items()]
    return _CollectiveResult(outcomes, winners, intervals, notes, table)


def _change(start: Sequence[Mapping[str, float]], end: Sequence[Mapping[str, float]], name: str) -> float:
    a = [s[name] for s in start if name in s]
    b = [e[name] for e in end if name in e]
    if not a or not b:
        return 0.0
    return math.expm1(statistics.fmean(b) - statistics.fmean(a))


def _moved(start: Sequence[Mapping[str, float]], end: Sequence[Mapping[str, float]], name: str) -> float | None:
    """The baseline's relative change when it is both significant and larger than MOVED_MIN."""
    a = [s[name] for s in start if name in s]
    b = [e[name] for e in end if name in e]
    change = _change(start, end, name)
    if abs(change) > MOVED_MIN and welch_p_value(a, b) < MOVED_ALPHA:
        return change
    return None


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


def bench_measure(
    runner: Runner, hosts: Sequence[Host], *, base_env: Mapping[str, str] | None = None, op: str = "all_reduce"
) -> Measure:
    """A ``Measure`` running ``<op>_perf`` through the bench library, ``base_env`` under every candidate.

    Several hosts run one job across all of them (``mpirun`` from the first): that is what a
    training job sees. One host runs alone.
    """
    from clusterctl.bench.nccl_tests import run_nccl_test

    def measure(env: Mapping[str, str]) -> Mapping[int, float]:
        full = {**(base_env or {}), **env}
        run = run_nccl_test(runner, hosts, op=op, env=full, multi_node=len(hosts) > 1)
        return busbw_by_size(run)

    return measure


#: From here on the printed busbw (two decimals) is within 0.05%; below it the time column is used.
PRINTED_PRECISE_GBPS = 10.0


def busbw_by_size(run: NcclRun) -> dict[int, float]:
    """Bytes -> bus bandwidth of a bench run: best of out-of-place/in-place, slowest host when several ran."""
    per_host: list[dict[int, float]] = []
    for host_run in run.runs:
        if host_run.result is None or not host_run.result.rows:
            why = host_run.error or "no result rows"
            raise ClusterctlError(f"nccl-tests on {host_run.host} with {run.env or 'defaults'}: {why}")
        rows = host_run.result.rows
        # busbw/algbw is one constant per run (it depends on the collective and rank count only)
        factor = next((m.busbw_gbs / m.algbw_gbs for r in reversed(rows) for m in (r.out_of_place, r.in_place)
                       if m.busbw_gbs and m.algbw_gbs and m.algbw_gbs >= 0.1), None)
        sizes: dict[int, float] = {}
        for row in rows:
            values = []
            for m in (row.out_of_place, row.in_place):
                # printed busbw has two decimals: precise enough from 10 GB/s, else derive it from the time
                if m.busbw_gbs is not None and m.busbw_gbs >= PRINTED_PRECISE_GBPS:
                    values.append(m.busbw_gbs)
                elif factor is not None and m.time_us and m.time_us > 0:
                    values.append(row.size_bytes / (m.time_us * 1e3) * factor)
                elif m.busbw_gbs is not None:
                    values.append(m.busbw_gbs)
            if values:
                sizes[row.size_bytes] = max(values)
        per_host.append(sizes)
    common = set.intersection(*(set(d) for d in per_host)) if per_host else set()
    return {size: min(d[size] for d in per_host) for size in sorted(common)}


# --- saving a sweep for --bench ---------------------------------------------------------------

SWEEP_FILE = "sweep.json"


def save_sweep(result: SweepResult, out_dir: str) -> Path:
    import dataclasses
    import json

    path = Path(out_dir) / SWEEP_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(dataclasses.asdict(result), indent=2) + "\n", encoding="utf-8")
    return path


def load_sweep(folder: str) -> SweepResult:
    """A sweep saved by ``tune-nccl --sweep --out DIR`` (``DIR/sweep.json``)."""
    import json

    path = Path(folder) / SWEEP_FILE
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        return SweepResult(
            budget=int(data["budget"]),
            runs_used=int(data["runs_used"]),
            full_grid_runs=int(data["full_grid_runs"]),
            candidates_tried=int(data["candidates_tried"]),
            candidates_total=int(data["candidates_total"]),
            ranges=tuple(RangeOutcome(**r) for r in data["ranges"]),
            settings=tuple(TunedSetting(**s) for s in data["settings"]),
            # sweeps saved before per-collective results have (range, algo, proto) rows: all-reduce
            tuner_rows=tuple(
                (str(r[0]), str(r[1]), str(r[2]), str(r[3])) if len(r) == 4 else ("allreduce", str(r[0]), str(r[1]),
                                                                                  str(r[2]))
                for r in data["tuner_rows"]
            ),
            notes=tuple(data["notes"]),
            table=tuple((t[0], dict(t[1]), int(t[2])) for t in data.get("table", [])),
            confidence=float(data.get("confidence", 0.0)),
        )
    except OSError as exc:
        raise UsageError(f"cannot read {path} ({exc.strerror}); --bench wants the --out folder of a --sweep") from exc
    except (ValueError, KeyError, TypeError) as exc:
        raise UsageError(f"{path} is not a saved sweep: {exc}") from exc
