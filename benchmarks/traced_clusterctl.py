"""Runs ``clusterctl`` with its remote calls traced: where a run's time goes, per host.

Used by the sshd benchmarks' ``--profile`` (``python benchmarks/traced_clusterctl.py ARGS``
runs ``clusterctl ARGS``). Each SSH connection set-up and each command a transport runs is
recorded (host, start, end, the command's first words); at exit the summary goes to the file
named by ``CLUSTERCTL_TRACE`` as JSON, and with ``CLUSTERCTL_TRACE_PROFILE`` set, cProfile's
top entries over every thread (by own time and by cumulative time) go to that file as text.

Benchmark tooling only: it wraps methods from outside and changes nothing in the product.
"""

from __future__ import annotations

import atexit
import cProfile
import io
import json
import os
import pstats
import re
import sys
import threading
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

CALLS: list[dict[str, Any]] = []
_LOCK = threading.Lock()
T0 = time.monotonic()
#: Moments of the run (seconds since T0): what the CLI did before its first and after its last call.
MARKS: dict[str, float] = {}


def _process_age_s() -> float | None:
    """Seconds since this process started (the interpreter's own start-up before this module ran)."""
    try:
        ticks = int(Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()[19])
        uptime = float(Path("/proc/uptime").read_text().split()[0])
        return round(uptime - ticks / os.sysconf("SC_CLK_TCK"), 3)
    except (OSError, ValueError, IndexError):
        return None


MARKS["interpreter start-up before this module"] = _process_age_s() or 0.0


def _record(kind: str, host: str, began: float, what: str) -> None:
    with _LOCK:
        CALLS.append({"kind": kind, "host": host, "start": round(began - T0, 4),
                      "end": round(time.monotonic() - T0, 4), "what": what[:120]})


def _install() -> None:
    from clusterctl.transport.ssh import transport as ssh_transport

    cls = ssh_transport.SSHTransport
    execute, connection = cls.execute, cls._connection

    def traced_execute(self: Any, request: Any) -> Any:
        began = time.monotonic()
        try:
            return execute(self, request)
        finally:
            _record("command", self.host.name, began, " ".join(request.command.split()))

    def traced_connection(self: Any, timeout: float | None) -> Any:
        fresh = self._client is None or not self._client.is_active()
        began = time.monotonic()
        try:
            return connection(self, timeout)
        finally:
            if fresh:
                _record("connect", self.host.name, began, "")

    cls.execute = traced_execute  # type: ignore[method-assign]
    cls._connection = traced_connection  # type: ignore[method-assign]


#: One profiler per thread (cProfile sees only the thread that enabled it); merged at exit.
PROFILERS: list[cProfile.Profile] = []


def _profile_threads() -> None:
    # The thread's whole life, so that subclasses with their own run() (paramiko's Transport) count.
    bootstrap = threading.Thread._bootstrap_inner  # type: ignore[attr-defined]

    def profiled(self: threading.Thread) -> None:
        profiler = cProfile.Profile()
        with _LOCK:
            PROFILERS.append(profiler)
        profiler.enable()
        try:
            bootstrap(self)
        finally:
            profiler.disable()

    threading.Thread._bootstrap_inner = profiled  # type: ignore[attr-defined]


def _write(profiler: cProfile.Profile | None) -> None:
    target = os.environ.get("CLUSTERCTL_TRACE")
    if target:
        MARKS["exit handlers"] = round(time.monotonic() - T0, 3)
        Path(target).write_text(json.dumps({"wall_s": round(time.monotonic() - T0, 3), "calls": CALLS,
                                            "marks": MARKS}))
    profile_target = os.environ.get("CLUSTERCTL_TRACE_PROFILE")
    if profiler is not None and profile_target:
        profiler.disable()
        out = io.StringIO()
        stats = pstats.Stats(profiler, stream=out)
        for other in PROFILERS:
            other.disable()
            stats.add(other)
        stats.sort_stats("tottime").print_stats(25)
        stats.sort_stats("cumulative").print_stats(40)
        Path(profile_target).write_text(out.getvalue())


def main() -> None:
    _install()
    profiler = cProfile.Profile() if os.environ.get("CLUSTERCTL_TRACE_PROFILE") else None
    if profiler is not None:
        _profile_threads()
    atexit.register(_write, profiler)
    sys.argv = ["clusterctl", *sys.argv[1:]]
    if profiler is not None:
        profiler.enable()
    from clusterctl.cli.app import run_program

    MARKS["clusterctl imported"] = round(time.monotonic() - T0, 3)
    run_program()  # as ``python -m clusterctl`` runs it (it ends the process, exit handlers first)

if __name__ == "__main__":
    main()


def summarize(trace_file: Path, label: str, top: int = 12) -> str:
    """Round trips per host, connection set-ups, and the commands that cost the most, in words."""
    data = json.loads(trace_file.read_text())
    calls = data["calls"]
    hosts = sorted({c["host"] for c in calls})
    if not hosts:
        return f"{label}: no remote call traced"
    commands = [c for c in calls if c["kind"] == "command"]
    connects = [c for c in calls if c["kind"] == "connect"]
    per_host = len(commands) / len(hosts)
    busy = sum(c["end"] - c["start"] for c in commands) / len(hosts)
    connect_s = sum(c["end"] - c["start"] for c in connects) / max(len(connects), 1)
    first = min(c["start"] for c in calls)
    last = max(c["end"] for c in calls)
    lines = [f"{label}: {len(hosts)} hosts, {per_host:.1f} commands and {len(connects) / len(hosts):.1f} "
             f"connection(s) per host; a host's commands take {busy:.2f} s in all, a connection "
             f"{connect_s:.2f} s; remote calls from {first:.2f} s to {last:.2f} s of {data['wall_s']:.2f} s"]
    marks = data.get("marks") or {}
    if marks:
        lines.append("    moments (s): " + ", ".join(f"{name} {value:.2f}" for name, value in marks.items()))
    by_what: dict[str, list[float]] = {}
    for c in commands:
        # Per-run random tokens (read-ahead markers, lock run ids) would make every host's line its own.
        what = re.sub(r"\b[0-9a-f]{16,32}\b", "<token>", c["what"])[:70]
        by_what.setdefault(what, []).append(c["end"] - c["start"])
    ranked = sorted(by_what.items(), key=lambda kv: -sum(kv[1]))[:top]
    for what, times in ranked:
        lines.append(f"    {len(times) / len(hosts):4.1f}/host  mean {sum(times) / len(times):6.3f} s  {what}")
    return "\n".join(lines)
