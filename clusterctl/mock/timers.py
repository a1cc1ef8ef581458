"""The simulated systemd's timers: what a mock host's active timers would start when they fire.

A mock host has no clock of its own that runs between commands, so its timers fire when asked
(``clusterctl mock timers``, the demo's stand-in for time passing on the hosts): each timer unit
the host's systemd has active (``systemctl enable --now NAME.timer``) starts its service, whose
``ExecStart=`` line is read from the unit file in the host's tree exactly as bootstrap wrote it.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from typing import TYPE_CHECKING

from clusterctl.mock.tools.systemctl import UNIT_DIRS

if TYPE_CHECKING:
    from clusterctl.mock.state import HostState


@dataclass(frozen=True)
class TimerRun:
    host: str
    timer: str
    service: str
    #: ``ExecStart=`` split as systemd splits it (shell quoting rules), or () when none was found.
    argv: tuple[str, ...]
    #: Why it cannot start ("" when it can).
    problem: str = ""


def _unit_file(state: HostState, unit: str) -> str | None:
    for folder in UNIT_DIRS:
        data = state.fs.read(f"{folder}/{unit}")
        if data is not None:
            return data.decode("utf-8", errors="replace")
    return None


def _setting(text: str, section: str, key: str) -> str | None:
    current = ""
    found = None
    for raw in text.splitlines():
        line = raw.strip()
        if line.startswith("[") and line.endswith("]"):
            current = line[1:-1]
        elif current == section and line.startswith(f"{key}="):
            found = line.split("=", 1)[1].strip()
    return found


def due(state: HostState) -> list[TimerRun]:
    """The service each active timer of the host starts, with its command line."""
    runs = []
    services = state.read().get("services") or {}
    for name, entry in sorted(services.items()):
        if not name.endswith(".timer") or not isinstance(entry, dict) or entry.get("active") != "active":
            continue
        timer_text = _unit_file(state, name)
        service = (_setting(timer_text or "", "Timer", "Unit") or name[: -len(".timer")] + ".service")
        service_text = _unit_file(state, service)
        if service_text is None:
            runs.append(TimerRun(state.name, name, service, (), f"unit {service} not found"))
            continue
        line = _setting(service_text, "Service", "ExecStart")
        if not line:
            runs.append(TimerRun(state.name, name, service, (), f"{service} has no ExecStart="))
            continue
        runs.append(TimerRun(state.name, name, service, tuple(shlex.split(line.lstrip("-@+!:")))))
    return runs
