"""A timestamped folder per run (raw outputs + parsed JSON), and comparing two of them."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from clusterctl.errors import UsageError
from clusterctl.findings import FINDINGS_SCHEMA_VERSION
from clusterctl.json_input import BadField, matching, read_json, shown, versioned
from clusterctl.utc import file_stamp
from clusterctl.writable import make_folder, replace_file

if TYPE_CHECKING:
    from clusterctl.bench.ib_bench import IBBenchReport
    from clusterctl.bench.nccl_tests import NcclRun

RESULTS_FILE = "results.json"
#: Versions of results.json this clusterctl reads: 1 (no version written) up to today's.
READABLE_VERSIONS = tuple(range(1, FINDINGS_SCHEMA_VERSION + 1))
_SAFE = re.compile(r"[^A-Za-z0-9_.+-]+")


#: Marks a results folder as taken by one run; created exclusively, so two runs never share one.
CLAIM_FILE = ".clusterctl-run"


def new_results_dir(base: str | None = None, *, now: float | None = None) -> Path:
    """A results folder that belongs to this run alone, created now (before any host is touched).

    Default ``./clusterctl-results/bench-YYYYmmdd-HHMMSS``, with ``-2``, ``-3``... when another run
    took that second; ``base`` when given, refused when another run already wrote there.
    """
    if base:
        folder = Path(base).expanduser()
        make_folder(folder, f"--results-dir {folder}")
        _claim(folder)
    else:
        stamp = file_stamp(now)
        parent = Path("clusterctl-results")
        make_folder(parent, f"results folder {parent}")
        for attempt in range(1, 1000):
            folder = parent / (f"bench-{stamp}" if attempt == 1 else f"bench-{stamp}-{attempt}")
            try:
                folder.mkdir()  # atomic: exactly one run creates each name
            except FileExistsError:
                continue
            except OSError as exc:
                raise UsageError(f"cannot create {folder}: {exc.strerror or exc}.") from None
            _claim(folder)
            break
        else:  # pragma: no cover - a thousand runs in one second
            raise UsageError(f"too many runs named bench-{stamp} in {parent}")
    (folder / "raw").mkdir(exist_ok=True)
    return folder


@contextmanager
def given_back_if_refused(folder: Path | None, *, named: bool) -> Iterator[None]:
    """A run refused (``UsageError``) before it saved anything gives its results ``folder`` back: a typo in an option
    neither leaves an empty folder behind nor makes the one ``--results-dir`` named refuse the corrected run."""
    try:
        yield
    except UsageError:
        if folder is not None and not (folder / RESULTS_FILE).exists() and not any((folder / "raw").iterdir()):
            (folder / CLAIM_FILE).unlink()
            (folder / "raw").rmdir()
            if not named:
                folder.rmdir()
        raise


def _claim(folder: Path) -> None:
    try:
        fd = os.open(folder / CLAIM_FILE, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
    except FileExistsError:
        raise UsageError(
            f"{folder} already holds the results of another run; give a new folder to --results-dir "
            "(or leave it out: each run then gets its own)."
        ) from None
    except OSError as exc:
        raise UsageError(f"{folder}: not writable: {exc.strerror or exc}.") from None
    with os.fdopen(fd, "w") as handle:
        handle.write(f"{os.getpid()}\n")


def save_raw(folder: Path, name: str, text: str) -> Path:
    path = folder / "raw" / (_SAFE.sub("_", name).strip("_") + ".txt")
    path.write_text(text)
    return path


def save_results(folder: Path, payload: dict[str, Any]) -> Path:
    path = folder / RESULTS_FILE
    replace_file(path, json.dumps({"schema_version": FINDINGS_SCHEMA_VERSION, **payload}, indent=2) + "\n")
    return path


_NUMBER = {"type": ["number", "null"]}
_NAME = {"type": "string", "minLength": 1}
_TEXT = {"type": ["string", "null"]}
_FLAG = {"type": ["boolean", "null"]}
#: What ``bench compare`` and ``dashboards --bench`` read of a results file; the rest is carried as it is.
SCHEMA = {"type": "object", "properties": {
    "test": _TEXT, "kind": _TEXT,
    "links": {"type": "array", "items": {
        "type": "object", "required": ["server", "server_hca", "client", "client_hca"], "properties": {
            "server": _NAME, "server_hca": _NAME, "client": _NAME, "client_hca": _NAME, "test": _TEXT,
            "gbps": _NUMBER, "latency_us": _NUMBER, "expected_gbps": _NUMBER, "slow": _FLAG, "same_rack": _FLAG,
            "bidirectional": _FLAG}}},
    "nccl": {"type": "object", "properties": {
        "op": _TEXT, "median_busbw_gbs": _NUMBER,
        "runs": {"type": "array", "items": {
            "type": "object", "required": ["host"], "properties": {"host": _NAME, "busbw_gbs": _NUMBER}}}}}}}


def load_results(path: str) -> dict[str, Any]:
    """A ``bench`` run's results.json (or its folder), checked for what is read of it."""
    target = Path(path) / RESULTS_FILE if Path(path).is_dir() else Path(path)
    return read_json(str(target), "results", "a results file", _bench_run)


def _bench_run(data: Any) -> dict[str, Any]:
    """A results file's document: bench ib's (``kind: bench-ib``, its ``links``) or bench nccl's (``nccl``),
    never another report (a saved survey or health report was compared as a run with no figures, exit 0)."""
    run = dict(matching(versioned(data, None, READABLE_VERSIONS, unversioned=1), SCHEMA))
    if run.get("kind") not in (None, "bench-ib"):
        raise BadField("kind", f"a {shown(str(run['kind']))} report, not a bench run's: give the folder (or its "
                               f"{RESULTS_FILE}) that 'clusterctl bench ib' or 'bench nccl' wrote")
    if "links" not in run and "nccl" not in run:
        raise BadField("links", "missing, and so is 'nccl': no figure of a bench run")
    return run


def run_kind(data: dict[str, Any]) -> str:
    """``ib_write_bw``, ``ib_write_bw -b`` (both directions add up), ``ib_write_lat`` or ``nccl all_reduce``:
    what a results file measured."""
    if "nccl" in data:
        return f"nccl {data['nccl'].get('op', '')}".strip()
    both = " -b" if any(link.get("bidirectional") for link in data.get("links", [])) else ""
    return str(data.get("test") or data.get("kind") or "unknown") + both


def comparability(before: dict[str, Any], after: dict[str, Any]) -> str | None:
    """Why two runs cannot be compared figure by figure, or ``None`` when they can."""
    a, b = run_kind(before), run_kind(after)
    if a != b:
        return f"the runs measured different things ({a} vs {b}): no figure of one is comparable with the other"
    if not set(figures(before)) & set(figures(after)):
        return "the runs share no link or host: every figure is new or gone"
    return None


@dataclass(frozen=True)
class Change:
    key: str
    unit: str
    before: float | None
    after: float | None

    @property
    def ratio(self) -> float | None:
        return self.after / self.before if self.before and self.after is not None else None

    @property
    def verdict(self) -> str:
        if self.before is None:
            return "new"
        if self.after is None:
            return "gone"
        ratio = self.ratio
        if ratio is None or abs(ratio - 1) < 0.05:
            return "unchanged"
        # Smaller is better for latency.
        return "faster" if (ratio < 1 if self.unit == "us" else ratio > 1) else "slower"


def figures(data: dict[str, Any]) -> dict[str, tuple[float | None, str]]:
    """Comparable figures of a results file: per link (Gb/s or us) and per nccl host (GB/s)."""
    out: dict[str, tuple[float | None, str]] = {}
    for link in data.get("links", []):
        key = f"{link['server']}/{link['server_hca']} <-> {link['client']}/{link['client_hca']}"
        out[key] = (link["latency_us"], "us") if link.get("latency_us") is not None else (link.get("gbps"), "Gb/s")
    for run in data.get("nccl", {}).get("runs", []):
        out[f"nccl {data['nccl'].get('op', '')} {run['host']}"] = (run.get("busbw_gbs"), "GB/s")
    return out


def compare(before: dict[str, Any], after: dict[str, Any]) -> list[Change]:
    a, b = figures(before), figures(after)
    keys = list(dict.fromkeys([*a, *b]))
    return [Change(k, (a.get(k) or b.get(k) or (None, ""))[1], a.get(k, (None, ""))[0], b.get(k, (None, ""))[0])
            for k in keys]


def save_ib_run(folder: Path, report: IBBenchReport, payload: dict[str, Any]) -> None:
    """Into a ``bench ib`` run's folder (``new_results_dir``, made before the run): each test's raw
    client and server output, and results.json."""
    for r in report.results:
        stem = f"r{r.round}-{r.server}-{r.server_hca}--{r.client}-{r.client_hca}"
        save_raw(folder, f"{stem}-client", r.client_output)
        save_raw(folder, f"{stem}-server", r.server_output)
    save_results(folder, payload)


def save_nccl_run(folder: Path, run: NcclRun, payload: dict[str, Any]) -> None:
    """Into a ``bench nccl`` run's folder (``new_results_dir``, made before the run): each host's (or
    the mpirun job's) raw output, and results.json."""
    for r in run.runs:
        save_raw(folder, f"nccl-{run.op}-{r.host}", r.output)
    save_results(folder, {"nccl": payload})
