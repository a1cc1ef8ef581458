"""quarantine, release, undo and status as a user runs them, against the real control plane.

The commands run through clusterctl's entry point (``clusterctl -i INVENTORY quarantine ...``)
exactly as on a cluster: the inventory is the demo at Kubernetes 1.37, the first control plane's
transport runs clusterctl's own ``kubectl --kubeconfig /etc/kubernetes/admin.conf ...`` lines
inside the control plane's namespace with the real kubectl 1.37, so every taint, cordon,
annotation and eviction is the real API server's answer; the other hosts stay mock hosts (their
``systemctl is-active slurmd``, health and NCCL checks), as nothing of them is on the API server.

The workload on gpu-b3 is what a drain meets on a real node (namespace ``jobs``): a Deployment
of two pods pinned to the node with a PodDisruptionBudget allowing one disruption (the
controller-manager's disruption controller keeps its status), a DaemonSet pod, a bare pod
without a controller; kube-proxy's DaemonSet pod is there as kubeadm deployed it, and nothing
else (CoreDNS is kept off the node). kwok runs the pods and removes them when
they are deleted, as a kubelet would.
"""

from __future__ import annotations

import json
import re
import shlex
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from clirun import CliRun, clusterctl
from real_cluster import Cluster, kubectl_json

from clusterctl.facts.kube_nodes import parse_node
from clusterctl.inventory.model import Host
from clusterctl.quarantine import node_ops
from clusterctl.transport.base import CommandResult, PutRequest, PutResult, RunRequest, Transport

NODE = "gpu-b3"
NAMESPACE = "jobs"
WORKLOAD = f"""\
apiVersion: v1
kind: Namespace
metadata: {{name: {NAMESPACE}}}
---
apiVersion: apps/v1
kind: Deployment
metadata: {{name: trainer, namespace: {NAMESPACE}}}
spec:
  replicas: 2
  selector: {{matchLabels: {{app: trainer}}}}
  template:
    metadata: {{labels: {{app: trainer}}}}
    spec:
      nodeSelector: {{kubernetes.io/hostname: {NODE}}}
      containers: [{{name: main, image: busybox}}]
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {{name: trainer, namespace: {NAMESPACE}}}
spec: {{maxUnavailable: 1, selector: {{matchLabels: {{app: trainer}}}}}}
---
apiVersion: apps/v1
kind: DaemonSet
metadata: {{name: gpu-exporter, namespace: {NAMESPACE}}}
spec:
  selector: {{matchLabels: {{app: gpu-exporter}}}}
  template:
    metadata: {{labels: {{app: gpu-exporter}}}}
    spec:
      nodeSelector: {{kubernetes.io/hostname: {NODE}}}
      containers: [{{name: main, image: busybox}}]
---
apiVersion: v1
kind: Pod
metadata: {{name: notebook, namespace: {NAMESPACE}}}
spec:
  nodeSelector: {{kubernetes.io/hostname: {NODE}}}
  containers: [{{name: main, image: busybox}}]
"""


def wait_for(what: str, check: Callable[[], bool], cluster: Cluster, deadline_s: float = 90) -> None:
    deadline = time.monotonic() + deadline_s
    while not check():
        if time.monotonic() > deadline:
            pytest.fail(f"{what} did not happen in {deadline_s:g} s\n{where_things_are(cluster)}")
        time.sleep(0.5)


def where_things_are(cluster: Cluster) -> str:
    """What a failed wait shows: every pod's node and phase, the budget, and the scheduler's and kwok's last lines."""
    shown = cluster.plane.kubectl("get pods --all-namespaces -o wide").stdout
    budget = cluster.plane.kubectl(f"-n {NAMESPACE} get pdb -o wide").stdout
    return (f"pods:\n{shown}budget:\n{budget}kube-scheduler:\n{cluster.plane.log_tail('kube-scheduler', 8)}\n"
            f"kwok:\n{cluster.plane.log_tail('kwok', 4)}")


def pods(cluster: Cluster, namespace: str = NAMESPACE) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = kubectl_json(cluster, f"-n {namespace} get pods")["items"]  # type: ignore[assignment]
    return items


def running_on_node(cluster: Cluster) -> list[str]:
    return sorted(p["metadata"]["name"] for p in pods(cluster) if p["spec"].get("nodeName") == NODE
                  and p["status"].get("phase") == "Running" and "deletionTimestamp" not in p["metadata"])


def budget_allows(cluster: Cluster, disruptions: int) -> bool:
    budget = kubectl_json(cluster, f"-n {NAMESPACE} get pdb trainer")
    status: dict[str, Any] = budget.get("status") or {}  # type: ignore[assignment]
    return status.get("observedGeneration") == budget["metadata"]["generation"] and \
        status.get("disruptionsAllowed") == disruptions  # type: ignore[index]


def workload_settled(cluster: Cluster) -> bool:
    """Both trainers, the DaemonSet pod and the notebook run on the node, and the budget allows one eviction."""
    names = running_on_node(cluster)
    return len(names) == 4 and "notebook" in names and budget_allows(cluster, 1)


#: CoreDNS (kubeadm's addon) kept off the node: where the scheduler put its pods depends on which kwok
#: node became Ready first, and a CoreDNS pod on gpu-b3 is one more pod for the drain to evict.
AVOID_NODE = {"spec": {"template": {"spec": {"affinity": {"nodeAffinity": {
    "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{"matchExpressions": [
        {"key": "kubernetes.io/hostname", "operator": "NotIn", "values": [NODE]}]}]}}}}}}}
NO_NODE_AFFINITY = {"spec": {"template": {"spec": {"affinity": {"nodeAffinity": None}}}}}


def others_on_node(cluster: Cluster) -> list[str]:
    """Pods on the node that are not the workload's and that a drain would evict (not a DaemonSet's)."""
    listed: list[dict[str, Any]] = kubectl_json(cluster, "get pods --all-namespaces")["items"]  # type: ignore[assignment]
    return [f"{p['metadata']['namespace']}/{p['metadata']['name']}" for p in listed
            if p["spec"].get("nodeName") == NODE and p["metadata"]["namespace"] != NAMESPACE
            and not any(o.get("kind") == "DaemonSet" for o in p["metadata"].get("ownerReferences") or [])]


def patch_coredns(cluster: Cluster, patch: dict[str, Any]) -> None:
    merge = shlex.quote(json.dumps(patch))
    done = cluster.plane.kubectl(f"-n kube-system patch deployment coredns --type merge -p {merge}")
    assert done.returncode == 0, done.stderr


@pytest.fixture(scope="module")
def workload(control_plane: Cluster) -> Iterator[Cluster]:
    patch_coredns(control_plane, AVOID_NODE)
    wait_for("kube-system's pods off gpu-b3", lambda: not others_on_node(control_plane), control_plane)
    applied = control_plane.plane.kubectl("apply -f -", stdin=WORKLOAD.encode())
    assert applied.returncode == 0, applied.stderr
    wait_for("the workload running on gpu-b3", lambda: workload_settled(control_plane), control_plane)
    try:
        yield control_plane
    finally:
        for line in (f"delete namespace {NAMESPACE} --wait=false", f"uncordon {NODE}",
                     f"taint nodes {NODE} {node_ops.TAINT_KEY}-"):
            control_plane.plane.kubectl(line)
        patch_coredns(control_plane, NO_NODE_AFFINITY)


class FirstControlPlane(Transport):
    """The first control plane in two halves: its Kubernetes side (kubectl, ``/etc/kubernetes``) is the
    real control plane's namespace, its machine (packages, repositories, services, files) its mock host."""

    def __init__(self, host: Host, cluster: Transport, machine: Transport) -> None:
        super().__init__(host)
        self.cluster, self.machine = cluster, machine

    def execute(self, request: RunRequest) -> CommandResult:
        command = request.command
        if command.startswith("kubectl ") or "/etc/kubernetes/" in command:
            return self.cluster.execute(request)
        return self.machine.execute(request)

    def write(self, request: PutRequest) -> PutResult:
        return self.machine.write(request)

    def get(self, path: str, *, sudo: bool = False) -> bytes | None:
        return self.machine.get(path, sudo=sudo)

    def close(self) -> None:
        self.cluster.close()
        self.machine.close()


def through_the_plane(cluster: Cluster, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every ``clusterctl`` run of the test reaches the first control plane's Kubernetes side inside the real
    control plane's namespace (its kubectl lines hit the real API server); everything else is mock hosts."""
    from clusterctl.transport import factory

    first = cluster.inventory.hosts[0].name
    make_connector = factory.make_connector

    def connector(options: factory.ConnectOptions) -> Callable[[Host, float], Transport]:
        mock_hosts = make_connector(options)

        def connect(host: Host, timeout_s: float) -> Transport:
            machine = mock_hosts(host, timeout_s)
            return FirstControlPlane(host, cluster.plane.transport(host), machine) if host.name == first else machine

        return connect

    monkeypatch.setattr(factory, "make_connector", connector)


@pytest.fixture
def cli(control_plane: Cluster, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Callable[..., CliRun]:
    """``clusterctl -i INVENTORY ARGS`` against the real control plane (``through_the_plane``)."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("CLUSTERCTL_STATE_DIR", str(tmp_path / "state"))  # the undo journals go to its undo/
    through_the_plane(control_plane, monkeypatch)
    return lambda *args: clusterctl("-i", control_plane.inventory_path, *args)


def scheduling_state(cluster: Cluster, name: str = NODE) -> dict[str, Any]:
    """What quarantine changes on a node and undo must put back, as the API server has it."""
    node = kubectl_json(cluster, f"get node {name}")
    metadata: dict[str, Any] = node["metadata"]  # type: ignore[assignment]
    spec: dict[str, Any] = node["spec"]  # type: ignore[assignment]
    return {"labels": metadata.get("labels") or {}, "annotations": metadata.get("annotations") or {},
            "taints": spec.get("taints") or [], "unschedulable": bool(spec.get("unschedulable"))}


def untouched(cluster: Cluster) -> dict[str, Any]:
    """Every object a quarantine could change, in a form that only a write changes.

    The workload's objects by resourceVersion. The node's resourceVersion moves every 20 s or so
    with kwok's heartbeat (a status update, as a kubelet's); its metadata, spec and the
    non-status writers of its managed fields do not, unless someone writes them. And the API
    server's own count of eviction requests.
    """
    versions = {}
    for kind in ("pods", "deployments", "replicasets", "daemonsets", "poddisruptionbudgets"):
        listed = kubectl_json(cluster, f"-n {NAMESPACE} get {kind}")
        for item in listed["items"]:  # type: ignore[attr-defined]
            versions[f"{kind}/{item['metadata']['name']}"] = item["metadata"]["resourceVersion"]
    done = cluster.plane.kubectl(f"get node {NODE} -o json --show-managed-fields")
    assert done.returncode == 0, done.stderr
    node = json.loads(done.stdout)
    writers = [(m["manager"], m["operation"], m.get("time")) for m in node["metadata"].pop("managedFields")
               if m.get("subresource") != "status"]
    node["metadata"].pop("resourceVersion")
    metrics = cluster.plane.kubectl("get --raw /metrics")
    assert metrics.returncode == 0, metrics.stderr
    evictions = sum(float(n) for n in re.findall(r'^apiserver_request_total\{[^}]*subresource="eviction"[^}]*\} (\S+)$',
                                                 metrics.stdout, re.M))
    return {"objects": versions, "node": {"metadata": node["metadata"], "spec": node["spec"], "writers": writers},
            "eviction requests": evictions}


def test_a_dry_run_changes_nothing_on_the_api_server(workload: Cluster, cli: Callable[..., CliRun]) -> None:
    before = untouched(workload)
    done = cli("quarantine", NODE, "--reason", "NVLink down on GPU3", "--code", "NVLINK_DOWN", "--drain", "--dry-run")
    assert done.exit_code == 1, done.output  # the drain would leave the bare pod: said, and exit 1
    assert f"would taint node {NODE} clusterctl.dev/unhealthy=NVLINK_DOWN:NoSchedule" in done.stdout
    assert f"would cordon node {NODE}" in done.stdout
    assert re.search(r"would evict 2 pod\(s\): jobs/trainer-\S+, jobs/trainer-", done.stdout), done.stdout
    assert "NOT EVICTED jobs/notebook: declares no controller" in done.stdout
    assert "dry run: nothing was changed" in done.stdout
    assert untouched(workload) == before


def test_quarantine_taints_cordons_annotates_and_drains_honouring_the_budget_and_undo_restores_the_node(
        workload: Cluster, cli: Callable[..., CliRun]) -> None:
    as_it_was = scheduling_state(workload)
    trainers = [n for n in running_on_node(workload) if n.startswith("trainer-")]
    done = cli("-o", "json", "quarantine", NODE, "--reason", "NVLink down on GPU3", "--code", "NVLINK_DOWN",
               "--drain", "--drain-timeout", "10", "--yes")
    assert done.exit_code == 1, done.output  # the drain left pods: the notebook and the budget's last trainer
    (host,) = done.json()["hosts"]
    drain = host["drain"]

    # The node, as the API server has it: tainted, cordoned, annotated with who, when, why and the codes.
    node = kubectl_json(workload, f"get node {NODE}")
    spec, notes = node["spec"], node["metadata"]["annotations"]  # type: ignore[index]
    assert {"key": "clusterctl.dev/unhealthy", "value": "NVLINK_DOWN", "effect": "NoSchedule"} in spec["taints"]
    assert spec["unschedulable"] is True
    assert notes["clusterctl.dev/quarantine-reason"] == "NVLink down on GPU3"
    assert notes["clusterctl.dev/quarantine-codes"] == "NVLINK_DOWN"
    assert re.fullmatch(r"\S+@\S+", notes["clusterctl.dev/quarantine-by"])
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", notes["clusterctl.dev/quarantine-at"])

    # The drain: one trainer evicted through the Eviction API, the other refused by its budget (429)
    # until the timeout, the bare pod not evicted without --force, DaemonSet pods left on purpose.
    ours = [p for p in drain["evicted"] if p.startswith(f"{NAMESPACE}/")]
    assert len(ours) == 1 and ours[0].split("/")[1] in trainers, drain
    left = {p["pod"]: p["reason"] for p in drain["not_evicted"]}
    (blocked,) = [f"{NAMESPACE}/{t}" for t in trainers if f"{NAMESPACE}/{t}" != ours[0]]
    assert set(left) == {f"{NAMESPACE}/notebook", blocked}, left
    assert left[f"{NAMESPACE}/notebook"].startswith("declares no controller")
    assert "PodDisruptionBudget allowed no eviction within 10 s" in left[blocked]
    assert "Cannot evict pod as it would violate the pod's disruption budget." in left[blocked]
    ignored = {p["pod"].split("/")[0] + "/" + p["pod"].split("/")[1].rsplit("-", 1)[0]: p["reason"]
               for p in drain["ignored"]}
    assert ignored == {f"{NAMESPACE}/gpu-exporter": "DaemonSet-managed (gpu-exporter)",
                       "kube-system/kube-proxy": "DaemonSet-managed (kube-proxy)"}
    # ... and the cluster agrees: the evicted trainer is gone, its replacement cannot land anywhere (the
    # node is cordoned and tainted), so the budget allows nothing more; the others still run there.
    assert running_on_node(workload) == sorted([blocked.split("/")[1], "notebook",
                                                *[n for n in running_on_node(workload) if n.startswith("gpu-exp")]])
    pending = [p for p in pods(workload) if p["status"].get("phase") == "Pending"]
    assert len(pending) == 1 and not pending[0]["spec"].get("nodeName")
    assert budget_allows(workload, 0)

    status = cli("status")
    assert status.exit_code == 0, status.output
    assert NODE in status.stdout and "NVLink down on GPU3" in status.stdout and f"clusterctl release {NODE}" in \
        status.stdout

    # Undo would return the node to service: it goes through release's checks, which gpu-b3 (its mlx5_2 at
    # 10 Gb/s) fails, and changes nothing; --skip-checks is the operator saying they know better.
    refused = cli("undo", done.json()["undo_journal"], "--yes")
    assert refused.exit_code == 1 and "IB_PORT_SLOW" in refused.stderr, refused.output
    assert scheduling_state(workload) != as_it_was
    undone = cli("undo", done.json()["undo_journal"], "--yes", "--skip-checks")
    assert undone.exit_code == 0, undone.output
    # Uncordoning makes the node lifecycle controller drop its node.kubernetes.io/unschedulable taint a
    # moment later, as on any cluster.
    wait_for("the node as it was", lambda: scheduling_state(workload) == as_it_was, workload, 30)
    assert scheduling_state(workload) == as_it_was
    # Schedulable again: the replacement lands back on the node.
    # The scheduler retries the pending replacement when the node's update says it may fit; should that
    # event be missed, it retries every unschedulable pod after five minutes (podMaxInUnschedulablePodsDuration).
    wait_for("the workload back on the node", lambda: workload_settled(workload), workload, 330)


def test_release_refuses_a_host_whose_checks_fail_and_lets_a_healthy_one_back(
        workload: Cluster, cli: Callable[..., CliRun]) -> None:
    """gpu-a3's GPU3 lost its NVLinks and gpu-b3's mlx5_2 trained at 10 Gb/s (the demo's recordings): their
    health fails (gpu-b3's beside the other hosts) and they stay out; gpu-a2 is healthy: its health and a
    one-host NCCL test pass (on its mock host), and the API server has it back."""
    for name in ("gpu-a3", NODE, "gpu-a2"):
        done = cli("quarantine", name, "--reason", "maintenance", "--yes")
        assert done.exit_code == 0, done.output
    refused = cli("release", "gpu-a3", NODE, "--yes")
    assert refused.exit_code == 1, refused.output
    assert "REFUSED gpu-a3: stays quarantined: NVLINK_DOWN" in refused.stdout, refused.output
    assert f"REFUSED {NODE}: stays quarantined: IB_PORT_SLOW" in refused.stdout, refused.output
    for name in ("gpu-a3", NODE):
        assert node_ops.is_quarantined(parse_node(workload.plane.kubectl(f"get node {name} -o json").stdout))

    as_quarantined = scheduling_state(workload, "gpu-a2")
    released = cli("release", "gpu-a2", "--yes")
    assert released.exit_code == 0, released.output
    assert "NCCL_BUSBW" in released.stdout and "gpu-a2: released" in released.stdout
    back = scheduling_state(workload, "gpu-a2")
    assert not [t for t in back["taints"] if t["key"] == node_ops.TAINT_KEY]
    assert back["unschedulable"] is False
    # Only the quarantine history stays (issue #35: every host's history is kept in the cluster).
    assert [k for k in back["annotations"] if k.startswith(node_ops.ANNOTATION_PREFIX)] in ([], [node_ops.HISTORY])
    assert back["labels"] == as_quarantined["labels"]
    released_too = cli("release", "gpu-a3", NODE, "--skip-checks", "--yes")
    assert released_too.exit_code == 0 and "checks skipped" in released_too.stdout, released_too.output
    for name in ("gpu-a3", NODE):
        assert not node_ops.is_quarantined(parse_node(workload.plane.kubectl(f"get node {name} -o json").stdout))


def test_upgrade_plan_reads_the_versions_and_cordons_from_the_real_cluster(
        workload: Cluster, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """``upgrade plan --to 1.37.3`` (the next patch): the control plane's version from the static pod manifest
    kubeadm wrote, every node's kubelet version and cordon from the real API server (a quarantined node is
    left cordoned), the packages from the hosts (mock hosts whose repository offers 1.37.3). gpu-b3 runs the
    workload's notebook, a pod no controller owns: its drain is refused as kubectl drain refuses it, so the
    plan stops there as the upgrade would, before any cordon. It changes nothing on the API server."""
    from demo_calls import Variant

    monkeypatch.chdir(tmp_path)
    through_the_plane(workload, monkeypatch)
    inventory = Variant("k8s-1.37-next", kubernetes="1.37.2", containerd="2.3.7").write_inventory(tmp_path / "inv")
    for profile in (tmp_path / "inv" / "profiles").glob("*/profile.yaml"):
        text = profile.read_text().replace('versions: ["1.37.2-1.1"]', 'versions: ["1.37.2-1.1", "1.37.3-1.1"]')
        profile.write_text(text)
    assert clusterctl("-i", inventory, "quarantine", "gpu-b2", "--reason", "row remap", "--yes").exit_code == 0
    before = untouched(workload)
    done = clusterctl("-i", inventory, "-o", "json", "upgrade", "plan", "--to", "1.37.3")
    assert done.exit_code == 1, done.output
    plan = done.json()
    assert (plan["current"], plan["target"], plan["mode"]) == ("1.37.2", "1.37.3", "plan")
    hosts = {h["host"]: h for h in plan["hosts"]}
    assert list(hosts) == ["gpu-a1", "gpu-a2", "gpu-a3", "gpu-b1", "gpu-b2", "gpu-b3"]
    assert {h["kubelet"] for h in hosts.values()} == {"v1.37.2"}
    assert hosts["gpu-a1"]["role"] == "first control plane" and hosts["gpu-a1"]["control_plane"] == "v1.37.2"
    assert hosts["gpu-b2"]["message"] == "cordoned before the upgrade: left cordoned"
    assert "uncordon" not in [s["step"] for s in hosts["gpu-b2"]["steps"]]
    assert "uncordon" in [s["step"] for s in hosts["gpu-b1"]["steps"]]
    assert hosts["gpu-b3"]["status"] == "failed", hosts["gpu-b3"]
    assert hosts["gpu-b3"]["message"].startswith(f"phase drain: the drain cannot evict {NAMESPACE}/notebook: "
                                                 "declares no controller"), hosts["gpu-b3"]
    assert untouched(workload) == before
    assert clusterctl("-i", inventory, "release", "gpu-b2", "--skip-checks", "--yes").exit_code == 0
