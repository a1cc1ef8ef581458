"""``clusterctl remove-node``: drain, reset, delete; etcd's quorum guarded; bootstrap joins the host again."""

from __future__ import annotations

from pathlib import Path

from clirun import clusterctl
from day2_helpers import DEMO, DEMO_SURVEY, state_digest, unconfirmed

from clusterctl.day2.remove_node import quorum_check
from clusterctl.facts.kube import KubeNode, parse_nodes


def test_remove_node_gpu_b3_then_bootstrap_adds_it_back(bootstrapped_demo: Path) -> None:
    before = state_digest(bootstrapped_demo)
    plan = clusterctl("-i", DEMO, "-o", "json", "remove-node", "gpu-b3", "--dry-run")
    assert plan.exit_code == 0, plan.output
    steps = plan.json()["steps"]
    assert [s["step"] for s in steps] == ["drain", "reset", "delete-node"]
    assert any(c["command"] == "kubeadm reset --config /dev/stdin" for c in steps[1]["changes"])
    assert state_digest(bootstrapped_demo) == before  # the dry run touched nothing

    assert unconfirmed("-i", DEMO, "remove-node", "gpu-b3").exit_code == 2  # no terminal, no --yes
    done = clusterctl("-i", DEMO, "remove-node", "gpu-b3", "--yes")
    assert done.exit_code == 0, done.output
    nodes = clusterctl("-i", DEMO, "-l", "gpu-a1", "-o", "json", "exec", "--sudo", "--",
                       "kubectl --kubeconfig /etc/kubernetes/admin.conf get nodes -o json")
    names = {n.name for n in parse_nodes(nodes.json()["hosts"][0]["stdout"])}
    assert "gpu-b3" not in names and "gpu-b2" in names
    again = clusterctl("-i", DEMO, "-o", "json", "remove-node", "gpu-b3", "--dry-run")
    assert "not a node of the cluster" in " ".join(again.json()["notes"])

    back = clusterctl("-i", DEMO, "-o", "json", "bootstrap", "--survey", DEMO_SURVEY, "--state-dir",
                      bootstrapped_demo / "progress")
    assert back.exit_code == 0, back.output
    changed = {(r["host"], r["phase"]) for r in back.json()["results"] if r["status"] == "changed"}
    assert ("gpu-b3", "join") in changed
    assert {h for h, _ in changed} <= {"gpu-a1", "gpu-b3"}  # only the new node and the first control plane


def test_the_only_control_plane_and_an_unknown_host_are_refused(bootstrapped_demo: Path) -> None:
    only = clusterctl("-i", DEMO, "remove-node", "gpu-a1", "--dry-run")
    assert only.exit_code == 2 and "only control plane" in only.stderr
    unknown = clusterctl("-i", DEMO, "remove-node", "gpu-z9", "--dry-run")
    assert unknown.exit_code == 2 and "gpu-z9" in unknown.stderr


def _cp(name: str, ready: bool = True) -> KubeNode:
    return KubeNode(name, ready, 0, {"node-role.kubernetes.io/control-plane": ""})


def test_etcd_quorum_is_kept() -> None:
    assert quorum_check([_cp("a"), _cp("b"), _cp("c")], "c") == ""
    assert quorum_check([_cp("a"), _cp("b")], "b") == ""  # one member left, and it is healthy
    refused = quorum_check([_cp("a"), _cp("b", ready=False), _cp("c")], "c")
    assert "quorum needs 2" in refused and "not Ready: b" in refused
    assert "last control plane" in quorum_check([_cp("a")], "a")
    # Removing the sick member itself is how one repairs a cluster: allowed while the rest hold quorum.
    assert quorum_check([_cp("a"), _cp("b", ready=False), _cp("c")], "b") == ""
