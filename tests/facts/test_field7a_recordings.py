"""Field7a round of real outputs: an old perfquery with its short counter names, a RoCE host's bonded
ports in ibdev2netdev, MIG-mode queries of Blackwell and laptop GPUs, an 8x H200 host's memory query."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from fixture_files import read_fixture

from clusterctl.errors import ParseError
from clusterctl.facts.gpus import parse_gpus
from clusterctl.facts.ib_counters import parse_ib_counters
from clusterctl.facts.model import RDMADevices
from clusterctl.facts.netdev import parse_ibdev2netdev, parse_ip_addr
from clusterctl.facts.rdma import parse_ibstat, parse_rdma
from clusterctl.health.probe import IB_COUNTERS


def test_old_perfquery_short_names_are_read_as_the_counters_health_judges() -> None:
    """An older perfquery says ``LinkDowned`` and ``SymbolErrors``: kept under those names, health found no
    ``link_downed`` to judge the port by."""
    counters = parse_ib_counters(read_fixture("ib-counters", "perfquery-short-names-opt-ofed-lid936.txt"))
    (port,) = counters.ports
    assert (port.hca, port.port, counters.warnings) == ("lid-936", 1, ())
    assert {name: port.counters.get(name) for name in IB_COUNTERS} == dict.fromkeys(IB_COUNTERS, 0)


def test_h200_memory_query_reads_every_gpu_and_its_size() -> None:
    gpus = parse_gpus(read_fixture("nvidia-smi", "h200-8gpu-uuid-memory-used-utilization.csv"))
    assert [gpu.index for gpu in gpus] == list(range(8))
    assert {gpu.memory_total_mib for gpu in gpus} == {143771}
    assert gpus[7].uuid == "GPU-28780eb0-24d5-1f13-59b8-ae5c23617a72"


def test_mig_mode_queries_name_the_gpu_past_a_root_prompt_and_n_a_fields() -> None:
    (blackwell,) = parse_gpus(read_fixture("nvidia-smi", "rtxpro6000-blackwell-mig-mode-root-prompt.csv"))
    assert (blackwell.index, blackwell.name) == (0, "NVIDIA RTX PRO 6000 Blackwell Server Edition")
    (laptop,) = parse_gpus(read_fixture("nvidia-smi", "rtx4070-laptop-mig-mode-na.csv"))
    assert (laptop.index, laptop.name) == (0, "NVIDIA GeForce RTX 4070 Laptop GPU")


def test_roce_lag_bonds_are_ports_with_their_bond_netdev() -> None:
    devices = parse_ibdev2netdev(read_fixture("ibdev2netdev", "roce-lag-bond-two-down-no-space-prompt.txt"))
    assert [(d.hca, d.port, d.name, d.up) for d in devices] == [
        ("mlx5_4", 1, "eth4", False), ("mlx5_5", 1, "eth5", False),
        ("mlx5_bond_0", 1, "bond0", True), ("mlx5_bond_1", 1, "bond1", True)]


def test_a_huawei_roce_bond_beside_a_mellanox_one() -> None:
    devices = parse_ibdev2netdev(read_fixture("ibdev2netdev", "huawei-hrn3-bond-beside-mlx5-bond.txt"))
    assert [(d.hca, d.name, d.up) for d in devices] == [("hrn3_bond_0", "bond0", True), ("mlx5_bond_0", "bond1", True)]


@pytest.mark.parametrize("parse", [parse_ibstat, parse_rdma])
def test_ibstatus_of_an_h20_host_is_refused_as_ibstatus_by_either_reader(parse: Callable[[str], RDMADevices]) -> None:
    """Eight 2X NDR ports under PCI names and a RoCE port: where ibstat is read, the refusal said "no CA block"
    and not what the text is or which output to paste."""
    with pytest.raises(ParseError) as refused:
        parse(read_fixture("ibstatus", "h20-ndr-2x-pci-names-and-a-roce-port-root-prompt.txt"))
    assert refused.value.line == 2 and "this is ibstatus output" in refused.value.reason
    assert "ibstat or ibv_devinfo -v" in refused.value.reason


def test_a_secondary_address_on_the_same_interface_is_kept_beside_the_first() -> None:
    addresses = parse_ip_addr(read_fixture("ip", "k0s-controller-secondary-lb-address.txt"))
    assert dict(addresses) == {"eth0": ("172.17.0.2", "172.17.0.102")} and addresses.warnings == ()


def test_an_indented_paste_with_a_blank_line_of_spaces_reads_every_interface() -> None:
    addresses = parse_ip_addr(read_fixture("ip", "docker-exec-cassandra-indented-hostname-elided.txt"))
    assert dict(addresses) == {"lo": ("127.0.0.1",), "eth0": ("172.17.0.2",)} and addresses.warnings == ()
