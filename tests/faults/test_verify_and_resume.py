"""Verify does not wait for a node it knows dropped out; a run that could not verify is not a
success; --resume makes the fresh join token a resumed join needs (simulated cluster)."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bootstrap_cluster"))

from sim_cluster import CLUSTER_PHASES, AdvanceClock, SimCluster

from clusterctl.bootstrap.phase import Phase
from clusterctl.engine.run import Status

HOSTS = ["gpu-a1", "gpu-a2", "gpu-a3"]


def _with_clock(sim: SimCluster) -> list[str | Phase[object]]:
    phases: list[str | Phase[object]] = list(CLUSTER_PHASES)
    phases.insert(phases.index("join"), AdvanceClock(sim))
    return phases


def test_verify_reports_nodes_that_dropped_out_at_once_without_waiting(tmp_path: Path) -> None:
    sim = SimCluster(tmp_path, HOSTS)
    report = sim.run(_with_clock(sim), settle_s=45.0)
    assert {h for h in report.failed_hosts} >= {"gpu-a2", "gpu-a3"}
    verify = next(r for r in report.results if r.phase == "verify")
    missing = [f for f in verify.findings if f.code == "NODE_MISSING"]
    assert {f.host for f in missing} == {"gpu-a2", "gpu-a3"}
    assert all("dropped out of this run" in f.message for f in missing)
    polls = [line for line in sim.transports["gpu-a1"].history if "get nodes" in line]
    assert len(polls) == 1, polls  # asked once: waiting would not bring them


def test_a_resumed_run_makes_the_fresh_token_its_joins_need(tmp_path: Path) -> None:
    sim = SimCluster(tmp_path, HOSTS)
    first = sim.run(_with_clock(sim))
    assert "join token expired" in first.failed_hosts.get("gpu-a2", ""), first.failed_hosts
    resumed = sim.run(resume=True)
    assert resumed.ok, resumed.failed_hosts
    assert {r.host: r.status for r in resumed.results if r.phase == "join"}["gpu-a2"] is Status.CHANGED
    assert {"gpu-a2", "gpu-a3"} <= set(sim.kube()["nodes"])


def test_a_run_whose_verify_ran_nowhere_is_not_a_success(tmp_path: Path) -> None:
    sim = SimCluster(tmp_path, HOSTS)
    assert sim.run().ok
    workers_only = sim.run(hosts=["gpu-a2", "gpu-a3"])  # verify runs on the first control plane only
    assert not workers_only.failed_hosts
    assert not workers_only.ok and workers_only.not_verified is not None
    assert "verify did not run" in workers_only.not_verified
