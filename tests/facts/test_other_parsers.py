from __future__ import annotations

import pytest
from fixture_files import read_fixture
from refusals import refusal

from clusterctl.errors import ParseError
from clusterctl.facts.gpus import GPUS, PERSISTENCE_MODES, parse_gpus, parse_persistence_modes
from clusterctl.facts.netdev import IPV4_ADDRS, NETDEV, merge_ipv4, parse_ibdev2netdev, parse_ip_addr
from clusterctl.facts.nvlink import NVLINK, parse_nvlink
from clusterctl.facts.rdma import RDMA, parse_rdma
from clusterctl.facts.stack import STACK, parse_stack
from clusterctl.facts.survey_facts import SURVEY_FACTS

# --- nvidia-smi --query-gpu -----------------------------------------------------------


def test_gpus_command_asks_for_every_field_as_csv_with_header() -> None:
    assert GPUS.command == (
        "nvidia-smi --query-gpu=index,name,uuid,pci.bus_id,memory.total,driver_version,persistence_mode,"
        "ecc.mode.current,ecc.errors.uncorrected.volatile.total,power.limit,pcie.link.gen.current,"
        "pcie.link.gen.max,pcie.link.width.current,pcie.link.width.max --format=csv"
    )


def test_gpus_identity_csv_with_units_and_unknown_fields() -> None:
    (gpu,) = parse_gpus(read_fixture("nvidia-smi", "rtx5080-identity.csv"))
    assert gpu.index == 0 and gpu.name == "NVIDIA GeForce RTX 5080"
    assert gpu.uuid == "GPU-49dacec4-c9d8-7109-cffc-9ff262186fe6"
    assert (gpu.pci_bus_id, gpu.memory_total_mib, gpu.driver_version) == (
        "00000000:06:10.0",
        16303,
        "580.159.03",
    )
    assert gpu.power_limit_w is None


def test_persistence_modes_read_before_a_gpu_reset() -> None:
    """heal reads it (``-i N`` appended) to turn persistence mode off around ``nvidia-smi -r`` only where it is on."""
    assert PERSISTENCE_MODES.command == "nvidia-smi --query-gpu=index,persistence_mode --format=csv"
    assert parse_persistence_modes(read_fixture("nvidia-smi", "t4-persistence-mode.csv")) == {0: True}
    assert parse_persistence_modes("index, persistence_mode\n2, Disabled\n3, [N/A]\n") == {2: False, 3: None}
    with pytest.raises(ParseError, match="line 1: the CSV header names no persistence_mode field"):
        parse_persistence_modes(read_fixture("nvidia-smi", "rtx5080-identity.csv"))
    with pytest.raises(ParseError, match="line 2: field persistence_mode"):
        parse_persistence_modes("index, persistence_mode\n0, Maybe\n")

def test_gpus_pcie_link_fields() -> None:
    gpus = parse_gpus(read_fixture("nvidia-smi", "l40s-8gpu-pcie.csv"))
    assert [g.index for g in gpus] == list(range(8))
    assert {(g.pcie_gen_current, g.pcie_gen_max, g.pcie_width_current, g.pcie_width_max) for g in gpus} == {
        (1, 4, 16, 16)
    }
    narrow = parse_gpus(read_fixture("nvidia-smi", "rtx5060ti-2gpu-pcie-names.csv"))
    assert (narrow[1].pcie_width_current, narrow[1].pcie_width_max) == (8, 16)


def test_gpus_without_index_column_are_numbered_in_order() -> None:
    gpus = parse_gpus(read_fixture("nvidia-smi", "rtx5060ti-no-index-driver.csv"))
    assert [(g.index, g.driver_version, g.pcie_gen_current) for g in gpus] == [
        (0, "595.71.05", 1),
        (1, "595.71.05", 1),
    ]


def test_gpus_na_enabled_and_watts() -> None:
    text = (
        "index, persistence_mode, ecc.mode.current, ecc.errors.uncorrected.volatile.total, power.limit [W]\n"
        "0, Enabled, [N/A], [Not Supported], 400.00 W\n"
        "1, Disabled, Enabled, 0, 700.00 W\n"
    )
    first, second = parse_gpus(text)
    assert (first.persistence_mode, first.ecc_mode, first.ecc_errors_uncorrected, first.power_limit_w) == (
        True,
        None,
        None,
        400.0,
    )
    assert (
        second.persistence_mode,
        second.ecc_mode,
        second.ecc_errors_uncorrected,
        second.power_limit_w,
    ) == (False, True, 0, 700.0)


@pytest.mark.parametrize(
    ("text", "line"),
    [
        ("index, memory.total [MiB]\n0, lots MiB\n", 2),
        ("index, name\n0, A100, extra\n", 2),
        ("index, persistence_mode\n0, Maybe\n", 2),
        ("No devices were found\n", 1),
    ],
)
def test_gpus_bad_values_name_the_line(text: str, line: int) -> None:
    assert refusal(parse_gpus, text).line == line


# --- nvidia-smi nvlink -s -------------------------------------------------------------


def test_nvlink_inactive_links_recorded() -> None:
    assert NVLINK.command == "nvidia-smi nvlink -s"
    (gpu,) = parse_nvlink(read_fixture("nvlink", "v100-gpu3-two-inactive.txt"))
    assert gpu.gpu_index == 3 and gpu.gpu_name == "Tesla V100-SXM2-32GB"
    assert [lane.link for lane in gpu.lanes if not lane.active] == [3, 5]
    assert gpu.lanes[0].speed_gbps == pytest.approx(25.781)


def test_nvlink_uuid_and_errors() -> None:
    text = (
        "GPU 0: NVIDIA A100-SXM4-80GB (UUID: GPU-1234abcd-0000-1111-2222-333344445555)\n"
        "\t Link 0: 26.562 GB/s\n"
    )
    (gpu,) = parse_nvlink(text)
    assert gpu.uuid == "GPU-1234abcd-0000-1111-2222-333344445555" and gpu.lanes[0].active
    assert refusal(parse_nvlink, "\t Link 0: 26.562 GB/s\n").line == 1


# --- ibv_devinfo ----------------------------------------------------------------------


def test_rdma_roce_port_rate_and_gid_index() -> None:
    assert RDMA.command == "ibv_devinfo -v"
    (device,) = parse_rdma(read_fixture("ibv_devinfo", "roce-bond-cx6dx-vv.txt"))
    assert (device.hca, device.fw_version, device.board_id) == ("mlx5_bond_0", "22.36.1010", "MT_0000000359")
    assert device.node_guid == "08c0:eb03:00f0:28b2"
    (port,) = device.ports
    assert (port.state, port.phys_state, port.link_layer) == ("PORT_ACTIVE", "LinkUp", "Ethernet")
    assert (port.active_width, port.active_speed, port.rate_gbps) == ("2X", "50.0 Gbps", 100.0)
    assert port.roce_v2_gid_index == 3
    assert port.gids[1] == (1, "fe80::ac0:ebff:fef0:28b2", "RoCE v2")


def test_rdma_plain_devinfo_has_no_rate_and_down_port() -> None:
    text = (
        "hca_id:\tmlx5_1\n\ttransport:\t\t\tInfiniBand (0)\n\tfw_ver:\t\t\t\t20.37.1700\n"
        "\t\tport:\t1\n\t\t\tstate:\t\t\tPORT_DOWN (1)\n\t\t\tlink_layer:\t\tInfiniBand\n"
    )
    (device,) = parse_rdma(text)
    assert device.ports[0].state == "PORT_DOWN" and device.ports[0].rate_gbps is None


def test_rdma_no_devices_and_errors() -> None:
    assert parse_rdma("No IB devices found\n") == ()
    assert refusal(parse_rdma, "\tfw_ver:\t\t20.1\n").line == 1
    # A port without a state costs that port, with a warning naming its line; the device stands.
    (device,) = devices = parse_rdma("hca_id:\tmlx5_0\n\t\tport:\t1\n\t\t\tlink_layer:\tEthernet\n")
    assert device.hca == "mlx5_0" and device.ports == ()
    assert [(w.line, "no 'state'" in w.message) for w in devices.warnings] == [(2, True)]


# --- software stack -------------------------------------------------------------------


def test_stack_command_prints_every_section_and_tolerates_missing_tools() -> None:
    for section in (
        "os-release",
        "kernel",
        "driver",
        "nvidia-smi",
        "nvcc",
        "nccl",
        "containerd",
        "kubelet",
        "kubeadm",
        "nvidia-ctk",
    ):
        assert f"echo '### {section}'" in STACK.command
    assert STACK.command.count("|| true") == 10


def test_stack_recorded_on_a_host_without_driver_or_kubernetes() -> None:
    stack = parse_stack(read_fixture("stack", "debian12-build-host-nvcc-no-driver.txt"))
    assert (stack.os_name, stack.os_version, stack.kernel) == ("Debian GNU/Linux", "12", "6.18.44-fc-v857")
    assert stack.cuda_toolkit == "13.0" and stack.driver is None and stack.kubelet is None
    assert "No such file or directory" in stack.missing["driver"]
    assert stack.missing["kubelet"] == "kubelet: command not found"
    assert stack.missing["cuda"] == "nvidia-smi: command not found"


def test_stack_gpu_node_assembled_from_recorded_pieces() -> None:
    stack = parse_stack(read_fixture("stack", "assembled-ubuntu-gpu-k8s-node.txt"))
    assert (stack.os_name, stack.os_version) == ("Ubuntu", "22.04")
    assert stack.driver == "440.95.01" and stack.cuda == "10.2"
    assert stack.nccl == "2.21.5" and stack.containerd == "1.7.12"
    assert stack.kubelet == "1.29.3" and stack.kubeadm == "1.29.3"
    assert stack.nvidia_container_toolkit == "1.14.6"
    assert stack.missing == {"cuda_toolkit": "nvcc: command not found"}


def test_stack_reads_os_release_as_preflight_does_and_names_a_line_it_cannot_read() -> None:
    """One os-release reader (``facts.node.parse_os_release``): survey's own kept a value's backslashes and read
    an unclosed quote as if closed."""
    recorded = read_fixture("stack", "debian12-build-host-nvcc-no-driver.txt")
    escaped = parse_stack(recorded.replace('NAME="Debian GNU/Linux"', 'NAME="Debian \\"GNU\\"/Linux"'))
    assert (escaped.os_name, escaped.os_version, "os" in escaped.missing) == ('Debian "GNU"/Linux', "12", False)
    cut = parse_stack(recorded.replace('VERSION_ID="12"', 'VERSION_ID="12'))
    assert cut.os_name is None and cut.kernel == "6.18.44-fc-v857"
    assert cut.missing["os"] == "cannot parse os-release at line 3: expected KEY=value: 'VERSION_ID=\"12'"


def test_stack_needs_sections() -> None:
    assert refusal(parse_stack, "Ubuntu 22.04\n").line == 1


# --- ibdev2netdev / ip -o -4 addr ---------------------------------------------------------


def test_ibdev2netdev_recordings() -> None:
    assert NETDEV.command == "ibdev2netdev" and IPV4_ADDRS.command == "ip -o -4 addr show"
    devices = parse_ibdev2netdev(read_fixture("ibdev2netdev", "mixed-eth-ib-up-down.txt"))
    assert len(devices) == 8
    assert [(d.hca, d.name) for d in devices if d.up] == [
        ("mlx5_2", "ens6"),
        ("mlx5_3", "ens14f0"),
        ("mlx5_5", "ib0"),
    ]
    pair = parse_ibdev2netdev(read_fixture("ibdev2netdev", "cx4-ib0-up-ib1-down.txt"))
    assert [(d.name, d.up, d.port) for d in pair] == [("ib0", True, 1), ("ib1", False, 1)]


def test_ibdev2netdev_verbose_and_ip_merge() -> None:
    verbose = (
        "0000:31:00.0 mlx5_0 (MT4117 - MT2138K10121) CX4121A - ConnectX-4 LX SFP28 fw 14.27.1016 "
        "port 1 (DOWN  ) ==> ens4f0 (Down)\n"
    )
    (device,) = parse_ibdev2netdev(verbose)
    assert (device.hca, device.name, device.up) == ("mlx5_0", "ens4f0", False)
    addresses = parse_ip_addr(
        "2: ens4f0    inet 10.0.0.5/24 brd 10.0.0.255 scope global ens4f0\\"
        "       valid_lft forever preferred_lft forever\n"
    )
    assert merge_ipv4((device,), addresses)[0].ipv4 == ("10.0.0.5",)
    mixed = parse_ibdev2netdev("mlx5_0 port 1 ==> ib0 (Up)\nibdev2netdev: command not found\n")
    assert [d.name for d in mixed] == ["ib0"] and [w.line for w in mixed.warnings] == [2]
    assert refusal(parse_ibdev2netdev, "ibdev2netdev: command not found\n").line == 1


def test_survey_runs_topology_first() -> None:
    assert [fact.name for fact in SURVEY_FACTS] == ["topology", "gpus", "nvlink", "rdma", "stack", "netdev", "ipv4"]


# --- compound probes: a section's error names its line in the whole output ---------------


@pytest.mark.parametrize("module, text, line", [
    ("packages", "@@clusterctl@@ os-release\nID=ubuntu\n@@clusterctl@@ packages\nkubelet\t1.31.0-1.1\tii\nbroken\n", 5),
    ("kernel", "@@clusterctl@@ modules\nModule Size Used by\n@@clusterctl@@ sysctl\nnet.ipv4.ip_forward = 1\nno\n", 5),
    ("containerd", "@@clusterctl@@ version\n\nnot a version\n", 3),
])
def test_a_probe_section_that_does_not_parse_is_named_at_its_line(module: str, text: str, line: int) -> None:
    from clusterctl.facts import containerd, kernel, packages

    parse = {"packages": packages.parse_packages_probe, "kernel": kernel.parse_kernel_probe,
             "containerd": containerd.parse_containerd_probe}[module]
    with pytest.raises(ParseError, match="section '") as caught:
        parse(text)
    assert caught.value.line == line


def test_pci_addresses_are_compared_in_one_form() -> None:
    """nvidia-smi's bus id, the kernel's Xid address and lspci's, as printed (domain kept, function dropped)."""
    from clusterctl.facts.lspci import pci_address

    assert {pci_address(a) for a in ("00000000:47:00.0", "PCI:0000:47:00", "0000:47:00.0", "47:00.0")} == {
        "0000:47:00"}
    assert (pci_address("00000009:06:00.0"), pci_address("0008:06:00")) == ("0009:06:00", "0008:06:00")
    assert {pci_address(a) for a in (None, "", "GPU-5269b708", "N/A", "0000:47")} == {None}


def test_a_missing_tool_reads_one_way_in_every_reader() -> None:
    """Survey's commands, preflight's node probe and the stack's sections said "nvidia-smi: command not found",
    the shell's line as it came, and "NVIDIA driver not loaded" for the same facts; now one function decides."""
    from clusterctl.facts.base import missing_reason
    from clusterctl.facts.node import parse_node
    from clusterctl.transport.base import CommandResult

    node = parse_node(read_fixture("node", "node-probe-debian12-no-gpu.txt"))
    assert node.missing["gpus"] == "nvidia-smi: command not found"  # "/tmp/boot1-probe.sh: 1: nvidia-smi: not found"
    assert node.missing["nvidia-driver"] == "cat: /sys/module/nvidia/version: No such file or directory"
    assert node.missing["timesync"].startswith("System has not been booted with systemd")
    for said in ("sh: 1: nvidia-smi: not found", "bash: line 1: nvidia-smi: command not found"):
        stack = parse_stack(f"### nvidia-smi\n{said}\n")
        assert stack.missing["cuda"] == "nvidia-smi: command not found"
        assert missing_reason(CommandResult("nvidia-smi -q", "", said + "\n", 127, 0.0)) == stack.missing["cuda"]
    # exit 127 without the shell's words: the command names the tool.
    assert missing_reason(CommandResult("ibstat", "", "", 127, 0.0)) == "ibstat: command not found"
    for said in ("sh: 1: nvcc: not found", "/tmp/probe.sh: 1: nvcc: not found", "sh: nvcc: not found",
                 "bash: nvcc: command not found", "/tmp/probe.sh: line 3: nvcc: command not found",
                 "-bash: nvcc: command not found", "zsh:1: command not found: nvcc",
                 "zsh: command not found: nvcc", "sudo: nvcc: command not found"):
        assert parse_stack(f"### nvcc\n{said}\n").missing["cuda_toolkit"] == "nvcc: command not found", said
    # A tool's own "not found" (helm/helm#10967, confidential-containers/cloud-api-adaptor#2919) names no
    # missing program: its line is the reason, not "release: command not found".
    for said in ("Error: release: not found", "Error: uninstall: Release not loaded: gpu-operator: release: not found"):
        assert missing_reason(CommandResult("helm status gpu-operator", "", said + "\n", 1, 0.0)) == (
            f"exit code 1: {said}")
    no_driver = ("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure that the "
                 "latest NVIDIA driver is installed and running.")
    assert parse_stack(f"### nvidia-smi\n{no_driver}\n").missing["cuda"] == missing_reason(
        CommandResult("nvidia-smi -q", no_driver + "\n", "", 9, 0.0)) == (
        "nvidia-smi cannot talk to the NVIDIA driver (driver not loaded)")
