"""A sweep saved by ``tune-nccl --sweep --out DIR`` (``DIR/sweep.json``) and read back for ``--bench``.

The file is input like any other a user names: it may have been edited, truncated, copied from
another cluster or written by someone else. It is read through ``json_input.read_json`` (its size
limit, binary data, UTF-8 and JSON checks) and then every field is checked for its type, range
and characters before anything of it reaches a rendered file or the terminal; a field that is
wrong is a usage error naming the file and the field (``ranges[2].best_gbps``), exit 2.
"""

from __future__ import annotations

import re
from functools import partial
from pathlib import Path
from typing import Any

from clusterctl.errors import UsageError
from clusterctl.json_input import BadField, flag, join, mapping, maybe, number, text
from clusterctl.json_input import count as _whole
from clusterctl.json_input import items as _all
from clusterctl.nccl.tune.derive import TunedSetting
from clusterctl.nccl.tune.sweep_result import SIZE_RANGES, RangeOutcome, SweepResult, UnreadRow

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


def save_sweep(result: SweepResult, out_dir: str) -> Path:
    import dataclasses
    import json

    from clusterctl.writable import replace_file

    path = Path(out_dir) / SWEEP_FILE
    # Whole or not at all: a later ``tune-nccl --bench DIR`` reads it back.
    replace_file(path, json.dumps(dataclasses.asdict(result), indent=2) + "\n")
    return path


def load_sweep(folder: str) -> SweepResult:
    """A sweep saved by ``tune-nccl --sweep --out DIR`` (``DIR/sweep.json``).

    Raises ``UsageError`` (exit 2) naming the file, and the field where one is wrong, for a missing,
    oversized, binary, non-JSON or wrongly shaped file.
    """
    from clusterctl.json_input import read_json

    path = Path(folder) / SWEEP_FILE
    if Path(folder).is_dir() and not path.exists():
        raise UsageError("no saved sweep in this folder.", file=str(path), hint=_REMEDY)
    return read_json(str(path), "sweep", "a saved sweep", sweep_from_json, hint=_REMEDY)


def sweep_from_json(data: Any) -> SweepResult:
    """The ``SweepResult`` of a saved sweep's JSON value, every field checked (``BadField`` if not)."""
    top = mapping(data, "", required=("budget", "runs_used", "full_grid_runs", "candidates_tried",
                                      "candidates_total", "ranges", "settings", "tuner_rows", "notes"),
                  optional=("table", "confidence", "unread_rows"))
    return SweepResult(
        budget=_count(top["budget"], "budget"),
        runs_used=_count(top["runs_used"], "runs_used"),
        full_grid_runs=_count(top["full_grid_runs"], "full_grid_runs"),
        candidates_tried=_count(top["candidates_tried"], "candidates_tried"),
        candidates_total=_count(top["candidates_total"], "candidates_total"),
        ranges=_items(top["ranges"], "ranges", _range_outcome),
        settings=_items(top["settings"], "settings", _setting),
        tuner_rows=_items(top["tuner_rows"], "tuner_rows", _tuner_row),
        notes=_items(top["notes"], "notes", text),
        table=_items(top.get("table", []), "table", _table_row),
        confidence=number(top.get("confidence", 0.0), "confidence", low=0.0, high=1.0),
        # sweeps saved before the unread rows were kept have none
        unread_rows=_items(top.get("unread_rows", []), "unread_rows", _unread_row),
    )


def _unread_row(value: Any, field: str) -> UnreadRow:
    from clusterctl.nccl.tune.sweep import COLLECTIVES

    r = mapping(value, field, required=("collective", "config", "run", "host", "line", "message"))
    return UnreadRow(
        collective=text(r["collective"], join(field, "collective"), choices=tuple(COLLECTIVES.values())),
        config=text(r["config"], join(field, "config")),
        run=_count(r["run"], join(field, "run")),
        host=text(r["host"], join(field, "host")),
        line=maybe(_count, r["line"], join(field, "line")),
        message=text(r["message"], join(field, "message")),
    )


def _range_outcome(value: Any, field: str) -> RangeOutcome:
    from clusterctl.nccl.tune.sweep import COLLECTIVES

    r = mapping(value, field, required=("range", "baseline_gbps", "noise", "best_label", "best_gbps", "significant",
                                        "best_runs"),
                optional=("collective", "gain", "ci_low", "ci_high", "baseline_moved", "verdict"))

    def num(key: str, low: float | None = None) -> float:
        return number(r.get(key, 0.0), join(field, key), low=low)

    return RangeOutcome(
        range=text(r["range"], join(field, "range"), choices=_RANGES),
        baseline_gbps=num("baseline_gbps", 0.0), noise=num("noise", 0.0),
        best_label=text(r["best_label"], join(field, "best_label")),
        best_gbps=num("best_gbps", 0.0),
        significant=flag(r["significant"], join(field, "significant")),
        best_runs=_count(r["best_runs"], join(field, "best_runs")),
        collective=text(r.get("collective", "allreduce"), join(field, "collective"),
                         choices=tuple(COLLECTIVES.values())),
        gain=num("gain"), ci_low=num("ci_low"), ci_high=num("ci_high"), baseline_moved=num("baseline_moved"),
        verdict=text(r.get("verdict", ""), join(field, "verdict")),
    )


def _setting(value: Any, field: str) -> TunedSetting:
    s = mapping(value, field, required=("name", "value", "reason"), optional=("source",))
    return TunedSetting(
        name=text(s["name"], join(field, "name"), pattern=_SETTING_NAME, meaning="an NCCL setting name"),
        value=text(s["value"], join(field, "value")),
        reason=text(s["reason"], join(field, "reason")),
        source=text(s.get("source", "sweep"), join(field, "source"), choices=("survey", "sweep")),
    )


def _tuner_row(value: Any, field: str) -> tuple[str, str, str, str]:
    from clusterctl.nccl.tune.sweep import COLLECTIVES, TUNER_ALGOS

    if not isinstance(value, list) or len(value) not in (3, 4):
        raise BadField(field, "not a (collective, range, algorithm, protocol) row")
    # sweeps saved before per-collective results have (range, algo, proto) rows: all-reduce
    row = value if len(value) == 4 else ["allreduce", *value]
    return (
        text(row[0], f"{field}.collective", choices=tuple(COLLECTIVES.values())),
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
