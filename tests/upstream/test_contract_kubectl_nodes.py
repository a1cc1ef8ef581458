"""Contract: quarantine's kubectl lines, answered by the simulated kubectl and by the real kubectl 1.37.

Each line is the one clusterctl emits (``node_ops``' taint, cordon and annotation changes, their
undo lines, the eviction, the node read), built from the node as each side reads it, run in the
same order on a simulated cluster (``tests/quarantine/kube_sim.py``) and on the session's real
control plane. Exit codes, stdout and stderr must agree, and so must what clusterctl parses
from ``kubectl get node -o json`` (taints, cordon, its annotations). Where they differed, the
simulator was changed: the real kubectl says ``node/N modified`` for every ``taint --overwrite``.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from contract import Answer
from control_plane import kwok_node
from real_cluster import Cluster

from clusterctl.facts.kube import kubectl
from clusterctl.facts.kube_nodes import KubeNode, node_command, parse_node
from clusterctl.quarantine import node_ops
from clusterctl.quarantine.drain import eviction_command

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "quarantine"))
from kube_sim import KubeSim

NODE = "gpu-b1"
CP = "gpu-a1"


class Sides:
    def __init__(self, sim: KubeSim, cluster: Cluster) -> None:
        self.sim, self.cluster = sim, cluster

    def simulated(self, line: str) -> Answer:
        code, out, err = self.sim.sh(line)
        return Answer(code, out, err)

    def real(self, line: str) -> Answer:
        done = self.cluster.plane.sh(line)
        return Answer(done.returncode, done.stdout, done.stderr)

    def nodes(self) -> tuple[KubeNode, KubeNode]:
        return parse_node(self.simulated(node_command(NODE)).stdout), parse_node(self.real(node_command(NODE)).stdout)

    def same(self, line: str) -> Answer:
        simulated, real = self.simulated(line), self.real(line)
        assert simulated == real, f"{line}\n  simulated: {simulated}\n  real:      {real}"
        return real


@pytest.fixture
def sides(control_plane: Cluster, tmp_path: Path) -> Sides:
    return Sides(KubeSim(tmp_path, names=(CP, NODE)), control_plane)


def seen(node: KubeNode) -> tuple[object, ...]:
    """What quarantine, release and status read of a node."""
    return (sorted(node.taints, key=lambda t: t.key), node.unschedulable,
            {k: v for k, v in node.annotations.items() if k.startswith(node_ops.ANNOTATION_PREFIX)})


def settled(sides: Sides, check: Callable[[KubeNode], bool]) -> KubeNode:
    """The real node once the controller-manager caught up (it taints a cordoned node a moment later)."""
    deadline = time.monotonic() + 30
    while True:
        real = parse_node(sides.real(node_command(NODE)).stdout)
        if check(real) or time.monotonic() > deadline:
            return real
        time.sleep(0.3)


def unschedulable_taint(node: KubeNode) -> bool:
    return node.taint("node.kubernetes.io/unschedulable") is not None


def test_quarantine_and_release_lines_answer_alike(sides: Sides) -> None:
    simulated, real = sides.nodes()
    assert seen(simulated) == seen(real) == ([], False, {})
    taint = node_ops.taint(CP, real, "NVLINK_DOWN")
    cordon = node_ops.cordon(CP, real)
    notes = node_ops.annotate(CP, real, node_ops.quarantine_annotations(
        who="ops@control", when="2026-12-01T23:00:00Z", reason="NVLink down, GPU3", codes=["NVLINK_DOWN"]))
    for change in (*taint, *cordon, *notes):
        assert change.command is not None
        sides.same(change.command)
    sides.same(kubectl(f"taint nodes {NODE} clusterctl.dev/unhealthy=XID_79:NoSchedule"))  # no --overwrite
    sides.same(kubectl(f"cordon {NODE}"))  # already
    sides.same(kubectl(f"annotate node {NODE} clusterctl.dev/quarantine-reason=other"))  # no --overwrite

    quarantined = settled(sides, unschedulable_taint)
    simulated = parse_node(sides.simulated(node_command(NODE)).stdout)
    assert seen(simulated) == seen(quarantined)
    assert node_ops.is_quarantined(quarantined)

    back = (node_ops.untaint(CP, quarantined) + node_ops.cordon(CP, quarantined, on=False)
            + node_ops.annotate(CP, quarantined, node_ops.release_annotations()))
    for change in back:
        assert change.command is not None
        sides.same(change.command)
    sides.same(node_ops.untaint(CP, quarantined)[0].command or "")  # gone already: not found
    sides.same(kubectl(f"uncordon {NODE}"))  # already
    released = settled(sides, lambda n: not unschedulable_taint(n))
    assert seen(parse_node(sides.simulated(node_command(NODE)).stdout)) == seen(released) == ([], False, {})

    # Undo lines: the journal of a quarantine reverted line by line (last first).
    for change in (*taint, *cordon, *notes):
        assert change.command is not None
        sides.same(change.command)
    for change in reversed((*taint, *cordon, *notes)):
        assert change.undo_command is not None
        sides.same(change.undo_command)
    restored = settled(sides, lambda n: not unschedulable_taint(n))
    assert seen(parse_node(sides.simulated(node_command(NODE)).stdout)) == seen(restored) == ([], False, {})


def test_a_missing_node_and_a_missing_pod_answer_alike(sides: Sides) -> None:
    from clusterctl.facts.kube_nodes import Pod

    for line in (node_command("gpu-zz"), kubectl("cordon gpu-zz"), kubectl("taint nodes gpu-zz a=b:NoSchedule"),
                 eviction_command(Pod("default", "gone", "Running", "ReplicaSet", "gone-5d4f8c7b9a")),
                 # kubectl's short names read as the kinds they stand for
                 kubectl("get po gone"), kubectl("delete no gpu-zz"), kubectl("delete po gone")):
        answer = sides.same(line)
        assert answer.exit_code == 1 and "(NotFound)" in answer.stderr


def test_create_from_a_file_answers_alike_and_refuses_a_second_time(sides: Sides) -> None:
    made = "printf 'apiVersion: v1\\nkind: ConfigMap\\nmetadata: {name: contract-made}\\n' | " + kubectl("create -f -")
    assert sides.same(made) == Answer(0, "configmap/contract-made created\n", "")
    assert sides.same(made).stderr == ('Error from server (AlreadyExists): error when creating "STDIN": '
                                       'configmaps "contract-made" already exists\n')
    assert sides.same(kubectl("delete cm/contract-made")).exit_code == 0


def test_a_mismatch_in_the_simulated_kubectl_is_caught(sides: Sides, monkeypatch: pytest.MonkeyPatch) -> None:
    """The contract can fail: a simulated kubectl that says ``tainted`` after ``--overwrite`` is told apart."""
    from clusterctl.mock.tools import kubectl_nodes

    real_taint = kubectl_nodes.taint

    def old_wording(*args: object, **kwargs: object) -> object:
        answer = real_taint(*args, **kwargs)  # type: ignore[arg-type]
        return type(answer)(answer.stdout.replace(" modified", " tainted"), answer.stderr, answer.exit_code)

    monkeypatch.setattr(kubectl_nodes, "taint", old_wording)
    _simulated, real = sides.nodes()
    (change,) = node_ops.taint(CP, real, "NVLINK_DOWN")
    assert change.command is not None and change.undo_command is not None
    with pytest.raises(AssertionError, match="simulated"):
        sides.same(change.command)
    sides.real(change.undo_command)


def test_delete_of_nodes_by_kind_slash_name_or_by_names_answers_alike(control_plane: Cluster, tmp_path: Path) -> None:
    """``delete node/N`` deletes the Node (the simulator once answered NotFound); several names are deleted in
    turn, a missing one NotFound after the others; no name at all is refused before the server is asked."""
    names = ("gpu-c8", "gpu-c9")
    for name in names:
        node = kwok_node(name, {}, 0, control_plane=False)
        created = control_plane.plane.kubectl("create -f -", stdin=json.dumps(node).encode())
        assert created.returncode == 0, created.stderr
    sides = Sides(KubeSim(tmp_path, names=(CP, *names)), control_plane)
    assert sides.same(kubectl("delete node/gpu-c8")) == Answer(0, 'node "gpu-c8" deleted\n', "")
    assert sides.same(kubectl("delete node gpu-c9 gpu-c8")).stdout == 'node "gpu-c9" deleted\n'
    assert sides.same(kubectl("delete node")).exit_code == 1
