"""Forgetting --survey on a re-run: the plan shows the NVLink alert rule's removal as a removal,
an apply refuses it unless --survey or --without-survey, and kept topology labels are said kept."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bootstrap_cluster"))

from sim_cluster import SimCluster

from clusterctl.bootstrap.cluster.alerts import RULES_PATH
from clusterctl.bootstrap.phases.alert_rules import NVLINK_RULE
from clusterctl.engine.run import Status

HOSTS = ["gpu-a1", "gpu-a2"]


def _alert_result(report):  # type: ignore[no-untyped-def]
    return next(r for r in report.results if r.phase == "alert-rules")


def test_a_rerun_without_survey_shows_and_refuses_dropping_the_nvlink_rule(tmp_path: Path) -> None:
    sim = SimCluster(tmp_path, HOSTS)
    assert sim.run().ok
    assert NVLINK_RULE in (sim.file("gpu-a1", RULES_PATH) or b"").decode()

    plan = sim.run(apply=False, survey=None)
    result = _alert_result(plan)
    assert any("REMOVES the NVLink bandwidth rule" in c.summary for c in result.changes)
    assert [f.code for f in result.findings if f.code == "SURVEY_DATA_DROPPED"] == ["SURVEY_DATA_DROPPED"]

    applied = sim.run(survey=None)
    result = _alert_result(applied)
    assert result.status is Status.FAILED and "--survey" in result.message
    assert NVLINK_RULE in (sim.file("gpu-a1", RULES_PATH) or b"").decode()  # kept
    labels = [f for r in applied.results if r.phase == "topology-labels" for f in r.findings]
    assert {f.code for f in labels} == {"TOPOLOGY_LABELS_KEPT"}

    chosen = sim.run(survey=None, without_survey=True)
    assert _alert_result(chosen).status is Status.CHANGED
    assert NVLINK_RULE not in (sim.file("gpu-a1", RULES_PATH) or b"").decode()
