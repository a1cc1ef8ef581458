"""Judging real recorded outputs: the finding a user would act on, and the host's verdict."""

from __future__ import annotations

import os
import re
import subprocess
from dataclasses import replace
from pathlib import Path

import pytest
from fixture_files import read_fixture

from clusterctl.errors import UsageError
from clusterctl.facts.ib_counters import parse_ib_counters
from clusterctl.facts.kernel_log import parse_kernel_log
from clusterctl.facts.lspci import parse_lspci
from clusterctl.facts.model import RDMADevice, RDMADevices, RDMAPort
from clusterctl.facts.nvlink import parse_nvlink
from clusterctl.facts.nvsmi_query import parse_nvidia_smi_q
from clusterctl.health import xid_catalog
from clusterctl.health.checks import HostInput
from clusterctl.health.model import HealthOptions, HostHealth, Verdict, since_seconds
from clusterctl.health.probe import HostProbe, level0_probes, probe_command, read_probe_outputs, split_probe_output
from clusterctl.health.run import judge
from clusterctl.inventory.model import Fabric, QuarantineConfig
from clusterctl.quarantine.policy import Action, decide, health_wanted


def _judge_one(**facts: object) -> HostHealth:
    probe = HostProbe(**facts)  # type: ignore[arg-type]
    report = judge([HostInput("h1", probe)])
    return report.hosts[0]


def test_580_fabric_health_unhealthy_and_a_pending_tpc_repair_are_findings() -> None:
    real = parse_nvidia_smi_q(read_fixture("nvidia-smi-q", "rtx3090ti-580.142-q-wide-keys-no-reset-status.txt"))
    assert not {"GPU_FABRIC_UNHEALTHY", "GPU_REPAIR_PENDING"} & {f.code for f in _judge_one(smi=real).findings}
    smi = parse_nvidia_smi_q(read_fixture("nvidia-smi-q", "DERIVED-rtx3090ti-580.142-tpc-repair-fabric-unhealthy.txt"))
    host = _judge_one(smi=smi)
    assert host.verdict is Verdict.UNHEALTHY
    fabric = next(f for f in host.findings if f.code == "GPU_FABRIC_UNHEALTHY")
    assert fabric.severity.value == "error"
    assert fabric.message.endswith("NVLink fabric health: Summary : Unhealthy, Route Unhealthy : True")
    repair = next(f for f in host.findings if f.code == "GPU_REPAIR_PENDING")
    assert "a TPC repair is pending" in repair.message and "nvidia-smi -r -i 0" in repair.fix
    assert repair.evidence["action"] == "RESET_GPU"


def _recovery(said: str) -> HostHealth:
    recorded = read_fixture("nvidia-smi-q", "v100-570.124.06-q-notebook-indented-recovery-action.txt")
    return _judge_one(smi=parse_nvidia_smi_q(recorded.replace(
        "GPU Recovery Action                   : None", f"GPU Recovery Action                   : {said}")))


def _fabric(**health: str) -> HostHealth:
    derived = read_fixture("nvidia-smi-q", "DERIVED-rtx3090ti-580.142-tpc-repair-fabric-unhealthy.txt")
    derived = derived.replace("TPC Repair Pending                             : Yes",
                              "TPC Repair Pending                             : No")
    for key, value in health.items():
        derived = re.sub(rf"({key}\s+: )\S.*", rf"\g<1>{value}", derived)
    return _judge_one(smi=parse_nvidia_smi_q(derived))


def _sxid(fatal: bool) -> HostHealth:
    log = read_fixture("kernel-log", "nvtrust124-dmesg-sxid-h100-nvswitch.log")
    return _judge_one(kernel=parse_kernel_log(log.replace("Non-fatal", "Fatal") if fatal else log))


def _decision(host: HostHealth) -> Action:
    (decided,) = decide(health_wanted([host], QuarantineConfig()), out_of_service=(), limit=1)
    return decided.action


@pytest.mark.parametrize(("host", "code", "action"), [
    # NVML flags a TPC/channel repair as it flags a pending row remap: the next GPU reset applies it.
    (lambda: _judge_one(smi=parse_nvidia_smi_q(read_fixture(
        "nvidia-smi-q", "DERIVED-rtx3090ti-580.142-tpc-repair-fabric-unhealthy.txt"))), "GPU_REPAIR_PENDING", "drain"),
    (lambda: _fabric(Summary="Unhealthy"), "GPU_FABRIC_UNHEALTHY", "drain"),
    (lambda: _fabric(Summary="Limited Capacity", Unhealthy="False"), "GPU_FABRIC_UNHEALTHY", "report"),
    (lambda: _recovery("Drain P2P"), "GPU_RESET_REQUIRED", "drain"),
    (lambda: _recovery("Reboot"), "GPU_RESET_REQUIRED", "drain"),
    (lambda: _sxid(fatal=True), "NVSWITCH_SXID", "drain"),
    (lambda: _sxid(fatal=False), "NVSWITCH_SXID", "report"),
])
def test_a_findings_action_decides_its_severity_its_fix_and_the_drain(host: object, code: str, action: str) -> None:
    """One rule (``xid_catalog.takes_host_down``): a finding whose action takes the host down is an error, its fix
    opens with draining the host, and the quarantine policy drains for it; any other finding's fix does not ask
    for a drain the policy would not make."""
    judged = host()  # type: ignore[operator]
    assert code in {f.code for f in judged.findings}
    assert _decision(judged) == action
    for finding in judged.findings:
        down = xid_catalog.takes_host_down(finding.evidence.get("action"))
        assert down == finding.fix.startswith("Drain the host"), finding
        assert not down or finding.severity.value == "error", finding


def test_every_action_that_takes_the_host_down_is_an_error_whose_fix_opens_with_the_drain() -> None:
    for action, (severity, fix) in xid_catalog.ACTIONS.items():
        assert xid_catalog.takes_host_down(action) == (severity.value == "error") == fix.startswith("Drain the host"), \
            action
    assert not xid_catalog.takes_host_down(None) and not xid_catalog.takes_host_down("RESTART_APP")


def test_pending_row_remap_makes_the_host_unhealthy_with_a_reset_action() -> None:
    smi = parse_nvidia_smi_q(read_fixture("nvidia-smi-q", "gpud-535.129.03-a10-pcie-remap-pending.txt"))
    host = _judge_one(smi=smi)
    assert host.verdict is Verdict.UNHEALTHY and host.reason.startswith("GPU_ROW_REMAP_PENDING")
    finding = next(f for f in host.findings if f.code == "GPU_ROW_REMAP_PENDING")
    assert "nvidia-smi -r -i 0" in finding.fix and finding.evidence["action"] == "RESET_GPU"
    assert not host.ok


def test_gpu_recovery_action_of_a_575_driver_is_a_reset_finding() -> None:
    recorded = read_fixture("nvidia-smi-q", "v100-570.124.06-q-notebook-indented-recovery-action.txt")
    as_recorded = _judge_one(smi=parse_nvidia_smi_q(recorded))  # "GPU Recovery Action : None": nothing to do
    assert as_recorded.verdict is Verdict.DEGRADED and as_recorded.reason.startswith("GPU_PERSISTENCE_OFF")
    assert not any(f.code == "GPU_RESET_REQUIRED" for f in as_recorded.findings)
    # The same output where the driver asks for a reset (the recording's "None" changed to "Reset").
    smi = parse_nvidia_smi_q(recorded.replace("GPU Recovery Action                   : None",
                                              "GPU Recovery Action                   : Reset"))
    host = _judge_one(smi=smi)
    assert host.verdict is Verdict.UNHEALTHY and host.reason.startswith("GPU_RESET_REQUIRED")
    finding = next(f for f in host.findings if f.code == "GPU_RESET_REQUIRED")
    assert "'GPU Recovery Action: Reset'" in finding.message and finding.evidence["action"] == "RESET_GPU"


def test_the_six_unwired_links_of_an_h100_pcie_nvlink_bridge_are_not_down() -> None:
    nvlink = parse_nvlink(read_fixture("nvlink", "h100-pcie-2gpu-bridge-12-of-18-links-indented-root-prompt.txt"))
    host = _judge_one(nvlink=nvlink)
    assert not any(f.code == "NVLINK_DOWN" for f in host.findings), host.findings


@pytest.mark.parametrize(("said", "action", "fix_says"), [
    ("Reboot", "RESTART_BM", "a GPU reset is not enough"),
    # NVIDIA: terminate the processes that conduct peer-to-peer traffic AND disable UVM persistence mode.
    ("Drain P2P", "DRAIN_P2P", "UVM persistence mode is off"),
    ("Drain and Reset", "RESET_GPU", "nvidia-smi -r -i 0"),
])
def test_gpu_recovery_action_names_nvidias_remedy(said: str, action: str, fix_says: str) -> None:
    # NVIDIA's "Error Recovery and Response Flags": Reboot is the OS, not the GPU; Drain P2P is no reset yet.
    recorded = read_fixture("nvidia-smi-q", "v100-570.124.06-q-notebook-indented-recovery-action.txt")
    host = _judge_one(smi=parse_nvidia_smi_q(recorded.replace(
        "GPU Recovery Action                   : None", f"GPU Recovery Action                   : {said}")))
    finding = next(f for f in host.findings if f.code == "GPU_RESET_REQUIRED")
    assert host.verdict is Verdict.UNHEALTHY and f"'GPU Recovery Action: {said}'" in finding.message
    assert finding.evidence.get("action") == action and fix_says in finding.fix


def test_hw_power_brake_on_a_real_h100_is_a_degraded_host() -> None:
    host = _judge_one(smi=parse_nvidia_smi_q(read_fixture("nvidia-smi-q", "gpud-535.161.08-8xh100-sxm.txt")))
    assert host.verdict is Verdict.DEGRADED and "GPU_CLOCKS_THROTTLED" in host.reason
    # The power brake held every GPU of the chassis at once, as a PSU/chassis brake does.
    assert {f.subject for f in host.findings if f.code == "GPU_CLOCKS_THROTTLED"} == {f"GPU {i}" for i in range(8)}
    assert host.reason.endswith("(+7 more: GPU_CLOCKS_THROTTLED)")


def test_xid_findings_carry_nvidia_catalogue_action_and_version() -> None:
    host = _judge_one(kernel=parse_kernel_log(read_fixture("kernel-log", "gpud-dmesg-iso-xid48-63-94-h100.log")))
    by_xid = {f.evidence["xid"]: f for f in host.findings if f.code == "GPU_XID"}
    assert by_xid[48].severity.value == "error" and by_xid[48].evidence["action"] == "WORKFLOW_XID_48"
    assert by_xid[63].severity.value == "info"  # IGNORE: the remap is judged from nvidia-smi -q
    assert by_xid[94].evidence["count"] == 9 and by_xid[94].evidence["action"] == "RESTART_APP"
    assert by_xid[48].evidence["catalog_version"] == xid_catalog.CATALOG_VERSION
    assert "Xid (PCI:0000:19:00): 48" in by_xid[48].evidence["evidence"]
    assert host.verdict is Verdict.UNHEALTHY


def test_xid_79_is_a_reboot_and_fatal_sxid_an_error() -> None:
    host = _judge_one(kernel=parse_kernel_log(read_fixture("kernel-log", "modal-xid79-fallen-off-bus.log")))
    (xid,) = [f for f in host.findings if f.code == "GPU_XID"]
    assert xid.evidence["action"] == "RESTART_BM" and "reboot" in xid.fix
    log = parse_kernel_log(read_fixture("kernel-log", "nvtrust124-dmesg-sxid-h100-nvswitch.log"))
    nonfatal = _judge_one(kernel=log)
    assert nonfatal.verdict is Verdict.DEGRADED and "NVSWITCH_SXID" in nonfatal.reason


@pytest.mark.parametrize("name", ["akash209-dmesg-T-xid79-fallen-off-bus-535.log", "syslog-xid79-154-595.log"])
def test_xid_79_and_the_drivers_off_the_bus_line_are_one_finding(name: str) -> None:
    """Real logs: the Xid 79 line, then the driver's "GPU 0000:..:00.0: GPU has fallen off the bus." for the
    same GPU: one fault, one finding (GPU_XID, which heal and quarantine act on), the driver's line in it."""
    log = parse_kernel_log(read_fixture("kernel-log", name))
    assert {e.kind for e in log.events} >= {"xid", "fallen-off-bus"}
    host = _judge_one(kernel=log)
    on_bus = [f for f in host.findings if f.code in ("GPU_XID", "GPU_FELL_OFF_BUS")
              and f.evidence.get("xid") in (79, None)]
    (xid79,) = on_bus
    assert xid79.code == "GPU_XID" and xid79.evidence["action"] == "RESTART_BM"
    assert "GPU has fallen off the bus." in str(xid79.evidence["fell_off_bus_line"])
    assert xid79.evidence["fell_off_bus_count"] == 1


def test_an_xid_names_the_gpu_of_its_pci_domain() -> None:
    """GB200 trays number their GPUs' buses alike in other PCI domains (0008:06:00, 0009:06:00): the Xid was
    matched on bus and device alone, so it named whichever GPU came last. Recorded 8x H100 -q and Xid log, the
    first two GPUs moved to domains 0008 and 0009 on one bus (no public multi-domain -q was found)."""
    smi = read_fixture("nvidia-smi-q", "gpud-535.161.08-8xh100-sxm.txt")
    smi = smi.replace("00000000:19:00.0", "00000008:19:00.0").replace("00000000:3B:00.0", "00000009:19:00.0")
    log = read_fixture("kernel-log", "gpud-dmesg-iso-xid48-63-94-h100.log").replace("PCI:0000:19:00", "PCI:0008:19:00")
    host = _judge_one(smi=parse_nvidia_smi_q(smi), kernel=parse_kernel_log(log))
    assert {f.subject for f in host.findings if f.code == "GPU_XID"} == {"GPU 0"}


def test_off_the_bus_without_an_xid_79_stays_its_own_finding() -> None:
    host = _judge_one(kernel=parse_kernel_log(read_fixture("kernel-log",
                                                           "nvsentinel155-dmesg-fallen-off-bus-no-xid-570.log")))
    assert [f.code for f in host.findings if f.code in ("GPU_XID", "GPU_FELL_OFF_BUS")] == ["GPU_FELL_OFF_BUS"]


def test_catalogue_rows_cover_the_common_xids() -> None:
    for xid, bucket in ((13, "RESTART_APP"), (31, "RESTART_APP"), (48, "WORKFLOW_XID_48"), (63, "IGNORE"),
                        (74, "WORKFLOW_NVLINK_ERR"), (79, "RESTART_BM"), (95, "RESET_GPU"), (119, "RESET_GPU")):
        assert xid_catalog.judge(xid)[2] == bucket
    assert xid_catalog.judge(9999)[2] == "UNKNOWN"


def test_acs_on_a_storage_switch_is_not_flagged() -> None:
    host = _judge_one(pci=parse_lspci(read_fixture("lspci", "gpud-lspci-vvv-8xh100.txt")))
    assert not [f for f in host.findings if f.code == "PCIE_ACS_ENABLED"]
    downgraded = [f for f in host.findings if f.code == "PCIE_LINK_DOWNGRADED"]
    assert downgraded and all(f.severity.value == "info" for f in downgraded)  # the management NIC only



def test_a_virtual_functions_x0_is_no_link_and_a_narrow_pf_is_still_named() -> None:
    # Real: a ConnectX-7 PF at x8 of x16 and one of its SR-IOV VFs, whose LnkSta reads 'Width x0 (downgraded)'
    # as every VF's does (it has no link of its own).
    host = _judge_one(pci=parse_lspci(read_fixture("lspci", "kvm-list-connectx7-pf-x8-and-vf-x0.txt")))
    pcie = [(f.code, f.subject, f.severity.value) for f in host.findings if f.code.startswith("PCIE_LINK")]
    assert pcie == [("PCIE_LINK_DOWNGRADED", "0000:b1:00.1", "info")]


def test_a_gpu_whose_link_is_down_is_said_to_be_down_with_reseat_then_rma() -> None:
    # The real H100 recording with its first GPU's LnkSta swapped for a real link-down line (an OpenShift
    # worker's `lspci -vvv | grep downgraded`, lspci README): trained to no lanes, not "a narrow link".
    text = read_fixture("lspci", "gpud-lspci-vvv-8xh100.txt")
    start = text.index("3D controller")
    at = text.index("LnkSta:", start)
    line_end = text.index("\n", at)
    text = text[:at] + "LnkSta:\tSpeed unknown (downgraded), Width x0 (downgraded)" + text[line_end:]
    host = _judge_one(pci=parse_lspci(text))
    (down,) = [f for f in host.findings if f.code == "PCIE_LINK_DOWN"]
    assert down.severity.value == "error" and "link down (x0), capable of x16" in down.message
    assert "reseat" in down.fix and "RMA" in down.fix and "narrow" not in down.message + down.fix
    assert host.verdict is Verdict.UNHEALTHY
    # Its fix opens with the drain, so the policy drains it (one rule: xid_catalog.takes_host_down).
    assert down.fix.startswith("Drain the host") and _decision(host) == "drain"

def test_acs_redirect_between_a_gpu_and_its_nic_is_an_error() -> None:
    # Derived from the real H100 recording: ACS request/completion redirect switched on for the PCIe
    # switch port above GPU 0000:19:00.0 (17:01.0), whose switch also holds NIC 0000:1a:00.0.
    text = read_fixture("lspci", "gpud-lspci-vvv-8xh100.txt")
    start = text.index("\n17:01.0 PCI bridge")
    end = text.index("\n\n", start + 1)
    block = re.sub(r"ACSCtl:\tSrcValid(.) TransBlk- ReqRedir- CmpltRedir-",
                   r"ACSCtl:\tSrcValid\1 TransBlk- ReqRedir+ CmpltRedir+", text[start:end])
    host = _judge_one(pci=parse_lspci(text[:start] + block + text[end:]))
    (acs,) = [f for f in host.findings if f.code == "PCIE_ACS_ENABLED"]
    assert acs.subject == "0000:17:01.0" and "0000:19:00.0 (GPU)" in acs.message and "0000:1a:00.0" in acs.message
    assert host.verdict is Verdict.UNHEALTHY


def test_a_flapping_ib_link_stands_out_from_the_fleet() -> None:
    counters = parse_ib_counters(read_fixture("ib-counters", "gpud-sysfs-h100-grep-H.txt"))
    host = _judge_one(ib_counters=counters)
    flapping = [f for f in host.findings if f.code == "IB_LINK_FLAPPING"]
    assert [f.subject for f in flapping] == ["mlx5_1/1"] and flapping[0].evidence["counters"]["link_downed"] == 255


def test_a_port_is_slow_by_the_same_rule_as_in_survey() -> None:
    """Below most hosts' rate by more than rounding (survey's NIC_SLOW rule): a port at 200 among
    ports at 400 is slow; one at 395 is not (a link trains at discrete rates); one reading 0 Gb/s is
    not "slow at 0" and the hosts that read 0 do not outvote the rest."""
    def host(name: str, rate: float) -> HostInput:
        port = RDMAPort(1, "PORT_ACTIVE", "LinkUp", "InfiniBand", rate, "4X", "NDR")
        return HostInput(name, HostProbe(rdma=RDMADevices([RDMADevice("mlx5_0", None, None, (port,))])))

    rates = {"h0": 400.0, "h1": 400.0, "h2": 400.0, "near": 395.0, "z0": 0.0, "z1": 0.0, "z2": 0.0, "slow": 200.0}
    report = judge([host(name, rate) for name, rate in rates.items()])
    slow = [(f.host, f.message) for f in report.findings if f.code == "IB_PORT_SLOW"]
    assert slow == [("slow", "port runs at 200 Gb/s, most hosts' mlx5_0 at 400 Gb/s")]


def test_a_port_is_judged_against_the_same_card_and_one_at_the_inventory_rate_is_not_slow() -> None:
    """Survey's NIC_SLOW peers: a 40% minority of A10 hosts with 200G cards among H100 hosts at 400G
    is not slow (health --quarantine would take them out of service); a 200G port among the same card's
    ports at 400G is, whatever GPUs its host has left, unless the host's inventory fabric.rate_gbps is 200."""
    h100 = parse_nvidia_smi_q(read_fixture("nvidia-smi-q", "gpud-535.161.08-8xh100-sxm.txt"))
    a10 = parse_nvidia_smi_q(read_fixture("nvidia-smi-q", "gpud-535.129.03-a10-pcie-remap-pending.txt"))

    def host(name: str, rate: float, smi: object = h100, board: str = "MT_0000000838",
             inventory: float | None = None) -> HostInput:
        port = RDMAPort(1, "PORT_ACTIVE", "LinkUp", "InfiniBand", rate, "4X", "NDR" if rate == 400 else "HDR")
        devices = RDMADevices([RDMADevice("mlx5_0", None, None, (port,), board_id=board)])
        return HostInput(name, HostProbe(smi=smi, rdma=devices),  # type: ignore[arg-type]
                         fabric=Fabric(rate_gbps=inventory))

    fleet = [host(f"h{i}", 400.0) for i in range(6)] + [host(f"a{i}", 200.0, a10, "MT_0000000223") for i in range(4)]

    def slow(*more: HostInput) -> list[str]:
        return [f.host for f in judge([*fleet, *more]).findings if f.code == "IB_PORT_SLOW"]

    assert slow() == []
    assert slow(host("slow", 200.0)) == ["slow"]
    assert slow(host("slow", 200.0, replace(h100, gpus=h100.gpus[:7]))) == ["slow"]  # lost a GPU
    assert slow(host("slow", 200.0, None)) == ["slow"]  # no GPUs: a storage node on the fabric
    assert slow(host("slow", 200.0, inventory=200.0)) == []


def test_a_gpu_pcie_width_is_judged_against_its_peers_by_survey_s_rule() -> None:
    # survey.checks.host.narrow_pcie, as survey's PCIE_DOWNTRAINED: x8 of x16 on every host is the
    # slot's or riser's design, not a fault to quarantine hosts for; x4 where peers run x8 is.
    smi = parse_nvidia_smi_q(read_fixture("nvidia-smi-q", "gpud-535.161.08-8xh100-sxm.txt"))

    def at(width: int, *, gpu3: int | None = None) -> HostProbe:
        gpus = tuple(replace(g, pcie_width_current=gpu3 if i == 3 and gpu3 else width)
                     for i, g in enumerate(smi.gpus))
        return HostProbe(smi=replace(smi, gpus=gpus))

    report = judge([HostInput("h1", at(8)), HostInput("h2", at(8)), HostInput("h3", at(8, gpu3=4))])
    narrowed = [(f.host, f.subject) for h in report.hosts for f in h.findings if f.code == "GPU_PCIE_DOWNGRADED"]
    assert narrowed == [("h3", "GPU 3")]


def test_a_missing_gpu_is_counted_against_hosts_of_its_model_as_in_survey() -> None:
    # survey.checks.host.usual_gpu_count, as survey's GPU_COUNT_DIFFERS: a 1-GPU A10 box among 8-GPU
    # H100 hosts is another machine, not one that lost 7 GPUs; an H100 host with 7 has lost one.
    h100 = parse_nvidia_smi_q(read_fixture("nvidia-smi-q", "gpud-535.161.08-8xh100-sxm.txt"))
    a10 = parse_nvidia_smi_q(read_fixture("nvidia-smi-q", "gpud-535.129.03-a10-pcie-remap-pending.txt"))
    hosts = [HostInput(f"h{i}", HostProbe(smi=h100)) for i in (1, 2, 4)]
    hosts += [HostInput("h3", HostProbe(smi=replace(h100, gpus=h100.gpus[:7]))), HostInput("a10", HostProbe(smi=a10))]
    missing = [f for h in judge(hosts).hosts for f in h.findings if f.code == "GPU_MISSING"]
    assert [(f.host, f.message) for f in missing] == [
        ("h3", f"nvidia-smi lists 7 GPU(s), most {h100.gpus[0].name} hosts have 8")]
    # Its fix opens with the drain and reboot, so the policy drains it (one rule: xid_catalog.takes_host_down).
    assert missing[0].fix.startswith("Drain the host") and missing[0].evidence["action"] == "RESTART_BM"
    assert _decision(next(h for h in judge(hosts).hosts if h.host == "h3")) == "drain"


def test_nvidia_smi_exit_15_for_a_gpu_it_cannot_open_still_reads_the_others() -> None:
    # nvidia-smi exits 15 when a GPU "has fallen off the bus or has otherwise become inaccessible" (its man page)
    # and still prints the other GPUs' blocks: the host is unhealthy for the lost GPU, not "nvidia-smi failed".
    lost = read_fixture("nvidia-smi-q", "DERIVED-app-610.57.04-q-d-temperature-gpu1-lost.txt")
    text = f"### now\n2026-12-01T10:00:00\n@@rc 0\n### nvidia-smi-q\n{lost}@@rc 15\n"
    probes = tuple(p for p in level0_probes(86400, 30) if p.name in ("now", "nvidia-smi-q"))
    probe = read_probe_outputs(split_probe_output(text), probes)
    assert probe.problems == [] and probe.smi is not None and len(probe.smi.gpus) == 1
    (host,) = judge([HostInput("h1", probe)]).hosts
    assert host.verdict == Verdict.UNHEALTHY
    assert [(f.code, f.message) for f in host.findings if f.severity.value == "error"] == [
        ("GPU_MISSING", "nvidia-smi could not open GPU 0000:02:00.0: Unknown Error")]


def test_nvidia_smi_q_that_could_open_no_gpu_names_the_lost_one() -> None:
    # A one-GPU host whose GPU fell off the bus: nvidia-smi -q prints the line alone (from the 610.57.04 host's
    # session of the fixture's README) and exits 15.
    lost = "Unable to determine the device handle for GPU1: 0000:34:00.0: Unknown Error\n"
    text = f"### now\n2026-12-01T10:00:00\n@@rc 0\n### nvidia-smi-q\n{lost}@@rc 15\n"
    probes = tuple(p for p in level0_probes(86400, 30) if p.name in ("now", "nvidia-smi-q"))
    (host,) = judge([HostInput("h1", read_probe_outputs(split_probe_output(text), probes))]).hosts
    assert [(f.code, f.message) for f in host.findings if f.severity.value == "error"] == [
        ("GPU_MISSING", "nvidia-smi could not open GPU 0000:34:00.0: Unknown Error")]


def test_probe_output_with_missing_and_hung_tools() -> None:
    probes = level0_probes(86400, 30)
    text = ("### now\n2026-12-01T10:00:00\n@@rc 0\n### kernel-log\n@@rc 0\n### nvidia-smi-q\n@@rc 124\n"
            "### nvlink-s\nsh: 1: nvidia-smi: not found\n@@rc 127\n### nvlink-e\n@@rc 124\n"
            "### rdma\nsh: 1: ibstat: not found\n@@rc 127\n### ib-counters\n@@rc 2\n### lspci\n@@rc 0\n")
    probe = read_probe_outputs(split_probe_output(text), probes)
    kinds = {p.probe: p.kind for p in probe.problems}
    assert kinds["nvidia-smi-q"] == "hung" and kinds["rdma"] == "missing" and "ib-counters" not in kinds
    host = judge([HostInput("h1", probe)]).hosts[0]
    assert host.verdict is Verdict.UNHEALTHY and host.reason.startswith("PROBE_HUNG")
    assert _decision(host) == "drain"  # a hung nvidia-smi: drain and reboot, as its fix opens
    assert probe.kernel is not None and probe.kernel.events == ()  # an empty window is no problem


def test_a_kernel_log_whose_dmesg_was_refused_says_so_and_how_to_allow_it() -> None:
    # A host without systemd (no journalctl) whose dmesg is root's only (kernel.dmesg_restrict=1): dmesg is there
    # and ran. The shell's "journalctl: not found" on the way is neither what to install nor the reason shown.
    text = ("### kernel-log\nsh: 1: journalctl: not found\ndmesg: read kernel buffer failed: Operation not "
            "permitted\n@@rc 1\n")
    probe = read_probe_outputs(split_probe_output(text), level0_probes(86400, 30)[1:2])
    (finding,) = judge([HostInput("h1", probe)]).hosts[0].findings
    assert (finding.code, finding.message) == ("KERNEL_LOG_UNREADABLE", "the kernel log could not be read: dmesg: "
                                               "read kernel buffer failed: Operation not permitted")
    assert "'sudo -n dmesg'" in finding.fix and "kernel.dmesg_restrict=0" in finding.fix, finding.fix
    assert "journalctl" not in finding.fix and "Install" not in finding.fix


def _kernel_log_probe(tmp_path: Path, **stand_ins: str) -> HostProbe:
    """The real kernel-log command run in ``sh``, with stand-ins (name -> script) for the host's programs."""
    from clusterctl.health.probe import kernel_log_command

    tools = tmp_path / "bin"
    tools.mkdir()
    for name, script in stand_ins.items():
        (tools / name).write_text(f"#!/bin/sh\n{script}\n")
        (tools / name).chmod(0o755)
    ran = subprocess.run(["sh", "-c", kernel_log_command(86400)], capture_output=True, text=True, check=False,
                         env={**os.environ, "PATH": f"{tools}:{os.environ['PATH']}"})
    text = f"### kernel-log\n{ran.stdout}{ran.stderr}@@rc {ran.returncode}\n"
    return read_probe_outputs(split_probe_output(text), level0_probes(86400, 30)[1:2])


def test_a_journal_the_login_user_cannot_read_is_unreadable_not_an_empty_log(tmp_path: Path) -> None:
    """A login user outside the journal's groups, without passwordless sudo: journalctl reads the user's own
    journal only, no kernel line, and exits 0 (systemd 252, recorded). '-q' hid the hint that says so, so a host
    whose kernel logged Xids passed as "nothing logged". journalctl is replayed by a stand-in that prints the
    recording as the real one does: the hint on stderr unless -q, '-- No entries --' on stdout."""
    recorded = tmp_path / "recorded.txt"
    recorded.write_text(read_fixture("kernel-log", "journalctl-k-unprivileged-252-debian12.txt"))
    probe = _kernel_log_probe(tmp_path, sudo="echo 'sudo: a password is required' >&2; exit 1",
                              journalctl=f'case " $* " in *" -q "*) exit 0;; esac; head -n 3 {recorded} >&2; '
                                         f"tail -n 1 {recorded}")
    (finding,) = judge([HostInput("h1", probe)]).hosts[0].findings
    assert (finding.code, finding.message) == ("KERNEL_LOG_UNREADABLE", "the kernel log could not be read: Hint: You "
                                               "are currently not seeing messages from other users and the system.")
    assert "systemd-journal group" in finding.fix, finding.fix
    # Root's read of an empty window says '-- No entries --' now that no -q hides it: nothing logged, as before.
    probe = read_probe_outputs(split_probe_output("### kernel-log\n-- No entries --\n@@rc 0\n"),
                               level0_probes(86400, 30)[1:2])
    assert probe.kernel is not None and (probe.kernel.events, probe.kernel.source) == ((), "journalctl")
    assert not probe.problems and not judge([HostInput("h1", probe)]).hosts[0].findings
    # systemd before 250 heads it with the journal's span (k3s-io/k3s#146, 2019, a real 'journalctl -u' answer).
    probe = read_probe_outputs(split_probe_output(
        "### kernel-log\n-- Logs begin at Sat 2019-03-02 07:14:45 UTC, end at Mon 2019-03-04 19:18:55 UTC. --\n"
        "-- No entries --\n@@rc 0\n"), level0_probes(86400, 30)[1:2])
    assert probe.kernel is not None and (probe.kernel.events, probe.kernel.source) == ((), "journalctl")


def test_a_host_without_journal_files_is_read_with_dmesg(tmp_path: Path) -> None:
    """systemd's Storage=none, or a container with no journal: root's journalctl says 'No journal files were
    found.' (stderr) and '-- No entries --', exit 0 (systemd 252, recorded), as for an empty window. The kernel's
    log is then dmesg's: its Xid is found, or its refusal is KERNEL_LOG_UNREADABLE, never "nothing logged"."""
    recorded = tmp_path / "recorded.txt"
    recorded.write_text(read_fixture("kernel-log", "journalctl-k-no-journal-files-252-debian12.txt"))
    xid_log = tmp_path / "dmesg.log"
    xid_log.write_text(read_fixture("kernel-log", "gpud-dmesg-T-xid119-h100.log"))
    journalctl = f"head -n 1 {recorded} >&2; tail -n 1 {recorded}"
    probe = _kernel_log_probe(tmp_path, sudo='shift; exec "$@"', journalctl=journalctl, dmesg=f"cat {xid_log}")
    assert probe.kernel is not None and probe.kernel.source == "dmesg", probe
    assert {(e.kind, e.code) for e in probe.kernel.events} == {("xid", 119)}
    refused = tmp_path / "refused"
    refused.mkdir()
    probe = _kernel_log_probe(refused, sudo="echo 'sudo: a password is required' >&2; exit 1", journalctl=journalctl,
                              dmesg="echo 'dmesg: read kernel buffer failed: Operation not permitted' >&2; exit 1")
    (finding,) = judge([HostInput("h1", probe)]).hosts[0].findings
    assert (finding.code, finding.message) == ("KERNEL_LOG_UNREADABLE", "the kernel log could not be read: dmesg: "
                                               "read kernel buffer failed: Operation not permitted")


def test_probe_command_quotes_nothing_from_the_inventory_and_writes_nothing() -> None:
    line = probe_command(level0_probes(3600, 20))
    assert "--since=-3600s" in line and "timeout 20 nvidia-smi -q" in line
    assert ">" not in line.replace("2>&1", "").replace("2>/dev/null", "")  # no redirection into a file


def test_since_takes_durations_only() -> None:
    assert since_seconds("24h") == 86400 and since_seconds("30m") == 1800 and since_seconds("7d") == 604800
    for bad in ("", "0h", "yesterday", "24"):
        with pytest.raises(UsageError):
            HealthOptions(since=bad)
    with pytest.raises(UsageError):
        HealthOptions(level=4)


def test_alike_hosts_share_their_facts_and_the_report_reads_as_if_each_had_its_own() -> None:
    # Hosts printing identical outputs get one parsed object (facts.shared); their facts parts are made
    # once and written once, yet each host's facts and the JSON are what each host alone would give.
    import json

    from clusterctl.cli.output import dump
    from clusterctl.health.report import report_to_json
    from clusterctl.health.summary import host_facts

    healthy = read_fixture("nvidia-smi-q", "gpud-535.129.03-a10-pcie-remap-pending.txt")
    probes = level0_probes(86400, 30)
    texts = {name: f"### now\n2026-12-01T10:00:00\n@@rc 0\n### nvidia-smi-q\n{smi}@@rc 0\n"
             for name, smi in (("a", healthy), ("b", healthy), ("c", healthy + "\n"))}
    inputs = [HostInput(name, read_probe_outputs(split_probe_output(text), probes)) for name, text in texts.items()]
    report = judge(inputs)
    a, b, c = report.hosts
    assert a.facts["gpus"] is b.facts["gpus"]
    assert c.facts["gpus"] is not a.facts["gpus"] and c.facts["gpus"] == a.facts["gpus"]  # a text of its own
    alone = [host_facts(i.probe) for i in inputs if i.probe is not None]
    assert [h.facts for h in report.hosts] == alone
    written = json.loads(dump(report_to_json(report), "json"))
    assert [h["facts"] for h in written["hosts"]] == json.loads(json.dumps(alone))


def test_a_bad_link_is_held_to_the_other_hosts_links_not_to_its_own() -> None:
    # One host alone: its links' median (half the bad link's count, with one clean link) once hid the bad one.
    from clusterctl.facts.health_model import IBCounters, IBPortCounters
    from clusterctl.facts.nvlink_errors import parse_nvlink_errors

    alone = _judge_one(nvlink_errors=parse_nvlink_errors(read_fixture("nvlink-e", "annotated-bad-link-one-line.txt")))
    assert [(f.code, f.subject, f.evidence["link"], f.evidence["counters"]) for f in alone.findings] == [
        ("NVLINK_ERRORS_HIGH", "GPU 0", 1, {"Replay Errors": 142, "Recovery Errors": 3, "CRC Errors": 891})]
    assert "CRC Errors 891 (peers' median 0)" in alone.findings[0].message

    # Two hosts, one port each: the bad port is judged against the clean one, the clean one against the bad.
    def host(name: str, symbol_errors: int) -> HostInput:
        port = IBPortCounters("mlx5_0", 1, {"symbol_error": symbol_errors, "link_downed": 0})
        return HostInput(name, HostProbe(ib_counters=IBCounters((port,))))

    report = judge([host("bad", 500), host("clean", 0)])
    assert [(f.host, f.code, f.message) for f in report.findings] == [
        ("bad", "IB_ERRORS_HIGH", "symbol_error 500 (fleet median 0)")]


def test_a_ports_first_local_link_integrity_errors_stand_out() -> None:
    """Each count is already the port's LocalPhyErrors threshold crossed (IBTA), so a few are a finding, as on an
    NVLink; excessive buffer overruns stay held to 100 (UFM's default alarm; a real H100 reads 15 on every port)."""
    from clusterctl.facts.health_model import IBCounters, IBPortCounters

    def host(name: str, integrity: int, overruns: int) -> HostInput:
        port = IBPortCounters("mlx5_0", 1, {"local_link_integrity_errors": integrity,
                                            "excessive_buffer_overrun_errors": overruns})
        return HostInput(name, HostProbe(ib_counters=IBCounters((port,))))

    report = judge([host("bad", 3, 0), host("overrun", 0, 15), host("clean", 0, 0)])
    assert [(f.host, f.code, f.message) for f in report.findings] == [
        ("bad", "IB_ERRORS_HIGH", "local_link_integrity_errors 3 (fleet median 0)")]


def test_alike_hosts_judged_once_get_the_findings_each_would_get_alone() -> None:
    # Hosts sharing one parsed output (identical text) have their NVLink counters judged once for all;
    # each still gets its own findings, the same as when every host's output was parsed apart.
    from clusterctl.facts.nvlink import parse_nvlink
    from clusterctl.facts.nvlink_errors import parse_nvlink_errors

    bad = read_fixture("nvlink-e", "annotated-bad-link-one-line.txt")
    quiet = "GPU 0: NVLink Errors\n" + "".join(
        f"   Link {n}: Replay Errors: 0, Recovery Errors: 0, CRC Errors: 0\n" for n in (0, 1))
    lanes = read_fixture("nvlink", "v100-gpu3-two-inactive.txt")

    def fleet(shared: bool) -> list[HostInput]:
        one_bad, one_lanes = parse_nvlink_errors(bad), parse_nvlink(lanes)
        hosts = []
        for name in ("a", "b", "c", "d", "e", "f"):
            errors = (one_bad if shared else parse_nvlink_errors(bad)) if name in "ab" else parse_nvlink_errors(quiet)
            statuses = (one_lanes if shared else parse_nvlink(lanes)) if name in "ab" else None
            hosts.append(HostInput(name, HostProbe(nvlink_errors=errors, nvlink=statuses)))
        return hosts

    together, apart = judge(fleet(shared=True)), judge(fleet(shared=False))
    assert [[f.to_json() for f in h.findings] for h in together.hosts] == \
        [[f.to_json() for f in h.findings] for h in apart.hosts]
    for host in together.hosts[:2]:
        high = [f for f in host.findings if f.code == "NVLINK_ERRORS_HIGH"]
        assert [f.evidence["link"] for f in high] == [1] and high[0].host == host.host
    assert not any(f.code == "NVLINK_ERRORS_HIGH" for h in together.hosts[2:] for f in h.findings)


@pytest.mark.parametrize("changed", [
    # A link that went into recovery and came back: Hopper's "Recovery Errors", one worth a look on Blackwell too.
    {"Link recovery successful events": 3, "Total link recovery events": 3},
    # Each count is already the link's own local-error threshold crossed (DCGM's field description).
    {"Local link integrity Errors": 1},
])
def test_blackwell_link_recoveries_and_integrity_errors_count_from_the_first(changed: dict[str, int]) -> None:
    from clusterctl.facts.nvlink_errors import parse_nvlink_errors

    text = read_fixture("nvlink-e", "DERIVED-b300-595.91.07-healthy-blackwell-counters.txt")
    for counter, value in changed.items():
        text = text.replace(f"Link 1: {counter}: 0", f"Link 1: {counter}: {value}", 1)
    host = _judge_one(nvlink_errors=parse_nvlink_errors(text))
    assert [(f.code, f.subject, f.evidence["link"], f.evidence["counters"]) for f in host.findings] == [
        ("NVLINK_ERRORS_HIGH", "GPU 0", 1, changed)]


def test_a_level_2_host_s_nccl_tests_run_reaches_the_report_s_facts_whole() -> None:
    import json
    from pathlib import Path

    import jsonschema

    from clusterctl.bench.nccl_tests import NcclHostRun
    from clusterctl.facts.nccltests import parse_nccl_tests
    from clusterctl.health.report import report_to_json

    text = read_fixture("nccl-tests", "DERIVED-all_reduce-a100-row-cut-by-cuda-error.txt")
    run = NcclHostRun("thanos", "all_reduce_perf -b 8M -e 8G -f 2 -g 8", text, parse_nccl_tests(text), host_gpus=8)
    data = json.loads(json.dumps(report_to_json(judge([HostInput("thanos", HostProbe(nccl=run))], level=2))))
    schema = json.loads((Path(__file__).resolve().parents[2] / "clusterctl/schemas/health.schema.json").read_text())
    jsonschema.validate(data, schema)
    nccl = data["hosts"][0]["facts"]["nccl"]
    assert (nccl["n_gpus"], nccl["host_gpus"], len(nccl["rows"])) == (8, 8, 27)
    assert nccl["rows"][-1]["out_of_place_time_us"] is not None
    assert nccl["parse_warnings"][0]["line"] == 44  # the row an error cut is named, not dropped in silence


def test_a_healthy_blackwell_link_passes_and_one_with_real_errors_does_not() -> None:
    # B300 driver 595 lists traffic, the FEC histogram (billions of corrected codewords in bucket 0 on a
    # healthy link), pre-FEC raw lane errors and bit error rates beside its error counters: none is an error.
    import json

    from clusterctl.cli.output import dump
    from clusterctl.facts.nvlink_errors import parse_nvlink_errors
    from clusterctl.health.report import report_to_json

    text = read_fixture("nvlink-e", "DERIVED-b300-595.91.07-healthy-blackwell-counters.txt")
    host = _judge_one(nvlink_errors=parse_nvlink_errors(text))
    assert host.verdict is Verdict.HEALTHY and not host.findings
    report = judge([HostInput("h1", HostProbe(nvlink_errors=parse_nvlink_errors(text)))])
    (written,) = [h["facts"] for h in json.loads(dump(report_to_json(report), "json"))["hosts"]]
    assert written["nvlink_statistics"]["0/0"]["Effective BER"] == 1.5e-254
    assert written["nvlink_statistics"]["0/0"]["FEC Errors - 0"] == 36140749276
    assert written["nvlink_errors"]["1/1"]["Symbol Errors"] == 0 and "parse_warnings" not in written
    bad = _judge_one(nvlink_errors=parse_nvlink_errors(text.replace(
        "Link 1: Link recovery failed events: 0", "Link 1: Link recovery failed events: 2", 1)))
    assert bad.verdict is not Verdict.HEALTHY
    assert [(f.code, f.subject, f.evidence["counters"]) for f in bad.findings] == \
        [("NVLINK_ERRORS_HIGH", "GPU 0", {"Link recovery failed events": 2})]
    hopper = read_fixture("nvlink-e", "mlengineering-h100-clipped.txt").replace(
        "Link 17: CRC Errors: 0", "Link 17: CRC Errors: 891")
    crc = _judge_one(nvlink_errors=parse_nvlink_errors(hopper))
    assert crc.verdict is not Verdict.HEALTHY and crc.findings[0].evidence["counters"] == {"CRC Errors": 891}
