"""A finished nccl-tests run in which NCCL warned (a network transport that failed to open, a fallback) is not
failed, but the warnings are said: before, they reached only the JSON, and a slow figure had no visible why."""

from __future__ import annotations

import json

from clirun import clusterctl
from fixture_files import FIXTURES, read_fixture

from clusterctl.bench.plausible import NCCL_WARNED, nccl_checks
from clusterctl.facts.nccltests import parse_nccl_tests
from clusterctl.findings import Severity

WARNED = "DERIVED-all_reduce-a3mega-16rank-nccl-warn-at-init.txt"  # finished; two ranks failed to open ibverbs


def test_a_finished_run_nccl_warned_in_is_a_warning_naming_the_first() -> None:
    result = parse_nccl_tests(read_fixture("nccl-tests", WARNED))
    (found,) = [f for f in nccl_checks(result, gpus_per_host=None, about="x.log", about_kind="file")
                if f.code == NCCL_WARNED]
    assert found.severity is Severity.WARNING and found.evidence["warnings"] == len(result.nccl_warnings) == 2
    assert "NCCL WARN Failed to open libibverbs.so[.1]" in found.message


def test_a_run_without_warnings_gets_none() -> None:
    result = parse_nccl_tests(read_fixture("nccl-tests", "all_reduce-a100-8gpu-nvswitch-single-node.txt"))
    assert not [f for f in nccl_checks(result, gpus_per_host=None, about="x") if f.code == NCCL_WARNED]


def test_bench_report_shows_it_and_still_passes() -> None:
    path = str(FIXTURES / "nccl-tests" / WARNED)
    table = clusterctl("bench", "report", path)
    assert table.exit_code == 0, table.stdout + table.stderr
    assert NCCL_WARNED in table.stdout and "libibverbs" in table.stdout
    run = clusterctl("bench", "report", "-o", "json", path)
    (entry,) = json.loads(run.stdout)["files"]
    assert [f["severity"] for f in entry["findings"] if f["code"] == NCCL_WARNED] == ["warning"]
