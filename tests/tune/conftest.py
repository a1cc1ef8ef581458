"""Tuning inputs built from real recordings (topology matrices) plus constructed RDMA ports."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from fixture_files import FIXTURES as FIXTURES_ROOT

from clusterctl.facts.model import NetDevice, RDMADevice, RDMAPort
from clusterctl.facts.topo import parse_topo
from clusterctl.fanout import Runner
from clusterctl.inventory.model import Host, Inventory
from clusterctl.mock.transport import MockTransport
from clusterctl.nccl.tune.bench_measure import bench_measure
from clusterctl.nccl.tune.candidates import Candidate
from clusterctl.nccl.tune.inputs import TuneHost, nics_from_facts
from clusterctl.nccl.tune.sweep import run_sweep
from clusterctl.nccl.tune.sweep_result import SweepResult

FIXTURES = FIXTURES_ROOT
HERE = Path(__file__).resolve().parent


def ib_port(state: str = "PORT_ACTIVE", rate: float = 400.0) -> RDMAPort:
    return RDMAPort(1, state, "LinkUp" if state == "PORT_ACTIVE" else "Disabled", "InfiniBand", rate)


def roce_port(gid_index: int | None = 3, gids: tuple[tuple[int, str, str], ...] = ()) -> RDMAPort:
    return RDMAPort(1, "PORT_ACTIVE", "LinkUp", "Ethernet", 100.0, roce_v2_gid_index=gid_index, gids=gids)


def hgx_host(
    name: str = "gpu-1",
    address: str = "10.0.0.11",
    *,
    nccl: str = "2.21.5",
    down: tuple[int, ...] = (),
    mgmt_ifname: str = "eno1",
) -> TuneHost:
    """HGX H100 (real topo -m: 8 GPUs, NIC i at PIX to GPU i) with 8 IB HCAs and a management NIC."""
    matrix = parse_topo((FIXTURES / "topo" / "hgx-h100-8gpu-8nic.txt").read_text())
    # Listed out of order on purpose: NCCL_IB_HCA must come out in GPU order.
    rdma = [RDMADevice(f"mlx5_{i}", None, None, (ib_port("PORT_DOWN" if i in down else "PORT_ACTIVE"),))
            for i in (3, 1, 0, 2, 7, 5, 6, 4)]
    rdma.append(RDMADevice("mlx5_8", None, None, (roce_port(),)))
    netdevs = [NetDevice(f"ib{i}", f"mlx5_{i}", 1, True) for i in range(8)]
    netdevs += [NetDevice(mgmt_ifname, "mlx5_8", 1, True, (address,)), NetDevice("docker0", ipv4=("172.17.0.1",)),
                NetDevice("lo", ipv4=("127.0.0.1",))]
    return TuneHost(name, address, nccl, tuple(range(8)), nics_from_facts(rdma, matrix, netdevs), tuple(netdevs))


def roce_host(nccl: str, gid_index: int | None, gids: tuple[tuple[int, str, str], ...] = ()) -> TuneHost:
    """A100 with 8 RoCE NICs (real topo -m) whose ports carry ``gid_index`` / ``gids``, plus a management NIC."""
    matrix = parse_topo((FIXTURES / "topo" / "a100-8nic-roce-no-gpu-numa-id.txt").read_text())
    names = [d.device_name or d.label for d in matrix.nics]
    rdma = [RDMADevice(n, None, None, (RDMAPort(1, "PORT_ACTIVE", "LinkUp", "Ethernet", 200.0,
                                                 roce_v2_gid_index=gid_index, gids=gids),)) for n in names]
    netdevs = [NetDevice(f"ens{i}", n, 1, True, (f"192.168.{i}.2",)) for i, n in enumerate(names)]
    netdevs.append(NetDevice("eno1", ipv4=("10.0.0.5",)))
    return TuneHost("roce-1", "10.0.0.5", nccl, tuple(d.index for d in matrix.gpus),
                    nics_from_facts(rdma, matrix, netdevs), tuple(netdevs))


@pytest.fixture
def hgx() -> TuneHost:
    return hgx_host()


@pytest.fixture
def make_hgx() -> object:
    return hgx_host


@pytest.fixture
def make_roce_host() -> object:
    return roce_host


#: What the sweep on a mock host measures: ``profiles/sweep`` answers each differently.
MOCK_SWEEP_CANDIDATES = (Candidate((("NCCL_ALGO", "Tree"),)), Candidate((("NCCL_BUFFSIZE", "8388608"),)),
                         Candidate((("NCCL_NTHREADS", "256"),)))


def sweep_on_mock_host(profile: str) -> tuple[SweepResult, list[str]]:
    """The sweep of MOCK_SWEEP_CANDIDATES on one mock host replaying ``profiles/<profile>``, through
    the sweep's own measuring code; its result and the nccl-tests command lines in the order they ran."""
    host = Host(name="sweep-host", transport="mock", profile=str(HERE / "profiles" / profile))
    commands: list[str] = []

    def connect(h: Host, _timeout: float) -> MockTransport:
        transport = MockTransport(h)
        transport.history = commands
        return transport

    with Runner(connect, parallel=1, timeout_s=30) as runner:
        result = run_sweep(bench_measure(runner, Inventory("sweep", (host,)), [host]), MOCK_SWEEP_CANDIDATES,
                           nccl_version="2.21.5")
    return result, [c for c in commands if "all_reduce_perf" in c]


@pytest.fixture
def mock_sweep() -> Callable[[str], tuple[SweepResult, list[str]]]:
    return sweep_on_mock_host
