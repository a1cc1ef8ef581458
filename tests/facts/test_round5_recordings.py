"""Round 5 of real pastes ("field truth"): DCGM 4.4 tables on driver 580, perftest runs with several queue
pairs, and the author's ``...`` where a paste leaves lines or values out (never read as data)."""

from __future__ import annotations

import re

import pytest
from fixture_files import read_fixture

from clusterctl.facts.dcgmi import parse_dcgmi_diag
from clusterctl.facts.gpus import parse_gpus
from clusterctl.facts.nvlink import parse_nvlink
from clusterctl.facts.nvsmi_query import parse_nvidia_smi_q
from clusterctl.facts.perftest import parse_perftest
from clusterctl.facts.rdma import link_rate, parse_ibstat, parse_rdma
from clusterctl.facts.stack import parse_stack
from clusterctl.facts.topo import parse_topo


def test_dcgm_4_4_per_gpu_rows_on_a_single_gpu_run() -> None:
    diag = parse_dcgmi_diag(read_fixture("dcgmi", "dcgm124-4.4.2-580.105.08-a10g-r2-i0-pass.txt"))
    assert (diag.dcgm_version, diag.driver_version, diag.gpu_device_ids) == ("4.4.2", "580.105.08", ("2237",))
    assert [(r.category, r.test, r.status, r.gpu) for r in diag.results if r.gpu is not None] == [
        ("Deployment", "software", "Pass", 0), ("Hardware", "memory", "Pass", 0), ("Integration", "pcie", "Pass", 0)]
    assert diag.warnings == ()


def test_dcgm_4_4_gb10_skips_are_read_as_skips_not_passes() -> None:
    diag = parse_dcgmi_diag(read_fixture("dcgmi", "gb10-4.4.2-580.95.05-r3-all-skip-no-top-border.txt"))
    assert diag.gpu_device_ids == ("2e12",) and diag.warnings == ()
    per_gpu = {r.test: r.status for r in diag.results if r.gpu == 0}
    assert per_gpu == {"software": "Pass", "memory": "Skip", "diagnostic": "Skip", "nvbandwidth": "Skip",
                       "pcie": "Skip", "memory_bandwidth": "Skip", "targeted_stress": "Skip", "targeted_power": "Skip"}


def test_dcgm_rows_the_author_left_out_are_a_warning_not_a_clean_run() -> None:
    diag = parse_dcgmi_diag(read_fixture("dcgmi", "dcgm254-4.4.1-580.65.06-v100-r2-pcie-fail-elided-padded.txt"))
    assert diag.gpu_device_ids == ("1db1",) * 4 and diag.dcgm_version == "4.4.1"
    (pcie,) = diag.results
    assert (pcie.test, pcie.status, pcie.gpu) == ("pcie", "Fail", None)
    assert "exited with non-zero status 1" in pcie.info
    # The Deployment and Hardware rows are behind the '...': unknown, which the result must say.
    (elided,) = diag.warnings
    assert "leaves rows out" in elided.message and "1 '...' elision line" in elided.message


def test_perftest_eight_queue_pairs_unidirectional_and_bidirectional() -> None:
    write = parse_perftest(read_fixture("perftest", "write_bw-q8-a-gbits-roce-numactl-client.txt"))
    assert (write.test, write.qps, write.link_type, write.gid_index, write.bidirectional) == (
        "ib_write_bw", 8, "Ethernet", 3, False)
    assert [r.size_bytes for r in write.bandwidth] == [2 ** n for n in range(1, 10)]
    assert write.bandwidth[-1].bw_avg_gbps == 19.15 and write.warnings == ()
    send = parse_perftest(read_fixture("perftest", "send_bw-bidir-q8-a-gbits-roce-numactl-client.txt"))
    assert (send.test, send.qps, send.bidirectional, len(send.bandwidth)) == ("ib_send_bw", 8, True, 14)
    assert send.peak_gbps == 194.33 and ("RX depth", "512") in send.banner_settings and send.warnings == ()


def test_perftest_lines_the_author_left_out_are_a_warning() -> None:
    run = parse_perftest(read_fixture("perftest", "write_bw-postlist-q8-pollara400-server-pod-log-elided.txt"))
    assert (run.device, run.qps, run.printed_unit) == ("ionic_4", 8, "Gb/sec")
    (row,) = run.bandwidth
    assert (row.size_bytes, row.bw_peak_gbps, row.bw_avg_gbps) == (1048576, 0.0, 397.44)
    # 'Link type' and 'GID index' were behind the banner's ' ...': unknown, and said to be.
    assert (run.link_type, run.gid_index) == (None, None)
    elided, role = run.warnings
    assert "leaves lines out" in elided.message and "2 '...' elision lines" in elided.message
    # A server's log whose 'Waiting for client to connect' is behind the '...': no line left says which side it
    # is (the pod's own '--- starting ib_write_bw server ---' is not perftest's), so it is unknown, and said to be.
    assert run.side is None and role.message.startswith("client or server: unknown")


@pytest.mark.parametrize(("name", "side"), [
    ("read_lat-server-waiting-mlx4.txt", "server"),  # '* Waiting for client to connect... *'
    ("write_bw-rtx4080-gdr-mib-sec-server.txt", "server"),
    # '--source_ip 192.168.2.1' is an option's value, not a server to connect to: its 'Waiting...' line decides.
    ("write_bw-D60-q16-gdr-source-ip-server.txt", "server"),
    ("send_bw-bidir-D5-peak-zero-client.txt", "client"),  # 'Client: ib_send_bw -D5 -F -s 4096 -b 1.1.1.42'
    ("read_bw-a-no-rules-iterations-without-hash-excerpt.txt", "client"),  # '[root@cn3 ~]#ib_read_bw  cn2  -a ...'
    ("write_bw-roce-postlist-gbits-client.txt", "client"),  # no command; 'TX depth' of a one-way test
    ("write_bw-couldnt-connect-client.txt", "client"),  # "Couldn't connect to 192.168.125.211:18515"
    ("write_bw-bidir-a-sweep-gbits-indented.txt", None),  # a two-way banner has TX depth on both sides
    ("write_bw-efa-srd-gpu0-far-nic-table.txt", None),  # the table alone
])
def test_perftest_side_comes_from_the_lines_that_tell_it(name: str, side: str | None) -> None:
    run = parse_perftest(read_fixture("perftest", name))
    assert run.side == side
    assert any(w.message.startswith("client or server: unknown") for w in run.warnings) == (side is None)


def test_an_elided_ibstat_line_warns_whatever_prompt_surrounds_the_paste() -> None:
    text = read_fixture("ibstat", "gpud-partial-elided-ibpanic-mlx5_8.txt")
    bare, prompted = parse_ibstat(text), parse_ibstat("$ ibstat\n" + text)
    assert [w.message for w in bare.warnings] == [w.message for w in prompted.warnings]
    assert bare.warnings[0].message.startswith("the paste leaves lines out (1 '...' elision line)")


def test_b300_host_topology_without_nic_columns_and_interleaved_cpu_lists() -> None:
    matrix = parse_topo(read_fixture("topo", "b300-7gpu-610.57.04-nv18-no-nic-columns-interleaved-cpus-prompt.txt"))
    assert [d.label for d in matrix.devices] == [f"GPU{i}" for i in range(7)] and matrix.warnings == ()
    assert [(d.cpu_affinity, d.numa_affinity) for d in matrix.gpus] == [("0,2,4,6,8,10", "0")] * 3 + [
        ("1,3,5,7,9,11", "1")] * 4
    pairs = [link for link in matrix.links if link.a != link.b]
    assert len(pairs) == 42 and {(link.kind, link.nvlinks) for link in pairs} == {("NV", 18)}


def test_blackwell_gpu_rows_with_nic_columns_read_and_missing_nic_rows_named() -> None:
    b200 = parse_topo(read_fixture("topo", "b200-8nic-2per-pix-tabs-indented-header-gpu-rows-excerpt.txt"))
    assert [getattr(b200.link(a, b), "kind", None) for a, b in (("GPU0", "NIC1"), ("NIC0", "NIC1"))] == ["PIX"] * 2
    assert [d.numa_affinity for d in b200.gpus] == ["0"] * 4 + ["1"] * 4
    assert any("NIC1..NIC7" in w.message for w in b200.warnings)
    wide = parse_topo(read_fixture("topo", "8gpu-nv18-18nic-pxb-pairs-tabs-gpu-rows-excerpt.txt"))
    assert [n for n in (f"NIC{i}" for i in range(18)) if getattr(wide.link("GPU7", n), "kind", None) == "PXB"] == [
        "NIC16", "NIC17"]
    assert any("NIC0..NIC17" in w.message for w in wide.warnings)


def test_b300_ibstat_disabled_connectx8_ports_have_no_rate_to_judge() -> None:
    devices = parse_rdma(read_fixture("ibstat", "b300-xe9780-7-cx8-disabled-4-cx7-ib-100-prompt.txt"))
    assert devices.warnings == () and len(devices) == 11
    by_card = {(d.ca_type, d.fw_version, link_rate(d.ports[0])) for d in devices}
    # 'Rate: 10' of a disabled port is no speed: the ConnectX-8s are down, not slow.
    assert by_card == {("MT4131", "40.46.5500", None), ("MT4129", "28.47.2526", 100.0)}


def test_b300_nvlink_status_reads_eighteen_links_a_gpu() -> None:
    statuses = parse_nvlink(read_fixture("nvlink", "b300-7gpu-610.57.04-18-links-53.125-prompt.txt"))
    assert statuses.warnings == () and [s.gpu_index for s in statuses] == list(range(7))
    assert {(lane.speed_gbps, lane.active) for s in statuses for lane in s.lanes} == {(53.125, True)}
    assert {len(s.lanes) for s in statuses} == {18} and statuses[6].gpu_name == "NVIDIA B300 SXM6 AC"


def test_driver_610_header_versions_are_read_without_the_deprecation_note() -> None:
    query = parse_nvidia_smi_q(
        read_fixture("nvidia-smi-q", "app-610.57.04-q-d-temperature-2gpu-kmd-version-deprecated.txt"))
    # Not '610.57.04 [Deprecated; will be removed in CUDA 14.0. Use KMD Version instead]'.
    assert (query.driver_version, query.cuda_version, query.attached_gpus) == ("610.57.04", "13.3", 2)
    assert [(g.temperature_c, g.slowdown_temp_c, g.shutdown_temp_c) for g in query.gpus] == [
        (79.0, 100.0, 103.0), (29.0, None, None)]
    assert query.warnings == ()
    # Hand-made from it: 610's "GPU Current T.Limit Temp" (was "GPU T.Limit Temp") with a value, not N/A.
    recorded = read_fixture("nvidia-smi-q", "app-610.57.04-q-d-temperature-2gpu-kmd-version-deprecated.txt")
    margin = parse_nvidia_smi_q(re.sub(r"(Current T\.Limit Temp\s+: )N/A", r"\g<1>21 C", recorded))
    assert [g.t_limit_margin_c for g in margin.gpus] == [21.0, None]
    # Without the KMD lines (an excerpt of 616.92): the version the deprecated line starts with.
    excerpt = parse_nvidia_smi_q(
        read_fixture("nvidia-smi-q", "wsl-616.92-rtx5070ti-laptop-q-excerpt-deprecated-versions-only.txt"))
    assert (excerpt.driver_version, excerpt.cuda_version) == ("616.92", "13.4")
    assert [g.name for g in excerpt.gpus] == ["NVIDIA GeForce RTX 5070 Ti Laptop GPU"]


def test_driver_610_banner_gives_the_stack_its_driver_and_cuda() -> None:
    stack = parse_stack(read_fixture("stack", "b300-610.57.04-nvidia-smi-section-kmd-umd-banner.txt"))
    assert (stack.driver, stack.cuda) == ("610.57.04", "13.3")
    assert "driver" not in stack.missing and "cuda" not in stack.missing


def test_port_lines_a_grep_kept_without_their_port_header_are_named_not_dropped() -> None:
    devices = parse_rdma(read_fixture("ibv_devinfo", "bf3-grep-filtered-port-lines-without-port-header.txt"))
    assert [(d.hca, d.board_id, d.fw_version, d.ports) for d in devices] == [
        ("mlx5_0", "MT_0000000965", "32.47.1088", ()), ("mlx5_1", "MT_0000000965", "32.47.1088", ())]
    # No port is read (it has no number), and the result says so at each port's 'state' line.
    assert [(w.line, "outside a port" in w.message) for w in devices.warnings] == [(10, True), (23, True)]


def test_bluefield3_ibstat_down_but_linkup_and_a_separator_line_named() -> None:
    devices = parse_ibstat(read_fixture("ibstat", "bf3-mt41692-100-down-linkup-dash-separator.txt"))
    assert [(d.ca_type, d.ports[0].state, d.ports[0].phys_state, d.ports[0].rate_gbps) for d in devices] == [
        ("MT41692", "PORT_DOWN", "LinkUp", 100.0)] * 2
    assert [link_rate(d.ports[0]) for d in devices] == [None, None]  # down: no speed to judge
    (separator,) = devices.warnings
    assert separator.line == 18 and "---- mlx5_1 ----" in separator.message


def test_a_gpu_nvidia_smi_cannot_open_is_left_out_of_the_csv_and_the_others_read() -> None:
    # Its "Unable to determine the device handle ... GPU is lost" line stands among the rows.
    gpus = parse_gpus(read_fixture("nvidia-smi", "DERIVED-rtx3080-lost-rtx5070ti-616.92-windows.csv"))
    assert [(g.index, g.name, g.power_limit_w, g.driver_version) for g in gpus] == [
        (1, "NVIDIA GeForce RTX 5070 Ti", 300.0, "616.92")]


def test_a_gpu_nvidia_smi_q_cannot_open_is_named_not_dropped() -> None:
    query = parse_nvidia_smi_q(read_fixture("nvidia-smi-q", "DERIVED-app-610.57.04-q-d-temperature-gpu1-lost.txt"))
    assert [g.bus_id for g in query.gpus] == ["00000000:01:00.0"]
    assert query.lost_gpus == ("0000:02:00.0: Unknown Error",)
    assert query.warnings == ()  # the line is read: it names the lost GPU
