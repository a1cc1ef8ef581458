"""A sweep saved by ``tune-nccl --sweep --out DIR`` (``DIR/sweep.json``) and read back for ``--bench``.

The file is input like any other a user names: it may have been edited, truncated, copied from
another cluster or written by someone else. It is read through ``read_json_input`` (its size
limit, binary data, UTF-8 and JSON checks) and then every field is checked for its type, range
and characters before anything of it reaches a rendered file or the terminal; a field that is
wrong is a usage error naming the file and the field (``ranges[2].best_gbps``), exit 2.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from clusterctl.errors import UsageError
from clusterctl.nccl.tune.derive import TunedSetting
from clusterctl.nccl.tune.sweep_result import SIZE_RANGES, RangeOutcome, SweepResult

SWEEP_FILE = "sweep.json"
_REMEDY = "--bench wants the --out folder of a --sweep; run the sweep again if the file was changed."

#: Entries one list of a saved sweep may have: a sweep of every candidate on every collective has
#: a few hundred table rows, far below this.
MAX_ENTRIES = 10_000
#: Characters of one text field (a note, a reason, a value); real ones are under 300.
MAX_TEXT = 2_000
#: Runs, candidates and budgets: a sweep is a few hundred runs.
MAX_COUNT = 10_000_000
#: Characters a rendered file or the terminal must never get from a saved sweep: C0 and C1 controls
#: (newline and tab included: every text field is one line), DEL, and the Unicode line separators
#: and bidirectional overrides that make text read differently from what it is.
_UNSAFE = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")
_SETTING_NAME = re.compile(r"NCCL_[A-Z0-9_]{1,60}")
_RANGES = tuple(name for name, _, _ in SIZE_RANGES)
_PROTOCOLS = ("ll", "ll128", "simple")

T = TypeVar("T")


class _BadField(Exception):
    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field
        self.message = message


def save_sweep(result: SweepResult, out_dir: str) -> Path:
    import dataclasses
    import json

    path = Path(out_dir) / SWEEP_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(dataclasses.asdict(result), indent=2) + "\n", encoding="utf-8")
    return path


def load_sweep(folder: str) -> SweepResult:
    """A sweep saved by ``tune-nccl --sweep --out DIR`` (``DIR/sweep.json``).

    Raises ``UsageError`` (exit 2) naming the file, and the field where one is wrong, for a missing,
    oversized, binary, non-JSON or wrongly shaped file.
    """
    from clusterctl.inputfile import read_json_input

    path = Path(folder) / SWEEP_FILE
    if Path(folder).is_dir() and not path.exists():
        raise UsageError("no saved sweep in this folder.", file=str(path), hint=_REMEDY)
    try:
        data, where = read_json_input(str(path), "sweep", "a saved sweep")
    except UsageError as exc:
        if exc.hint is None:
            exc = UsageError(exc.message, file=exc.file, line=exc.line, field=exc.field, hint=_REMEDY)
        raise exc from None
    try:
        return sweep_from_json(data)
    except _BadField as exc:
        raise UsageError(f"not a saved sweep: {exc.message}.", file=where, field=exc.field or None,
                         hint=_REMEDY) from None


def sweep_from_json(data: Any) -> SweepResult:
    """The ``SweepResult`` of a saved sweep's JSON value, every field checked (``_BadField`` if not)."""
    top = _object(data, "", required=("budget", "runs_used", "full_grid_runs", "candidates_tried",
                                      "candidates_total", "ranges", "settings", "tuner_rows", "notes"),
                  optional=("table", "confidence"))
    return SweepResult(
        budget=_count(top["budget"], "budget"),
        runs_used=_count(top["runs_used"], "runs_used"),
        full_grid_runs=_count(top["full_grid_runs"], "full_grid_runs"),
        candidates_tried=_count(top["candidates_tried"], "candidates_tried"),
        candidates_total=_count(top["candidates_total"], "candidates_total"),
        ranges=_items(top["ranges"], "ranges", _range_outcome),
        settings=_items(top["settings"], "settings", _setting),
        tuner_rows=_items(top["tuner_rows"], "tuner_rows", _tuner_row),
        notes=_items(top["notes"], "notes", lambda v, f: _text(v, f)),
        table=_items(top.get("table", []), "table", _table_row),
        confidence=_number(top.get("confidence", 0.0), "confidence", low=0.0, high=1.0),
    )


# --- one field each --------------------------------------------------------------------------


def _object(value: Any, field: str, *, required: tuple[str, ...], optional: tuple[str, ...] = ()) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise _BadField(field, f"a {_kind(value)} where an object belongs")
    for key in required:
        if key not in value:
            raise _BadField(_join(field, key), "missing")
    unknown = [k for k in value if k not in required and k not in optional]
    if unknown:
        raise _BadField(field, f"unknown field {_shown(unknown[0])}")
    return value


def _items(value: Any, field: str, read: Callable[[Any, str], T]) -> tuple[T, ...]:
    if not isinstance(value, list):
        raise _BadField(field, f"a {_kind(value)} where a list belongs")
    if len(value) > MAX_ENTRIES:
        raise _BadField(field, f"{len(value):,} entries (at most {MAX_ENTRIES:,})")
    return tuple(read(item, f"{field}[{i}]") for i, item in enumerate(value))


def _count(value: Any, field: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise _BadField(field, f"a {_kind(value)} where a whole number belongs")
    if not 0 <= value <= MAX_COUNT:
        raise _BadField(field, f"{value} is outside 0 to {MAX_COUNT:,}")
    return value


def _number(value: Any, field: str, *, low: float | None = None, high: float | None = None) -> float:
    if not isinstance(value, int | float) or isinstance(value, bool):
        raise _BadField(field, f"a {_kind(value)} where a number belongs")
    number = float(value)
    if not math.isfinite(number) or (low is not None and number < low) or (high is not None and number > high):
        raise _BadField(field, f"{value} is not a number a sweep measures")
    return number


def _flag(value: Any, field: str) -> bool:
    if not isinstance(value, bool):
        raise _BadField(field, f"a {_kind(value)} where true or false belongs")
    return value


def _text(value: Any, field: str, *, choices: tuple[str, ...] = (), pattern: re.Pattern[str] | None = None) -> str:
    if not isinstance(value, str):
        raise _BadField(field, f"a {_kind(value)} where text belongs")
    if len(value) > MAX_TEXT:
        raise _BadField(field, f"{len(value):,} characters (at most {MAX_TEXT:,})")
    bad = _UNSAFE.search(value)
    if bad:
        raise _BadField(field, f"a control character (U+{ord(bad.group()):04X}) at character {bad.start() + 1}")
    if choices and value not in choices:
        raise _BadField(field, f"{_shown(value)} is not one of {', '.join(choices)}")
    if pattern is not None and not pattern.fullmatch(value):
        raise _BadField(field, f"{_shown(value)} is not an NCCL setting name")
    return value


def _range_outcome(value: Any, field: str) -> RangeOutcome:
    from clusterctl.nccl.tune.sweep import COLLECTIVES

    r = _object(value, field, required=("range", "baseline_gbps", "noise", "best_label", "best_gbps", "significant",
                                        "best_runs"),
                optional=("collective", "gain", "ci_low", "ci_high", "baseline_moved", "verdict"))

    def num(key: str, low: float | None = None) -> float:
        return _number(r.get(key, 0.0), _join(field, key), low=low)

    return RangeOutcome(
        range=_text(r["range"], _join(field, "range"), choices=_RANGES),
        baseline_gbps=num("baseline_gbps", 0.0), noise=num("noise", 0.0),
        best_label=_text(r["best_label"], _join(field, "best_label")),
        best_gbps=num("best_gbps", 0.0),
        significant=_flag(r["significant"], _join(field, "significant")),
        best_runs=_count(r["best_runs"], _join(field, "best_runs")),
        collective=_text(r.get("collective", "allreduce"), _join(field, "collective"),
                         choices=tuple(COLLECTIVES.values())),
        gain=num("gain"), ci_low=num("ci_low"), ci_high=num("ci_high"), baseline_moved=num("baseline_moved"),
        verdict=_text(r.get("verdict", ""), _join(field, "verdict")),
    )


def _setting(value: Any, field: str) -> TunedSetting:
    s = _object(value, field, required=("name", "value", "reason"), optional=("source",))
    return TunedSetting(
        name=_text(s["name"], _join(field, "name"), pattern=_SETTING_NAME),
        value=_text(s["value"], _join(field, "value")),
        reason=_text(s["reason"], _join(field, "reason")),
        source=_text(s.get("source", "sweep"), _join(field, "source"), choices=("survey", "sweep")),
    )


def _tuner_row(value: Any, field: str) -> tuple[str, str, str, str]:
    from clusterctl.nccl.tune.sweep import COLLECTIVES, TUNER_ALGOS

    if not isinstance(value, list) or len(value) not in (3, 4):
        raise _BadField(field, "not a (collective, range, algorithm, protocol) row")
    # sweeps saved before per-collective results have (range, algo, proto) rows: all-reduce
    row = value if len(value) == 4 else ["allreduce", *value]
    return (
        _text(row[0], f"{field}.collective", choices=tuple(COLLECTIVES.values())),
        _text(row[1], f"{field}.range", choices=_RANGES),
        _text(row[2], f"{field}.algorithm", choices=tuple(TUNER_ALGOS.values())),
        _text(row[3], f"{field}.protocol", choices=_PROTOCOLS),
    )


def _table_row(value: Any, field: str) -> tuple[str, dict[str, float], int]:
    if not isinstance(value, list) or len(value) != 3:
        raise _BadField(field, "not a (label, per-range GB/s, runs) row")
    label, levels, runs = value
    if not isinstance(levels, dict):
        raise _BadField(f"{field}.levels", f"a {_kind(levels)} where an object belongs")
    return (
        _text(label, f"{field}.label"),
        {_text(k, f"{field}.levels", choices=_RANGES): _number(v, f"{field}.levels.{k}", low=0.0)
         for k, v in levels.items()},
        _count(runs, f"{field}.runs"),
    )


def _join(field: str, key: str) -> str:
    return f"{field}.{key}" if field else key


def _kind(value: Any) -> str:
    return {dict: "object", list: "list", str: "text", bool: "true/false", int: "number", float: "number",
            type(None): "null"}.get(type(value), type(value).__name__)


def _shown(value: str) -> str:
    """A value from the file, quoted, control characters escaped and cut to a length that fits a line."""
    text = ascii(value[:40])
    return text if len(value) <= 40 else text[:-1] + "...'"
