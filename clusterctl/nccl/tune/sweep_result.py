"""What a sweep found, per collective and message-size range (the model ``render`` and ``--bench`` read)."""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from clusterctl.facts.model import ParseWarning
from clusterctl.nccl.tune.derive import TunedSetting

#: (name, smallest bytes, largest bytes or None = no limit): every measured size belongs to one.
SIZE_RANGES: tuple[tuple[str, int, int | None], ...] = (
    ("small", 0, 64 * 1024 - 1),
    ("medium", 64 * 1024, 64 * 1024 * 1024),
    ("large", 64 * 1024 * 1024 + 1, None),
)
#: The tuner CSV's max_bytes for the open-ended range: the plugin reads it with strtoull into size_t.
TUNER_MAX_BYTES = 18446744073709551615


@dataclass(frozen=True)
class MeasuredRun:
    """One run on all hosts: bus bandwidth (GB/s) per message size in bytes, and what was not read."""

    busbw: Mapping[int, float]
    #: (host, the parser's warning naming the line of that host's nccl-tests output it could not read).
    unread: tuple[tuple[str, ParseWarning], ...] = ()


#: env -> one run's bus bandwidth per message size (or the whole ``MeasuredRun``).
Measure = Callable[[Mapping[str, str]], Mapping[int, float] | MeasuredRun]


@dataclass(frozen=True)
class UnreadRow:
    """A line of one sweep run's nccl-tests output the parser could not read: that run lacks its size."""

    collective: str
    #: The configuration measured: a candidate's label, or ``defaults``.
    config: str
    #: The run's place among its collective's runs, from 1, in the order they ran.
    run: int
    host: str
    #: 1-based line of that run's output on ``host`` (``None``: the output as a whole).
    line: int | None
    message: str

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
    #: Every line of every run's output the nccl-tests parser could not read, in the order they ran.
    unread_rows: tuple[UnreadRow, ...] = ()
