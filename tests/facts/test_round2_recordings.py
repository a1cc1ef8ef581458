"""Round 2 of reading real output (issue 13): ibstat, newer perftest and nccl-tests, real `ip` recordings,
and the shared pre-cleaning of pastes. Every fixture's source is in the README beside it."""

from __future__ import annotations

from pathlib import Path

import pytest

from clusterctl.errors import ParseError
from clusterctl.facts.clean import clean_lines, is_prompt
from clusterctl.facts.model import RDMADevices
from clusterctl.facts.nccltests import parse_nccl_tests
from clusterctl.facts.netdev import parse_ip_addr
from clusterctl.facts.perftest import MIB_PER_S_TO_GBPS, parse_perftest
from clusterctl.facts.rdma import RDMA, parse_ibstat, parse_rdma
from clusterctl.inventory.model import Host
from clusterctl.survey.collect import collect_host_facts
from clusterctl.transport.base import CommandResult, Transport

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"


def read(folder: str, name: str) -> str:
    return (FIXTURES / folder / name).read_text()


# --- shared pre-cleaning ----------------------------------------------------------------------


@pytest.mark.parametrize("line", [
    "user@host:~$ ibv_devinfo", "vyl@csegpu1:~$ ", "[root@gpu01 ~]# ibstat", "$ kubectl exec -it p -- ibv_devinfo",
    "(venv) me@box:/tmp$ nvidia-smi topo -m", "root@node2:~/DeepEP# nvidia-smi topo -m", "host$ manager ip -o a",
])
def test_prompt_lines_are_recognised(line: str) -> None:
    assert is_prompt(line)


@pytest.mark.parametrize("line", [
    "# nThread 1 nGpus 8 minBytes 8", " #bytes #iterations    t_min[usec]   99% percentile[usec]",
    "GPU0\t X \tNV18", "hca_id:\tmlx5_0", "mlx5_0 port 1 ==> ib0 (Up)", "   Rate: 200",
    "node-0:120:180 [0] NCCL INFO NET/IB : Using [0]ibp0:1/IB",
])
def test_data_lines_are_not_taken_for_prompts(line: str) -> None:
    assert not is_prompt(line)


def test_cleaning_keeps_the_original_line_numbers() -> None:
    text = "```\n│ $ ibstat            │\n│ CA 'mlx5_0'         │\n\n│     Port 1:         │\n```\n"
    assert [(line.number, line.text) for line in clean_lines(text)] == [(3, "CA 'mlx5_0'"), (5, "    Port 1:")]


# --- ibstat -----------------------------------------------------------------------------------


def test_ibstat_socket_direct_names_states_and_rates() -> None:
    devices = parse_ibstat(read("ibstat", "socket-direct-cx6-ibp2s0f0.txt"))
    assert devices.source == "ibstat" and not devices.warnings
    assert [d.hca for d in devices] == ["ibp2s0f0", "ibp3s0f0", "ibp2s0f1", "ibp3s0f1"]
    first, aux = devices[0].ports[0], devices[1].ports[0]
    assert (first.state, first.phys_state, first.rate_gbps, first.link_layer) == (
        "PORT_ACTIVE", "LinkUp", 100.0, "InfiniBand")
    # The socket-direct aux card of the mail: link up, port not active (no SM-assigned LID).
    assert (aux.state, aux.phys_state) == ("PORT_DOWN", "LinkUp")
    assert devices[0].fw_version == "20.27.2008" and devices[0].ca_type == "MT4123"
    assert devices[0].node_guid == "0c42:a103:0060:9810"  # the form ibv_devinfo prints


@pytest.mark.parametrize("name", ["DERIVED-socket-direct-tmux-pane.txt", "socket-direct-cx6-quoted-reply.txt"])
def test_ibstat_in_a_tmux_pane_or_a_quoted_reply_reads_like_the_recording(name: str) -> None:
    assert parse_ibstat(read("ibstat", name)) == parse_ibstat(read("ibstat", "socket-direct-cx6-ibp2s0f0.txt"))


def test_ibstat_markdown_list_with_prompt_and_a_broadcom_roce_nic() -> None:
    devices = parse_rdma(read("ibstat", "cx7-ib-plus-broadcom-roce-markdown-list.txt"))
    assert [(d.hca, d.ports[0].link_layer, d.ports[0].rate_gbps, d.ports[0].state) for d in devices] == [
        ("ibp23s0", "InfiniBand", 200.0, "PORT_ACTIVE"),
        ("roceo1", "Ethernet", 2.5, "PORT_ACTIVE"),
        ("roceo2", "Ethernet", 2.5, "PORT_DOWN"),
    ]
    assert devices[1].ca_type == "Broadcom NetXtreme-C/E RoCE Driver HCA" and not devices.warnings


def test_ibstat_b300_host_with_prompt() -> None:
    devices = parse_rdma(read("ibstat", "b300-11-hca-dell-prompt.txt"))
    assert len(devices) == 11 and devices.source == "ibstat"
    active = [d.hca for d in devices if d.ports[0].state == "PORT_ACTIVE"]
    assert active == ["mlx5_2", "mlx5_3", "mlx5_4", "mlx5_5"]
    assert {d.ports[0].rate_gbps for d in devices if d.hca in active} == {100.0}


def test_parse_rdma_tells_ibstat_from_ibv_devinfo() -> None:
    ibv = read("ibv_devinfo", "roce-bond-cx6dx-vv.txt")
    devices = parse_rdma(ibv)
    assert devices.source == "ibv_devinfo" and [d.hca for d in devices] == ["mlx5_bond_0"]


def test_ibstat_panic_line_is_a_warning_and_the_devices_before_it_stand() -> None:
    text = read("ibstat", "socket-direct-cx6-ibp2s0f0.txt") + (
        "ibpanic: [1323906] main: stat of IB device 'mlx5_8' failed: No such file or directory\n")
    devices = parse_ibstat(text)
    assert len(devices) == 4 and devices.warnings and "ibpanic" in devices.warnings[0].message
    with pytest.raises(ParseError):
        parse_ibstat("ibstat: command not found\n")


class _NoVerbs(Transport):
    """A host without ibverbs-utils: ibv_devinfo is not found, ibstat answers."""

    def __init__(self) -> None:
        super().__init__(Host(name="h"))
        self.asked: list[str] = []

    def run(self, command, *, sudo=False, timeout=None, env=None, stdin=None):  # type: ignore[no-untyped-def]
        self.asked.append(command)
        if command == "ibstat":
            return CommandResult(command, read("ibstat", "b300-11-hca-dell-prompt.txt"), "", 0, 0.0)
        return CommandResult(command, "", f"sh: 1: {command.split()[0]}: not found\n", 127, 0.0)


def test_survey_falls_back_to_ibstat_where_ibv_devinfo_is_missing() -> None:
    transport = _NoVerbs()
    facts = collect_host_facts(transport, (RDMA,))
    assert transport.asked == ["ibv_devinfo -v", "ibstat"]
    devices = facts.rdma
    assert isinstance(devices, RDMADevices) and devices.source == "ibstat" and len(devices) == 11
    assert facts.missing == ()


# --- ip -o -4 addr ----------------------------------------------------------------------------


@pytest.mark.parametrize(("name", "expected"), [
    ("container-ib0-pipework-root-prompt.txt", {"lo": ("127.0.0.1",), "ib0": ("10.0.0.207",)}),
    ("team0-dynamic-core-prompt.txt", {"lo": ("127.0.0.1",), "team0": ("192.168.122.94",)}),
    ("swarm-manager-indented-f-inet.txt", {"lo": ("127.0.0.1",), "docker0": ("172.17.0.1",),
                                           "docker_gwbridge": ("172.19.0.1",), "eth0": ("172.18.0.2",)}),
    # `ip -o a` pastes carry inet6 lines too: another family, skipped without a warning.
    ("vrouter-ip-o-a-both-families.txt", {"lo": ("127.0.0.1",), "docker0": ("172.17.0.1",),
                                          "vhost0": ("172.31.12.55",)}),
])
def test_real_ip_recordings(name: str, expected: dict[str, tuple[str, ...]]) -> None:
    found = parse_ip_addr(read("ip", name))
    assert dict(found) == expected and found.warnings == ()


# --- perftest ---------------------------------------------------------------------------------


def test_newer_perftest_mib_sec_on_a_healthy_400g_link_is_read_not_failed() -> None:
    result = parse_perftest(read("perftest", "send_bw-ndr400-mib-sec-lockfree-prompt.txt"))
    assert result.ok and result.printed_unit == "MiB/sec" and result.link_type == "IB"
    assert result.peak_gbps == pytest.approx(46557.03 * MIB_PER_S_TO_GBPS, abs=1e-3)  # 390.5 Gb/s
    assert result.test == "ib_send_bw" and result.device == "mlx5_0"


def test_newer_perftest_server_side_with_cuda_chatter() -> None:
    result = parse_perftest(read("perftest", "write_bw-rtx4080-gdr-mib-sec-server.txt"))
    assert (result.side, result.printed_unit, result.ok) == ("server", "MiB/sec", True)
    assert result.peak_gbps == pytest.approx(14948.67 * MIB_PER_S_TO_GBPS, abs=1e-3)


def test_latency_with_percentiles_from_a_cpu_frequency_noisy_run() -> None:
    result = parse_perftest(read("perftest", "send_lat-ndr400-percentiles.txt"))
    (row,) = result.latency
    assert (row.t_typical_us, row.t_avg_us, row.p99_us, row.p99_9_us) == (1.27, 1.27, 1.37, 5.19)


def test_hdr_unidirectional_sweep_plateaus_below_line_rate() -> None:
    result = parse_perftest(read("perftest", "write_bw-hdr200-ib-a-sweep-client.txt"))
    assert not result.bidirectional and result.link_type == "IB" and len(result.bandwidth) == 23
    assert result.peak_gbps == 196.8


# --- nccl-tests -------------------------------------------------------------------------------


def test_wrong_count_in_g_notation_is_data_corruption() -> None:
    result = parse_nccl_tests(read("nccl-tests", "DERIVED-all_reduce-a100-wrong-1.04858e+06.txt"))
    row = next(r for r in result.rows if r.size_bytes == 268435456)
    assert row.out_of_place.wrong == 1048580 and row.in_place.wrong == 1048580
    assert "data corruption" in (result.failure() or "")


def test_suffixed_binary_with_tag_output_names_the_test() -> None:
    result = parse_nccl_tests(read("nccl-tests", "all_gather_perf_mpi-rtx5090-2rank-tag-output.txt"))
    assert result.test == "all_gather_perf_mpi" and result.collective == "all_gather"
    assert len(result.rows) == 8 and result.failure() is None
    assert result.avg_busbw_gbs == 1.55089


def test_row_cut_by_a_cuda_error_is_not_a_measurement() -> None:
    result = parse_nccl_tests(read("nccl-tests", "DERIVED-all_reduce-a100-row-cut-by-cuda-error.txt"))
    assert 1073741824 not in [r.size_bytes for r in result.rows] and len(result.rows) == 27
    assert result.failure() == "Test CUDA failure common.cu:892 'an illegal memory access was encountered'"
    assert [w.line for w in result.warnings] == [44]


def test_failure_right_after_the_header() -> None:
    result = parse_nccl_tests(read("nccl-tests", "all_reduce-rtx5090-2gpu-test-nccl-failure.txt"))
    assert result.rows == () and "Test NCCL failure" in (result.failure() or "")
    assert result.test == "all_reduce_perf"


def test_eight_a100_nvswitch_single_node() -> None:
    result = parse_nccl_tests(read("nccl-tests", "all_reduce-a100-8gpu-nvswitch-single-node.txt"))
    assert (result.n_gpus, len(result.ranks), result.largest_busbw_gbs) == (8, 8, 232.44)
    assert result.failure() is None
