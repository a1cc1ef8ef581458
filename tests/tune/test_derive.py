"""What tune-nccl derives from survey facts, and that it lints clean."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from fixture_files import FIXTURES as FIXTURES_ROOT

from clusterctl.facts.model import RDMADevice, RDMAPort
from clusterctl.facts.topo import parse_topo
from clusterctl.nccl.lint import lint_settings
from clusterctl.nccl.sources import read_settings
from clusterctl.nccl.tune.derive import derive_settings
from clusterctl.nccl.tune.inputs import TuneHost, nics_from_facts
from clusterctl.nccl.tune.render import render_files

FIXTURES = FIXTURES_ROOT


def values(tuning: Any) -> dict[str, str]:
    return {s.name: s.value for s in tuning.settings}


def test_ib_hca_lists_active_fabric_ports_in_gpu_order(hgx: TuneHost) -> None:
    tuning = derive_settings([hgx])
    assert values(tuning)["NCCL_IB_HCA"] == "=" + ",".join(f"mlx5_{i}:1" for i in range(8))
    reason = next(s.reason for s in tuning.settings if s.name == "NCCL_IB_HCA")
    assert "mlx5_8:1 (Ethernet-only on an InfiniBand fabric)" in reason


def test_down_port_is_left_out_and_warned(make_hgx: Any) -> None:
    tuning = derive_settings([make_hgx(down=(5,))])
    assert "mlx5_5" not in values(tuning)["NCCL_IB_HCA"]
    assert any("mlx5_5:1" in w and "not active" in w for w in tuning.warnings)


def test_socket_ifname_is_the_interface_with_the_inventory_address(hgx: TuneHost) -> None:
    tuning = derive_settings([hgx])
    assert values(tuning)["NCCL_SOCKET_IFNAME"] == "=eno1"


def test_socket_ifname_never_docker_or_lo(make_hgx: Any) -> None:
    host = replace(make_hgx(), address="172.17.0.1")  # the address on docker0, not on eno1
    tuning = derive_settings([host])
    assert "NCCL_SOCKET_IFNAME" not in values(tuning)
    assert any("docker0" in w for w in tuning.warnings)


def test_cross_nic_0_only_on_a_fabric_declared_rail_optimised(make_hgx: Any) -> None:
    # env.rst (NCCL_CROSS_NIC): "dependent on the network topology, and in particular on whether the
    # network fabric is rail-optimized" - which a survey cannot see; src/graph/search.cc default 2
    rails = [replace(make_hgx("gpu-1", "10.0.0.11"), rail_optimized=True),
             replace(make_hgx("gpu-2", "10.0.0.12"), rail_optimized=True)]
    tuning = derive_settings(rails)
    setting = next(s for s in tuning.settings if s.name == "NCCL_CROSS_NIC")
    assert setting.value == "0" and "fabric.rail_optimized" in setting.reason
    unknown = derive_settings([make_hgx("gpu-1", "10.0.0.11"), make_hgx("gpu-2", "10.0.0.12")])
    assert "NCCL_CROSS_NIC" not in values(unknown)
    assert any("not known" in n and "fabric.rail_optimized: true" in n for n in unknown.notes)
    # one host: no inter-host ring to keep on a rail, whatever the inventory says
    assert "NCCL_CROSS_NIC" not in values(derive_settings(rails[:1]))


def test_hosts_with_different_layouts_keep_cross_nic_default(make_hgx: Any) -> None:
    tuning = derive_settings([replace(make_hgx("gpu-1", "10.0.0.11"), rail_optimized=True),
                              replace(make_hgx("gpu-2", "10.0.0.12", down=(2,)), rail_optimized=True)])
    assert "NCCL_CROSS_NIC" not in values(tuning)
    # the host with the down port gets its own NCCL_IB_HCA
    assert "gpu-2" in tuning.host_overrides
    own = {s.name: s.value for s in tuning.for_host("gpu-2")}
    assert "mlx5_2" not in own["NCCL_IB_HCA"]
    assert "mlx5_2" in {s.name: s.value for s in tuning.for_host("gpu-1")}["NCCL_IB_HCA"]


def test_different_bootstrap_interfaces_share_a_prefix(make_hgx: Any) -> None:
    tuning = derive_settings([make_hgx("gpu-1", "10.0.0.11", mgmt_ifname="enp1s0"),
                              make_hgx("gpu-2", "10.0.0.12", mgmt_ifname="enp2s0")])
    assert values(tuning)["NCCL_SOCKET_IFNAME"] == "enp"
    assert not tuning.host_overrides


def test_nothing_repeats_a_default(hgx: TuneHost) -> None:
    tuning = derive_settings([hgx])
    assert "NCCL_NET_GDR_LEVEL" not in values(tuning)  # every GPU has a PIX NIC: NCCL's default
    assert "NCCL_IB_DISABLE" not in values(tuning)
    findings = lint_settings(
        read_settings(render_files(tuning, fmt="conf")["nccl.conf"], "env", name="nccl.conf"),
        nccl_version=tuning.nccl_version, fabric="ib",
    )
    assert [f for f in findings if f.code == "DEFAULT_VALUE"] == []


def test_roce_before_2_21_sets_the_v2_gid_index(make_roce_host: Any) -> None:
    tuning = derive_settings([make_roce_host("2.18.3", 3)])
    assert tuning.fabric == "roce"
    assert values(tuning)["NCCL_IB_GID_INDEX"] == "3"


@pytest.mark.parametrize(("version", "written"), [("2.20.5", "3"), ("2.21", None), ("2.21.5", None)])
def test_the_gid_index_is_left_to_nccl_from_the_release_the_catalogue_names(
        make_roce_host: Any, version: str, written: str | None) -> None:
    """nccl_vars.yaml: NCCL_IB_GID_INDEX defaults to -1 (NCCL picks the GID itself) from the 2.21 series on."""
    tuning = derive_settings([make_roce_host(version, 3)])
    assert values(tuning).get("NCCL_IB_GID_INDEX") == written
    assert (f"NCCL {tuning.nccl_version} picks the RoCE v2 IPv4 GID itself" in " ".join(tuning.notes)) is (
        written is None)


def test_roce_from_2_21_leaves_gid_selection_to_nccl(make_roce_host: Any) -> None:
    ipv4 = "0000:0000:0000:0000:0000:ffff:c0a8:0002"
    gids = ((2, ipv4, "RoCE v1"), (3, ipv4, "RoCE v2"))
    tuning = derive_settings([make_roce_host("2.21.5", 3, gids)])
    assert not {"NCCL_IB_GID_INDEX", "NCCL_IB_ADDR_FAMILY", "NCCL_IB_ROCE_VERSION_NUM"} & set(values(tuning))


def test_roce_from_2_21_with_only_v1_gids_sets_the_version(make_roce_host: Any) -> None:
    gids = ((0, "fe80:0000:0000:0000:0a00:27ff:fe00:0001", "RoCE v1"),)
    tuning = derive_settings([make_roce_host("2.21.5", None, gids)])
    assert values(tuning)["NCCL_IB_ROCE_VERSION_NUM"] == "1"


def _pcie_host(topo: str, name: str = "pcie-1") -> TuneHost:
    matrix = parse_topo((FIXTURES / "topo" / topo).read_text())
    names = [d.device_name or d.label for d in matrix.nics]
    rdma = [RDMADevice(n, None, None, (RDMAPort(1, "PORT_ACTIVE", "LinkUp", "InfiniBand", 100.0),)) for n in names]
    return TuneHost(name, None, "2.21.5", tuple(d.index for d in matrix.gpus), nics_from_facts(rdma, matrix, []))


def test_phb_nics_are_measured_not_written() -> None:
    # src/graph/paths.cc: netGdrLevel defaults to PATH_PXB, and ncclTopoCheckGdr turns GPUDirect RDMA
    # off when the GPU-NIC path is farther; env.rst files NCCL_NET_GDR_LEVEL under debugging
    tuning = derive_settings([_pcie_host("pcie-4gpu-soc-phb-mlx5.txt")])
    assert "NCCL_NET_GDR_LEVEL" not in values(tuning)
    # mlx5_0 is PHB to GPU2/3 and SYS to GPU0/1 in this recording
    assert any("GPU 2,3" in n and "NCCL calls PHB" in n and "measured by --sweep" in n for n in tuning.notes)
    assert any("GPU 0,1" in n and "no NIC nearer than SYS" in n for n in tuning.notes)
    assert (("NCCL_NET_GDR_LEVEL", "PHB"),) in tuning.sweep_candidates


def test_nvidia_smi_node_is_nccl_phb() -> None:
    # every GPU's nearest HCA is NODE (across host bridges of one CPU): computePaths in
    # src/graph/paths.cc types any path through a CPU as PATH_PHB, so NCCL's default keeps GDR off
    # there and NCCL_NET_GDR_LEVEL=PHB (not a level "NODE", which ncclGetLevel would ignore) turns it on
    tuning = derive_settings([_pcie_host("4gpu-nv3-4mlx5-tabs.txt")])
    note = next(n for n in tuning.notes if "GPU 0,1,2,3" in n)
    assert "nvidia-smi NODE, which NCCL calls PHB" in note
    assert (("NCCL_NET_GDR_LEVEL", "PHB"),) in tuning.sweep_candidates


def test_no_rdma_is_a_warning_to_fix_not_ib_disable(hgx: TuneHost) -> None:
    # src/transport/net_ib/init.cc: with no IB device NCCL logs "NET/IB : No device found." and uses
    # sockets by itself; NCCL_IB_DISABLE=1 in nccl.conf would keep it on TCP after the fabric is fixed
    host = replace(hgx, nics=())
    tuning = derive_settings([host])
    assert "NCCL_IB_DISABLE" not in values(tuning)
    assert tuning.fabric == "ethernet"
    assert any("no RDMA device found" in w and "Fix the fabric" in w for w in tuning.warnings)
    declared = derive_settings([replace(host, fabric="ethernet")])
    assert not any("Fix the fabric" in w for w in declared.warnings)
    assert any("NCCL_IB_DISABLE is not needed" in n for n in declared.notes)


def test_tcp_fabric_gets_socket_threads_within_nccls_limit(hgx: TuneHost) -> None:
    # env.rst: "For generic 100G networks, this value can be manually set to 4" for both knobs, and
    # src/transport/net_socket.cc caps threads x sockets per thread at MAX_SOCKETS (64)
    tuning = derive_settings([replace(hgx, nics=(), fabric="ethernet", expected_rate_gbps=100.0)])
    assert values(tuning) == {"NCCL_SOCKET_IFNAME": "=eno1", "NCCL_SOCKET_NTHREADS": "4",
                              "NCCL_NSOCKS_PERTHREAD": "4"}
    reasons = {s.name: s.reason for s in tuning.settings}
    assert "net_socket.cc" in reasons["NCCL_SOCKET_NTHREADS"] and "64" in reasons["NCCL_NSOCKS_PERTHREAD"]
    assert all(int(dict(env).get("NCCL_SOCKET_NTHREADS", "1")) * int(dict(env).get("NCCL_NSOCKS_PERTHREAD", "1"))
               <= 64 for env in tuning.sweep_candidates)
    assert any(dict(env).get("NCCL_SOCKET_NTHREADS") == "8" for env in tuning.sweep_candidates)
    # the sweep's baseline runs the derived settings: measuring them again as a candidate would waste its budget
    written = {(s.name, s.value) for s in tuning.settings}
    assert [env for env in tuning.sweep_candidates if set(env) <= written] == []
    slow = derive_settings([replace(hgx, nics=(), fabric="ethernet", expected_rate_gbps=10.0)])
    assert "NCCL_SOCKET_NTHREADS" not in values(slow)


def test_mixed_fleet_gets_per_host_socket_knobs_and_a_warning(make_hgx: Any) -> None:
    bare = replace(make_hgx("gpu-2", "10.0.0.12"), nics=())
    tuning = derive_settings([make_hgx("gpu-1", "10.0.0.11"), bare])
    assert "NCCL_IB_DISABLE" not in {s.name for s in tuning.for_host("gpu-2")}
    assert {s.name: s.value for s in tuning.for_host("gpu-2")}["NCCL_SOCKET_NTHREADS"] == "4"
    assert "NCCL_SOCKET_NTHREADS" not in {s.name for s in tuning.for_host("gpu-1")}
    assert any("different transports" in w for w in tuning.warnings)


def test_a_port_trained_slow_is_left_out_of_nccl_ib_hca_and_named(make_hgx: Any) -> None:
    slow = make_hgx("gpu-2", "10.0.0.12")
    nics = tuple(replace(n, rate_gbps=100.0) if n.hca == "mlx5_5" else n for n in slow.nics)
    # As survey and health: the same port of the same card on most of at least 3 hosts. Beside one host,
    # nothing tells which rate is right: the port stays, and a note says what would tell.
    two = derive_settings([make_hgx("gpu-1", "10.0.0.11"), replace(slow, nics=nics)])
    assert "mlx5_5" in {s.name: s.value for s in two.for_host("gpu-2")}["NCCL_IB_HCA"]
    assert any("run at 100, 400 Gb/s" in n and "fabric.rate_gbps" in n for n in two.notes)
    tuning = derive_settings([make_hgx("gpu-1", "10.0.0.11"), replace(slow, nics=nics),
                              make_hgx("gpu-3", "10.0.0.13")])
    own = {s.name: s for s in tuning.for_host("gpu-2")}
    assert "mlx5_5" not in own["NCCL_IB_HCA"].value
    assert "mlx5_5:1 (trained at 100 Gb/s, fleet 400 Gb/s)" in own["NCCL_IB_HCA"].reason
    assert "mlx5_5" in {s.name: s.value for s in tuning.for_host("gpu-1")}["NCCL_IB_HCA"]
    assert any("mlx5_5:1 at 100 Gb/s trained below the fleet's 400 Gb/s: left out of NCCL_IB_HCA on gpu-2" in w
               for w in tuning.warnings)
    # Held to its own fabric.rate_gbps, the warning says so rather than "the fleet's".
    tuning = derive_settings([make_hgx("gpu-1", "10.0.0.11"), replace(slow, nics=nics, expected_rate_gbps=400.0)])
    assert "mlx5_5:1 (trained at 100 Gb/s, inventory 400 Gb/s)" in {s.name: s for s in tuning.for_host("gpu-2")
                                                                    }["NCCL_IB_HCA"].reason
    assert any("mlx5_5:1 at 100 Gb/s trained below 400 Gb/s (the inventory's fabric.rate_gbps): left out" in w
               for w in tuning.warnings)


def _rated(host: TuneHost, default: float, **rates: float) -> TuneHost:
    """``host`` with its IB ports at ``default`` Gb/s, ``mlx5_N=rate`` where given."""
    return replace(host, nics=tuple(n if n.is_ethernet else replace(n, rate_gbps=rates.get(n.hca, default))
                                    for n in host.nics))


def test_slow_is_the_rule_survey_and_health_use_against_the_host_rate_else_most_ports(make_hgx: Any) -> None:
    def left_out(*hosts: TuneHost) -> dict[str, str]:
        tuning = derive_settings(hosts)
        assert not any("trained below" in w for w in tuning.warnings), tuning.warnings
        return {h.name: {s.name: s.value for s in tuning.for_host(h.name)}["NCCL_IB_HCA"] for h in hosts}

    every_port = "=" + ",".join(f"mlx5_{i}:1" for i in range(8))
    one, two, three = (make_hgx(f"gpu-{i}", f"10.0.0.1{i}") for i in (1, 2, 3))
    # Within 3% is rounding (links train at discrete rates), a rate of 0 is unknown: neither is slow.
    assert set(left_out(one, _rated(two, 400, mlx5_5=390, mlx5_6=0)).values()) == {every_port}
    # Without fabric.rate_gbps the fleet's rate is most ports' (200), not the fastest (400): a newer
    # host does not make every port of the others slow.
    assert set(left_out(one, _rated(two, 200), _rated(three, 200)).values()) == {every_port}
    # With it, each host is held to its own inventory's rate, not the highest in the inventory.
    assert set(left_out(replace(one, expected_rate_gbps=400), replace(_rated(two, 200), expected_rate_gbps=200),
                        ).values()) == {every_port}
    # Half the ports at each rate: nothing tells which is slow, and the note says how to tell it.
    mixed = derive_settings([_rated(one, 400, mlx5_0=200, mlx5_1=200, mlx5_2=200, mlx5_3=200)])
    assert values(mixed)["NCCL_IB_HCA"] == every_port
    assert any("run at 200, 400 Gb/s" in n and "fabric.rate_gbps" in n for n in mixed.notes)


def test_every_rendered_file_lints_without_warnings(make_hgx: Any) -> None:
    tuning = derive_settings([make_hgx("gpu-1", "10.0.0.11"), make_hgx("gpu-2", "10.0.0.12", down=(2,))])
    from clusterctl.nccl.tune.run import lint_rendered

    files = render_files(tuning, fmt="all")
    assert "hosts/gpu-2/nccl.conf" in files
    assert lint_rendered(files, tuning) == []


def test_ib_hca_reason_pairs_each_gpu_with_its_own_nic_where_two_share_a_switch(make_roce_host: Any) -> None:
    # In this recording GPU pairs share a PCIe switch with NIC pairs (both NICs PXB to both GPUs):
    # the reason must not name one GPU for two NICs.
    tuning = derive_settings([make_roce_host("2.21.5", 3)])
    reason = next(s.reason for s in tuning.settings if s.name == "NCCL_IB_HCA")
    assert "GPU0->mlx5_0 ... GPU7->mlx5_7" in reason, reason
