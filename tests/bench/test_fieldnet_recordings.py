"""perftest and nccl-tests outputs from public issues the readers had not seen (the "fieldnet" round): the
--cpu_util column, a table pasted without its rules and the '#' of '#iterations', connection failures of
rdma_cm and GRH-required ports, EFA SRD, GB200 NVL72, and nccl-tests built without MPI=1 under mpirun.
Sources in tests/fixtures/perftest/README.md and tests/fixtures/nccl-tests/README.md."""

from __future__ import annotations

import pytest
from fixture_files import read_fixture

from clusterctl.bench.payload import nccl_record, perftest_record
from clusterctl.facts.nccltests import parse_nccl_tests
from clusterctl.facts.perftest import MIB_PER_S_TO_GBPS, parse_perftest


def test_cpu_util_column_keeps_the_row_and_reaches_the_json() -> None:
    result = parse_perftest(read_fixture("perftest", "write_bw-D-cpu-util-column-peak-zero-table.txt"))
    # The table alone: which side printed it is unknown, and said to be; nothing else is missing.
    assert [w.message.split(",")[0] for w in result.warnings] == ["client or server: unknown"]
    (row,) = result.bandwidth
    assert (row.size_bytes, row.bw_avg_gbps, row.msg_rate_mpps, row.cpu_util_pct) == (65536, 195.69, 0.373258, 4.17)
    assert result.peak_gbps == 195.69 and result.ok
    assert perftest_record(result)["parsed"]["bandwidth"][0]["cpu_util_pct"] == 4.17


def test_a_row_of_six_columns_under_a_header_without_cpu_util_is_named() -> None:
    text = (" #bytes     #iterations    BW peak[Gb/sec]    BW average[Gb/sec]   MsgRate[Mpps]\n"
            " 65536      186641           0.00               195.69 \t\t   0.373258\t    4.17\n")
    result = parse_perftest(text)
    assert result.bandwidth == ()
    (warning,) = [w for w in result.warnings if w.line is not None]
    assert warning.line == 2 and "6" in warning.message


def test_sweep_pasted_without_rules_and_without_the_hash_of_iterations_is_read() -> None:
    result = parse_perftest(read_fixture("perftest", "read_bw-a-no-rules-iterations-without-hash-excerpt.txt"))
    assert (result.test, result.device, result.link_type, result.printed_unit) == ("ib_read_bw", "mlx5_1", "IB",
                                                                                   "MB/sec")
    assert [r.size_bytes for r in result.bandwidth] == [2, 4, 8, 16, 32, 64, 128]
    assert result.peak_gbps == pytest.approx(310.05 * MIB_PER_S_TO_GBPS, abs=1e-3)
    assert result.ok and result.warnings == ()


@pytest.mark.parametrize(("name", "first_error", "count"), [
    ("write_bw-R-rts-failed-client-x722.txt", "Failed to modify QP to RTS", 2),
    ("write_bw-R-read-keys-failed-server-x722.txt", "ethernet_read_keys: Couldn't read remote address", 3),
    ("write_bw-grh-required-rtr-failed-two-qps.txt", "Failed to modify QP 122273 to RTR", 4),
])
def test_connection_failures_are_errors_not_a_slow_link(name: str, first_error: str, count: int) -> None:
    result = parse_perftest(read_fixture("perftest", name))
    assert not result.ok and result.bandwidth == () and result.peak_gbps is None
    assert result.errors[0] == first_error and len(result.errors) == count
    assert perftest_record(result)["errors"] == list(result.errors)


def test_efa_srd_table_alone_gives_average_not_peak() -> None:
    result = parse_perftest(read_fixture("perftest", "write_bw-efa-srd-gpu0-far-nic-table.txt"))
    (row,) = result.bandwidth
    assert (row.size_bytes, row.bw_peak_gbps, row.bw_avg_gbps) == (8192, 170.04, 132.18)
    assert result.peak_gbps == 132.18 and result.printed_unit == "Gb/sec"


@pytest.mark.parametrize(("name", "hosts", "line"), [
    ("all_reduce-non-mpi-build-2node-rank0-twice-excerpt.txt", ("testgpu1", "testgpu2"), 10),
    ("all_reduce-non-mpi-build-no-hash-rank0-twice-excerpt.txt", ("nlp-gpu-05", "nlp-gpu-07"), 7),
])
def test_rank_zero_on_two_hosts_keeps_both_and_names_the_line(name: str, hosts: tuple[str, ...], line: int) -> None:
    result = parse_nccl_tests(read_fixture("nccl-tests", name))
    assert sorted(result.hosts) == list(hosts)  # the second host was dropped before
    assert [rank for rank, *_ in result.ranks].count(0) == 2
    (warning,) = result.warnings
    assert warning.line == line and "rank 0" in warning.message and "MPI=1" in warning.message
    record = nccl_record(result)
    assert sorted(record["hosts"]) == list(hosts) and record["parse_warnings"][0]["line"] == line


def test_one_process_listing_its_ranks_twice_is_not_a_second_process() -> None:
    text = ("#  Rank  0 Group  0 Pid   3255 on   testgpu2 device  0 [0x03] NVIDIA A100-PCIE-40GB\n"
            "#  Rank  0 Group  0 Pid   3255 on   testgpu2 device  0 [0x03] NVIDIA A100-PCIE-40GB\n")
    result = parse_nccl_tests(text)
    assert result.ranks == ((0, "testgpu2", 0, "NVIDIA A100-PCIE-40GB"),) and result.warnings == ()


def test_gb200_nvl72_tail_reads_busbw_and_the_rank_line() -> None:
    result = parse_nccl_tests(read_fixture("nccl-tests", "all_reduce-gb200-nvl72-graphics-device-tail-excerpt.txt"))
    assert result.ranks == ((71, "slurm-gb200-207-171", 3, "NVIDIA Graphics Device"),)
    assert [r.size_bytes for r in result.rows][-1] == 8589934592
    assert result.largest_busbw_gbs == 834.57 and result.peak_busbw_gbs == 846.82
    assert result.avg_busbw_gbs == 745.53 and result.out_of_bounds == 0 and result.failure() is None


def test_old_broadcast_with_validation_off_has_no_redop_and_no_error_figure() -> None:
    result = parse_nccl_tests(read_fixture("nccl-tests", "broadcast-c0-old-no-redop-error-na-nccl-warn-excerpt.txt"))
    (row,) = result.rows
    assert (row.size_bytes, row.type, row.redop, row.root) == (8, "float", None, 0)
    assert (row.out_of_place.time_us, row.out_of_place.error, row.out_of_place.wrong) == (45.82, None, None)
    assert (row.in_place.time_us, row.in_place.error) == (38.17, None)  # 'N/A': -c 0 checked nothing
    assert result.nccl_version == "2.9.6+cuda11.2" and result.hosts == ("v100-gpu-1", "v100-gpu-5")
    # Both ranks' NCCL WARN lines are kept verbatim; the excerpt ends before the run did, so the first is why.
    assert [e.split(" NCCL WARN ")[1] for e in result.nccl_warnings] == ["Failed to open libibverbs.so[.1]"] * 2
    assert result.errors == () and result.failure() == result.nccl_warnings[0]


def test_all_gather_bfloat16_with_a_linear_step() -> None:
    result = parse_nccl_tests(read_fixture("nccl-tests", "all_gather-bfloat16-i-step-none-redop-excerpt.txt"))
    assert result.test == "all_gather_perf" and result.collective == "all_gather"
    sizes = [r.size_bytes for r in result.rows]
    assert sizes == [16777216 * k for k in range(1, 8)]  # -i 16777216: a step, not a factor
    assert {(r.type, r.redop, r.root) for r in result.rows} == {("bfloat16", "none", -1)}
    assert result.peak_busbw_gbs == 144.59 and result.largest_busbw_gbs == 119.64
    # The stored copy stops at the eighth row: a table without its summary is not a finished run.
    assert "the table stops after the 117440512-byte row" in (result.failure() or "")


def test_a_paste_that_starts_inside_the_header_reads_the_table() -> None:
    result = parse_nccl_tests(read_fixture("nccl-tests", "all_reduce-ring-2node-header-cut-in-place-fragment.txt"))
    assert len(result.rows) == 5 and result.warnings == ()
    assert result.avg_busbw_gbs == 95.3009 and result.largest_busbw_gbs == 95.10 and result.out_of_bounds == 0


def test_nccl_tests_2_20_banner_gb10_and_domain_bus_ids() -> None:
    result = parse_nccl_tests(read_fixture("nccl-tests", "all_reduce-2.20.0-gb10-spark-2node-excerpt.txt"))
    assert result.nccl_tests_version == "2.20.0" and result.test == "all_reduce_perf"
    assert result.ranks == ((0, "spark-d708", 0, "NVIDIA GB10"), (1, "spark-dbf4", 0, "NVIDIA GB10"))
    assert (result.min_bytes, result.max_bytes, result.n_gpus) == (8192, 8589934592, 1)
    assert [r.out_of_place.busbw_gbs for r in result.rows] == [0.23, 0.52, 0.83, 0.96]
    assert result.avg_busbw_gbs is None  # the excerpt ends before the run did


def test_atomic_bw_on_a_soft_ib_device_reads_its_one_row() -> None:
    result = parse_perftest(read_fixture("perftest", "atomic_bw-cmp-and-swap-soft-ib-pib-client.txt"))
    assert (result.test, result.device, result.link_type, result.side) == ("ib_atomic_bw", "pib_1", "IB", "client")
    # 'Device not recognized to implement inline feature. Disabling it' is a note, not a failure.
    assert result.errors == () and result.ok and ("Outstand reads", "16") in result.banner_settings
    (row,) = result.bandwidth
    assert (row.size_bytes, row.msg_rate_mpps) == (8, 0.219031)
    assert row.bw_avg_gbps == pytest.approx(1.67 * MIB_PER_S_TO_GBPS, abs=1e-4)


def test_a_finished_16_rank_run_quoted_in_markdown() -> None:
    result = parse_nccl_tests(read_fixture("nccl-tests", "all_reduce-a3mega-16rank-markdown-quoted-command.txt"))
    assert result.test == "all_reduce_perf" and result.hosts == ("ztan-mig-235z", "ztan-mig-gq73")
    assert len(result.ranks) == 16 and len(result.rows) == 31 and result.warnings == ()
    assert (result.avg_busbw_gbs, result.largest_busbw_gbs, result.out_of_bounds) == (70.742, 338.82, 0)
    assert result.failure() is None


def test_nccl_warn_lines_of_a_run_that_finished_are_kept_but_do_not_fail_it() -> None:
    result = parse_nccl_tests(read_fixture("nccl-tests", "DERIVED-all_reduce-a3mega-16rank-nccl-warn-at-init.txt"))
    assert len(result.rows) == 31 and result.avg_busbw_gbs == 70.742 and result.errors == ()
    assert [w.split(":")[0] for w in result.nccl_warnings] == ["ztan-mig-235z", "ztan-mig-gq73"]
    assert result.failure() is None  # NCCL fell back to sockets and the run reached its end
    assert nccl_record(result)["nccl_warnings"] == list(result.nccl_warnings)
