"""Field5 round of real outputs: GB300 NVL72 nccl-tests logs whose author left ranks out, a 12-HCA node's
topology and ibstat, Windows' ``nvidia-smi.exe`` CSV with its command line, a GPU that no longer answers lspci,
perftest's post-list run and a paste with Markdown bold in its figures."""

from __future__ import annotations

from fixture_files import read_fixture

from clusterctl.facts.gpus import parse_gpus
from clusterctl.facts.kernel_log import parse_kernel_log
from clusterctl.facts.lspci import parse_lspci
from clusterctl.facts.model import NVLinkStatuses
from clusterctl.facts.nccltests import parse_nccl_tests
from clusterctl.facts.netdev import parse_ibdev2netdev
from clusterctl.facts.nvlink import parse_nvlink
from clusterctl.facts.perftest import parse_perftest
from clusterctl.facts.rdma import parse_ibstat, parse_rdma
from clusterctl.facts.topo import parse_topo
from clusterctl.findings import Finding
from clusterctl.health.checks import HostInput
from clusterctl.health.probe import HostProbe
from clusterctl.health.run import judge


def test_gb300_tray_all_reduce_reads_four_ranks_across_pci_domains() -> None:
    run = parse_nccl_tests(read_fixture("nccl-tests", "all_reduce-gb300-1tray-4rank-2.28.7.txt"))
    assert (run.test, run.nccl_version, run.avg_busbw_gbs, run.out_of_bounds) == (
        "all_reduce_perf", "2.28.7+cuda13.0", 446.673, 0)
    assert run.ranks == tuple((rank, "GPU-3882", rank, "NVIDIA GB300") for rank in range(4))
    assert [row.size_bytes for row in run.rows] == [8589934592, 17179869184]
    assert run.peak_busbw_gbs == 685.27 and run.warnings == ()


def test_ranks_behind_the_authors_elision_are_said_to_be_unknown() -> None:
    """8 ranks ran on 2 trays; the paste names ranks 0, 1, 6 and 7 around a '...': reading 4 ranks without a
    word would say the run had 2 GPUs per host."""
    run = parse_nccl_tests(read_fixture("nccl-tests", "all_reduce-gb300-2node-ranks-elided-truncated-comment.txt"))
    assert [rank for rank, _, _, _ in run.ranks] == [0, 1, 6, 7]
    (elided,) = run.warnings
    assert elided.message == ("the paste leaves lines out (1 '...' elision line): the ranks and rows there are "
                              "unknown")
    assert run.avg_busbw_gbs == 474.234 and run.rows[-1].in_place.busbw_gbs == 842.11


def test_alltoall_in_place_wrong_na_is_no_count_and_elided_ranks_are_warned() -> None:
    run = parse_nccl_tests(read_fixture("nccl-tests", "alltoall-gb300-32node-ranks-elided-in-place-wrong-na.txt"))
    assert run.test == "alltoall_perf" and [row.redop for row in run.rows] == ["none", "none"]
    assert [(row.out_of_place.wrong, row.in_place.wrong) for row in run.rows] == [(0, None), (0, None)]
    assert {host for _, host, _, _ in run.ranks} == {"GPU-5705", "GPU-1631"}
    assert "the paste leaves lines out" in run.warnings[0].message


def test_windows_nvidia_smi_exe_command_line_is_not_taken_for_the_header() -> None:
    """The command line above the CSV names power.limit too: read as the header, the real header became a data
    row and the output was refused at line 2."""
    (gpu,) = parse_gpus(read_fixture("nvidia-smi", "rtx2080ti-windows-exe-command-line-nounits-unknown-error.csv"))
    assert (gpu.index, gpu.name, gpu.power_limit_w) == (0, "GeForce RTX 2080 Ti", 210.0)


def test_gpu_requiring_reset_csv_still_reads_its_index() -> None:
    (gpu,) = parse_gpus(read_fixture("nvidia-smi", "h100-srun-gpu-requires-reset.csv"))
    assert gpu.index == 0 and gpu.name is None


def test_a_gpu_that_does_not_answer_lspci_is_named_not_passed_over() -> None:
    pci = parse_lspci(read_fixture("lspci", "gt650m-optimus-rev-ff-unknown-header-type-7f.txt"))
    (gpu,) = pci.devices
    assert (gpu.address, gpu.link_status, gpu.link_cap) == ("0000:01:00.0", None, None)
    (warning,) = pci.warnings
    assert warning.line == 2 and warning.message.startswith("01:00.0 does not answer ('!!! Unknown header type 7f')")
    assert "fallen off the bus" in warning.message


def test_twelve_hca_topology_with_sparse_cpu_lists() -> None:
    topo = parse_topo(read_fixture("topo", "hgx-8gpu-nv18-12nic-sparse-cpu-lists-check-env.txt"))
    assert topo.warnings == () and len(topo.gpus) == 8
    assert [nic.device_name for nic in topo.nics] == [f"mlx5_{i}" for i in range(12)]
    assert [gpu.cpu_affinity for gpu in topo.gpus] == ["4,6,8,10,12"] * 4 + ["1,3,5,7,9,11"] * 4
    assert [link.b for link in topo.links if link.a == "GPU0" and link.kind == "PIX"] == ["NIC0", "NIC1", "NIC2"]
    assert topo.link("GPU7", "NIC11").kind == "PIX" and topo.link("GPU3", "GPU4").nvlinks == 18


def test_twelve_hca_ibstat_mixed_ndr_and_ethernet() -> None:
    devices = parse_ibstat(read_fixture("ibstat", "cx7-ndr-400-x8-cx6dx-eth-x4-12-ca.txt"))
    by_name = {d.hca: d for d in devices}
    assert len(by_name) == 12 and devices.warnings == ()
    infiniband = sorted(d.hca for d in devices if d.ports[0].link_layer == "InfiniBand")
    assert infiniband == sorted(f"mlx5_{i}" for i in (0, 3, 4, 5, 6, 9, 10, 11))
    assert {d.ports[0].rate_gbps for d in devices if d.hca in infiniband} == {400.0}
    assert [(p.state, p.phys_state, p.rate_gbps) for p in by_name["mlx5_2"].ports] == [
        ("PORT_DOWN", "Disabled", 40.0)]
    assert (by_name["mlx5_7"].ca_type, by_name["mlx5_7"].fw_version) == ("MT4125", "22.38.1002")


def test_post_list_run_peak_is_not_a_measurement() -> None:
    run = parse_perftest(read_fixture("perftest", "write_bw-post-list-128-D60-8-bytes-ib0-roce.txt"))
    assert (run.test, run.device, run.link_type, run.gid_index, run.printed_unit) == (
        "ib_write_bw", "ib0", "Ethernet", 2, "Gb/sec")
    (row,) = run.bandwidth
    assert (row.size_bytes, row.iterations, row.bw_avg_gbps, row.msg_rate_mpps) == (8, 224958464, 0.48, 7.498617)
    assert run.peak_unmeasured_by == "Post List : 128" and run.warnings == ()


def test_markdown_bold_figures_are_named_not_read_as_numbers() -> None:
    run = parse_perftest(read_fixture("perftest", "send_bw-two-runs-markdown-bold-averages.txt"))
    assert run.bandwidth == ()
    assert [(w.line, w.message) for w in run.warnings[:2]] == [
        (3, "table row not read: '**5544.28**' is not a number"),
        (7, "table row not read: '**920.13**' is not a number")]


def test_all_links_inactive_is_kept_and_is_nvlink_down_among_peers_with_links() -> None:
    """A B200 that answers 'all links are inActive' lists no link; read as a GPU without NVLink, health passed a
    GPU whose 18 links had all fallen."""
    (b200,) = parse_nvlink(read_fixture("nvlink", "gpud1085-b200-gpu2-all-links-inactive-excerpt.txt"))
    assert (b200.gpu_index, b200.gpu_name, b200.lanes, b200.all_inactive) == (2, "NVIDIA B200", (), True)
    assert not _nvlink_findings(parse_nvlink(read_fixture(
        "nvlink", "gpud1085-b200-gpu2-all-links-inactive-excerpt.txt")))  # one GPU: no peer says what it should have
    statuses = parse_nvlink(read_fixture("nvlink", "DERIVED-b300-7gpu-gpu2-all-links-inactive.txt"))
    assert [s.gpu_index for s in statuses if s.all_inactive] == [2]
    (down,) = _nvlink_findings(statuses)
    assert (down.code, down.message) == ("NVLINK_DOWN", "0 of 18 NVLinks active, peers have 18")
    assert down.evidence["evidence"] == "all links are inActive" and down.evidence["action"] == "RESET_GPU"
    assert not _nvlink_findings(parse_nvlink(read_fixture("nvlink", "b300-7gpu-610.57.04-18-links-53.125-prompt.txt")))


def _nvlink_findings(statuses: NVLinkStatuses) -> list[Finding]:
    report = judge([HostInput("h1", HostProbe(nvlink=statuses))])
    return [f for f in report.hosts[0].findings if f.code == "NVLINK_DOWN"]


def test_rows_pasted_as_a_markdown_table_under_escaped_headers_are_read() -> None:
    """'\\#' headers and '1024 | 512 | half | ...' rows (a GitHub Markdown paste): every row was passed over and the
    log said 'no result table'."""
    run = parse_nccl_tests(read_fixture("nccl-tests", "all_reduce-markdown-table-rows-escaped-hash-header-excerpt.txt"))
    assert [row.size_bytes for row in run.rows] == [2 ** n for n in range(10, 19)]
    assert {(row.type, row.redop, row.root) for row in run.rows} == {("half", "sum", -1)}
    last = run.rows[-1]
    assert (last.out_of_place.busbw_gbs, last.in_place.busbw_gbs, last.in_place.wrong) == (39.27, 37.93, 0)
    (stops,) = run.warnings  # the excerpt ends before the summary, and the parser says so
    assert stops.line == 13 and "no 'Avg bus bandwidth' summary follows" in stops.message


def test_syslog_lines_with_the_kernels_own_stamp_and_a_driver_340_xid() -> None:
    log = parse_kernel_log(read_fixture("kernel-log", "ubuntuforums-syslog-dmesg-stamp-xid79-fallen-off-bus-2016.log"))
    assert (log.source, log.warnings) == ("syslog", ())
    assert [(e.kind, e.code, e.pci, e.timestamp) for e in log.events] == [
        ("xid", 79, "0000:01:00", "Dec  6 17:49:03"), ("fallen-off-bus", None, "0000:01:00.0", "Dec  6 17:49:03")]
    old = parse_kernel_log(read_fixture("kernel-log", "ubuntuforums-dmesg-xid62-driver-340-hex-words.log"))
    (xid,) = old.events
    assert (xid.code, xid.pci, xid.timestamp, xid.message) == (62, "0000:01:00", "121.331414",
                                                               "12b2(1fa0) 00000000 00000000")


def test_ibdev2netdev_and_ibv_devinfo_of_one_host() -> None:
    netdevs = parse_ibdev2netdev(read_fixture("ibdev2netdev", "ucx2534-two-ib-two-eth-dollar-prompt.txt"))
    assert [(d.hca, d.name, d.up) for d in netdevs] == [
        ("mlx5_0", "ib0", False), ("mlx5_1", "ib1", True),
        ("mlx5_2", "enp23s0f0", True), ("mlx5_3", "enp23s0f1", False)]
    devices = parse_rdma(read_fixture("ibv_devinfo", "ucx2534-cx4-ib-and-bogus-guid-eth-tabs-excerpt.txt"))
    assert [(d.hca, d.fw_version, d.board_id, d.ports[0].state, d.ports[0].link_layer) for d in devices] == [
        ("mlx5_1", "12.20.1010", "MT_2190110032", "PORT_ACTIVE", "InfiniBand"),
        ("mlx5_3", "14.17.1010", "PEG0000000001", "PORT_DOWN", "Ethernet")]
    assert devices[1].node_guid == "0000:0000:0000:0001" and devices.warnings == ()
