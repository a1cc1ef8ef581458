"""A sweep saved by ``tune-nccl --sweep --out DIR`` (``DIR/sweep.json``) and read back for ``--bench``."""

from __future__ import annotations

from pathlib import Path

from clusterctl.errors import UsageError
from clusterctl.nccl.tune.derive import TunedSetting
from clusterctl.nccl.tune.sweep_result import RangeOutcome, SweepResult

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
