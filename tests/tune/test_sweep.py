"""The sweep against mock hosts whose fake all_reduce_perf answers depend on the NCCL env."""

from __future__ import annotations

from pathlib import Path

import pytest

from clusterctl.errors import UsageError
from clusterctl.fanout import Runner
from clusterctl.inventory.model import Host
from clusterctl.nccl.tune.sweep import (
    Candidate,
    SweepResult,
    bench_measure,
    candidate_space,
    lint_validator,
    run_sweep,
)
from clusterctl.nccl.versions import parse_version
from clusterctl.transport.mock import MockTransport

PROFILE = Path(__file__).resolve().parent / "profiles" / "sweep"


@pytest.fixture
def mock_host() -> Host:
    return Host(name="sweep-host", transport="mock", profile=str(PROFILE))


def _sweep(host: Host, budget: int, version: str = "2.21.5") -> tuple[SweepResult, list[str]]:
    candidates = candidate_space(parse_version(version), validate=lint_validator())
    commands: list[str] = []

    def connect(h: Host, _timeout: float) -> MockTransport:
        transport = MockTransport(h)
        transport.history = commands  # every command line any connection ran, in order
        return transport

    with Runner(connect, parallel=1, timeout_s=30) as runner:
        result = run_sweep(bench_measure(runner, [host]), candidates, budget=budget, nccl_version=version)
    return result, commands


def test_finds_the_truly_better_candidate_and_stays_in_budget(mock_host: Host) -> None:
    result, commands = _sweep(mock_host, budget=16)
    runs = [c for c in commands if "all_reduce_perf" in c]
    assert len(runs) == result.runs_used <= 16
    assert {(s.name, s.value) for s in result.settings} == {("NCCL_ALGO", "Tree")}
    large = next(r for r in result.ranges if r.range == "large")
    assert large.significant and large.best_label == "NCCL_ALGO=Tree"
    assert large.best_gbps > large.baseline_gbps * 1.15


def test_rejects_a_win_within_noise(mock_host: Host) -> None:
    result, commands = _sweep(mock_host, budget=16)
    buffsize = [c for c in commands if "NCCL_BUFFSIZE=8388608" in c]
    assert len(buffsize) >= 2  # it reached the final round on its first, lucky run...
    assert all(s.name != "NCCL_BUFFSIZE" for s in result.settings)
    # ...and no other range has a winner: the defaults are reported best there
    assert {r.range for r in result.ranges if not r.significant} == {"small", "medium"}
    assert any("defaults are best" in n for n in result.notes)


def test_needs_far_fewer_runs_than_a_full_grid(mock_host: Host) -> None:
    result, _ = _sweep(mock_host, budget=24)
    assert result.runs_used <= 24 < result.full_grid_runs / 10
    assert result.candidates_tried == result.candidates_total


def test_baseline_runs_use_nccl_defaults(mock_host: Host) -> None:
    _, commands = _sweep(mock_host, budget=8)
    baseline = [c for c in commands if "all_reduce_perf" in c][:3]
    assert all("NCCL_" not in c for c in baseline)


def test_small_budget_is_a_usage_error(mock_host: Host) -> None:
    with pytest.raises(UsageError, match="too small"):
        _sweep(mock_host, budget=3)


def test_candidates_follow_the_installed_version() -> None:
    old = {name for c in candidate_space(parse_version("2.16.5")) for name, _ in c.env}
    new = {name for c in candidate_space(parse_version("2.21.5")) for name, _ in c.env}
    assert "NCCL_MIN_NCHANNELS" in old and "NCCL_MIN_CTAS" not in old
    assert "NCCL_MIN_CTAS" in new and "NCCL_MIN_NCHANNELS" not in new
    # a value the lint knowledge base rejects for this version is never swept
    validated = candidate_space(parse_version("2.16.5"), validate=lint_validator())
    assert all(c.get("NCCL_MIN_CTAS") is None for c in validated)


def test_tuner_rows_need_2_28_and_an_algorithm_protocol_pair() -> None:
    def measure(env: dict[str, str]) -> dict[int, float]:
        tree_ll = env.get("NCCL_ALGO") == "Tree" and env.get("NCCL_PROTO") == "LL"
        return {1024: 2.0 if tree_ll else 1.0, 1 << 20: 50.0, 1 << 30: 300.0}

    candidates = [Candidate((("NCCL_ALGO", "Tree"), ("NCCL_PROTO", "LL"))), Candidate((("NCCL_ALGO", "Ring"),))]
    new = run_sweep(measure, candidates, budget=12, nccl_version="2.28.3")  # type: ignore[arg-type]
    old = run_sweep(measure, candidates, budget=12, nccl_version="2.27.5")  # type: ignore[arg-type]
    assert new.tuner_rows == (("small", "tree", "ll"),)
    assert old.tuner_rows == ()
