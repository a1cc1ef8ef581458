"""Field7 round of real outputs: topology matrices whose NICs are bonded ConnectX ports (``mlx5_bond_N``), one with
a single GPU left visible to a container, and perftest refusing its own options."""

from __future__ import annotations

from fixture_files import read_fixture

from clusterctl.bench.logs import report_text
from clusterctl.facts.dcgmi import parse_dcgmi_diag
from clusterctl.facts.nccltests import parse_nccl_tests
from clusterctl.facts.perftest import parse_perftest
from clusterctl.facts.topo import parse_topo
from clusterctl.survey.topology import Shape, build_topology


def test_one_visible_gpu_under_a_tool_label_is_placed_on_its_bond_nic() -> None:
    matrix = parse_topo(read_fixture("topo", "a100-1gpu-5-bond-nics-lmdeploy-check-env-label.txt"))
    topology = build_topology(matrix)
    assert matrix.warnings == () and topology.shape is Shape.SINGLE_GPU
    (gpu,) = topology.gpus
    assert (gpu.numa_node, gpu.cpu_affinity, gpu.nearest_nics, gpu.nic_link) == (
        "1", "32-63,96-127", ("mlx5_bond_3",), "PXB")
    assert [(nic.name, nic.gpu_link, nic.nearest_gpus) for nic in topology.nics] == [
        ("mlx5_bond_0", "SYS", ()), ("mlx5_bond_1", "SYS", ()), ("mlx5_bond_2", "SYS", ()),
        ("mlx5_bond_3", "PXB", (0,)), ("mlx5_bond_4", "NODE", (0,))]


def test_b300_with_a_cx8_bond_behind_each_gpu() -> None:
    matrix = parse_topo(read_fixture("topo", "b300-8gpu-cx8-8-bond-nics-pxb-root-prompt.txt"))
    topology = build_topology(matrix)
    assert matrix.warnings == () and topology.shape is Shape.NVSWITCH
    assert [(g.index, g.numa_node, g.nearest_nics, g.nic_link) for g in topology.gpus] == [
        (index, str(index // 4), (f"mlx5_bond_{index}",), "PXB") for index in range(8)]
    assert matrix.link("NIC7", "GPU3").kind == "SYS"


def test_perftest_refusing_its_options_says_why() -> None:
    """perftest prints its reason, then ' Parser function exited with Error', and runs nothing: the reason is the
    failure, not 'cannot parse'."""
    text = read_fixture("perftest", "write_bw-cuda-dmabuf-before-use-cuda-parser-error.txt")
    result = parse_perftest(text)
    assert not result.ok
    assert result.errors == ("CUDA DMA-BUF cannot be used without CUDA", "Parser function exited with Error")
    (finding,) = report_text("dmabuf.log", text).findings
    assert finding.message.endswith("failed: CUDA DMA-BUF cannot be used without CUDA")


def test_a_pod_under_a_64k_memlock_limit_fails_both_ends_of_the_link() -> None:
    """The client cannot register its buffers; the server, which printed its banner, then never hears from it."""
    client_text = read_fixture("perftest", "read_bw-q30-memlock-64k-couldnt-allocate-mr-client.txt")
    client = parse_perftest(client_text)
    assert (client.side, client.ok, client.errors[0]) == ("client", False, "Couldn't allocate MR")
    assert "Couldn't create IB resources" in client.errors
    # No banner was printed: the command line names the test.
    (failed,) = report_text("client.log", client_text).findings
    assert failed.message == "ib_read_bw failed: Couldn't allocate MR"
    text = read_fixture("perftest", "read_bw-q30-memlock-64k-read-keys-failed-server.txt")
    server = parse_perftest(text)
    assert (server.side, server.test, server.device, server.qps, server.link_type) == (
        "server", "ib_read_bw", "mlx5_0", 30, "IB")
    assert server.errors[-1] == "Failed to exchange data between server and clients" and not server.ok
    (finding,) = report_text("server.log", text).findings
    assert finding.message == "ib_read_bw failed: ethernet_read_keys: Couldn't read remote address"


def test_datatype_all_run_repeats_each_size_per_type_and_its_saturated_figure_is_the_best_of_them() -> None:
    """``--datatype all`` prints the three sizes once per type, int8 first: the link's saturated figure is what the
    best type at the largest size carried (float, 487.06 GB/s), not the first row printed (int8, 390.12)."""
    text = read_fixture("nccl-tests", "all_reduce-2.18.3-h200-2node-datatype-all-sizes-repeat-per-type.txt")
    run = parse_nccl_tests(text)
    assert (run.nccl_tests_version, run.nccl_version, len(run.ranks), run.avg_busbw_gbs, run.out_of_bounds) == (
        "2.18.3", "2.30.4+cuda13.2", 16, 433.477, 0)
    assert len(run.rows) == 36 and {row.type for row in run.rows} >= {"int8", "float", "bfloat16", "f8e5m2"}
    assert run.warnings == () and run.failure() is None
    assert report_text("h200.log", text).record["largest_busbw_gbs"] == 487.06


def test_dcgm4_json_of_a_gb10_names_its_failed_test_and_the_device_ids_of_its_entity_list() -> None:
    """DCGM 4 JSON has no 'GPU Device IDs Detected': the ids are the GPU entities' ``device_id``."""
    diag = parse_dcgmi_diag(read_fixture("dcgmi", "gb10-4.2.3-580.82.09-r1-json-software-fail-persistence-tabs.json"))
    (result,) = diag.results
    assert (result.category, result.test, result.status, result.gpu) == ("Deployment", "software", "Fail", 0)
    assert result.info.startswith("Persistence Mode: Persistence mode for GPU 0 is disabled.")
    assert (diag.dcgm_version, diag.driver_version, diag.warnings) == ("4.2.3", "580.82.09", ())
    assert diag.gpu_device_ids == ("2e12",)


def test_a_server_interrupted_while_waiting_for_its_client_is_read_as_a_server_without_figures() -> None:
    """No client came, so no banner was printed: the log is a server's that measured nothing, not unreadable."""
    text = read_fixture("perftest", "write_bw-use-cuda-inline-zero-server-interrupted.txt")
    server = parse_perftest(text)
    assert (server.side, server.test, server.kind, server.ok, server.errors) == (
        "server", "ib_write_bw", None, False, ())
    report = report_text("server.log", text)
    assert (report.error, report.findings, report.record["side"], report.record["test"]) == (
        None, (), "server", "ib_write_bw")
