"""Mock fleets whose fake ib_write_bw answers depend on the pair (profiles written to tmp_path)."""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

import pytest
from fixture_files import fixture_dir

from clusterctl.bench.schedule import Round
from clusterctl.fanout import Runner
from clusterctl.inventory.model import Fabric, Host
from clusterctl.mock.transport import MockTransport
from clusterctl.transport.base import Transport

PERFTEST = fixture_dir("perftest")
#: Real recordings: a unidirectional HDR InfiniBand sweep peaking at 196.8 Gb/s, and a run that reached 0.48 Gb/s.
FAST = "write_bw-hdr200-ib-a-sweep-client.txt"
SLOW = "write_bw-roce-postlist-gbits-client.txt"
SERVER_PID = 4242


def address(index: int) -> str:
    return f"10.0.0.{index}"


def write_profile(folder: Path, slow_peers: Iterable[str], *, all_slow: bool = False, client_delay: float = 0) -> Path:
    """A host whose client runs are slow towards ``slow_peers`` (addresses), or towards everyone."""
    folder.mkdir(parents=True, exist_ok=True)
    shutil.copy(PERFTEST / FAST, folder / "fast.txt")
    shutil.copy(PERFTEST / SLOW, folder / "slow.txt")
    rules = [
        # Server start: backgrounded, prints its PID.
        {"regex": r"^ib_write_bw .*--report_gbits > /tmp/clusterctl-bench-\S+\.log 2>&1 < /dev/null & echo \$!$",
         "stdout_text": f"{SERVER_PID}\n"},
        {"regex": r"^cat /tmp/clusterctl-bench-\S+\.log$", "stdout": "slow.txt" if all_slow else "fast.txt"},
    ]
    delay = {"delay": client_delay} if client_delay else {}
    for peer in slow_peers:
        rules.append({"regex": rf"(^|\s)ib_write_bw .*--report_gbits {peer.replace('.', chr(92) + '.')}$",
                      "stdout": "slow.txt", **delay})
    rules.append({"regex": r"(^|\s)ib_write_bw .*--report_gbits \S+$", "stdout": "slow.txt" if all_slow else "fast.txt",
                  **delay})
    import yaml

    (folder / "profile.yaml").write_text(yaml.safe_dump({"commands": rules}, sort_keys=False))
    return folder


class Fleet:
    def __init__(self, hosts: list[Host]) -> None:
        self.hosts = hosts
        self.transports: dict[str, list[MockTransport]] = {}

    def connect(self, host: Host, timeout_s: float) -> Transport:
        transport = MockTransport(host)
        self.transports.setdefault(host.name, []).append(transport)
        return transport

    def history(self, name: str) -> list[str]:
        return [c for t in self.transports.get(name, []) for c in t.history]

    def runner(self) -> Runner:
        return Runner(self.connect, parallel=16, timeout_s=30)


FleetFactory = Callable[..., Fleet]


@pytest.fixture
def mock_fleet(tmp_path: Path) -> FleetFactory:
    """``mock_fleet(6, slow_host=3)`` or ``mock_fleet(6, bad_link=(1, 4))``: hosts h1..hN, racks of three."""

    def make(count: int, *, slow_host: int | None = None, bad_link: tuple[int, int] | None = None,
             client_delay: float = 0) -> Fleet:
        hosts = []
        for i in range(1, count + 1):
            slow_peers = []
            if slow_host is not None and i != slow_host:
                slow_peers.append(address(slow_host))
            if bad_link is not None and i in bad_link:
                other = bad_link[1] if i == bad_link[0] else bad_link[0]
                slow_peers.append(address(other))
            profile = write_profile(tmp_path / f"h{i}", slow_peers, all_slow=(i == slow_host),
                                    client_delay=client_delay)
            hosts.append(Host(name=f"h{i}", address=address(i), rack="ab"[(i - 1) // 3 % 2],
                              transport="mock", profile=str(profile), fabric=Fabric(type="ib", rate_gbps=200)))
        return Fleet(hosts)

    return make


def check_rounds(rounds: Sequence[Round]) -> None:
    """Raise ``ValueError`` if a host appears twice in a round or a pair is tested twice."""
    seen: set[frozenset[str]] = set()
    for index, members in enumerate(rounds, start=1):
        used: set[str] = set()
        for a, b in members:
            if a in used or b in used:
                raise ValueError(f"round {index} uses a host twice")
            used.update((a, b))
            key = frozenset((a, b))
            if key in seen:
                raise ValueError(f"pair {a}-{b} is scheduled twice")
            seen.add(key)
