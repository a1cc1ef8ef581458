"""Where the mock hosts of an inventory keep their state, and forgetting it (``clusterctl mock``)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from clusterctl.mock.state import MockCluster

if TYPE_CHECKING:
    from clusterctl.inventory.model import Host


@dataclass(frozen=True)
class HostStateSummary:
    host: str
    folder: str
    exists: bool
    services: dict[str, str]
    packages: dict[str, str]
    values: dict[str, str]


def mock_hosts(hosts: Sequence[Host]) -> list[Host]:
    return [h for h in hosts if h.transport == "mock" and h.mock_state]


def summaries(hosts: Sequence[Host]) -> list[HostStateSummary]:
    found = []
    for host in mock_hosts(hosts):
        state = MockCluster(str(host.mock_state)).host(host.name)
        services = {k: str(v.get("active")) for k, v in state.section("services").items() if isinstance(v, dict)}
        packages = {k: str(v.get("version")) for k, v in state.section("packages").items() if isinstance(v, dict)}
        found.append(HostStateSummary(host.name, str(state.folder), state.seeded, services, packages, state.values()))
    return found


def reset(hosts: Sequence[Host], *, whole_cluster: bool) -> list[str]:
    """Forget the state of ``hosts`` (and their clusters' shared state when ``whole_cluster``)."""
    removed: list[str] = []
    by_folder: dict[str, list[str]] = {}
    for host in mock_hosts(hosts):
        by_folder.setdefault(str(host.mock_state), []).append(host.name)
    for folder, names in by_folder.items():
        removed += MockCluster(folder).reset(None if whole_cluster else names)
    return removed


def set_values(hosts: Sequence[Host], values: dict[str, str]) -> list[str]:
    """Set state values (what profile rules' ``when_state`` test: an injected fault) on ``hosts``; an
    empty value removes the key. The names of the hosts changed."""
    from clusterctl.mock.machine import MockMachine
    from clusterctl.mock.profile import load_profile

    changed = []
    for host in mock_hosts(hosts):
        # Opening the machine creates its state first: values set on a host never used would be
        # dropped when it first boots from its profile.
        state = MockMachine.open(load_profile(str(host.profile)), str(host.mock_state), host.name).host
        with state.edit() as data:
            kept = data.setdefault("values", {})
            for key, value in values.items():
                if value:
                    kept[key] = value
                else:
                    kept.pop(key, None)
        changed.append(host.name)
    return changed
