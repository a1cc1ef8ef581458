"""Nodes' scheduling state, pods on nodes, PodDisruptionBudgets and evictions in the simulated cluster.

What ``kubectl taint/cordon/annotate``, ``get pods --field-selector spec.nodeName=`` and the
Eviction API (``kubectl create --raw /api/v1/namespaces/NS/pods/NAME/eviction -f -``) act on,
kept in ``cluster.json`` beside the rest of ``kube_state``::

    "nodes": {"gpu-a3": {..., "taints": [{"key": ..., "value": ..., "effect": "NoSchedule"}],
                         "unschedulable": true, "annotations": {"clusterctl.dev/...": "..."}}},
    "pods": {"ns/name": {"node": "gpu-a3", "phase": "Running", "labels": {...},
                         "owner": {"kind": "ReplicaSet", "name": "web-5d4f8c7b9a"},
                         "emptydir": false, "ready_at": 1764570000.0}},
    "workloads": {"ns/web": {"kind": "Deployment", "replicas": 3, "labels": {...}}},
    "pdbs": {"ns/web": {"selector": {...}, "min_available": 2, "max_unavailable": null}},
    "pod_startup_s": 0          # how long a replacement pod takes to become Ready (tests set it)

DaemonSet pods are not stored: every DaemonSet the cluster runs (applied ones, and those of
the Helm releases bootstrap installs) has one pod on every node, as the DaemonSet controller
keeps it (it tolerates ``node.kubernetes.io/unschedulable``), so they are listed, never evicted
for good. A pod of a Deployment or StatefulSet that is evicted is replaced by its controller on
a node that is schedulable for it (the least loaded), Ready after ``pod_startup_s``.

The Eviction API's answers are the API server's (``pkg/registry/core/pod/storage/eviction.go``):
429 ``Cannot evict pod as it would violate the pod's disruption budget.`` when the budget
allows no disruption, 500 when two budgets select the pod, terminal pods evicted regardless
of budgets (recordings/README.md).
"""

from __future__ import annotations

import hashlib
from collections import Counter
from typing import Any

from clusterctl.mock.tools import kube_state as ks
from clusterctl.mock.tools.base import ToolContext

UNSCHEDULABLE_TAINT = "node.kubernetes.io/unschedulable"
#: The Helm releases bootstrap installs whose charts run a DaemonSet, and that DaemonSet's name.
RELEASE_DAEMONSETS = {"nvidia-device-plugin": "nvidia-device-plugin", "dcgm-exporter": "dcgm-exporter",
                      "node-feature-discovery": "node-feature-discovery-worker",
                      "gpu-operator": "nvidia-device-plugin-daemonset"}
_SUFFIX_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"  # what Kubernetes' rand.String draws from


def suffix(seed: str, length: int = 5) -> str:
    digest = hashlib.sha256(seed.encode()).digest()
    return "".join(_SUFFIX_ALPHABET[b % len(_SUFFIX_ALPHABET)] for b in digest[:length])


def daemonsets(kube: dict[str, Any]) -> list[tuple[str, str]]:
    """(namespace, name) of every DaemonSet running in the cluster."""
    found: list[tuple[str, str]] = []
    for key in (kube.get("objects") or {}):
        kind, namespace, name = key.split("/", 2)
        if kind == "daemonset":
            found.append((namespace, name))
    for key, release in (kube.get("releases") or {}).items():
        namespace, name = key.split("/", 1)
        if release.get("status") == "deployed" and name in RELEASE_DAEMONSETS:
            found.append((namespace, RELEASE_DAEMONSETS[name]))
    return sorted(set(found))


def node_taints(node: dict[str, Any]) -> list[dict[str, str]]:
    """The node's taints as the API server shows them: the node lifecycle controller adds
    ``node.kubernetes.io/unschedulable:NoSchedule`` to a cordoned node."""
    taints = [dict(t) for t in node.get("taints") or []]
    if node.get("unschedulable") and not any(t.get("key") == UNSCHEDULABLE_TAINT for t in taints):
        taints.append({"key": UNSCHEDULABLE_TAINT, "effect": "NoSchedule"})
    return taints


def pods_on(kube: dict[str, Any], node_name: str) -> list[tuple[str, dict[str, Any]]]:
    """("ns/name", pod) of every pod bound to ``node_name``, DaemonSet pods included."""
    pods = [(key, pod) for key, pod in sorted((kube.get("pods") or {}).items()) if pod.get("node") == node_name]
    if node_name in (kube.get("nodes") or {}):
        for namespace, name in daemonsets(kube):
            pod_name = f"{name}-{suffix(name + '/' + node_name)}"
            pods.append((f"{namespace}/{pod_name}", {"node": node_name, "phase": "Running",
                                                     "owner": {"kind": "DaemonSet", "name": name},
                                                     "labels": {"app.kubernetes.io/name": name}}))
    return pods


def _schedulable(node: dict[str, Any]) -> bool:
    return not node.get("unschedulable") and not any(
        t.get("effect") in ("NoSchedule", "NoExecute") for t in node.get("taints") or [])


def place(kube: dict[str, Any], avoid: str = "") -> str:
    """The node the scheduler picks for a new pod: schedulable, fewest pods, then by name ("" when none)."""
    load = Counter(str(pod.get("node", "")) for pod in (kube.get("pods") or {}).values())
    candidates = [name for name, node in (kube.get("nodes") or {}).items() if _schedulable(node) and name != avoid]
    return min(candidates, key=lambda n: (load[n], n)) if candidates else ""


def new_pod(kube: dict[str, Any], namespace: str, workload: str, spec: dict[str, Any], index: int,
            avoid: str = "") -> tuple[str, dict[str, Any]]:
    """A pod of ``workload`` as its controller creates it (ReplicaSet-owned for a Deployment)."""
    node = place(kube, avoid)
    started = ks.now(kube) + float(kube.get("pod_startup_s", 0))
    if spec.get("kind") == "StatefulSet":
        name, owner = f"{workload}-{index}", {"kind": "StatefulSet", "name": workload}
    else:
        replica_set = f"{workload}-{suffix(namespace + '/' + workload, 10)}"
        serial = int(spec.get("created", 0)) + 1
        spec["created"] = serial
        name, owner = f"{replica_set}-{suffix(f'{replica_set}/{serial}')}", {"kind": "ReplicaSet",
                                                                              "name": replica_set}
    pod = {"node": node, "phase": "Running" if node else "Pending", "labels": dict(spec.get("labels") or {}),
           "owner": owner, "emptydir": bool(spec.get("emptydir")), "ready_at": started,
           "gpus": int(spec.get("gpus") or 0)}
    return f"{namespace}/{name}", pod


def gpus_asked(pod_spec: dict[str, Any]) -> int:
    """``nvidia.com/gpu`` the pod's containers ask for (limits, else requests)."""
    total = 0
    for container in pod_spec.get("containers") or []:
        if not isinstance(container, dict):
            continue
        resources = container.get("resources") or {}
        asked = (resources.get("limits") or {}).get("nvidia.com/gpu") or \
            (resources.get("requests") or {}).get("nvidia.com/gpu") or 0
        total += int(str(asked)) if str(asked).isdigit() else 0
    return total


def apply_workload(kube: dict[str, Any], kind: str, namespace: str, doc: dict[str, Any]) -> None:
    """A Deployment or StatefulSet applied: its controller makes ``replicas`` pods."""
    spec = doc.get("spec") or {}
    template = spec.get("template") or {}
    labels = dict((template.get("metadata") or {}).get("labels") or {})
    volumes = (template.get("spec") or {}).get("volumes") or []
    name = str((doc.get("metadata") or {}).get("name", ""))
    key = f"{namespace}/{name}"
    workloads = kube.setdefault("workloads", {})
    record = workloads.setdefault(key, {})
    record.update(kind="StatefulSet" if kind == "statefulset" else "Deployment",
                  replicas=int(spec.get("replicas", 1)), labels=labels,
                  emptydir=any(isinstance(v, dict) and "emptyDir" in v for v in volumes),
                  gpus=gpus_asked(template.get("spec") or {}))
    pods = kube.setdefault("pods", {})
    mine = [k for k, p in pods.items() if _owned_by(p, namespace, name, record, k)]
    for index in range(len(mine), record["replicas"]):
        pod_key, pod = new_pod(kube, namespace, name, record, index)
        pods[pod_key] = pod


def _owned_by(pod: dict[str, Any], namespace: str, name: str, record: dict[str, Any], key: str) -> bool:
    owner = pod.get("owner") or {}
    if not key.startswith(namespace + "/"):
        return False
    if record.get("kind") == "StatefulSet":
        return owner.get("kind") == "StatefulSet" and owner.get("name") == name
    return owner.get("kind") == "ReplicaSet" and str(owner.get("name", "")).startswith(name + "-")


def apply_pdb(kube: dict[str, Any], namespace: str, doc: dict[str, Any]) -> None:
    spec = doc.get("spec") or {}
    name = str((doc.get("metadata") or {}).get("name", ""))
    kube.setdefault("pdbs", {})[f"{namespace}/{name}"] = {
        "selector": dict((spec.get("selector") or {}).get("matchLabels") or {}),
        "min_available": spec.get("minAvailable"), "max_unavailable": spec.get("maxUnavailable")}


def _matches(selector: dict[str, Any], labels: dict[str, Any]) -> bool:
    return bool(selector) and all(labels.get(k) == v for k, v in selector.items())


def _healthy(kube: dict[str, Any], pod: dict[str, Any]) -> bool:
    return pod.get("phase") == "Running" and bool(pod.get("node")) and \
        float(pod.get("ready_at", 0)) <= ks.now(kube)


def _count(value: Any, total: int) -> int:
    text = str(value)
    return -(-total * int(text[:-1]) // 100) if text.endswith("%") else int(text)  # the API rounds percentages up


def evict(ctx: ToolContext, namespace: str, name: str) -> tuple[int, str]:
    """Evict one pod: (HTTP status, message). 201 and the pod is gone; 429/500 and nothing changed."""
    key = f"{namespace}/{name}"
    with ks.edit(ctx) as kube:
        pods = kube.setdefault("pods", {})
        pod = pods.get(key)
        if pod is None:
            daemon = next((p for k, p in pods_on_any(kube) if k == key), None)
            if daemon is None:
                return 404, f'pods "{name}" not found'
            return 201, ""  # the DaemonSet controller puts an identical pod back at once
        labels = pod.get("labels") or {}
        budgets = [b for k, b in (kube.get("pdbs") or {}).items()
                   if k.startswith(namespace + "/") and _matches(b.get("selector") or {}, labels)]
        terminal = pod.get("phase") in ("Succeeded", "Failed")
        if len(budgets) > 1 and not terminal:
            return 500, ("This pod has more than one PodDisruptionBudget, which the eviction subresource does not "
                         "support.")
        if budgets and not terminal and _healthy(kube, pod):
            budget = budgets[0]
            selected = [p for k, p in pods.items() if k.startswith(namespace + "/")
                        and _matches(budget.get("selector") or {}, p.get("labels") or {})]
            healthy = sum(1 for p in selected if _healthy(kube, p))
            if budget.get("min_available") is not None:
                desired = _count(budget["min_available"], len(selected))
            else:
                desired = len(selected) - _count(budget.get("max_unavailable") or 0, len(selected))
            if healthy - desired <= 0:
                return 429, "Cannot evict pod as it would violate the pod's disruption budget."
        del pods[key]
        (kube.get("objects") or {}).pop(f"pod/{namespace}/{name}", None)
        _replace(kube, namespace, name, pod)
    return 201, ""


def pods_on_any(kube: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    return [entry for node in sorted(kube.get("nodes") or {}) for entry in pods_on(kube, node)]


def _replace(kube: dict[str, Any], namespace: str, gone_name: str, gone: dict[str, Any]) -> None:
    """The controller of an evicted pod makes a new one (a StatefulSet's keeps its name), away from its node."""
    owner = gone.get("owner") or {}
    for key, record in (kube.get("workloads") or {}).items():
        ns, name = key.split("/", 1)
        if ns != namespace or not _owned_by(gone, ns, name, record, f"{ns}/{gone_name}"):
            continue
        ordinal = gone_name.rsplit("-", 1)[-1]
        index = int(ordinal) if owner.get("kind") == "StatefulSet" and ordinal.isdigit() else 0
        pod_key, pod = new_pod(kube, ns, name, record, index, avoid=str(gone.get("node", "")))
        kube.setdefault("pods", {})[pod_key] = pod
        return
