"""nccl-tests runner pieces and fleet judgement (median/MAD)."""

from __future__ import annotations

import pytest

from clusterctl.bench.nccl_tests import NcclHostRun, judge_nccl, mpirun_command, nccl_args
from clusterctl.errors import UsageError
from clusterctl.facts.nccltests import Measure, NcclRow, NcclTestResult


def run_with(host: str, busbw: float) -> NcclHostRun:
    measure = Measure(1.0, busbw, busbw, 0)
    result = NcclTestResult("all_reduce_perf", (NcclRow(8 << 30, 1, "float", "sum", -1, measure, measure),), busbw)
    return NcclHostRun(host, "all_reduce_perf", "", result)


def test_outliers_by_robust_deviation() -> None:
    values = {"h1": 230.0, "h2": 231.0, "h3": 229.0, "h4": 232.0, "h5": 228.0, "h6": 226.0, "h7": 150.0}
    findings, median = judge_nccl([run_with(h, v) for h, v in values.items()], "all_reduce")
    assert median == 229.0
    assert [(f.severity, f.host) for f in findings] == [("error", "h7")]


def test_uniform_fleet_has_no_outliers() -> None:
    findings, _ = judge_nccl([run_with(f"h{i}", 235.0) for i in range(5)], "all_reduce")
    assert findings == []


def test_inventory_expected_peak() -> None:
    findings, _ = judge_nccl([run_with("h1", 180.0)], "all_reduce", {"h1": 235})
    assert [f.code for f in findings] == ["NCCL_BELOW_PEAK"]


def test_commands_are_quoted_and_pass_env_with_x() -> None:
    args = nccl_args("all_gather", min_bytes="8", max_bytes="8G", factor=2, gpus=8, binary_dir="/opt/nccl tests")
    assert args[:1] == ["/opt/nccl tests/all_gather_perf"] and args[-2:] == ["-g", "8"]
    line = mpirun_command("/tmp/hf", 2, args, {"NCCL_IB_HCA": "mlx5_0,mlx5_1"})
    assert "-x NCCL_IB_HCA=mlx5_0,mlx5_1" in line and "'/opt/nccl tests/all_gather_perf'" in line
    with pytest.raises(UsageError):
        nccl_args("allreduce", min_bytes="8", max_bytes="8G", factor=2, gpus=None, binary_dir=None)
