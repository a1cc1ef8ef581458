"""A timestamped folder per run (raw outputs + parsed JSON), and comparing two of them."""

from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from clusterctl.errors import UsageError

if TYPE_CHECKING:
    from clusterctl.bench.ib_bench import IBBenchReport
    from clusterctl.bench.nccl_tests import NcclRun

RESULTS_FILE = "results.json"
_SAFE = re.compile(r"[^A-Za-z0-9_.+-]+")


def new_results_dir(base: str | None = None, *, now: float | None = None, prefix: str = "bench") -> Path:
    """``./clusterctl-results/bench-YYYYmmdd-HHMMSS`` (or ``base`` itself when given), created."""
    if base:
        folder = Path(base)
    else:
        stamp = time.strftime("%Y%m%d-%H%M%S", time.localtime(now))
        folder = Path("clusterctl-results") / f"{prefix}-{stamp}"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "raw").mkdir(exist_ok=True)
    return folder


def save_raw(folder: Path, name: str, text: str) -> Path:
    path = folder / "raw" / (_SAFE.sub("_", name).strip("_") + ".txt")
    path.write_text(text)
    return path


def save_results(folder: Path, payload: dict[str, Any]) -> Path:
    path = folder / RESULTS_FILE
    path.write_text(json.dumps(payload, indent=2) + "\n")
    return path


def load_results(path: str) -> dict[str, Any]:
    target = Path(path)
    if target.is_dir():
        target = target / RESULTS_FILE
    try:
        data = json.loads(target.read_text())
    except OSError as exc:
        raise UsageError(f"cannot read {target}: {exc.strerror}", file=str(target)) from None
    except json.JSONDecodeError as exc:
        raise UsageError(f"not a results file: {exc}", file=str(target), line=exc.lineno) from None
    if not isinstance(data, dict):
        raise UsageError("not a results file", file=str(target))
    return data


@dataclass(frozen=True)
class Change:
    key: str
    unit: str
    before: float | None
    after: float | None

    @property
    def ratio(self) -> float | None:
        if not self.before or self.after is None:
            return None
        return self.after / self.before

    @property
    def verdict(self) -> str:
        if self.before is None:
            return "new"
        if self.after is None:
            return "gone"
        ratio = self.ratio
        if ratio is None:
            return "unchanged"
        # Smaller is better for latency.
        better = ratio < 1 if self.unit == "us" else ratio > 1
        if abs(ratio - 1) < 0.05:
            return "unchanged"
        return "faster" if better else "slower"


def figures(data: dict[str, Any]) -> dict[str, tuple[float | None, str]]:
    """Comparable figures of a results file: per link (Gb/s or us) and per nccl host (GB/s)."""
    out: dict[str, tuple[float | None, str]] = {}
    for link in data.get("links", []):
        key = f"{link['server']}/{link['server_hca']} <-> {link['client']}/{link['client_hca']}"
        if link.get("latency_us") is not None:
            out[key] = (link["latency_us"], "us")
        else:
            out[key] = (link.get("gbps"), "Gb/s")
    for run in data.get("nccl", {}).get("runs", []):
        out[f"nccl {data['nccl'].get('op', '')} {run['host']}"] = (run.get("busbw_gbs"), "GB/s")
    return out


def compare(before: dict[str, Any], after: dict[str, Any]) -> list[Change]:
    a, b = figures(before), figures(after)
    keys = list(dict.fromkeys([*a, *b]))
    return [Change(k, (a.get(k) or b.get(k) or (None, ""))[1], a.get(k, (None, ""))[0], b.get(k, (None, ""))[0])
            for k in keys]


def save_ib_run(results_dir: str | None, report: IBBenchReport, payload: dict[str, Any]) -> Path:
    """A ``bench ib`` run's folder: each test's raw client and server output, and results.json."""
    folder = new_results_dir(results_dir)
    for r in report.results:
        stem = f"r{r.round}-{r.server}-{r.server_hca}--{r.client}-{r.client_hca}"
        save_raw(folder, f"{stem}-client", r.client_output)
        save_raw(folder, f"{stem}-server", r.server_output)
    save_results(folder, payload)
    return folder


def save_nccl_run(results_dir: str | None, run: NcclRun, payload: dict[str, Any]) -> Path:
    """A ``bench nccl`` run's folder: each host's (or the mpirun job's) raw output, and results.json."""
    folder = new_results_dir(results_dir)
    for r in run.runs:
        save_raw(folder, f"nccl-{run.op}-{r.host}", r.output)
    save_results(folder, {"nccl": payload})
    return folder
