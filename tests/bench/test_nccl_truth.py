"""A nccl-tests log is a finished run only with its summary, and ``bench nccl --multi-node`` is judged by the
one judge single-host runs get (before: a table cut short passed when the exit code was 0 or the log was
saved, and the mpirun job's validation-off and NCCL WARN findings were never looked for)."""

from __future__ import annotations

from pathlib import Path

import pytest
from fixture_files import read_fixture

from clusterctl.bench.logs import report_text
from clusterctl.bench.nccl_tests import NcclRun, run_nccl_test
from clusterctl.bench.plausible import NCCL_NOT_VALIDATED, NCCL_WARNED
from clusterctl.changes import Gate
from clusterctl.facts.nccltests import parse_nccl_tests
from clusterctl.fanout import Runner
from clusterctl.inventory.model import Host
from clusterctl.mock.profile import load_profile
from clusterctl.mock.transport import MockTransport

DEMO_PROFILE = Path(__file__).resolve().parents[2] / "inventories" / "demo" / "profiles" / "dgx-a100"
#: The real 2-node H100 mpirun log, cut after its 1 GiB row as a killed or timed-out run leaves it.
STOPPED = "DERIVED-all_reduce-h100-2node-mpirun-stops-after-1g-row.txt"
OOB_FAILED = "all_reduce-rtx3090-2node-mpi-oob-108-failed.txt"


def test_a_table_that_stops_before_its_summary_names_its_last_row_and_fails() -> None:
    result = parse_nccl_tests(read_fixture("nccl-tests", STOPPED))
    assert len(result.rows) == 28 and result.errors == () and result.avg_busbw_gbs is None
    (warning,) = result.warnings
    assert warning.line == 44 and "no 'Avg bus bandwidth' summary" in warning.message
    assert "1073741824 bytes" in warning.message
    assert result.failure() == ("the table stops after the 1073741824-byte row, before the 'Avg bus bandwidth' "
                                "summary: the run did not finish (killed, timed out, hung) or the log was cut")
    report = report_text("saved.log", read_fixture("nccl-tests", STOPPED))
    assert [f.code for f in report.findings] == ["NCCL_FAILED"]
    assert report.record["parse_warnings"] == [warning.to_json()]


def test_the_complete_log_it_was_cut_from_passes() -> None:
    result = parse_nccl_tests(read_fixture("nccl-tests", "all_reduce-h100-2node-mpirun.txt"))
    assert result.failure() is None and result.warnings == () and result.avg_busbw_gbs == 76.0414


def test_a_two_node_mpi_run_with_out_of_bounds_values_failed() -> None:
    result = parse_nccl_tests(read_fixture("nccl-tests", OOB_FAILED))
    assert result.warnings == () and result.errors == () and result.validation == 1
    assert result.ranks == ((0, "worker1", 0, "NVIDIA GeForce RTX 3090"), (1, "worker2", 0, "NVIDIA GeForce RTX 3090"))
    assert result.hosts == ("worker1", "worker2") and result.out_of_bounds == 108 and result.avg_busbw_gbs == 3.02663
    assert result.rows[-1].out_of_place.wrong == 268435000 and result.rows[0].in_place.wrong == 4
    assert result.failure() == f"{result.wrong_total} wrong element(s) reported (#wrong > 0): data corruption"


class KeptHost(MockTransport):
    def close(self) -> None:  # one simulated host for the whole test
        pass


def _run(tmp_path: Path, fixture: str, *, multi_node: bool, env: dict[str, str] | None = None,
         answer: str | None = None) -> NcclRun:
    profile = tmp_path / "profile"
    profile.mkdir()
    (profile / "answer.txt").write_text(answer or read_fixture("nccl-tests", fixture))
    # Exit 0 whatever the log says: a launcher that lost its ranks, or a recorded replay.
    regex = "^mpirun " if multi_node else "_perf "
    (profile / "profile.yaml").write_text(f"extends: {DEMO_PROFILE}\ncommands:\n  - regex: '{regex}'\n"
                                          "    stdout: answer.txt\n")
    hosts = [Host(name=n, address=f"10.0.0.{i}", transport="mock") for i, n in enumerate(("n1", "n2"), 1)]
    loaded = load_profile(str(profile))
    transports = {h.name: KeptHost(h, loaded, state_folder=tmp_path / "state") for h in hosts}
    with Runner(lambda host, _t: transports[host.name], parallel=2, timeout_s=60) as runner:
        return run_nccl_test(runner, hosts[: 2 if multi_node else 1], multi_node=multi_node, gpus=8,
                             gate=Gate(apply=True), env=env)


@pytest.mark.parametrize(("fixture", "codes", "failed"), [
    ("all_reduce-a3mega-tcpxo-2node-no-hash-markers-wrong-na.txt", [NCCL_NOT_VALIDATED], False),  # -c 0
    ("DERIVED-all_reduce-a3mega-16rank-nccl-warn-at-init.txt", [NCCL_WARNED], False),
    (STOPPED, ["NCCL_FAILED"], True),
    (OOB_FAILED, ["NCCL_FAILED"], True),
    # 8 H100 ranks at 328 GB/s: the one-host NVSwitch peak (370) is not what two hosts over a network give.
    ("all_reduce-h100-2node-mpirun.txt", [], False),
])
def test_a_multi_node_run_is_judged_like_a_single_host_one(tmp_path: Path, fixture: str, codes: list[str],
                                                           failed: bool) -> None:
    run = _run(tmp_path, fixture, multi_node=True)
    (host_run,) = run.runs
    assert host_run.host == "n1+n2"
    assert [f.code for f in run.findings] == codes and run.failed is failed
    assert (run.median_busbw_gbs is None) is failed


def test_a_single_host_run_that_exits_0_with_a_table_cut_short_failed(tmp_path: Path) -> None:
    run = _run(tmp_path, "all_gather-bfloat16-i-step-none-redop-excerpt.txt", multi_node=False)
    (finding,) = [f for f in run.findings if f.code == "NCCL_FAILED"]
    assert finding.host == "n1" and "stops after the 117440512-byte row" in finding.message
    assert run.runs[0].busbw_gbs is None and run.median_busbw_gbs is None


@pytest.mark.parametrize("multi_node", [False, True])
def test_a_run_given_nccl_tests_min_bw_that_printed_failed_fails_naming_the_threshold_set(
        tmp_path: Path, multi_node: bool) -> None:
    # The output does not show the threshold (the command line is not in it): bench nccl set it, so it names it.
    answer = read_fixture("nccl-tests", "DERIVED-all_reduce-rtx4090-min-bw-20-failed.txt").split("\n", 1)[1]
    run = _run(tmp_path, "", multi_node=multi_node, env={"NCCL_TESTS_MIN_BW": "20"}, answer=answer)
    (finding,) = [f for f in run.findings if f.code == "NCCL_FAILED"]
    assert run.failed and finding.message == ("nccl-tests marked the run FAILED: its Avg bus bandwidth 13.3111 GB/s "
                                              "is below 90% of NCCL_TESTS_MIN_BW=20 GB/s")
