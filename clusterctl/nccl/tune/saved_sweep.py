"""A sweep saved by ``tune-nccl --sweep --out DIR`` (``DIR/sweep.json``) and read back for ``--bench``.

The file is input like any other a user names: it may have been edited, truncated, copied from
another cluster or written by someone else. It is read through ``json_input.read_json`` (its size
limit, binary data, UTF-8 and JSON checks) and then every field is checked for its type, range
and characters before anything of it reaches a rendered file or the terminal; a field that is
wrong is a usage error naming the file and the field (``ranges[2].best_gbps``), exit 2.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Callable, Mapping
from dataclasses import MISSING
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

from clusterctl.errors import UsageError
from clusterctl.json_input import BadField, flag, join, mapping, maybe, number, read_json, text
from clusterctl.json_input import count as _whole
from clusterctl.json_input import items as _all
from clusterctl.nccl.tune.derive import TunedSetting
from clusterctl.nccl.tune.sweep import COLLECTIVES, TUNER_ALGOS
from clusterctl.nccl.tune.sweep_result import SIZE_RANGES, RangeOutcome, SweepResult, UnreadRow
from clusterctl.writable import replace_file

SWEEP_FILE = "sweep.json"
_REMEDY = "--bench wants the --out folder of a --sweep; run the sweep again if the file was changed."

#: Entries one list of a saved sweep may have: a sweep of every candidate on every collective has
#: a few hundred table rows, far below this.
MAX_ENTRIES = 10_000
#: Runs, candidates and budgets: a sweep is a few hundred runs.
MAX_COUNT = 10_000_000
_SETTING_NAME = re.compile(r"NCCL_[A-Z0-9_]{1,60}")
_RANGES = tuple(name for name, _, _ in SIZE_RANGES)
_PROTOCOLS = ("ll", "ll128", "simple")
_count = partial(_whole, high=MAX_COUNT)
_items = partial(_all, limit=MAX_ENTRIES)
_collective = partial(text, choices=tuple(COLLECTIVES.values()))


def save_sweep(result: SweepResult, out_dir: str) -> Path:
    path = Path(out_dir) / SWEEP_FILE
    # Whole or not at all: a later ``tune-nccl --bench DIR`` reads it back.
    replace_file(path, json.dumps(dataclasses.asdict(result), indent=2) + "\n")
    return path


def load_sweep(folder: str) -> SweepResult:
    """A sweep saved by ``tune-nccl --sweep --out DIR`` (``DIR/sweep.json``).

    Raises ``UsageError`` (exit 2) naming the file, and the field where one is wrong, for a missing,
    oversized, binary, non-JSON or wrongly shaped file.
    """
    path = Path(folder) / SWEEP_FILE
    if Path(folder).is_dir() and not path.exists():
        raise UsageError("no saved sweep in this folder.", file=str(path), hint=_REMEDY)
    return read_json(str(path), "sweep", "a saved sweep", sweep_from_json, hint=_REMEDY)


def sweep_from_json(data: Any) -> SweepResult:
    """The ``SweepResult`` of a saved sweep's JSON value, every field checked (``BadField`` if not)."""
    return _record(SweepResult, data, "", {
        "budget": _count, "runs_used": _count, "full_grid_runs": _count, "candidates_tried": _count,
        "candidates_total": _count, "ranges": _list(_range_outcome), "settings": _list(_setting),
        "tuner_rows": _list(_tuner_row), "notes": _list(text), "table": _list(_table_row),
        "confidence": partial(number, low=0.0, high=1.0),
        # sweeps saved before the unread rows were kept have none
        "unread_rows": _list(_unread_row),
    })


_Read = Callable[[Any, str], Any]
_R = TypeVar("_R")


def _record(cls: type[_R], value: Any, field: str, read: Mapping[str, _Read], *, closed: bool = True) -> _R:
    """A dataclass from a JSON object, each field read by ``read[name]``: a field with a default may be missing
    (a file an older clusterctl saved; the default then holds); when ``closed``, a key that is no field is refused."""
    fields = dataclasses.fields(cls)  # type: ignore[arg-type]
    required = tuple(f.name for f in fields if f.default is MISSING and f.default_factory is MISSING)
    optional = tuple(f.name for f in fields if f.name not in required) if closed else None
    r = mapping(value, field, required=required, optional=optional)
    return cls(**{name: reader(r[name], join(field, name)) for name, reader in read.items() if name in r})


def _list(read: _Read) -> _Read:
    return lambda value, field: _items(value, field, read)


def _unread_row(value: Any, field: str) -> UnreadRow:
    return _record(UnreadRow, value, field, {
        "collective": _collective, "config": text, "run": _count, "host": text, "line": partial(maybe, _count),
        "message": text,
    }, closed=False)


def _range_outcome(value: Any, field: str) -> RangeOutcome:
    non_negative = partial(number, low=0.0)
    return _record(RangeOutcome, value, field, {
        "range": partial(text, choices=_RANGES), "baseline_gbps": non_negative, "noise": non_negative,
        "best_label": text, "best_gbps": non_negative, "significant": flag, "best_runs": _count,
        "collective": _collective, "gain": number, "ci_low": number, "ci_high": number, "baseline_moved": number,
        "verdict": text,
    })


def _setting(value: Any, field: str) -> TunedSetting:
    s = mapping(value, field, required=("name", "value", "reason"), optional=("source",))
    return TunedSetting(
        name=text(s["name"], join(field, "name"), pattern=_SETTING_NAME, meaning="an NCCL setting name"),
        value=text(s["value"], join(field, "value")),
        reason=text(s["reason"], join(field, "reason")),
        source=text(s.get("source", "sweep"), join(field, "source"), choices=("survey", "sweep")),
    )


def _tuner_row(value: Any, field: str) -> tuple[str, str, str, str]:
    if not isinstance(value, list) or len(value) not in (3, 4):
        raise BadField(field, "not a (collective, range, algorithm, protocol) row")
    # sweeps saved before per-collective results have (range, algo, proto) rows: all-reduce
    row = value if len(value) == 4 else ["allreduce", *value]
    return (
        _collective(row[0], f"{field}.collective"),
        text(row[1], f"{field}.range", choices=_RANGES),
        text(row[2], f"{field}.algorithm", choices=tuple(TUNER_ALGOS.values())),
        text(row[3], f"{field}.protocol", choices=_PROTOCOLS),
    )


def _table_row(value: Any, field: str) -> tuple[str, dict[str, float], int]:
    if not isinstance(value, list) or len(value) != 3:
        raise BadField(field, "not a (label, per-range GB/s, runs) row")
    label, levels, runs = value
    mapping(levels, f"{field}.levels")
    return (
        text(label, f"{field}.label"),
        {text(k, f"{field}.levels", choices=_RANGES): number(v, f"{field}.levels.{k}", low=0.0)
         for k, v in levels.items()},
        _count(runs, f"{field}.runs"),
    )
