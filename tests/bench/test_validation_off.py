"""A run started with ``-c 0`` checked nothing: its ``#wrong`` column (``N/A``, or ``0`` in some builds)
proves no data arrived intact. bench reads the setup line's ``validation: 0`` and says so, as a
warning (speed figures still stand), never silently as a pass."""

from __future__ import annotations

import json

import pytest
from clirun import clusterctl
from fixture_files import FIXTURES, read_fixture

from clusterctl.bench.plausible import NCCL_NOT_VALIDATED, nccl_checks
from clusterctl.facts.nccltests import parse_nccl_tests
from clusterctl.findings import Severity

OFF = ("all_reduce-a3high-tcpx-2node-no-hash-markers.txt",  # validation: 0, yet #wrong prints 0
       "all_reduce-a3mega-tcpxo-2node-no-hash-markers-wrong-na.txt",  # validation: 0, #wrong N/A
       "broadcast-c0-old-no-redop-error-na-nccl-warn-excerpt.txt")  # old format, -c 0 on the command line
ON = ("all_reduce-a100-8gpu-nvswitch-single-node.txt", "all_gather_perf_mpi-rtx5090-2rank-tag-output.txt")


@pytest.mark.parametrize(("name", "validation"), [*((n, 0) for n in OFF), *((n, 1) for n in ON)])
def test_the_setup_lines_validation_is_read(name: str, validation: int) -> None:
    assert parse_nccl_tests(read_fixture("nccl-tests", name)).validation == validation


def test_a_log_without_the_setup_line_has_no_validation() -> None:
    assert parse_nccl_tests(read_fixture("nccl-tests", "all_reduce-old-error-column-128gpu-excerpt.txt")
                            ).validation is None


@pytest.mark.parametrize("name", OFF)
def test_a_run_that_checked_nothing_is_a_warning(name: str) -> None:
    found = [f for f in nccl_checks(parse_nccl_tests(read_fixture("nccl-tests", name)), gpus_per_host=None,
                                    about="x.log", about_kind="file") if f.code == NCCL_NOT_VALIDATED]
    assert [f.severity for f in found] == [Severity.WARNING]
    assert "-c 0" in found[0].message and "not checked" in found[0].message


@pytest.mark.parametrize("name", ON)
def test_a_validated_run_gets_no_such_warning(name: str) -> None:
    result = parse_nccl_tests(read_fixture("nccl-tests", name))
    assert not [f for f in nccl_checks(result, gpus_per_host=None, about="x") if f.code == NCCL_NOT_VALIDATED]


def test_bench_report_says_correctness_was_not_checked_and_still_passes() -> None:
    path = str(FIXTURES / "nccl-tests" / "all_reduce-a3mega-tcpxo-2node-no-hash-markers-wrong-na.txt")
    table = clusterctl("bench", "report", path)
    assert table.exit_code == 0, table.stdout + table.stderr
    assert NCCL_NOT_VALIDATED in table.stdout and "not checked" in " ".join(table.stdout.split())
    run = clusterctl("bench", "report", "-o", "json", path)
    (entry,) = json.loads(run.stdout)["files"]
    assert run.exit_code == 0 and entry["validation"] == 0
    assert [f["severity"] for f in entry["findings"] if f["code"] == NCCL_NOT_VALIDATED] == ["warning"]
