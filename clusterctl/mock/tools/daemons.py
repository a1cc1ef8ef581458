"""Real daemons behind simulated services, on isolated sshd mock hosts.

A host whose ``host.json`` lists a service under ``daemons`` (the test fixture does this for
hosts started with a real containerd) gets the real program when ``systemctl`` starts,
restarts or stops that service: the simulated ``systemctl`` runs inside the host's mount and
UTS namespaces, so ``/etc/containerd/config.toml``, ``/var/lib/containerd`` and
``/run/containerd`` are the host's private ones. A config the daemon rejects makes it exit:
the start then fails like systemd's. Every daemon's PID is kept in ``host.json`` so teardown
stops it by PID (after checking its command line).

``daemons: {containerd: {"argv": ["/usr/bin/containerd", "--config", "/etc/containerd/config.toml"],
"ready": "/run/containerd/containerd.sock"}}``
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import time
from pathlib import Path
from typing import Any

from clusterctl.mock.tools.base import ToolContext
from clusterctl.mock.turns import pause, waiting

START_WAIT_S = 15.0


def _spec(ctx: ToolContext, service: str) -> dict[str, Any] | None:
    daemons = ctx.host.read().get("daemons") or {}
    spec = daemons.get(service)
    return spec if isinstance(spec, dict) else None


def is_real(ctx: ToolContext, service: str) -> bool:
    return _spec(ctx, service) is not None


def cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return ""


def alive(pid: int, argv: list[str]) -> bool:
    """Whether ``pid`` is still this daemon (not a zombie, not a reused PID)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z" and cmdline(pid) == " ".join(argv)


def running(ctx: ToolContext, service: str) -> bool:
    spec = _spec(ctx, service) or {}
    pid = spec.get("pid")
    return isinstance(pid, int) and alive(pid, list(spec.get("argv") or []))


def stop_pid(pid: int, argv: list[str]) -> None:
    """SIGTERM, then SIGKILL, the process ``pid`` while it is still ``argv``."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        if not alive(pid, argv):
            return
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, sig)
        deadline = time.monotonic() + 5.0
        while time.monotonic() < deadline and alive(pid, argv):
            pause(0.05)


def _ready(path: str) -> bool:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(0.5)
        try:
            s.connect(path)
        except OSError:
            return False
    return True


def stop(ctx: ToolContext, service: str) -> None:
    spec = _spec(ctx, service) or {}
    pid = spec.get("pid")
    if isinstance(pid, int):
        stop_pid(pid, list(spec.get("argv") or []))
    with ctx.host.edit() as data:
        data.setdefault("daemons", {}).setdefault(service, {}).pop("pid", None)


def start(ctx: ToolContext, service: str) -> str | None:
    """Start the daemon; the reason it did not come up (its log's tail), or None."""
    if running(ctx, service):
        return None
    spec = _spec(ctx, service) or {}
    argv = [str(a) for a in spec.get("argv") or []]
    ready = str(spec.get("ready") or "")
    log_path = ctx.host.folder / f"{service}.log"
    with open(log_path, "ab") as log:
        process = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                   start_new_session=True)
    with ctx.host.edit() as data:
        data.setdefault("daemons", {}).setdefault(service, {})["pid"] = process.pid
    deadline = time.monotonic() + START_WAIT_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            tail = log_path.read_text(errors="replace").strip().splitlines()[-3:]
            return f"{service} exited with {process.returncode}: " + " | ".join(tail)
        if not ready:
            return None
        with waiting():
            up = _ready(ready)
        if up:
            return None
        pause(0.1)
    stop_pid(process.pid, argv)
    return f"{service} did not become ready within {START_WAIT_S:g}s"
