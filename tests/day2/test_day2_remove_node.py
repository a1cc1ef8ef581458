"""``clusterctl remove-node``: drain, reset, delete; etcd's quorum guarded; bootstrap joins the host again."""

from __future__ import annotations

from pathlib import Path

from clirun import clusterctl
from day2_helpers import DEMO, DEMO_SURVEY, state_digest, unconfirmed

from clusterctl.facts.etcd import EndpointHealth, EtcdMember, etcd_quorum
from clusterctl.facts.kube_nodes import KubeNode, parse_nodes


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
    # Nothing to drain: no drain step waiting up to 300 s for its pods (the plan said both).
    assert [s["step"] for s in again.json()["steps"]] == ["reset"], again.json()["steps"]
    assert "(wait: " not in clusterctl("-i", DEMO, "remove-node", "gpu-b3", "--dry-run").stdout

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
    return KubeNode(name, ready, labels={"node-role.kubernetes.io/control-plane": ""})


def _quorum(healthy: dict[str, bool], leaving: str) -> str:
    """``etcd_quorum`` for members named after ``healthy``'s keys, each client URL answering as told."""
    members = [EtcdMember(i + 1, name, (), (f"https://{name}:2379",)) for i, name in enumerate(healthy)]
    health = [EndpointHealth(f"https://{name}:2379", up, "1ms", "") for name, up in healthy.items()]
    return etcd_quorum(members, health, next(m for m in members if m.name == leaving))


def test_etcd_quorum_is_kept() -> None:
    assert _quorum({"a": True, "b": True, "c": True}, "c") == ""
    assert _quorum({"a": True, "b": True}, "b") == ""  # one member left, and it is healthy
    refused = _quorum({"a": True, "b": False, "c": True}, "c")
    assert "quorum needs 2" in refused and "unhealthy: b" in refused
    assert "last etcd member" in _quorum({"a": True}, "a")
    # Removing the sick member itself is how one repairs a cluster: allowed while the rest hold quorum.
    assert _quorum({"a": True, "b": False, "c": True}, "b") == ""


def test_a_dead_unreachable_worker_is_removed_without_its_reset(bootstrapped_demo: Path) -> None:
    from day2_helpers import set_fault

    set_fault(bootstrapped_demo, "gpu-b3", "power", "off")  # gone: no SSH answer, its Node NotReady
    before = state_digest(bootstrapped_demo)
    plan = clusterctl("-i", DEMO, "-o", "json", "remove-node", "gpu-b3", "--dry-run")
    assert plan.exit_code == 0, plan.output
    assert [s["step"] for s in plan.json()["steps"]] == ["drain", "delete-node"]  # no reset on a dead host
    assert plan.json()["steps"][0]["waits"] == []  # nothing waits for a kubelet that cannot answer
    assert state_digest(bootstrapped_demo) == before

    done = clusterctl("-i", DEMO, "-o", "json", "remove-node", "gpu-b3", "--yes")
    assert done.exit_code == 0, done.output
    notes = " ".join(done.json()["notes"])
    assert "does not answer" in notes and "its reset is skipped" in notes
    assert "left on gpu-b3" in notes and "clusterctl -l gpu-b3 reset --yes" in notes
    nodes = clusterctl("-i", DEMO, "-l", "gpu-a1", "-o", "json", "exec", "--sudo", "--",
                       "kubectl --kubeconfig /etc/kubernetes/admin.conf get nodes -o json")
    names = {n.name for n in parse_nodes(nodes.json()["hosts"][0]["stdout"])}
    assert "gpu-b3" not in names and "gpu-b2" in names


def test_an_unreachable_host_whose_node_is_ready_is_refused_and_a_dead_control_plane_keeps_etcds_path() -> None:
    import pytest

    from clusterctl.day2.remove_node import RemovalReport, _may_remove_gone
    from clusterctl.errors import UsageError

    worker = RemovalReport("gpu-b2", control_plane=False, applied=False, via="gpu-a1")
    with pytest.raises(UsageError, match=r"does not answer over SSH .* but its Node is Ready"):
        _may_remove_gone("gpu-b2", "unreachable", KubeNode("gpu-b2", True), worker)
    # A dead control plane is no longer refused here: its etcd member goes first, the note saying so
    # once etcd was read (test_day2_remove_dead_control_plane.py).
    plane = RemovalReport("cp2", control_plane=True, applied=False, via="cp1")
    _may_remove_gone("cp2", "unreachable", _cp("cp2", ready=False), plane)
    assert any("its reset is skipped" in note for note in plane.notes)
    assert any("its etcd data in /var/lib/etcd" in note for note in plane.notes)
    _may_remove_gone("gpu-b2", "unreachable", KubeNode("gpu-b2", False), worker)
    assert any("left on gpu-b2" in note for note in worker.notes)
    assert not any("etcd" in note for note in worker.notes)
