"""nccl-tests parser on recorded real outputs (tests/fixtures/nccl-tests/README.md)."""

from __future__ import annotations

from fixture_files import read_fixture
from hypothesis import given, settings
from hypothesis import strategies as st

from clusterctl.errors import ParseError
from clusterctl.facts.nccltests import parse_nccl_tests


def test_single_process_sweep() -> None:
    result = parse_nccl_tests(read_fixture("nccl-tests", "all_reduce-rtx4090-4gpu-single-process.txt"))
    assert result.test == "all_reduce_perf"
    assert len(result.rows) == 21 and result.rows[0].size_bytes == 1024
    last = result.rows[-1]
    assert (last.size_bytes, last.redop, last.root, last.out_of_place.busbw_gbs, last.in_place.busbw_gbs) == (
        1073741824, "sum", -1, 25.31, 25.31)
    assert result.avg_busbw_gbs == 13.3111 and result.out_of_bounds == 0
    assert result.n_gpus == 4 and result.min_bytes == 1024 and len(result.ranks) == 4
    assert result.failure() is None and result.largest_busbw_gbs == 25.31


def test_two_node_mpirun_names_both_hosts() -> None:
    result = parse_nccl_tests(read_fixture("nccl-tests", "all_reduce-h100-2node-mpirun.txt"))
    assert result.hosts == ("dgx-06", "dgx-07")
    assert result.avg_busbw_gbs == 76.0414
    assert result.peak_busbw_gbs == 330.95
    assert result.rows[-1].out_of_place.time_us == 45789


def test_tagged_mpirun_output_with_nccl_info_lines() -> None:
    result = parse_nccl_tests(read_fixture("nccl-tests", "all_reduce-efa-mpirun-tag-output-nccl-info.txt"))
    assert [r.size_bytes for r in result.rows] == [262144, 524288, 1048576, 2097152, 4194304]
    assert result.avg_busbw_gbs == 1.15327 and result.failure() is None


def test_alltoall_in_place_not_available() -> None:
    result = parse_nccl_tests(read_fixture("nccl-tests", "alltoall-rtx5090-1gpu-in-place-na.txt"))
    (row,) = result.rows
    assert result.test == "alltoall_perf"
    assert row.redop == "none" and row.in_place.wrong is None and row.out_of_place.wrong == 0
    assert result.avg_busbw_gbs == 0


def test_old_error_column_format() -> None:
    result = parse_nccl_tests(read_fixture("nccl-tests", "all_reduce-old-error-column-128gpu-excerpt.txt"))
    assert len(result.rows) == 6
    assert result.rows[0].root is None and result.rows[0].out_of_place.error == 1e-06
    assert result.rows[0].out_of_place.wrong is None
    assert result.avg_busbw_gbs is None


def test_wrong_elements_fail_the_run() -> None:
    result = parse_nccl_tests(read_fixture("nccl-tests", "DERIVED-all_reduce-rtx4090-wrong-3.txt"))
    assert result.wrong_total == 3 and result.out_of_bounds == 3
    assert "3 wrong" in (result.failure() or "")


def test_missing_table_is_a_failure_not_an_exception() -> None:
    result = parse_nccl_tests("bash: all_reduce_perf: command not found\n")
    assert result.rows == () and result.failure() == "no result table in the output"


def test_short_row_is_left_out_with_a_warning_naming_its_line() -> None:
    text = read_fixture("nccl-tests", "all_reduce-rtx4090-4gpu-single-process.txt").replace(
        "      131072         32768     float     sum      -1    38.63    3.39    5.09      0    38.54    3.40    5.10      0",  # noqa: E501 - recorded line
        "      131072         32768     float     sum      -1    38.63    3.39",
    )
    result = parse_nccl_tests(text)
    assert [w.line for w in result.warnings] == [20]  # the 131072-byte row
    assert 131072 not in [r.size_bytes for r in result.rows] and len(result.rows) > 10


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from([
    "#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong",  # noqa: E501 - recorded line
    "#       size         count      type   redop     time   algbw   busbw  error     time   algbw   busbw  error",
    "        1024           256     float     sum      -1    18.46    0.06    0.08      0    18.56    0.06    0.08      0",  # noqa: E501 - recorded line
    "        4096          1024     float     sum    93.73    0.04    0.09  1e-06    93.15    0.04    0.09  1e-06",
    "# Avg bus bandwidth    : 13.3111",
    "# Out of bounds values : 0 OK",
    "host:1:2 [0] NCCL INFO Channel 00",
    "[1,0]<stdout>:        1024  x",
    "#       size         count      type   bogus",
]) | st.text(max_size=40), max_size=12))
def test_parser_returns_a_result_or_raises_parse_error(lines: list[str]) -> None:
    text = "\n".join(lines)
    try:
        result = parse_nccl_tests(text)
    except ParseError as exc:
        assert exc.line is not None and 1 <= exc.line <= len(text.splitlines())
    else:
        assert (result.failure() is None) == (bool(result.rows) and not result.errors and result.wrong_total == 0
                                              and not result.out_of_bounds and not result.unfinished_runs
                                              and result.avg_busbw_gbs is not None)
