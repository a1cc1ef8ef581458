"""The simulated systemd's timers: what a mock host's active timers start when they fire.

A mock host has no clock of its own that runs between commands, so its timers fire when asked
(``clusterctl mock timers``, the demo's stand-in for time passing on the hosts): each timer unit
the host's systemd has active (``systemctl enable --now NAME.timer``) starts its service, whose
``ExecStart=`` line is read from the unit file in the host's tree exactly as bootstrap wrote it.
"""

from __future__ import annotations

import contextlib
import io
import shlex
import zipfile
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from clusterctl.mock.admin import mock_hosts
from clusterctl.mock.state import MockCluster
from clusterctl.mock.tools.systemctl import UNIT_DIRS
from clusterctl.mock.transport import MockTransport

if TYPE_CHECKING:
    from clusterctl.inventory.model import Host
    from clusterctl.mock.state import HostState
    from clusterctl.transport.base import Transport

#: The node agent's entry point (``clusterctl.agent.main.main``): its arguments and the host it runs on.
AgentMain = Callable[[list[str], Callable[[], "Transport"]], int]


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


def fire(hosts: Sequence[Host], bundle: tuple[str, str], agent: AgentMain) -> list[dict[str, Any]]:
    """Each active timer of the selected mock hosts fired once: the service it starts, its exit status and output
    (``bundle`` and ``agent``: the node agent's ``PYTHON PATH`` and what runs it, see ``_start``)."""
    results = []
    for host in mock_hosts(hosts):
        state = MockCluster(str(host.mock_state)).host(host.name)
        for name, entry in sorted((state.read().get("services") or {}).items()):
            if not name.endswith(".timer") or not isinstance(entry, dict) or entry.get("active") != "active":
                continue
            service = _setting(_unit_file(state, name) or "", "Timer", "Unit") or name[: -len(".timer")] + ".service"
            code, output = _start(host, state, service, bundle, agent)
            results.append({"host": host.name, "timer": name, "service": service, "exit_code": code,
                            "output": output})
    return results


def _start(host: Host, state: HostState, service: str, bundle: tuple[str, str], agent: AgentMain) -> tuple[int, str]:
    """Run the ExecStart of ``service`` on the mock host, split as systemd splits it (shell quoting rules): the
    node agent's bundle runs as ``agent`` with the host as its own machine (its commands answered by that
    host); any other line runs in the host's shell."""
    service_text = _unit_file(state, service)
    if service_text is None:
        return 1, f"unit {service} not found"
    line = _setting(service_text, "Service", "ExecStart")
    if not line:
        return 1, f"{service} has no ExecStart="
    argv = shlex.split(line.lstrip("-@+!:"))
    python, path = bundle
    if argv[:2] == [python, path]:
        data = state.fs.read(path)
        if data is None:
            return 203, f"{python}: can't open file '{path}': [Errno 2] No such file or directory"
        try:
            zipfile.ZipFile(io.BytesIO(data)).getinfo("clusterctl/agent/main.py")
        except (zipfile.BadZipFile, KeyError):
            return 1, f"{python}: {path} is not clusterctl's node bundle"
        out = io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
            code = agent(argv[2:], lambda: MockTransport(host))
        return code, out.getvalue()
    with MockTransport(host) as transport:
        result = transport.run(shlex.join(argv), sudo=True, timeout=300)
    return result.exit_code, result.stdout + result.stderr
