"""A drain's plan names the pods the drain will refuse (kubectl drain's rules: a pod that declares no controller
without --force, one with emptyDir data without --delete-emptydir-data), each with why and the switch that lets it
through where the command has one, by the rule the run applies: the plan fails as the run will, and the run stops
before its cordon (it listed only the evictions, and the run then failed "left 1 pod(s)" after cordoning the node
and evicting the rest)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from clirun import clusterctl
from kube_sim import KubeSim

NO_CONTROLLER = "the drain cannot evict default/debug-shell: declares no controller: nothing would recreate it"


def test_remove_node_plans_the_pod_its_drain_refuses_and_the_run_leaves_the_node_be(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    sim = KubeSim(tmp_path)
    sim.deploy("web", 3)
    sim.bare_pod("debug-shell", "gpu-a3")
    before = sim.snapshot()
    plan = clusterctl("-i", sim.inventory, "-o", "json", "remove-node", "gpu-a3", "--dry-run")
    assert plan.exit_code == 1, plan.output
    report = json.loads(plan.stdout)
    (drain,) = [s for s in report["steps"] if s["step"] == "drain"]
    assert drain["status"] == "failed" and drain["message"] == NO_CONTROLLER, drain
    assert report["nothing_to_do"] is False and report["failed"] == "phase drain: " + NO_CONTROLLER, report
    text = clusterctl("-i", sim.inventory, "remove-node", "gpu-a3", "--dry-run").output
    assert NO_CONTROLLER in text and "not part of the cluster" not in text, text
    assert "--force" not in text  # remove-node has no such switch
    assert sim.snapshot() == before

    done = clusterctl("-i", sim.inventory, "remove-node", "gpu-a3", "--yes")
    assert done.exit_code == 1 and NO_CONTROLLER in done.output, done.output
    assert not sim.node("gpu-a3")["spec"].get("unschedulable")  # never cordoned, nothing evicted
    assert [p for p in sim.pods_on("gpu-a3") if p.startswith("default/web-")]


BARE_ON_B1 = """apiVersion: v1
kind: Pod
metadata: {name: debug-shell, namespace: default}
spec:
  nodeSelector: {kubernetes.io/hostname: gpu-b1}
  containers: [{name: main, image: busybox}]
"""


def test_an_upgrade_plan_stops_at_the_node_whose_drain_refuses_a_pod(bootstrapped_demo: Path, tmp_path: Path) -> None:
    from day2_helpers import DEMO, mock_cluster_folder
    from demo_cluster import kubectl_apply

    from clusterctl.mock.state import MockCluster

    kubectl_apply(DEMO, tmp_path, BARE_ON_B1)
    with MockCluster(mock_cluster_folder(bootstrapped_demo)).cluster.edit() as data:
        data["kubernetes"]["pods"]["default/debug-shell"]["phase"] = "Running"  # the simulator's bare pod ran once
    plan = clusterctl("-i", DEMO, "-o", "json", "upgrade", "plan", "--to", "1.36.3")
    assert plan.exit_code == 1, plan.output
    hosts = {h["host"]: h for h in json.loads(plan.stdout)["hosts"]}
    assert hosts["gpu-b1"]["status"] == "failed", hosts["gpu-b1"]
    assert hosts["gpu-b1"]["message"] == "phase drain: " + NO_CONTROLLER
    assert hosts["gpu-a3"]["status"] == "planned"  # the nodes before it are planned in full
