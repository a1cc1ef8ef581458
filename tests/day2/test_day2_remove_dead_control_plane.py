"""``remove-node`` of a control plane: etcd's quorum checked from a healthy control plane by etcd's own health
(never the Nodes' Ready), alive or gone; one that is gone has its member removed by its ID (etcdctl in that
control plane's etcd pod), then the Node; refused when the members left healthy would not be a majority."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from clirun import clusterctl
from day2_helpers import mock_cluster_folder, set_fault, state_digest

from clusterctl.facts.etcd import parse_member_list
from clusterctl.facts.kube_nodes import parse_nodes


def _mock_state() -> Path:
    return Path(os.environ["CLUSTERCTL_MOCK_STATE"])  # this test's own (tests/conftest.py)


def _on_a1(inventory: Path, command: str) -> str:
    done = clusterctl("-i", inventory, "-l", "gpu-a1", "-o", "json", "exec", "--sudo", "--", command)
    assert done.exit_code == 0, done.output
    return str(done.json()["hosts"][0]["stdout"])


def _members(inventory: Path) -> set[str]:
    from clusterctl.facts.etcd import etcdctl

    return {m.name for m in parse_member_list(_on_a1(inventory, etcdctl("gpu-a1", "member list -w json")))}


def _refused(inventory: Path, mock_state: Path) -> str:
    """``remove-node gpu-a3 --yes`` refused: exit 2, a message and no traceback, the mock cluster as it was;
    the message."""
    before = state_digest(mock_state)
    refused = clusterctl("-i", inventory, "remove-node", "gpu-a3", "--yes")
    assert refused.exit_code == 2 and "Traceback" not in refused.output, refused.output
    assert state_digest(mock_state) == before
    return refused.stderr


def test_a_dead_control_plane_is_removed_with_its_etcd_member_when_quorum_holds(bootstrapped_3cp: Path) -> None:
    inventory, mock_state = bootstrapped_3cp, _mock_state()
    assert _members(inventory) == {"gpu-a1", "gpu-a2", "gpu-a3"}
    set_fault(mock_state, "gpu-a3", "power", "off")
    before = state_digest(mock_state)

    plan = clusterctl("-i", inventory, "-o", "json", "remove-node", "gpu-a3", "--dry-run")
    assert plan.exit_code == 0, plan.output
    report = plan.json()
    assert [s["step"] for s in report["steps"]] == ["drain", "etcd-member", "delete-node"]
    (remove,) = report["steps"][1]["changes"]
    assert report["steps"][1]["runs_on"] == "gpu-a1"
    assert "kubectl --kubeconfig /etc/kubernetes/admin.conf -n kube-system exec etcd-gpu-a1 -- etcdctl" \
        in remove["command"]
    assert "--cert=/etc/kubernetes/pki/etcd/healthcheck-client.crt" in remove["command"]
    assert " member remove " in remove["command"] and "(gpu-a3)" in remove["summary"]
    assert "3 etcd member(s) now, 2 after; 2 healthy" in report["etcd"]
    assert state_digest(mock_state) == before  # the dry run changed nothing
    assert _members(inventory) == {"gpu-a1", "gpu-a2", "gpu-a3"}

    done = clusterctl("-i", inventory, "-o", "json", "remove-node", "gpu-a3", "--yes")
    assert done.exit_code == 0, done.output
    assert _members(inventory) == {"gpu-a1", "gpu-a2"}
    names = {n.name for n in parse_nodes(_on_a1(inventory, "kubectl --kubeconfig /etc/kubernetes/admin.conf "
                                                            "get nodes -o json"))}
    assert "gpu-a3" not in names and {"gpu-a1", "gpu-a2"} <= names
    notes = " ".join(done.json()["notes"])
    assert "its reset is skipped" in notes and "etcd member is removed by its ID from gpu-a1" in notes
    assert "/var/lib/etcd" in notes


def test_a_dead_control_plane_whose_removal_would_break_quorum_is_refused(bootstrapped_3cp: Path) -> None:
    inventory = bootstrapped_3cp
    mock_state = _mock_state()
    set_fault(mock_state, "gpu-a3", "power", "off")
    # gpu-a2's Node stays Ready but its etcd does not answer: only etcd's own health tells.
    set_fault(mock_state, "gpu-a2", "etcd", "down")
    said = _refused(inventory, mock_state)
    assert "refusing to remove gpu-a3" in said and "quorum needs 2" in said and "unhealthy: gpu-a2" in said
    set_fault(mock_state, "gpu-a2", "etcd", None)
    assert _members(inventory) == {"gpu-a1", "gpu-a2", "gpu-a3"}


@pytest.mark.parametrize("gone", [False, True], ids=["alive", "gone"])
def test_etcds_own_health_decides_not_the_nodes_ready(bootstrapped_3cp: Path, gone: bool) -> None:
    inventory, mock_state = bootstrapped_3cp, _mock_state()
    if gone:
        set_fault(mock_state, "gpu-a3", "power", "off")
    # gpu-a2's kubelet is NotReady, its etcd member healthy: quorum holds, the removal goes ahead.
    set_fault(mock_state, "gpu-a2", "kubelet", "not-ready")
    plan = clusterctl("-i", inventory, "-o", "json", "remove-node", "gpu-a3", "--dry-run")
    assert plan.exit_code == 0, plan.output
    assert "etcd-member" in [s["step"] for s in plan.json()["steps"]]
    assert f"3 etcd member(s) now, 2 after; {2 if gone else 3} healthy" in plan.json()["etcd"]


def test_a_live_control_plane_whose_removal_would_break_quorum_is_refused_with_every_node_ready(
        bootstrapped_3cp: Path) -> None:
    inventory, mock_state = bootstrapped_3cp, _mock_state()
    # gpu-a2's Node is Ready, its etcd member down: removing gpu-a3 would leave one healthy member of two.
    set_fault(mock_state, "gpu-a2", "etcd", "down")
    said = _refused(inventory, mock_state)
    assert "quorum needs 2" in said and "unhealthy: gpu-a2" in said
    assert _members(inventory) == {"gpu-a1", "gpu-a2", "gpu-a3"}


def test_a_live_control_plane_leaves_etcd_with_kubeadm_when_a_kubelet_is_not_ready(bootstrapped_3cp: Path) -> None:
    inventory, mock_state = bootstrapped_3cp, _mock_state()
    set_fault(mock_state, "gpu-a2", "kubelet", "not-ready")
    done = clusterctl("-i", inventory, "-o", "json", "remove-node", "gpu-a3", "--yes")
    assert done.exit_code == 0, done.output
    assert _members(inventory) == {"gpu-a1", "gpu-a2"}


def test_the_simulated_etcdctl_answers_in_etcdctls_shapes(bootstrapped_3cp: Path) -> None:
    from clusterctl.facts.etcd import etcdctl, parse_endpoint_health

    mock_state = _mock_state()
    set_fault(mock_state, "gpu-a2", "power", "off")
    health = clusterctl("-i", bootstrapped_3cp, "-l", "gpu-a1", "-o", "json", "exec", "--sudo", "--",
                        etcdctl("gpu-a1", "endpoint health --cluster -w json"))
    (host,) = health.json()["hosts"]
    assert host["exit_code"] == 1 and "Error: unhealthy cluster" in host["stderr"]
    assert sorted(h.healthy for h in parse_endpoint_health(host["stdout"])) == [False, True, True]
    listed = json.loads(_on_a1(bootstrapped_3cp, etcdctl("gpu-a1", "member list -w json")))
    assert set(listed) == {"header", "members"} and all(isinstance(m["ID"], int) for m in listed["members"])


def _external_etcd(mock_state: Path) -> None:
    """The cluster as kubeadm init makes it with ``etcd.external``: no control plane runs an etcd pod."""
    from clusterctl.mock.state import ClusterState

    with ClusterState(mock_cluster_folder(mock_state)).edit() as data:
        data["kubernetes"]["cluster_configuration"]["etcd"] = {"external": {
            "endpoints": ["https://10.0.0.50:2379"], "caFile": "/etc/kubernetes/pki/etcd/ca.crt",
            "certFile": "/etc/kubernetes/pki/apiserver-etcd-client.crt",
            "keyFile": "/etc/kubernetes/pki/apiserver-etcd-client.key"}}


@pytest.mark.parametrize("gone", [False, True], ids=["alive", "gone"])
def test_with_external_etcd_a_control_plane_is_removed_and_etcd_left_alone(bootstrapped_3cp: Path,
                                                                          gone: bool) -> None:
    inventory, mock_state = bootstrapped_3cp, _mock_state()
    _external_etcd(mock_state)
    if gone:
        set_fault(mock_state, "gpu-a3", "power", "off")
    done = clusterctl("-i", inventory, "-o", "json", "remove-node", "gpu-a3", "--yes")
    assert done.exit_code == 0, done.output
    report = done.json()
    assert "etcd-member" not in [s["step"] for s in report["steps"]] and report["etcd"] == "external"
    assert "external etcd: its members are not the cluster's to change; nothing removed from etcd" \
        in report["notes"]
    assert not any("etcd member is removed" in n for n in report["notes"])
    names = {n.name for n in parse_nodes(_on_a1(inventory, "kubectl --kubeconfig /etc/kubernetes/admin.conf "
                                                            "get nodes -o json"))}
    assert "gpu-a3" not in names


def test_a_down_etcd_pod_on_the_first_control_plane_is_passed_over_for_the_next(bootstrapped_3cp: Path) -> None:
    inventory, mock_state = bootstrapped_3cp, _mock_state()
    # gpu-a1 (whose kubectl remove-node uses) has its etcd down: gpu-a2's etcd pod answers, and etcd's own
    # health, not the missing answer, refuses: gpu-a3 leaving would leave 1 healthy member of 2.
    set_fault(mock_state, "gpu-a1", "etcd", "down")
    said = _refused(inventory, mock_state)
    assert "quorum needs 2 (unhealthy: gpu-a1)" in said and "exec etcd-gpu-a2 --" in said, said


def test_removal_is_refused_when_no_etcd_pod_answers_naming_each_tried(bootstrapped_3cp: Path) -> None:
    inventory, mock_state = bootstrapped_3cp, _mock_state()
    set_fault(mock_state, "gpu-a1", "etcd", "down")
    set_fault(mock_state, "gpu-a2", "etcd", "down")
    said = _refused(inventory, mock_state)
    assert "no etcd member answered" in said and "Nothing was changed" in said
    assert "etcd-gpu-a1 (" in said and "etcd-gpu-a2 (" in said
