"""Figures that cannot be true and recordings of another machine are findings, not "ok" (issue 13)."""

from __future__ import annotations

from pathlib import Path

import pytest

from clusterctl.bench.judge import judge_link, saved_link
from clusterctl.bench.plausible import FIGURE_IMPOSSIBLE, RECORDING_MISMATCH, nccl_checks
from clusterctl.facts.nccltests import parse_nccl_tests
from clusterctl.facts.perftest import PerftestResult, parse_perftest
from clusterctl.findings import Finding, Severity
from clusterctl.inventory.model import Fabric, FabricType

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


def perftest(name: str):  # type: ignore[no-untyped-def]
    return parse_perftest((FIXTURES / "perftest" / name).read_text())


def perftest_checks(result: PerftestResult, *, line_rate_gbps: float, fabric_type: FabricType, about: str,
                    about_kind: str = "subject") -> list[Finding]:
    """What the one perftest judge finds about a saved log, less whether it is slow (``LINK_SLOW``)."""
    fabric = Fabric(type=fabric_type)
    return [f for f in judge_link(saved_link(result, rate_gbps=line_rate_gbps, limits=fabric), fabric, about=about,
                                  about_kind=about_kind) if f.code != "LINK_SLOW"]


def nccl(name: str):  # type: ignore[no-untyped-def]
    return parse_nccl_tests((FIXTURES / "nccl-tests" / name).read_text())


def test_a_400g_recording_on_a_200g_fabric_cannot_be_a_measurement_of_it() -> None:
    (found,) = perftest_checks(perftest("write_bw-ndr400-gbits-prompt.txt"), line_rate_gbps=200, fabric_type="ib",
                               about="a.log", about_kind="file")
    assert (found.severity, found.code, found.file) == (Severity.ERROR, FIGURE_IMPOSSIBLE, "a.log")
    assert found.evidence["measured_gbps"] == 392.34 and found.evidence["limit_gbps"] == 200
    assert "units" in found.fix and "bidirectional" in found.fix


def test_the_same_recording_on_its_own_400g_fabric_is_fine() -> None:
    assert perftest_checks(perftest("write_bw-ndr400-gbits-prompt.txt"), line_rate_gbps=400, fabric_type="ib",
                           about="a.log") == []


def test_a_bidirectional_run_is_judged_against_twice_the_line_rate() -> None:
    result = perftest("write_bw-bidir-a-sweep-gbits-indented.txt")  # 204.6 Gb/s, -b, RoCE
    assert result.bidirectional and result.peak_gbps is not None and result.peak_gbps > 200
    assert perftest_checks(result, line_rate_gbps=200, fabric_type="roce", about="x") == []
    # ...but on an InfiniBand fabric its banner says it was measured elsewhere.
    (mismatch,) = perftest_checks(result, line_rate_gbps=200, fabric_type="ib", about="x")
    assert (mismatch.severity, mismatch.code) == (Severity.WARNING, RECORDING_MISMATCH)
    assert "Link type : Ethernet" in mismatch.message and "InfiniBand" in mismatch.message


def test_real_hdr_recording_on_the_hdr_fabric_is_plausible() -> None:
    assert perftest_checks(perftest("write_bw-hdr200-ib-a-sweep-client.txt"), line_rate_gbps=200, fabric_type="ib",
                           about="x") == []


def test_four_ranks_on_an_eight_gpu_host_is_a_recording_of_another_machine() -> None:
    (found,) = nccl_checks(nccl("all_reduce-rtx4090-4gpu-single-process.txt"), gpus_per_host=8, about="gpu-a1")
    assert (found.severity, found.code, found.host) == (Severity.WARNING, RECORDING_MISMATCH, "gpu-a1")
    assert "4 rank(s)" in found.message and "8 GPUs" in found.message


def test_eight_a100_all_reduce_is_below_their_nvlink_limit() -> None:
    assert nccl_checks(nccl("all_reduce-a100-8gpu-nvswitch-single-node.txt"), gpus_per_host=8, about="h") == []


def test_bus_bandwidth_above_one_gpus_nvlinks_cannot_be_true(monkeypatch: pytest.MonkeyPatch) -> None:
    # The A100 run (232 GB/s) judged as if the GPUs had A800's 8 NVLinks (200 GB/s per direction).
    monkeypatch.setattr("clusterctl.bench.plausible.NVLINK_GBS_PER_GPU", (("A100", 200.0, "8 NVLink3 x 25 GB/s"),))
    (found,) = nccl_checks(nccl("all_reduce-a100-8gpu-nvswitch-single-node.txt"), gpus_per_host=8, about="h")
    assert (found.severity, found.code) == (Severity.ERROR, FIGURE_IMPOSSIBLE)
    assert found.evidence == {"measured_gbs": 232.44, "limit_gbs": 200.0}


def test_multi_host_runs_are_not_held_to_one_hosts_nvlink_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("clusterctl.bench.plausible.NVLINK_GBS_PER_GPU", (("H100", 100.0, "x"),))
    assert [f.code for f in nccl_checks(nccl("all_reduce-h100-2node-mpirun.txt"), gpus_per_host=4, about="j")] == []
