"""nccl-tests run with ``-C 1`` (CPU time), ``-I 1`` (per-iteration columns), ``-S 1`` (timestamps) or
``NCCL_TESTS_MIN_BW``, and launched by MPICH/Intel MPI with ``-prepend-rank`` (before: no table found, an
"unrecognised table header" for each of ``-I 1`` and ``-S 1``, a FAILED average that passed, no table found).
Fixtures: tests/fixtures/nccl-tests/README.md."""

from __future__ import annotations

from pathlib import Path

import pytest
from clirun import clusterctl
from fixture_files import read_fixture

from clusterctl.bench.logs import report_text
from clusterctl.facts.nccltests import parse_nccl_tests

CPUTIME = "DERIVED-all_reduce-rtx4090-c1-cputime.txt"
PER_ITERATION = "DERIVED-all_reduce-rtx4090-i1-per-iteration.txt"
TIMESTAMPS = "DERIVED-all_reduce-rtx4090-s1-timestamp.txt"
MIN_BW_FAILED = "DERIVED-all_reduce-rtx4090-min-bw-20-failed.txt"
HYDRA = "DERIVED-all_reduce-h100-3node-mpich-prepend-rank-rows-split-by-tag.txt"


def test_cpu_time_columns_are_read_as_cpu_time_and_reach_the_json() -> None:
    result = parse_nccl_tests(read_fixture("nccl-tests", CPUTIME))
    assert len(result.rows) == 21 and result.warnings == () and result.failure() is None
    last = result.rows[-1]
    assert (last.out_of_place.cpu_time_us, last.in_place.cpu_time_us, last.out_of_place.time_us) == (
        63624, 63640, None)
    assert last.in_place.busbw_gbs == 25.31 and result.avg_busbw_gbs == 13.3111
    row = report_text("c1.log", read_fixture("nccl-tests", CPUTIME)).record["rows"][-1]
    assert (row["out_of_place_cpu_time_us"], row["in_place_cpu_time_us"], row["out_of_place_time_us"]) == (
        63624, 63640, None)


def test_per_iteration_columns_are_read_beside_each_half() -> None:
    result = parse_nccl_tests(read_fixture("nccl-tests", PER_ITERATION))
    assert len(result.rows) == 21 and result.warnings == () and result.failure() is None
    first = result.rows[0]
    assert (first.out_of_place.time_us, first.out_of_place.busbw_gbs, first.out_of_place.wrong) == (18.46, 0.08, 0)
    assert (first.in_place.iter_min_us, first.in_place.iter_max_us, first.in_place.iter_p99_us,
            first.in_place.iter_cv_pct) == (18.56, 18.56, 18.56, 0.0)
    row = report_text("i1.log", read_fixture("nccl-tests", PER_ITERATION)).record["rows"][0]
    assert (row["out_of_place_iter_p99_us"], row["in_place_iter_cv_pct"]) == (18.46, 0.0)


def test_timestamps_are_read_per_row_and_reach_the_json() -> None:
    text = read_fixture("nccl-tests", TIMESTAMPS)
    result = parse_nccl_tests(text)
    assert len(result.rows) == 21 and result.warnings == () and result.failure() is None
    last = result.rows[-1]
    assert (last.timestamp, last.in_place.busbw_gbs, last.in_place.wrong) == ("2025-11-12 09:41:13", 25.31, 0)
    row = report_text("s1.log", text).record["rows"][-1]
    assert (row["timestamp"], row["in_place_time_us"]) == ("2025-11-12 09:41:13", 63640)
    # A row whose last words are not a time is named, not read with a wrong figure.
    cut = parse_nccl_tests(text.replace("2025-11-12 09:41:13", "09:41:13"))
    (warning,) = cut.warnings
    assert len(cut.rows) == 20 and warning.line == 33 and "columns" in warning.message
    garbled = parse_nccl_tests(text.replace("2025-11-12 09:41:13", "2025-11-12 later"))
    assert "'2025-11-12 later' is not a timestamp" in garbled.warnings[0].message


def test_an_average_nccl_tests_marked_failed_fails_the_run_naming_the_threshold() -> None:
    text = read_fixture("nccl-tests", MIN_BW_FAILED)
    result = parse_nccl_tests(text)
    assert (result.below_min_bw, result.min_bw, result.avg_busbw_gbs) == (True, "20", 13.3111)
    message = ("nccl-tests marked the run FAILED: its Avg bus bandwidth 13.3111 GB/s is below 90% of "
               "NCCL_TESTS_MIN_BW=20 GB/s")
    assert result.failure() == message
    (finding,) = report_text("min-bw.log", text).findings
    assert (finding.code, finding.message) == ("NCCL_FAILED", message)
    # A log whose command line does not show the threshold still fails, and says it cannot name it.
    unnamed = parse_nccl_tests(text.replace("NCCL_TESTS_MIN_BW=20 ", ""))
    assert unnamed.failure() == ("nccl-tests marked the run FAILED: its Avg bus bandwidth 13.3111 GB/s is below 90% "
                                 "of the NCCL_TESTS_MIN_BW the run was given (the log does not say which)")
    passed = parse_nccl_tests(text.replace("13.3111 FAILED", "13.3111 OK"))
    assert passed.below_min_bw is False and passed.failure() is None


def test_hydra_prepend_rank_tags_are_removed_where_they_split_a_row() -> None:
    result = parse_nccl_tests(read_fixture("nccl-tests", HYDRA))
    assert [r.size_bytes for r in result.rows] == [1048576 << i for i in range(10)]
    row = result.rows[0]
    assert (row.redop, row.root, row.out_of_place.time_us, row.out_of_place.busbw_gbs, row.in_place.time_us,
            row.in_place.busbw_gbs) == ("sum", -1, 1626.5, 1.24, 2302.3, 0.87)
    assert result.net.nnodes == 3 and result.net.nranks == 24
    # The excerpt ends before the summary: the parser says so, it does not pass the run.
    (warning,) = result.warnings
    assert warning.line == 18 and "536870912 bytes" in warning.message


def test_a_log_that_names_no_test_is_headed_by_the_tool_alone(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The MPICH excerpt has no command line: its heading read "nccl-tests  - ..." around an empty name.
    monkeypatch.chdir(tmp_path)
    Path("hydra.log").write_text(read_fixture("nccl-tests", HYDRA))
    first = clusterctl("bench", "report", "hydra.log").stdout.split("\n")[0]
    assert first == "hydra.log: nccl-tests - 5.31 GB/s busbw at the largest size (no Avg line)"
