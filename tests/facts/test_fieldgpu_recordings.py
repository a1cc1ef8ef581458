"""Real GPU-side outputs from public issues and notes (brief "fieldgpu"): variants the earlier
recordings lacked, each asserted on what a user would check in it."""

from __future__ import annotations

from fixture_files import read_fixture

from clusterctl.facts.compute_apps import parse_compute_apps
from clusterctl.facts.dcgmi import parse_dcgmi_diag
from clusterctl.facts.gpus import parse_gpus, parse_persistence_modes
from clusterctl.facts.nvlink import parse_nvlink
from clusterctl.facts.nvsmi_query import parse_nvidia_smi_q
from clusterctl.facts.topo import parse_topo


def _raw(matrix_name: str, pairs: list[tuple[str, str]]) -> list[str]:
    matrix = parse_topo(read_fixture("topo", matrix_name))
    found = []
    for a, b in pairs:
        link = matrix.link(a, b)
        assert link is not None, (a, b)
        found.append(link.raw)
    return found


def test_h20_with_36_nics_and_bonds_reads_every_fused_cell() -> None:
    matrix = parse_topo(read_fixture("topo", "h20-8gpu-36nic-bond-fused-cells.txt"))
    assert (len(matrix.gpus), len(matrix.nics), matrix.warnings) == (8, 36, ())
    assert [n.device_name for n in matrix.nics[32:]] == [f"mlx5_bond_{i}" for i in range(4)]
    # "NODENODE" / "SYSSYS" (NIC12, NIC13), "NODEPIX" (NIC34, NIC35) and " X PIX" split back into cells.
    assert _raw("h20-8gpu-36nic-bond-fused-cells.txt", [
        ("GPU0", "NIC12"), ("GPU0", "NIC13"), ("GPU0", "NIC34"), ("GPU0", "NIC35"), ("GPU2", "NIC35"),
        ("GPU4", "NIC12"), ("NIC12", "NIC13"), ("NIC34", "NIC35"), ("GPU6", "NIC33")]) == [
        "NODE", "NODE", "NODE", "PIX", "NODE", "SYS", "PIX", "NODE", "PIX"]
    assert [(g.cpu_affinity, g.numa_affinity) for g in (matrix.gpus[0], matrix.gpus[7])] == [
        ("0-55,112-167", "0"), ("70-99,102-107", "1")]


def test_gb200_numa_affinity_lists_and_gpu_numa_ids() -> None:
    matrix = parse_topo(read_fixture("topo", "gb200-4gpu-8nic-numa-list-gpu-numa-id.txt"))
    assert (len(matrix.gpus), len(matrix.nics), matrix.warnings) == (4, 8, ())
    assert {link.raw for link in matrix.links if link.a.startswith("GPU") and link.b.startswith("GPU")
            and link.a != link.b} == {"NV18"}
    # Grace-attached GPUs: every NIC is SYS, the NUMA affinity is a list, the GPU memory has its own node.
    assert [(g.cpu_affinity, g.numa_affinity, g.gpu_numa_id) for g in matrix.gpus] == [
        ("0-71", "0,3-9,11-17", "2"), ("0-71", "0,3-9,11-17", "10"),
        ("72-143", "1,19-25,27-33", "18"), ("72-143", "1,19-25,27-33", "26")]
    assert _raw("gb200-4gpu-8nic-numa-list-gpu-numa-id.txt", [("GPU0", "NIC0"), ("NIC2", "NIC3")]) == ["SYS", "PIX"]


def test_dcgm_fail_row_under_a_pass_row_is_that_gpus_failure() -> None:
    # "| GPU Memory | Pass - GPUs: 1, ..., 7 |" then "|  | Fail - GPU: 0 |": GPU 0 failed, it is not a note of GPU 7.
    diag = parse_dcgmi_diag(read_fixture("dcgmi", "mlengineering-r2-pass-gpus-then-fail-gpu0-clipped.txt"))
    assert [(r.test, r.gpu) for r in diag.failed] == [("GPU Memory", 0)]
    assert sorted(r.gpu for r in diag.results if r.status == "Pass") == [1, 2, 3, 4, 5, 6, 7]
    assert "Thermal violations" in diag.failed[0].info
    assert not any("Thermal" in r.info for r in diag.results if r.status == "Pass")
    assert [w.line for w in diag.warnings] == [8]  # the paste's cut last row is named, not read


def test_nvlink_status_with_a_six_dot_elision_reads_the_links_shown() -> None:
    statuses = parse_nvlink(read_fixture("nvlink", "nccltests228-a100-80gb-tabs-integer-speed-six-dot-elision.txt"))
    assert [(s.gpu_index, len(s.lanes)) for s in statuses] == [(0, 12), (1, 12), (2, 1)]
    assert {lane.speed_gbps for s in statuses for lane in s.lanes} == {25.0}  # "25 GB/s", no decimals
    assert statuses[0].uuid == "GPU-ff8a40d4-abc6-08d1-f939-15848b5d4e05"
    # GPU 2's other links were left out by the author: unknown, said so, not inactive.
    assert any("leaves lines out" in w.message for w in statuses.warnings)


def test_nvlink_status_as_published_with_a_four_dot_elision_keeps_the_inactive_links() -> None:
    (gpu3,) = parse_nvlink(read_fixture("nvlink", "azhpc73-v100-gpu3-as-published-four-dot-elision.txt"))
    assert gpu3.gpu_index == 3 and [lane.link for lane in gpu3.lanes if not lane.active] == [3, 5]


def test_h100_nv6_with_sparse_cpu_lists_one_numa_node_per_gpu() -> None:
    matrix = parse_topo(read_fixture("topo", "h100-4gpu-nv6-sparse-cpu-affinity-4nic.txt"))
    assert [(g.cpu_affinity, g.numa_affinity) for g in matrix.gpus] == [
        ("6,14,22,30", "3"), ("4,12,20,28", "1"), ("7,15,23,31", "7"), ("5,13,21,29", "5")]
    assert _raw("h100-4gpu-nv6-sparse-cpu-affinity-4nic.txt", [("GPU0", "GPU3"), ("GPU2", "NIC2"), ("GPU2", "NIC3")]) \
        == ["NV6", "PIX", "SYS"]
    # The legend was not copied: the NICs keep their labels, and the reader says why.
    assert [w.message for w in matrix.warnings] == [
        "the NIC Legend not pasted: NIC0..NIC3 are shown by label, not HCA name"]


V100_570 = "v100-570.124.06-q-notebook-indented-recovery-action.txt"


def test_570_driver_q_reads_instantaneous_power_and_the_recovery_action() -> None:
    smi = parse_nvidia_smi_q(read_fixture("nvidia-smi-q", V100_570))
    (gpu,) = smi.gpus
    assert (smi.driver_version, smi.cuda_version, gpu.name, gpu.bus_id) == (
        "570.124.06", "12.8", "Tesla V100-PCIE-16GB", "00000001:00:00.0")
    # 570 prints only "Instantaneous Power Draw" (Average is N/A): the draw is that value, not unknown.
    assert (gpu.power_draw_w, gpu.power_limit_w) == (24.07, 250.0)
    # "GPU Reset Status" says "Requested functionality has been deprecated": no reading, no complaint;
    # the state is in "GPU Recovery Action", read as printed.
    assert (gpu.reset_required, gpu.drain_and_reset_recommended, gpu.recovery_action) == (None, None, "None")
    assert (gpu.unread, smi.warnings) == ((), ())
    assert (gpu.ecc_mode, gpu.ecc.volatile_uncorrectable, gpu.retired_pages_pending) == ("Enabled", 0, False)
    assert (gpu.pcie_gen_current, gpu.pcie_width_current, gpu.clock_events_active) == (3, 16, ("Idle",))


def test_580_driver_q_with_wide_keys_and_no_reset_status() -> None:
    smi = parse_nvidia_smi_q(read_fixture("nvidia-smi-q", "rtx3090ti-580.142-q-wide-keys-no-reset-status.txt"))
    (gpu,) = smi.gpus
    assert (smi.driver_version, smi.cuda_version, gpu.name, smi.warnings) == (
        "580.142", "13.0", "NVIDIA GeForce RTX 3090 Ti", ())
    # 580 prints no GPU Reset Status at all: GPU Recovery Action is the only reset signal.
    assert (gpu.reset_required, gpu.recovery_action, gpu.unread) == (None, "None", ())
    assert (gpu.remapped_rows_correctable, gpu.remapped_rows_uncorrectable, gpu.remap_pending) == (0, 0, False)
    assert (gpu.power_draw_w, gpu.power_limit_w, gpu.ecc_mode) == (24.78, 450.0, "Disabled")
    assert (gpu.pcie_gen_current, gpu.pcie_gen_max, gpu.clock_events_active) == (1, 4, ("Idle",))
    assert (gpu.slowdown_temp_c, gpu.shutdown_temp_c, gpu.temperature_c) == (94.0, 97.0, 45.0)


def test_l40s_pcie_box_behind_a_redacted_conda_prompt() -> None:
    matrix = parse_topo(read_fixture("topo", "l40s-4gpu-2nic-node-sys-redacted-conda-prompt.txt"))
    assert (len(matrix.gpus), [n.device_name for n in matrix.nics], matrix.warnings) == (4, ["mlx5_0", "mlx5_1"], ())
    # No NVLink: GPU pairs are NODE within a socket, SYS across; both NICs hang off socket 1.
    pairs = [("GPU0", "GPU1"), ("GPU1", "GPU2"), ("GPU2", "GPU3"), ("GPU0", "NIC0"), ("GPU3", "NIC1"), ("NIC0", "NIC1")]
    assert _raw("l40s-4gpu-2nic-node-sys-redacted-conda-prompt.txt", pairs) == [
        "NODE", "SYS", "NODE", "SYS", "NODE", "PIX"]
    assert {link.kind for link in matrix.links} == {"X", "NODE", "SYS", "PIX"}
    assert [g.numa_affinity for g in matrix.gpus] == ["0", "0", "1", "1"]


def test_five_gpu_workstation_with_the_odd_gpu_on_the_other_socket() -> None:
    matrix = parse_topo(read_fixture("topo", "rtx4090-5gpu-phb-node-sys.txt"))
    assert (len(matrix.gpus), matrix.nics, matrix.warnings) == (5, (), ())
    assert [(g.cpu_affinity, g.numa_affinity) for g in matrix.gpus] == [("8-15,24-31", "1")] + [("0-7,16-23", "0")] * 4
    pairs = [("GPU1", "GPU2"), ("GPU3", "GPU4"), ("GPU2", "GPU3"), ("GPU0", "GPU4")]
    assert _raw("rtx4090-5gpu-phb-node-sys.txt", pairs) == ["PHB", "PHB", "NODE", "SYS"]


def test_dcgm_paste_cut_mid_table_reads_the_tests_and_names_every_other_row() -> None:
    diag = parse_dcgmi_diag(read_fixture("dcgmi", "godcgm52-3.3.1-r2-pass-gpu1-fail-gpu0-clipped.txt"))
    assert [(r.category, r.test, r.gpu, r.status) for r in diag.results] == [
        ("Hardware", "GPU Memory", 1, "Pass"), ("Hardware", "GPU Memory", 0, "Fail")]
    assert "cuCtxCreate" in diag.failed[0].info
    # The Info rows above the first test belong to a test cut off the paste: never metadata, each line named.
    assert diag.metadata == {}
    assert [w.line for w in diag.warnings] == [1, 2, 3, 4, 5, 6, 7, 8, 9, 18]


def test_dcgm_text_cut_mid_word_at_the_cell_edge_reads_as_one_word() -> None:
    # dcgmi cuts long text every 45 characters, mid-word or not: "Reset GPU. R" / "estart DCGM." is "Restart";
    # a cut that fell on a space ("... Check" / "DCGM", "... and row" / " remappings") keeps that space.
    (_, gpu0) = parse_dcgmi_diag(read_fixture("dcgmi", "godcgm52-3.3.1-r2-pass-gpu1-fail-gpu0-clipped.txt")).results
    assert gpu0.info == ("GPU 0 Error using CUDA API cuCtxCreate Check DCGM and system logs for errors. Reset GPU. "
                         "Restart DCGM. Rerun diagnostics. Unable to create CUDA context: 'CUDA-capable device(s) "
                         "is/are busy or unavailable'.")
    faulty = parse_dcgmi_diag(read_fixture("dcgmi", "mlengineering-r2-pass-gpus-then-fail-gpu0-clipped.txt")).failed[0]
    assert faulty.info.startswith("GPU 0 Thermal violations totaling 13.3 seconds started at 9.7 seconds into the test "
                                  "for GPU 0 Verify that the cooling on this machine is functional, including "
                                  "external, thermal material interface,")
    (error,) = parse_dcgmi_diag(read_fixture("dcgmi", "mlengineering-dcgm-text-error-row.txt")).results
    assert error.info == "GPU 3 has uncorrectable memory errors and row remappings are pending"


def test_dcgm_info_rows_go_to_the_gpu_they_name() -> None:
    diag = parse_dcgmi_diag(read_fixture("dcgmi", "DERIVED-godcgm52-pcie-row-per-gpu-info.txt"))
    pcie = {r.gpu: r for r in diag.results if r.test == "PCIe"}
    assert (pcie[1].status, pcie[0].status) == ("Pass", "Fail")
    assert pcie[1].info == ("GPU 1 GPU to Host bandwidth:  12.33 GB/s, GPU 1 Host to GPU bandwidth:  13.15 GB/s, "
                            "GPU 1 bidirectional bandwidth: 22.63 GB/s")
    assert pcie[0].info == ("GPU 0 API call cudaStreamCreate failed: 'CUDA-capable device(s) is/are busy or "
                            "unavailable' Check DCGM and system logs for errors. Reset GPU. Restart DCGM. "
                            "Rerun diagnostics.")
    assert [(r.test, r.gpu) for r in diag.failed] == [("PCIe", 0), ("GPU Memory", 0)]
    assert diag.warnings == ()


def test_dcgm4_per_gpu_warning_goes_to_its_gpu_and_the_next_gpus_row_stays_a_result() -> None:
    """DCGM 4 prints each GPU's result row, then that GPU's warnings named in the name cell (``Warning: GPU0``),
    cut every 45 characters (Diag.cpp, HelperDisplayEntityResults and DisplayVerboseInfo). A warning that fills
    its last row exactly is followed by the next GPU's row, which is that GPU's result, not more warning text."""
    message = "GPU 0 has uncorrectable memory errors and row remappings are pending. Drain and reset GPU."
    assert len(message) == 90  # two full rows

    def row(name: str, info: str) -> str:
        return f"| {name:<25} | {info:<46} |"

    text = "\n".join([
        "+---------------------------+------------------------------------------------+",
        row("Diagnostic", "Result"),
        "+===========================+================================================+",
        "+-----  Hardware  ----------+------------------------------------------------+",
        row("memory", "Fail"), row("", "GPU0: Fail"),
        row("Warning: GPU0", message[:45]), row("", message[45:]),
        row("", "GPU1: Pass"),
        "+---------------------------+------------------------------------------------+"])
    diag = parse_dcgmi_diag(text)
    per_gpu = {r.gpu: r for r in diag.results if r.gpu is not None}
    assert (per_gpu[0].status, per_gpu[0].info) == ("Fail", message)
    assert (per_gpu[1].status, per_gpu[1].info) == ("Pass", "")
    assert diag.metadata == {} and diag.warnings == ()


def test_query_gpu_csv_pasted_with_its_command_line() -> None:
    # The "$ nvidia-smi --query-gpu=pcie.link.gen.current,pcie.link.gen.max,..." line names query fields too:
    # it was taken for the header and the real header refused as a GPU row ("expected a number").
    gpus = parse_gpus(read_fixture("nvidia-smi", "rtx3090-x870e-gen1-x8-dollar-prompt.csv"))
    assert [(g.index, g.pcie_gen_current, g.pcie_gen_max, g.pcie_width_current) for g in gpus] == [
        (0, 1, 4, 8), (1, 1, 4, 8)]
    assert parse_persistence_modes(
        "$ nvidia-smi --query-gpu=name,driver_version,index,persistence_mode --format=csv\n"
        + read_fixture("nvidia-smi", "t4-persistence-mode.csv")) == {0: True}


def test_compute_apps_pasted_with_its_command_line() -> None:
    pasted = ("$ nvidia-smi --query-compute-apps=pid,process_name,used_gpu_memory --format=csv\n"
              + read_fixture("nvidia-smi-compute-apps", "nvidia-docker-1483-host-pid-name-memory.csv"))
    assert [(a.pid, a.used_mib) for a in parse_compute_apps(pasted)] == [(40170, 185)]


def test_dcgm4_json_info_lists_are_messages_not_a_python_list() -> None:
    diag = parse_dcgmi_diag(read_fixture("dcgmi", "DERIVED-dcgm215-4.x-json-info-lists.json"))
    assert [(r.test, r.gpu, r.status) for r in diag.results] == [("diagnostic", gpu, "Pass") for gpu in range(8)]
    assert diag.results[1].info == ("Allocated space for 138 output matricies from 76077622886 bytes available.; "
                                    "Running with precisions: FP64 1, FP32 1, FP16 1; "
                                    "GPU 1 calculated at approximately 859.08 gigaflops during this test")
    assert not any("[" in r.info or "'" in r.info for r in diag.results)
    assert diag.results[7].info == ""


H100_PCIE_NVLINK = "h100-pcie-2gpu-bridge-12-of-18-links-indented-root-prompt.txt"


def test_h100_pcie_pair_on_an_nvlink_bridge_topology_and_links() -> None:
    matrix = parse_topo(read_fixture("topo", "h100-pcie-2gpu-nvlink-bridge-nv12-indented-root-prompt.txt"))
    link = matrix.link("GPU0", "GPU1")
    assert link is not None and (link.kind, link.nvlinks) == ("NV", 12)
    assert [(g.cpu_affinity, g.numa_affinity) for g in matrix.gpus] == [("32-63,96-127", "1")] * 2
    assert matrix.warnings == ()
    statuses = parse_nvlink(read_fixture("nvlink", H100_PCIE_NVLINK))
    # The bridge wires 12 of the 18 links; the other 6 print <inactive> on a healthy pair.
    assert [(s.gpu_index, sum(lane.active for lane in s.lanes), [lane.link for lane in s.lanes if not lane.active])
            for s in statuses] == [(0, 12, [4, 5, 10, 11, 16, 17]), (1, 12, [4, 5, 10, 11, 16, 17])]
    assert {lane.speed_gbps for s in statuses for lane in s.lanes if lane.active} == {26.562}
    assert statuses.warnings == ()


def test_580_repair_pending_and_fabric_health_are_read() -> None:
    (real,) = parse_nvidia_smi_q(read_fixture("nvidia-smi-q", "rtx3090ti-580.142-q-wide-keys-no-reset-status.txt")).gpus
    assert (real.channel_repair_pending, real.tpc_repair_pending) == (False, False)
    assert (real.fabric_health_summary, real.fabric_bandwidth, real.fabric_route_unhealthy,
            real.fabric_incorrect_configuration) == (None, None, None, None)  # printed N/A: not known
    (gpu,) = parse_nvidia_smi_q(read_fixture("nvidia-smi-q",
                                             "DERIVED-rtx3090ti-580.142-tpc-repair-fabric-unhealthy.txt")).gpus
    assert (gpu.channel_repair_pending, gpu.tpc_repair_pending) == (False, True)
    assert (gpu.fabric_health_summary, gpu.fabric_bandwidth, gpu.fabric_route_recovery_in_progress,
            gpu.fabric_route_unhealthy, gpu.fabric_access_timeout_recovery) == (
        "Unhealthy", "Full", "False", "True", None)
