"""``bench report -o json`` carries every figure its parsers read (issue #36): algbw and time beside
busbw, the run's NCCL version, each parser's whole result; and perftest rows whose figures
contradict each other are reported as inconsistent."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from clirun import clusterctl
from fixture_files import FIXTURES, fixture_dir, read_fixture
from json_holds import json_holds

from clusterctl.facts.nccltests import parse_nccl_tests
from clusterctl.facts.perftest import parse_perftest


def _report(*paths: str, rate: str | None = None) -> tuple[int, list[dict[str, Any]]]:
    args = ["bench", "report", "-o", "json", *(["--rate-gbps", rate] if rate else []), *paths]
    run = clusterctl(*args)
    return run.exit_code, json.loads(run.stdout)["files"]


LOGS = sorted((tool, p.name) for tool in ("nccl-tests", "perftest") for p in fixture_dir(tool).iterdir()
              if p.name != "README.md")


@pytest.mark.parametrize(("tool", "name"), LOGS, ids=[f"{t}/{n}" for t, n in LOGS])
def test_every_field_each_log_parser_reads_reaches_bench_report_json(tool: str, name: str) -> None:
    parse = parse_nccl_tests if tool == "nccl-tests" else parse_perftest
    try:
        parsed = parse(read_fixture(tool, name))
    except Exception:  # a log bench report refuses (no table, no banner) has no fields to carry
        pytest.skip("not a log bench report reads")
    _, (entry,) = _report(str(FIXTURES / tool / name))
    assert json_holds(parsed, entry["parsed"], tool) > 0


def test_nccl_rows_carry_algbw_and_time_and_the_run_names_its_nccl_version() -> None:
    _, (efa, rtx) = _report(str(FIXTURES / "nccl-tests" / "all_reduce-efa-mpirun-tag-output-nccl-info.txt"),
                            str(FIXTURES / "nccl-tests" / "all_gather_perf_mpi-rtx5090-2rank-tag-output.txt"))
    assert efa["nccl_version"] == "2.12.7+cuda11.4"
    assert rtx["nccl_tests_version"] == "2.18.0"
    parsed = parse_nccl_tests(read_fixture("nccl-tests", "all_reduce-efa-mpirun-tag-output-nccl-info.txt"))
    last, row = parsed.rows[-1], efa["rows"][-1]
    assert (row["out_of_place_algbw_gbs"], row["out_of_place_time_us"]) == (last.out_of_place.algbw_gbs,
                                                                            last.out_of_place.time_us)
    assert (row["in_place_algbw_gbs"], row["in_place_time_us"]) == (last.in_place.algbw_gbs, last.in_place.time_us)
    assert row["out_of_place_algbw_gbs"] is not None and row["count"] == last.count


def test_a_mb_per_second_header_over_gbit_figures_is_inconsistent() -> None:
    code, (entry,) = _report(str(FIXTURES / "perftest" / "DERIVED-write_bw-ndr400-gbits-figures-mb-sec-header.txt"))
    (finding,) = entry["findings"]
    assert code == 1 and (finding["code"], finding["severity"]) == ("FIGURE_INCONSISTENT", "error")
    assert "header says MB/sec" in finding["message"] and "392.34 Gb/s" in finding["message"]
    # The same log with its own Gb/sec header is consistent.
    _, (original,) = _report(str(FIXTURES / "perftest" / "write_bw-ndr400-gbits-prompt.txt"))
    assert original["findings"] == []


@pytest.mark.parametrize(("name", "mode"), [
    ("send_bw-bidir-D5-peak-zero-client.txt", "-D5"),
    ("write_bw-roce-postlist-gbits-client.txt", "Post List : 128"),
    ("write_bw-postlist-q8-pollara400-server-pod-log-elided.txt", "Post List : 64"),
    ("write_bw-D-cpu-util-column-peak-zero-table.txt", "CPU_Util column"),
    # No command line: perftest's own warning line says it (a one-way send test's server never measures a peak).
    ("send_bw-rxe-server-peak-not-measured-warning.txt", "BW peak won't be measured"),
])
def test_a_zero_peak_the_logs_mode_explains_is_not_inconsistent(name: str, mode: str) -> None:
    """Duration mode (-D, and --cpu_util, valid only in it) and --post_list print the peak as 0.00: the log's
    header says which, and a figure that mode explains contradicts nothing."""
    _, (entry,) = _report(str(FIXTURES / "perftest" / name))
    assert not any(f["code"] == "FIGURE_INCONSISTENT" for f in entry["findings"])
    assert mode in entry["parsed"]["peak_unmeasured_by"] and entry["rows"][0]["bw_peak_gbps"] == 0.0


def test_a_zero_peak_no_header_line_explains_is_inconsistent(tmp_path: Path) -> None:
    """The -D5 log with its command line left out (hand-cut here from the recording): nothing shows duration
    mode, so the 0.00 peak is named as no measurement, and the modes that would explain it are named."""
    cut = tmp_path / "send_bw-without-command.txt"
    cut.write_text(read_fixture("perftest", "send_bw-bidir-D5-peak-zero-client.txt").split("\n", 1)[1])
    _, (entry,) = _report(str(cut))
    (finding,) = [f for f in entry["findings"] if f["code"] == "FIGURE_INCONSISTENT"]
    assert finding["severity"] == "warning" and "peak 0.00" in finding["message"]
    assert "duration -D, --post_list" in finding["message"] and entry["parsed"]["peak_unmeasured_by"] is None


def test_consistent_real_logs_get_no_inconsistency() -> None:
    for name in ("send_bw-ndr400-mib-sec-lockfree-prompt.txt", "write_bw-hdr200-ib-a-sweep-client.txt",
                 "write_bw-bidir-a-sweep-gbits-indented.txt", "write_bw-rtx4080-gdr-mib-sec-server.txt"):
        _, (entry,) = _report(str(FIXTURES / "perftest" / name))
        assert not any(f["code"] == "FIGURE_INCONSISTENT" for f in entry["findings"]), name


def test_every_banner_setting_of_a_perftest_log_reaches_the_json() -> None:
    _, (entry,) = _report(str(FIXTURES / "perftest" / "write_bw-ndr400-gbits-prompt.txt"))
    banner = dict(entry["parsed"]["banner_settings"])
    assert banner["TX depth"] == "128" and banner["Mtu"] == "4096[B]" and banner["rdma_cm QPs"] == "OFF"
    assert banner["CQE Poll Batch"] == "Dynamic" and len(banner) == 18


def test_a_slurm_srun_label_log_is_read_like_an_unlabelled_one() -> None:
    """``srun -l`` puts `` 0: `` before every line rank 0 prints (the usual Slurm sbatch of nccl-tests): the table and
    its summary are read through it, not called "no result table"."""
    _, (entry,) = _report(str(FIXTURES / "nccl-tests" / "all_gather-a3mega-tcpxo-srun-label-c0-excerpt.txt"))
    assert not any(f["code"] == "NCCL_FAILED" for f in entry["findings"]), entry["findings"]
    assert len(entry["rows"]) == 11 and entry["avg_busbw_gbs"] == 128.817
    assert entry["rows"][-1]["size_bytes"] == 8589934592 and entry["rows"][-1]["out_of_place_busbw_gbs"] == 188.88
