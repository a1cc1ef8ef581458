"""A measured search over NCCL knobs against NCCL's own defaults, within a run budget.

One *run* is one nccl-tests job over all hosts (sizes 8 B to 8 GiB), so every run measures
all three message-size ranges at once. The search is successive halving: the baseline is
repeated first to measure run-to-run noise, every candidate gets one run, the better half
gets another, and so on until the budget is spent or each finalist has as many runs as the
baseline. A candidate is kept only where it beats the baseline by more than that noise:
its worst run above the baseline's best, and its mean gain above the larger relative spread
of the two. Otherwise the report says NCCL's defaults are best.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from clusterctl.errors import ClusterctlError, UsageError
from clusterctl.nccl.tune.derive import TunedSetting
from clusterctl.nccl.versions import NcclVersion, try_parse_version

if TYPE_CHECKING:
    from clusterctl.bench.nccl_tests import NcclRun
    from clusterctl.fanout import Runner
    from clusterctl.inventory.model import Host

#: (name, smallest bytes, largest bytes): small <64 KiB, medium 64 KiB-64 MiB, large >64 MiB.
SIZE_RANGES: tuple[tuple[str, int, int], ...] = (
    ("small", 0, 64 * 1024 - 1),
    ("medium", 64 * 1024, 64 * 1024 * 1024),
    ("large", 64 * 1024 * 1024 + 1, 4294967295),
)
#: Channel knobs were renamed in 2.17 (NCCL_MIN/MAX_NCHANNELS -> NCCL_MIN/MAX_CTAS).
CTAS_SINCE = NcclVersion(2, 17, 0)
#: The example tuner plugin's CSV format (algorithm+protocol per size range) dates from 2.28.
TUNER_CSV_SINCE = NcclVersion(2, 28, 0)
DEFAULT_BUDGET = 24
DEFAULT_BASELINE_REPEATS = 3

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


def candidate_space(version: NcclVersion | None, *, validate: Validator | None = None) -> list[Candidate]:
    """One-knob variations of the defaults (plus algorithm/protocol pairs where a tuner CSV can use them)."""
    options: list[tuple[tuple[str, str], ...]] = []
    algos = ("Ring", "Tree")
    protos = ("LL", "LL128", "Simple")
    options += [(("NCCL_ALGO", a),) for a in algos]
    options += [(("NCCL_PROTO", p),) for p in protos]
    if version is not None and version >= TUNER_CSV_SINCE:
        options += [(("NCCL_ALGO", a), ("NCCL_PROTO", p)) for a in algos for p in protos]
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


def lint_validator() -> Validator:
    """Validity from the lint knowledge base: a value lint warns about, or NCCL's default, is not swept."""
    from clusterctl.nccl.lint import lint_settings
    from clusterctl.nccl.sources import Setting

    def validate(name: str, value: str, version: NcclVersion | None) -> bool:
        findings = lint_settings([Setting(name, value, "<sweep>", 1)], nccl_version=version)
        return not any(f.severity in ("error", "warning") or f.code == "DEFAULT_VALUE" for f in findings)

    return validate


# --- results -------------------------------------------------------------------------------


@dataclass
class Runs:
    """Every run of one configuration: per size range, the mean busbw of each run."""

    per_range: dict[str, list[float]] = field(default_factory=dict)

    def add(self, busbw: Mapping[int, float]) -> None:
        for name, low, high in SIZE_RANGES:
            values = [bw for size, bw in busbw.items() if low <= size <= high]
            if values:
                self.per_range.setdefault(name, []).append(statistics.fmean(values))

    @property
    def count(self) -> int:
        return max((len(v) for v in self.per_range.values()), default=0)

    def mean(self, name: str) -> float | None:
        values = self.per_range.get(name)
        return statistics.fmean(values) if values else None

    def spread(self, name: str) -> float:
        """Relative run-to-run spread (max-min)/mean; 0 for one run."""
        values = self.per_range.get(name) or []
        if len(values) < 2 or not statistics.fmean(values):
            return 0.0
        return (max(values) - min(values)) / statistics.fmean(values)


@dataclass(frozen=True)
class RangeOutcome:
    range: str
    baseline_gbps: float
    #: Relative baseline noise (max-min)/mean over its repeats.
    noise: float
    best_label: str
    best_gbps: float
    #: True when the best beats the baseline by more than the noise; else the defaults are best.
    significant: bool
    #: Runs behind ``best_gbps``.
    best_runs: int


@dataclass(frozen=True)
class SweepResult:
    budget: int
    runs_used: int
    #: Runs a full grid over the same knobs with the same repeats would have needed.
    full_grid_runs: int
    candidates_tried: int
    candidates_total: int
    ranges: tuple[RangeOutcome, ...]
    #: Settings to put in every file: one candidate that wins somewhere and loses nowhere.
    settings: tuple[TunedSetting, ...]
    #: Per-range winners with an algorithm and protocol, for the tuner CSV: (range, algo, proto).
    tuner_rows: tuple[tuple[str, str, str], ...]
    notes: tuple[str, ...]
    #: (label, per-range means, runs) for every configuration measured, baseline first.
    table: tuple[tuple[str, dict[str, float], int], ...] = ()


def _gain(c: Runs, base: Runs, name: str) -> float:
    cm, bm = c.mean(name), base.mean(name)
    if cm is None or not bm:
        return -math.inf
    return cm / bm - 1.0


def _score(c: Runs, base: Runs) -> float:
    return max((_gain(c, base, name) for name, _, _ in SIZE_RANGES), default=-math.inf)


def beats(c: Runs, base: Runs, name: str) -> bool:
    """More than noise: worst candidate run above the best baseline run, and mean gain above the spread."""
    cand, ref = c.per_range.get(name) or [], base.per_range.get(name) or []
    if len(cand) < 2 or len(ref) < 2:
        return False
    noise = max(base.spread(name), c.spread(name))
    return min(cand) > max(ref) and _gain(c, base, name) > noise


def loses(c: Runs, base: Runs, name: str) -> bool:
    noise = max(base.spread(name), c.spread(name))
    return _gain(c, base, name) < -noise


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


def run_sweep(
    measure: Measure,
    candidates: Sequence[Candidate],
    *,
    budget: int = DEFAULT_BUDGET,
    baseline_repeats: int = DEFAULT_BASELINE_REPEATS,
    nccl_version: str | None = None,
) -> SweepResult:
    """Successive halving over ``candidates`` with at most ``budget`` runs of ``measure``."""
    if baseline_repeats < 2:
        raise UsageError("the baseline needs at least 2 runs to measure noise")
    if budget < baseline_repeats + 2:
        raise UsageError(f"--budget {budget} is too small: the baseline alone takes {baseline_repeats} runs",
                         hint=f"Give at least {baseline_repeats + 2}.")
    used = 0
    base = Runs()
    for _ in range(baseline_repeats):
        base.add(measure({}))
        used += 1
    runs: dict[Candidate, Runs] = {c: Runs() for c in candidates}
    pool = list(candidates)
    notes: list[str] = []
    # Every candidate needs one run and at least two finalists a second one; when the budget
    # cannot pay for that, try the first ones (algorithm/protocol before buffer sizes: the
    # larger effects).
    affordable = max(1, budget - used - 2)
    if len(pool) > affordable:
        notes.append(f"budget allows {affordable} of {len(pool)} candidates; raise --budget to try them all")
        pool = pool[:affordable]
    tried = len(pool)
    while pool and used < budget:
        order = sorted(pool, key=lambda c: runs[c].count)
        for c in order:
            if used >= budget:
                break
            runs[c].add(measure(dict(c.env)))
            used += 1
        measured = [c for c in pool if runs[c].count]
        measured.sort(key=lambda c: _score(runs[c], base), reverse=True)
        if all(runs[c].count >= baseline_repeats for c in measured):
            pool = measured
            break
        pool = measured[: max(1, math.ceil(len(measured) / 2))] if len(measured) > 1 else measured
    finalists = [c for c in candidates if runs[c].count >= 2]
    return _decide(base, runs, finalists, budget, used, candidates, tried, baseline_repeats, notes, nccl_version)


def _decide(
    base: Runs,
    runs: dict[Candidate, Runs],
    finalists: list[Candidate],
    budget: int,
    used: int,
    candidates: Sequence[Candidate],
    tried: int,
    repeats: int,
    notes: list[str],
    nccl_version: str | None,
) -> SweepResult:
    outcomes: list[RangeOutcome] = []
    winners: dict[str, Candidate] = {}
    for name, _, _ in SIZE_RANGES:
        bm = base.mean(name)
        if bm is None:
            continue
        ranked = sorted(finalists, key=lambda c: _gain(runs[c], base, name), reverse=True)
        best = next((c for c in ranked if beats(runs[c], base, name)), None)
        shown = best or (ranked[0] if ranked else None)
        if best is not None:
            winners[name] = best
        else:
            notes.append(
                f"{name} messages: NCCL's defaults are best (no candidate beat the baseline by more than its noise)"
            )
        outcomes.append(
            RangeOutcome(
                range=name,
                baseline_gbps=round(bm, 2),
                noise=round(base.spread(name), 4),
                best_label=shown.label if shown else "defaults",
                best_gbps=round(runs[shown].mean(name) or bm, 2) if shown else round(bm, 2),
                significant=best is not None,
                best_runs=runs[shown].count if shown else 0,
            )
        )
    settings = _global_settings(base, runs, winners)
    version = try_parse_version(nccl_version) if nccl_version else None
    tuner_rows: list[tuple[str, str, str]] = []
    if version is not None and version >= TUNER_CSV_SINCE:
        for name, c in winners.items():
            algo, proto = c.get("NCCL_ALGO"), c.get("NCCL_PROTO")
            if algo and proto:
                tuner_rows.append((name, algo.lower(), proto.lower()))
    table = [("defaults", {n: round(base.mean(n) or 0.0, 2) for n, _, _ in SIZE_RANGES}, base.count)]
    for c in candidates:
        if runs[c].count:
            table.append((c.label, {n: round(runs[c].mean(n) or 0.0, 2) for n, _, _ in SIZE_RANGES}, runs[c].count))
    return SweepResult(
        budget=budget,
        runs_used=used,
        full_grid_runs=full_grid_size(candidates, repeats),
        candidates_tried=tried,
        candidates_total=len(candidates),
        ranges=tuple(outcomes),
        settings=settings,
        tuner_rows=tuple(tuner_rows),
        notes=tuple(notes),
        table=tuple(table),
    )


def _global_settings(
    base: Runs, runs: dict[Candidate, Runs], winners: dict[str, Candidate]
) -> tuple[TunedSetting, ...]:
    """The best candidate that wins in some range and loses in none becomes a setting for all sizes."""
    names = [n for n, _, _ in SIZE_RANGES if base.mean(n) is not None]
    safe = [
        (name, c) for name, c in winners.items()
        if not any(loses(runs[c], base, other) for other in names)
    ]
    if not safe:
        return ()
    name, chosen = max(safe, key=lambda item: _gain(runs[item[1]], base, item[0]))
    gain = _gain(runs[chosen], base, name)
    noise = max(base.spread(name), runs[chosen].spread(name))
    reason = (
        f"measured: {name} messages {base.mean(name):.1f} -> {runs[chosen].mean(name):.1f} GB/s busbw "
        f"(+{gain:.0%}, noise {noise:.0%}, {runs[chosen].count} runs), no size range slower"
    )
    return tuple(TunedSetting(k, v, reason, source="sweep") for k, v in chosen.env)


def bench_measure(runner: Runner, hosts: Sequence[Host], *, base_env: Mapping[str, str] | None = None) -> Measure:
    """A ``Measure`` running all_reduce_perf through the bench library, ``base_env`` under every candidate.

    Several hosts run one job across all of them (``mpirun`` from the first): that is what a
    training job sees. One host runs alone.
    """
    from clusterctl.bench.nccl_tests import run_nccl_test

    def measure(env: Mapping[str, str]) -> Mapping[int, float]:
        full = {**(base_env or {}), **env}
        run = run_nccl_test(runner, hosts, op="all_reduce", env=full, multi_node=len(hosts) > 1)
        return busbw_by_size(run)

    return measure


def busbw_by_size(run: NcclRun) -> dict[int, float]:
    """Bytes -> bus bandwidth of a bench run: best of out-of-place/in-place, slowest host when several ran."""
    per_host: list[dict[int, float]] = []
    for host_run in run.runs:
        if host_run.result is None or not host_run.result.rows:
            why = host_run.error or "no result rows"
            raise ClusterctlError(f"all_reduce_perf on {host_run.host} with {run.env or 'defaults'}: {why}")
        sizes: dict[int, float] = {}
        for row in host_run.result.rows:
            values = [m.busbw_gbs for m in (row.out_of_place, row.in_place) if m.busbw_gbs is not None]
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
            tuner_rows=tuple((str(r[0]), str(r[1]), str(r[2])) for r in data["tuner_rows"]),
            notes=tuple(data["notes"]),
            table=tuple((t[0], dict(t[1]), int(t[2])) for t in data.get("table", [])),
        )
    except OSError as exc:
        raise UsageError(f"cannot read {path} ({exc.strerror}); --bench wants the --out folder of a --sweep") from exc
    except (ValueError, KeyError, TypeError) as exc:
        raise UsageError(f"{path} is not a saved sweep: {exc}") from exc
