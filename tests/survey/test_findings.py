"""Each finding code fires on the broken host, with evidence, and never on its healthy peers."""

from __future__ import annotations

from survey_builders import (
    fleet,
    gpu_infos,
    healthy_state,
    inventory_host,
    nvlink_status,
    nvswitch,
    rdma,
    stack,
)

from clusterctl.facts.base import Missing
from clusterctl.facts.model import NVLinkStatus, RDMADevice, RDMAPort
from clusterctl.findings import Finding, Severity
from clusterctl.inventory.model import Fabric, Host, StackPin
from clusterctl.survey.checks.host import SurveyedHost
from clusterctl.survey.checks.stack import version_matches
from clusterctl.survey.findings import fleet_findings
from clusterctl.survey.run import host_state


def problems(states: list[SurveyedHost]) -> list[Finding]:
    return [f for f in fleet_findings(states) if f.severity is not Severity.INFO]


def only(states: list[SurveyedHost], code: str, host: str = "bad") -> Finding:
    """The broken host has exactly one finding of ``code``; healthy peers have no warning/error."""
    found = fleet_findings(states)
    assert [f for f in found if f.host != host and f.severity is not Severity.INFO] == []
    matching = [f for f in found if f.host == host and f.code == code]
    assert len(matching) == 1, found
    return matching[0]


def test_healthy_fleet_has_no_findings_at_all() -> None:
    assert fleet_findings(fleet(healthy=5)) == []


def test_nvlink_missing_against_peers() -> None:
    f = only(fleet(healthy_state("bad", topology=nvswitch(lost=[(2, 3)]))), "NVLINK_MISSING")
    assert f.severity is Severity.ERROR
    assert f.evidence["pairs"] == [{"gpus": [2, 3], "link": "NODE", "expected": "NV18"}]
    assert f.evidence["basis"] == "peers"


def test_nvlink_missing_on_a_lone_host_from_its_own_mesh() -> None:
    found = fleet_findings([healthy_state("bad", topology=nvswitch(lost=[(0, 5)]))])
    assert [(f.code, f.evidence["pairs"][0]["gpus"]) for f in found] == [("NVLINK_MISSING", [0, 5])]


def test_fewer_nvlinks() -> None:
    f = only(fleet(healthy_state("bad", topology=nvswitch(fewer={(1, 6): 12}))), "NVLINK_FEWER_LINKS")
    assert f.severity is Severity.ERROR and f.evidence["pairs"][0]["link"] == "NV12"


def test_inactive_lanes() -> None:
    f = only(fleet(healthy_state("bad", nvlink=nvlink_status(inactive={3: [4, 5]}))), "NVLINK_LANE_INACTIVE")
    assert f.evidence["gpu"] == 3 and f.evidence["inactive_lanes"] == [4, 5] and f.evidence["active"] == 16


def test_a_gpu_whose_links_all_fell_says_so_not_an_empty_list() -> None:
    fallen = NVLinkStatus(3, "GPU", None, (), all_inactive=True)
    statuses = tuple(fallen if s.gpu_index == 3 else s for s in nvlink_status())
    f = only(fleet(healthy_state("bad", nvlink=statuses)), "NVLINK_LANE_INACTIVE")
    assert f.message == "GPU3: 0 of 18 NVLink lanes active (nvidia-smi: all links are inactive)"
    assert f.evidence["inactive_lanes"] == []


def test_gpu_count_differs() -> None:
    f = only(fleet(healthy_state("bad", gpus=gpu_infos(7))), "GPU_COUNT_DIFFERS")
    assert (f.severity, f.evidence["gpus"], f.evidence["fleet_gpus"]) == (Severity.ERROR, 7, 8)


def test_gpu_model_differs() -> None:
    f = only(fleet(healthy_state("bad", gpus=gpu_infos(name="NVIDIA A100-SXM4-80GB"))), "GPU_MODEL_DIFFERS")
    assert f.evidence["fleet_model"] == "NVIDIA H100 80GB HBM3"


def test_pcie_width_downtrained_is_an_error_but_idle_generation_is_not() -> None:
    gpus = gpu_infos(per_gpu={2: {"pcie_width_current": 8}, 5: {"pcie_gen_current": 1}})
    states = fleet(healthy_state("bad", gpus=gpus))
    assert [(f.code, f.severity) for f in problems(states)] == [("PCIE_DOWNTRAINED", Severity.ERROR)]
    assert problems(states)[0].evidence["gpu"] == 2


def test_idle_generation_on_every_host_is_silent() -> None:
    idle = gpu_infos(per_gpu={i: {"pcie_gen_current": 1} for i in range(8)})
    states = [healthy_state(f"h{i}", gpus=idle) for i in range(3)]
    assert fleet_findings(states) == []


def test_persistence_off() -> None:
    gpus = gpu_infos(per_gpu={0: {"persistence_mode": False}, 1: {"persistence_mode": False}})
    f = only(fleet(healthy_state("bad", gpus=gpus)), "PERSISTENCE_OFF")
    assert f.severity is Severity.WARNING and f.evidence["gpus"] == [0, 1]


def test_ecc_errors() -> None:
    f = only(fleet(healthy_state("bad", gpus=gpu_infos(per_gpu={4: {"ecc_errors_uncorrected": 3}}))), "ECC_ERRORS")
    assert f.severity is Severity.ERROR and f.evidence == {"gpu": 4, "uncorrected": 3}


def test_nic_down() -> None:
    devices = rdma(overrides={"mlx5_3": {"state": "PORT_DOWN", "phys_state": "Disabled", "rate_gbps": None}})
    f = only(fleet(healthy_state("bad", rdma=devices)), "NIC_DOWN")
    assert f.severity is Severity.ERROR and f.evidence["hca"] == "mlx5_3"


def test_nic_slow_against_inventory_rate() -> None:
    devices = rdma(overrides={"mlx5_6": {"rate_gbps": 10.0, "active_width": "4X", "active_speed": "2.5 Gbps"}})
    f = only(fleet(healthy_state("bad", rdma=devices)), "NIC_SLOW")
    assert f.severity is Severity.ERROR and f.evidence["rate_gbps"] == 10.0 and f.evidence["expected_gbps"] == 400


def test_nic_slow_against_peers_without_an_inventory_rate() -> None:
    def state(name: str, devices=None) -> SurveyedHost:  # type: ignore[no-untyped-def]
        return healthy_state(name, host=inventory_host(name, rate=None), **({"rdma": devices} if devices else {}))

    states = [state(f"h{i}") for i in range(3)] + [state("bad", rdma(overrides={"mlx5_0": {"rate_gbps": 200.0}}))]
    f = only(states, "NIC_SLOW")
    assert f.evidence["basis"] == "peers" and f.evidence["expected_gbps"] == 400.0


def test_a_port_is_judged_against_the_same_card_and_one_at_the_inventory_rate_is_not_slow() -> None:
    """A 40% minority of hosts with 200G cards among hosts with 400G cards is not slow; a 200G port
    among the same card's 400G ports is, whatever GPUs its host has (a lost GPU, none at all); and one
    that meets its inventory's rate is not, whatever its peers run at."""
    def state(name: str, rate: float, gpu: str = "NVIDIA H100 80GB HBM3", fabric: float | None = None,
              board: str = "MT_0000000838", gpus: int = 8) -> SurveyedHost:
        return healthy_state(name, host=inventory_host(name, rate=fabric), gpus=gpu_infos(gpus, name=gpu),
                             rdma=rdma(rate=rate, board=board))

    states = [state(f"h{i}", 400.0) for i in range(6)] + [state(f"a{i}", 200.0, "NVIDIA A100-SXM4-80GB",
                                                                board="MT_0000000223") for i in range(4)]

    def slow(*more: SurveyedHost) -> list[tuple[str | None, object]]:
        return [(f.host, f.evidence["expected_gbps"]) for f in fleet_findings([*states, *more]) if f.code == "NIC_SLOW"]

    assert slow() == []
    for gpus in (8, 7, 0):  # a lost GPU, or none (a storage node on the fabric), leaves the card's peers
        bad = healthy_state("bad", host=inventory_host("bad", rate=None), gpus=gpu_infos(gpus),
                            rdma=rdma(overrides={"mlx5_0": {"rate_gbps": 200.0}}, board="MT_0000000838"))
        assert slow(bad) == [("bad", 400.0)], gpus
    assert slow(state("bad", 200.0, fabric=200)) == []


def test_a_port_reading_0_gbps_is_not_slow_and_does_not_outvote_its_peers() -> None:
    """A rate of 0 is one the driver does not know (a down port reads its slowest rate, ibstat's
    ``Rate: 10``): no NIC_SLOW "at 0 Gb/s", and hosts reading 0 leave the peers' rate to those that
    read one, so the port at 200 among ports at 400 is still slow (health judges it the same way)."""
    assert [f for f in fleet_findings(fleet(healthy_state("bad", rdma=rdma(overrides={"mlx5_0": {"rate_gbps": 0.0}}))))
            if f.code.startswith("NIC")] == []

    def state(name: str, rate: float) -> SurveyedHost:
        devices = rdma(overrides={"mlx5_0": {"rate_gbps": rate}})
        return healthy_state(name, host=inventory_host(name, rate=None), rdma=devices)

    states = [state(f"h{i}", 400.0) for i in range(3)] + [state(f"z{i}", 0.0) for i in range(3)] + [state("bad", 200.0)]
    f = only(states, "NIC_SLOW")
    assert f.evidence["basis"] == "peers" and f.evidence["expected_gbps"] == 400.0


def test_management_and_storage_nics_are_not_judged_against_the_fabric() -> None:
    """A 25G ethernet management NIC and a down spare port, the same on every host: no finding."""
    extra = (
        RDMADevice("mlx5_8", None, None, (RDMAPort(1, "PORT_ACTIVE", "LinkUp", "Ethernet", 25.0),)),
        RDMADevice("mlx5_9", None, None, (RDMAPort(1, "PORT_DOWN", "Disabled", "Ethernet", None),)),
    )
    states = [healthy_state(f"h{i}", rdma=rdma(extra=extra)) for i in range(4)]
    assert fleet_findings(states) == []


def test_expected_hca_absent_is_nic_down() -> None:
    host = Host(name="bad", fabric=Fabric(type="ib", rate_gbps=400, hcas=("mlx5_0", "mlx5_9")), transport="mock")
    f = only(fleet(healthy_state("bad", host=host)), "NIC_DOWN")
    assert f.evidence == {"hca": "mlx5_9", "state": "absent"}


def _gpu_without_near_nic(far: str) -> object:
    """GPU 7's own NIC moved: it now reaches mlx5_7 only over ``far``."""
    from survey_builders import make_matrix

    def nic_cell(j: int):  # type: ignore[no-untyped-def]
        def cell(g: int) -> str:
            if j == 7 and g == 7:
                return far
            return "PIX" if g == j else ("NODE" if (g < 4) == (j < 4) else "SYS")
        return cell

    return make_matrix(8, lambda a, b: "NV18", [(f"mlx5_{j}", nic_cell(j)) for j in range(8)],
                       numa=lambda i: "0" if i < 4 else "1")


def test_gpu_without_near_nic_where_peers_have_one() -> None:
    f = only(fleet(healthy_state("bad", topology=_gpu_without_near_nic("NODE"))), "GPU_NO_NEAR_NIC")
    assert f.severity is Severity.WARNING and f.evidence["gpus"] == [7]


def test_nic_on_the_other_numa_node() -> None:
    """The NICs of NUMA node 1 are missing: GPUs 4-7 reach a NIC only across the sockets."""
    from survey_builders import make_matrix

    nics = [(f"mlx5_{j}", (lambda g, j=j: "PIX" if g == j else ("NODE" if g < 4 else "SYS"))) for j in range(4)]
    matrix = make_matrix(8, lambda a, b: "NV18", nics, numa=lambda i: "0" if i < 4 else "1")
    f = only(fleet(healthy_state("bad", topology=matrix, rdma=rdma(4))), "NIC_NUMA_MISMATCH")
    assert f.severity is Severity.WARNING and f.evidence["gpus"] == [4, 5, 6, 7]
    assert f.evidence["nearest"]["GPU4"] == {"nics": ["mlx5_0", "mlx5_1", "mlx5_2", "mlx5_3"], "link": "SYS",
                                             "numa": "1"}


def test_locality_shared_by_the_whole_fleet_is_only_info() -> None:
    states = [healthy_state(f"h{i}", topology=_gpu_without_near_nic("NODE")) for i in range(3)]
    assert problems(states) == []
    assert {f.code for f in fleet_findings(states)} == {"GPU_NO_NEAR_NIC"}


def test_stack_pin_mismatch() -> None:
    pin = StackPin(driver="535", nccl="2.21")
    host = inventory_host("bad", pin=pin)
    states = [healthy_state(f"h{i}", host=inventory_host(f"h{i}", pin=StackPin(driver="550", nccl="2.21")))
              for i in range(3)]
    f = only([*states, healthy_state("bad", host=host)], "STACK_PIN_MISMATCH")
    assert f.severity is Severity.ERROR and f.evidence["installed"] == "550.54.15" and f.evidence["pinned"] == "535"


def test_stack_drift() -> None:
    f = only(fleet(healthy_state("bad", stack=stack(kernel="6.5.0-1-generic"))), "STACK_DRIFT")
    assert f.evidence == {"component": "kernel", "installed": "6.5.0-1-generic", "fleet": "5.15.0-105-generic"}


def test_fact_missing_keeps_the_reason_and_the_rest_of_the_survey() -> None:
    lost = Missing("rdma", "ibv_devinfo: command not found")
    f = only(fleet(healthy_state("bad", rdma=None, missing=[lost])), "FACT_MISSING")
    assert f.severity is Severity.WARNING and f.evidence["reason"] == "ibv_devinfo: command not found"


def test_unreachable_host() -> None:
    states = [*fleet(), host_state(inventory_host("bad"), None, "unreachable: connection refused")]
    f = only(states, "HOST_UNREACHABLE")
    assert f.severity is Severity.ERROR and "connection refused" in f.message


def test_findings_are_sorted_errors_first() -> None:
    gpus = gpu_infos(per_gpu={0: {"persistence_mode": False}})
    states = fleet(healthy_state("bad", gpus=gpus, topology=nvswitch(lost=[(0, 1)])))
    severities = [f.severity for f in fleet_findings(states)]
    assert severities == sorted(severities, key=["error", "warning", "info"].index)
    assert severities[0] is Severity.ERROR


def test_version_matching_respects_component_boundaries() -> None:
    assert version_matches("535", "535.104.05")
    assert version_matches("v1.29", "1.29.3")
    assert not version_matches("12.2", "12.20")


def test_a_matrix_without_nic_columns_on_a_host_with_rdma_devices_says_affinity_is_unknown() -> None:
    """Driver 610 on a B300 host prints no NIC columns in topo -m while ibstat lists 11 adapters: no GPU-NIC path
    is known, and survey says so instead of reading the matrix as a host without NICs."""
    from fixture_files import read_fixture

    from clusterctl.facts.rdma import parse_ibstat
    from clusterctl.facts.topo import parse_topo

    matrix = parse_topo(read_fixture("topo", "b300-7gpu-610.57.04-nv18-no-nic-columns-interleaved-cpus-prompt.txt"))
    devices = parse_ibstat(read_fixture("ibstat", "b300-xe9780-7-cx8-disabled-4-cx7-ib-100-prompt.txt"))
    state = healthy_state("bad", topology=matrix, rdma=devices, gpus=gpu_infos(7, "NVIDIA B300 SXM6 AC"), nvlink=None)
    (unknown,) = [f for f in fleet_findings([state]) if f.code == "TOPO_NO_NICS"]
    assert unknown.severity is Severity.WARNING and len(unknown.evidence["hcas"]) == 11
    assert "names no NICs" in unknown.message and "11 RDMA device(s)" in unknown.message
    # No path is made up: no GPU is given a nearest NIC, and no locality finding reads the matrix as NIC-less.
    assert all(g.nearest_nics == () for g in state.topology.gpus)
    assert not {"GPU_NO_NEAR_NIC", "NIC_NUMA_MISMATCH"} & {f.code for f in fleet_findings([state])}
    # Without RDMA devices, a matrix without NICs is a host without NICs: nothing to say.
    bare = healthy_state("bare", topology=matrix, rdma=(), gpus=gpu_infos(7, "NVIDIA B300 SXM6 AC"), nvlink=None)
    assert not [f for f in fleet_findings([bare]) if f.code == "TOPO_NO_NICS"]
