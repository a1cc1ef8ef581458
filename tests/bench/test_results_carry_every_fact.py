"""Every fact bench's parsers read reaches results.json (``bench ib``'s link records, ``bench nccl``'s runs),
in the shape ``bench report`` gives the same output: checked on recorded real outputs (tests/fixtures)."""

from __future__ import annotations

from fixture_files import read_fixture

from clusterctl.bench.model import LinkResult
from clusterctl.bench.nccl_tests import NcclHostRun, NcclRun
from clusterctl.bench.payload import link_record, nccl_payload
from clusterctl.bench.perftest_rounds import measure
from clusterctl.facts.nccltests import parse_nccl_tests
from clusterctl.facts.nvlink import parse_nvlink


def link(test: str) -> LinkResult:
    return LinkResult(1, "gpu-a1", "gpu-a2", "mlx5_0", "mlx5_0", 18515, test)


def test_a_bandwidth_link_keeps_the_client_s_sweep_and_banner() -> None:
    record = link_record(measure(link("ib_write_bw"), read_fixture("perftest", "write_bw-hdr200-ib-a-sweep-client.txt"),
                                 "", 0))
    client = record["client_result"]
    assert record["gbps"] == 196.8 and record["link_type"] == "IB" and record["server_result"] is None
    assert (client["side"], client["device"], client["printed_unit"]) == ("client", "mlx5_0", "Gb/sec")
    assert len(client["bandwidth"]) == 23 and client["bandwidth"][0]["size_bytes"] == 2
    assert ["Mtu", "4096[B]"] in client["banner_settings"]


def test_a_latency_link_keeps_both_sides() -> None:
    client, server = (read_fixture("perftest", f"read_lat-{side}-mlx4.txt") for side in ("client-cpufreq-warning",
                                                                                          "server-waiting"))
    record = link_record(measure(link("ib_read_lat"), client, server, 0))
    assert record["latency_us"] == 1.79 and record["client_result"]["latency"][0]["t_typical_us"] == 1.79
    assert (record["server_result"]["side"], record["server_result"]["device"]) == ("server", "mlx4_0")


def test_a_failed_link_keeps_every_line_that_said_why() -> None:
    record = link_record(measure(link("ib_write_bw"), read_fixture("perftest", "write_bw-couldnt-connect-client.txt"),
                                 "", 1))
    assert record["error"] == "exit 1: Couldn't connect to 192.168.125.211:18515"
    assert record["client_result"]["errors"][1].startswith("Unable to open file descriptor")


def test_an_nccl_run_keeps_its_versions_network_partial_rows_and_the_host_s_nvlinks() -> None:
    text = read_fixture("nccl-tests", "gather-a100-2node-1nic-nccl-info-topology-excerpt.txt")
    cut = read_fixture("nccl-tests", "DERIVED-all_reduce-a100-row-cut-by-cuda-error.txt")
    nvlinks = parse_nvlink(read_fixture("nvlink", "v100-gpu3-two-inactive.txt"))
    run = NcclRun("gather", (NcclHostRun("n013", "gather_perf", text, parse_nccl_tests(text)),
                             NcclHostRun("thanos", "all_reduce_perf", cut, parse_nccl_tests(cut), host_gpus=8,
                                         nvlinks=tuple(nvlinks))))
    multi, single = nccl_payload(run)["runs"]
    assert (multi["nccl_version"], multi["hosts"], multi["network"]["nics_used"]) == ("2.16.5+cuda11.8",
                                                                                       ["n013", "n014"], ["mlx5_2"])
    assert multi["rows"][-1]["out_of_place_algbw_gbs"] is not None and "time_us" in str(multi["rows"][-1])
    assert single["parse_warnings"] == [{"line": 44, "message": "the row for 1073741824 bytes was cut by an "
                                                                "error printed into it; not read"}]
    (gpu3,) = single["nvlinks"]  # the recording's GPU 3, two of its six links inactive
    assert single["host_gpus"] == 8 and gpu3["gpu_index"] == 3
    assert [lane["active"] for lane in gpu3["lanes"]].count(False) == 2


def test_a_server_output_the_parser_cannot_read_is_named_not_dropped() -> None:
    """The figure is then the client's alone, and the record says why the server's side is missing."""
    client = read_fixture("perftest", "write_bw-hdr200-ib-a-sweep-client.txt")
    record = link_record(measure(link("ib_write_bw"), client, "Segmentation fault\n", 0))
    assert record["gbps"] == 196.8 and record["server_result"] is None
    assert record["server_parse_error"] == ("cannot parse perftest output at line 1: no perftest banner, result "
                                            "table or known error message: 'Segmentation fault'")
    readable = link_record(measure(link("ib_write_bw"), client, "", 0))
    assert readable["server_parse_error"] is None
