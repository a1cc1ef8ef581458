"""remediate serve's coordination against the real API server: the Lease lines, and two receivers sharing a cap.

The receivers' ``coordination.k8s.io`` Lease (``clusterctl/quarantine/cluster_lease.py``) is
written with ``kubectl create|replace -f - -o json`` and read with ``kubectl get lease``; here
the same lines run on the simulated kubectl (``tests/quarantine/kube_sim.py``) and on the real
kubectl 1.37 against the session's real API server, and must answer alike (exit code, stderr;
the object's fields clusterctl reads). Then two receivers with a cap of 1 get alerts for two
different kwok nodes at the same moment, round after round, through the real API server: never
are both nodes taken out.
"""

from __future__ import annotations

import io
import json
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from contract import Answer
from real_cluster import Cluster

from clusterctl.facts.kube import kubectl
from clusterctl.quarantine import node_ops
from clusterctl.quarantine.cluster_lease import LEASE_NAME, LEASE_NAMESPACE, ClusterLease

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "quarantine"))
from kube_sim import KubeSim

GET = kubectl(f"get lease {LEASE_NAME} -n {LEASE_NAMESPACE} -o json")


def lease(holder: str | None, version: str | None) -> bytes:
    spec: dict[str, Any] = {"leaseDurationSeconds": 60}
    if holder:
        spec.update(holderIdentity=holder, acquireTime="2026-12-06T02:00:00.000000Z",
                    renewTime="2026-12-06T02:00:00.000000Z")
    metadata: dict[str, Any] = {"name": LEASE_NAME, "namespace": LEASE_NAMESPACE}
    if version is not None:
        metadata["resourceVersion"] = version
    return json.dumps({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": metadata,
                       "spec": spec}).encode()


class Sides:
    def __init__(self, sim: KubeSim, cluster: Cluster) -> None:
        self.sim, self.cluster = sim, cluster

    def simulated(self, line: str, stdin: bytes = b"") -> Answer:
        code, out, err = self.sim.sh(line, stdin.decode())
        return Answer(code, out, err)

    def real(self, line: str, stdin: bytes = b"") -> Answer:
        done = self.cluster.plane.sh(line, stdin=stdin or None)
        return Answer(done.returncode, done.stdout, done.stderr)

    def same(self, line: str, stdin: Callable[[str], bytes] | None = None) -> tuple[Answer, Answer]:
        """``line`` on both sides (``stdin`` made from each side's current resourceVersion)."""
        simulated = self.simulated(line, stdin(self.version(self.simulated)) if stdin else b"")
        real = self.real(line, stdin(self.version(self.real)) if stdin else b"")
        assert (simulated.exit_code, simulated.stderr) == (real.exit_code, real.stderr), \
            f"{line}\n  simulated: {simulated}\n  real:      {real}"
        assert seen(simulated) == seen(real), f"{line}\n  simulated: {simulated.stdout}\n  real:      {real.stdout}"
        return simulated, real

    @staticmethod
    def version(side: Callable[[str], Answer]) -> str:
        answer = side(GET)
        return str(json.loads(answer.stdout)["metadata"]["resourceVersion"]) if answer.exit_code == 0 else "1"


def seen(answer: Answer) -> object:
    """What clusterctl reads of a Lease answer: kind, name, holder, duration, that a resourceVersion is there."""
    if answer.exit_code != 0 or not answer.stdout.startswith("{"):
        return answer.stdout
    data = json.loads(answer.stdout)
    spec = data.get("spec") or {}
    return (data.get("kind"), data["metadata"]["name"], spec.get("holderIdentity"), spec.get("leaseDurationSeconds"),
            bool(data["metadata"].get("resourceVersion")))


@pytest.fixture
def sides(control_plane: Cluster, tmp_path: Path) -> Sides:
    control_plane.plane.kubectl(f"delete lease {LEASE_NAME} -n {LEASE_NAMESPACE} --ignore-not-found")
    return Sides(KubeSim(tmp_path, names=("gpu-a1", "gpu-b1")), control_plane)


def test_the_lease_lines_answer_alike(sides: Sides) -> None:
    missing, _ = sides.same(GET)
    assert missing.exit_code == 1 and "(NotFound)" in missing.stderr
    created, _ = sides.same(kubectl("create -f - -o json"), lambda _: lease("receiver-a", None))
    assert created.exit_code == 0
    again, _ = sides.same(kubectl("create -f - -o json"), lambda _: lease("receiver-b", None))
    assert "(AlreadyExists)" in again.stderr
    stale, _ = sides.same(kubectl("replace -f - -o json"), lambda v: lease("receiver-b", str(int(v) - 1)))
    assert "(Conflict)" in stale.stderr
    taken, _ = sides.same(kubectl("replace -f - -o json"), lambda v: lease("receiver-b", v))
    assert taken.exit_code == 0 and seen(taken)[2] == "receiver-b"  # type: ignore[index]
    given_back, _ = sides.same(kubectl("replace -f - -o json"), lambda v: lease(None, v))
    assert given_back.exit_code == 0 and seen(given_back)[2] is None  # type: ignore[index]
    sides.same(kubectl("replace -f - -o json"), lambda _: lease("receiver-c", None))  # no resourceVersion
    sides.same(kubectl(f"delete lease {LEASE_NAME} -n {LEASE_NAMESPACE}"))


def test_two_lease_holders_never_hold_it_together_on_the_real_api_server(control_plane: Cluster) -> None:
    control_plane.plane.kubectl(f"delete lease {LEASE_NAME} -n {LEASE_NAMESPACE} --ignore-not-found")
    first = control_plane.inventory.hosts[0]
    inside: list[str] = []
    overlaps: list[list[str]] = []
    lock = threading.Lock()

    def receiver(name: str) -> None:
        claim = ClusterLease(holder=name)
        transport = control_plane.plane.transport(first)
        for _ in range(6):
            hold = claim.acquire(transport, 120)
            with lock:
                inside.append(name)
                if len(inside) > 1:
                    overlaps.append(list(inside))
            threading.Event().wait(0.05)
            with lock:
                inside.remove(name)
            assert claim.release(transport, hold)

    threads = [threading.Thread(target=receiver, args=(f"receiver-{i}",)) for i in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(600)
    assert not overlaps


def test_two_receivers_with_cap_1_take_one_node_out_on_the_real_api_server(
        control_plane: Cluster, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from test_real_quarantine import through_the_plane

    from clusterctl.fanout import Runner
    from clusterctl.quarantine.receiver import Remediator
    from clusterctl.transport import factory

    through_the_plane(control_plane, monkeypatch)
    monkeypatch.chdir(tmp_path)
    # The control plane is the session's: hosts earlier tests left quarantined would count against the cap.
    nodes = json.loads(control_plane.plane.kubectl("get nodes -o json").stdout)["items"]
    for name in (n["metadata"]["name"] for n in nodes):
        keys = " ".join(f"{node_ops.annotation(k)}-" for k in node_ops.ANNOTATION_KEYS)
        for line in (f"taint nodes {name} {node_ops.TAINT_KEY}-", f"uncordon {name}", f"annotate node {name} {keys}"):
            control_plane.plane.kubectl(line)
    connect = factory.make_connector(factory.ConnectOptions())
    logs = [io.StringIO(), io.StringIO()]
    receivers = [Remediator(control_plane.inventory, lambda: Runner(connect, parallel=4, timeout_s=300), log,
                            max_unavailable="1", state_dir=str(tmp_path)) for log in logs]
    pairs = [("gpu-b1", "gpu-b2"), ("gpu-a2", "gpu-b1"), ("gpu-b2", "gpu-a3")]
    for one, other in pairs:
        go = threading.Barrier(2)

        def post(receiver: Remediator, host: str, go: threading.Barrier = go) -> None:
            go.wait(60)
            receiver.handle(json.dumps({"alerts": [{"status": "firing", "labels": {
                "alertname": "GPUXidError", "Hostname": host}}]}).encode())

        threads = [threading.Thread(target=post, args=(receivers[0], one)),
                   threading.Thread(target=post, args=(receivers[1], other))]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(120)
        assert all(r.settle(300) for r in receivers)
        nodes = json.loads(control_plane.plane.kubectl("get nodes -o json").stdout)["items"]
        out = [n["metadata"]["name"] for n in nodes if n["spec"].get("unschedulable")]
        assert len(out) == 1, (out, [log.getvalue() for log in logs])
        for line in (f"taint nodes {out[0]} {node_ops.TAINT_KEY}-", f"uncordon {out[0]}",
                     f"annotate node {out[0]} " + " ".join(f"{node_ops.annotation(k)}-"
                                                           for k in node_ops.ANNOTATION_KEYS)):
            assert control_plane.plane.kubectl(line).returncode == 0
    decisions = [json.loads(line)["decision"] for log in logs for line in log.getvalue().splitlines()]
    assert decisions.count("quarantine") == len(pairs) and decisions.count("held") == len(pairs)
