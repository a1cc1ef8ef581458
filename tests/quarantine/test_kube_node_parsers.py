"""parse_pods on recorded and derived kubectl JSON and on broken input; parse_node / parse_nodes on the simulated
kubectl quarantine drives (the recorded Node outputs: tests/facts/test_kube_nodes.py)."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest
from fixture_files import read_fixture
from kube_sim import KubeSim

from clusterctl.cluster_access import read_nodes
from clusterctl.errors import ParseError
from clusterctl.facts.kube_nodes import Taint, parse_node, parse_nodes, parse_pods
from clusterctl.transport.base import CommandResult, FailureKind, TransportError


def test_a_recorded_replicaset_pod() -> None:
    (pod,) = parse_pods(read_fixture("kubectl", "pods-minikube-replicaset.json"))
    assert (pod.ref, pod.phase, pod.controller_kind, pod.controller_name) == \
        ("default/queue-l4dv8", "Running", "ReplicaSet", "queue")
    assert not pod.mirror and not pod.local_storage and not pod.deleting


def test_daemonset_mirror_and_bare_pods_are_told_apart() -> None:
    pods = {p.name: p for p in parse_pods(read_fixture("kubectl", "DERIVED-pods-daemonset-mirror-bare.json"))}
    assert pods["kube-proxy-7xk2p"].controller_kind == "DaemonSet"
    assert pods["kube-apiserver-minikube"].mirror and pods["kube-apiserver-minikube"].controller_kind == ""
    bare = pods["debug"]
    assert bare.controller_kind == "" and bare.local_storage and bare.deleting


def test_a_cordoned_tainted_node_from_the_simulated_kubectl(tmp_path: object) -> None:
    sim = KubeSim(tmp_path)  # type: ignore[arg-type]
    sim.kubectl("taint nodes gpu-a2 clusterctl.dev/unhealthy=XID_79:NoSchedule")
    sim.kubectl("cordon gpu-a2")
    sim.kubectl("annotate node gpu-a2 clusterctl.dev/quarantine-reason='fell off the bus'")
    node = parse_node(sim.kubectl("get node gpu-a2 -o json")[1])
    assert node.unschedulable and node.taint("clusterctl.dev/unhealthy") == Taint("clusterctl.dev/unhealthy",
                                                                                   "NoSchedule", "XID_79")
    assert node.annotations == {"clusterctl.dev/quarantine-reason": "fell off the bus"}
    nodes = {n.name: n for n in parse_nodes(sim.kubectl("get nodes -o json")[1])}
    assert nodes["gpu-a2"].unschedulable and not nodes["gpu-a1"].unschedulable


@pytest.mark.parametrize("text, where", [
    ('{"items": [', "line 1"),
    ('{"kind": "List"}', "no 'items' list"),
    ('{"items": [{"metadata": {"name": "x"}}]}', "items[0]"),
])
def test_broken_pod_lists_name_what_is_wrong(text: str, where: str) -> None:
    with pytest.raises(ParseError) as caught:
        parse_pods(text)
    assert where in str(caught.value)


class _ControlPlane:
    """A control plane that answers every command with one recorded result."""

    def __init__(self, stdout: str, stderr: str = "", exit_code: int = 0) -> None:
        self.stdout, self.stderr, self.exit_code = stdout, stderr, exit_code
        self.host = SimpleNamespace(name="cp-1")

    def run(self, command: str, *, sudo: bool = False, timeout: float | None = None) -> CommandResult:
        return CommandResult(command, self.stdout, self.stderr, self.exit_code, 0.0)


#: A control plane that refuses kubectl's connection, and what the failure says.
REFUSED = (_ControlPlane("", "The connection to the server 10.0.0.1:6443 was refused - did you specify the right "
                         "host or port?\n", 1),
           "kubectl failed: The connection to the server 10.0.0.1:6443 was refused")


@pytest.mark.parametrize("answer, said", [
    REFUSED,
    (_ControlPlane("<html><body>502 Bad Gateway</body></html>\n"), "line 1"),
    (_ControlPlane('{"kind": "List", "items": [{"metadata": {"name": "gpu-a1"}, "spec": "cordoned"}]}'),
     "node gpu-a1: spec is text, not an object"),
])
def test_status_and_the_receiver_fail_a_node_list_they_cannot_read_the_same_way(answer: _ControlPlane,
                                                                                 said: str) -> None:
    """``quarantine status``, the receiver's marker, upgrade and bootstrap's checks read the node list
    through one reader: a failed kubectl or an answer that is no node list is the control plane's
    failed command, named, never a second error type."""
    from clusterctl import cluster_access
    from clusterctl.quarantine import cluster_marker, status

    assert cluster_marker.read_nodes is read_nodes and status.cluster_nodes is cluster_access.cluster_nodes
    with pytest.raises(TransportError) as caught:
        read_nodes(answer)  # type: ignore[arg-type]
    assert caught.value.kind is FailureKind.COMMAND_FAILED and said in caught.value.message
    (node,) = read_nodes(_ControlPlane(read_fixture("kubectl", "nodelist-kubeadm-v1.28-notready.json"))).values()
    assert node.name == "k8s-controller-01"


def test_drain_fails_the_pod_list_of_a_pod_asking_no_whole_number_of_gpus_naming_node_and_pod() -> None:
    """A pod asking ``8Gi`` GPUs is not a pod asking none: the drain's read of that node fails, named."""
    from clusterctl.cluster_access import read_pods

    data = json.loads(read_fixture("kubectl", "pods-minikube-replicaset.json"))
    data["items"][0]["spec"]["containers"][0]["resources"] = {"limits": {"nvidia.com/gpu": "8Gi"}}
    with pytest.raises(TransportError) as caught:
        read_pods(_ControlPlane(json.dumps(data)), "minikube")  # type: ignore[arg-type]
    assert caught.value.kind is FailureKind.COMMAND_FAILED
    assert "the pods of node minikube could not be read through cp-1 (" in caught.value.message
    assert "pod default/queue-l4dv8 on node minikube: spec.containers[0].resources.limits nvidia.com/gpu is '8Gi'" \
        in caught.value.message


@pytest.mark.parametrize("answer, said", [
    REFUSED,
    (_ControlPlane("<html><body>502 Bad Gateway</body></html>\n"), "node gpu-a2: cannot parse kubectl get node"),
    (_ControlPlane('{"kind": "Node", "metadata": {"name": "gpu-a2"}, "spec": "cordoned"}'),
     "node gpu-a2: spec is text, not an object"),
    # A NotFound of the request itself (an API the server, or a proxy, does not serve) is no missing node.
    (_ControlPlane("", "Error from server (NotFound): the server could not find the requested resource\n", 1),
     "kubectl failed: Error from server (NotFound): the server could not find the requested resource"),
])
def test_one_node_is_read_by_the_same_reader_as_the_node_list(answer: _ControlPlane, said: str) -> None:
    """quarantine, release, heal, status HOST, drain and upgrade read one node through the one reader in
    cluster_access, as health's busy check does: a failed kubectl is the control plane's failed command,
    an answer that is no node names the node asked for, and NotFound is no node at all."""
    from clusterctl import cluster_access
    from clusterctl.heal import run as heal_run
    from clusterctl.heal import status as heal_status
    from clusterctl.health import busy
    from clusterctl.quarantine import release
    from clusterctl.quarantine import run as quarantine_run

    assert quarantine_run.read_node is release.read_node is heal_run.read_node is heal_status.read_node \
        is busy.read_node is cluster_access.read_node
    assert not hasattr(quarantine_run, "parse_node")
    with pytest.raises(TransportError) as caught:
        cluster_access.read_node(answer, "gpu-a2")  # type: ignore[arg-type]
    assert caught.value.kind is FailureKind.COMMAND_FAILED and said in caught.value.message
    missing = _ControlPlane("", 'Error from server (NotFound): nodes "gpu-a9" not found\n', 1)
    assert cluster_access.read_node(missing, "gpu-a9") is None  # type: ignore[arg-type]
    item = read_fixture("kubectl", "nodelist-kubeadm-v1.28-notready.json")
    node_json = json.loads(item)["items"][0] | {"kind": "Node", "apiVersion": "v1"}
    node = cluster_access.read_node(_ControlPlane(json.dumps(node_json)), "k8s-controller-01")  # type: ignore[arg-type]
    assert node is not None and node.name == "k8s-controller-01" and node.ready is False


def test_a_quarantine_is_signed_as_the_run_lock_is_owned_even_with_no_passwd_entry(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Who runs clusterctl is one decision (``engine.lock.who_runs_this``): quarantine's ``by`` annotation and the
    host lock's owner say the same, and a user with no passwd entry (a container) is its uid in both (quarantine
    said ``unknown``)."""
    import getpass
    import os
    import socket

    from clusterctl.changes import Gate
    from clusterctl.engine.lock import LockInfo
    from clusterctl.quarantine.run import QuarantineRequest, quarantine_node

    def no_entry() -> str:
        raise KeyError("getpwuid(): uid not found")

    monkeypatch.setattr(getpass, "getuser", no_entry)
    node_json = json.loads(read_fixture("kubectl", "nodelist-kubeadm-v1.28-notready.json"))["items"][0]
    gate = Gate(apply=False)
    quarantine_node(_ControlPlane(json.dumps(node_json | {"kind": "Node"})), gate,  # type: ignore[arg-type]
                    "k8s-controller-01", QuarantineRequest("xid"), when="2026-12-07T03:00:00Z")
    (annotate,) = [r.change for r in gate.records if r.change.summary.startswith("annotate")]
    signed = f"{os.getuid()}@{socket.gethostname()}"
    assert f"clusterctl.dev/quarantine-by={signed}" in (annotate.command or "")
    assert LockInfo.mine("run").describe().startswith(signed + " ")
