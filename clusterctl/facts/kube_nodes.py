"""The cluster's nodes and the pods on one of them, read through ``kubectl ... -o json``.

``parse_nodes`` reads ``kubectl get nodes -o json`` and ``parse_node`` ``kubectl get node NAME -o
json`` into one model, ``KubeNode``: readiness and why not, cordon state, taints, labels,
annotations, the GPUs it offers and the kubelet's version. ``parse_pods`` reads ``kubectl get pods
-A --field-selector spec.nodeName=NAME -o json``: what drain needs of each pod (its controller,
whether it is a mirror pod, whether it has emptyDir data, its phase, whether it is already being
deleted). Bad JSON, or an object without what the API server always writes, is a ``ParseError``
naming the line, the node and the field: never a crash, a dropped value or a guess.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field
from typing import Any

from clusterctl.errors import ParseError
from clusterctl.facts.kube import GPU_RESOURCE, kubectl, list_items, load_json, ready_condition, string_map

MIRROR_ANNOTATION = "kubernetes.io/config.mirror"
NODES_COMMAND = kubectl("get nodes -o json")


def node_command(name: str) -> str:
    return kubectl(f"get node {shlex.quote(name)} -o json")


def pods_command(node: str) -> str:
    return kubectl(f"get pods --all-namespaces --field-selector {shlex.quote('spec.nodeName=' + node)} -o json")


@dataclass(frozen=True)
class Taint:
    key: str
    effect: str
    value: str = ""

    def spec(self) -> str:
        """``KEY[=VALUE]:EFFECT`` as ``kubectl taint`` writes it."""
        return f"{self.key}{'=' + self.value if self.value else ''}:{self.effect}"


@dataclass(frozen=True)
class KubeNode:
    name: str
    #: The Ready condition: True, False (NotReady: the kubelet posts it, or stopped posting), None: none reported.
    ready: bool | None = None
    #: ``spec.unschedulable``: cordoned.
    unschedulable: bool = False
    taints: tuple[Taint, ...] = ()
    annotations: dict[str, str] = field(default_factory=dict)
    labels: dict[str, str] = field(default_factory=dict)
    #: ``nvidia.com/gpu`` the node offers to pods (0 when the device plugin has not registered).
    allocatable_gpus: int = 0
    #: ``status.nodeInfo.kubeletVersion`` (``v1.36.2``): what the running kubelet reports.
    kubelet_version: str = ""
    #: Why it is not Ready (the condition's reason and message), for reports.
    not_ready_reason: str = ""

    def taint(self, key: str) -> Taint | None:
        return next((t for t in self.taints if t.key == key), None)


@dataclass(frozen=True)
class Pod:
    namespace: str
    name: str
    phase: str
    #: Kind and name of the controller (``ownerReferences`` entry with ``controller: true``); "" for none.
    controller_kind: str = ""
    controller_name: str = ""
    mirror: bool = False
    #: Has an ``emptyDir`` volume: its data is lost when the pod goes.
    local_storage: bool = False
    deleting: bool = False
    #: ``nvidia.com/gpu`` its containers ask for (limits, else requests; init containers' largest counts too).
    gpus: int = 0

    @property
    def ref(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def finished(self) -> bool:
        return self.phase in ("Succeeded", "Failed")


def parse_node(text: str) -> KubeNode:
    """``kubectl get node NAME -o json`` -> the node."""
    what = "kubectl get node -o json"
    data = load_json(what, text)
    if not isinstance(data, dict) or data.get("kind") != "Node":
        raise ParseError(what, "not a Node object")
    return _node(what, data, "the Node")


def parse_nodes(text: str) -> list[KubeNode]:
    """``kubectl get nodes -o json`` (a ``List`` of ``Node``; the API's ``NodeList`` leaves out each
    item's ``kind``) -> every node, in the order listed."""
    what = "kubectl get nodes -o json"
    nodes: list[KubeNode] = []
    for index, item in enumerate(list_items(what, text)):
        if not isinstance(item, dict) or item.get("kind", "Node") != "Node":
            raise ParseError(what, f"items[{index}] is not a Node object")
        nodes.append(_node(what, item, f"items[{index}]"))
    return nodes


def _node(what: str, data: dict[str, Any], where: str) -> KubeNode:
    metadata = data.get("metadata")
    if not isinstance(metadata, dict) or not isinstance(metadata.get("name"), str):
        raise ParseError(what, f"{where} has no metadata.name")
    name = metadata["name"]

    def member(parent: dict[str, Any], key: str) -> dict[str, Any]:
        """``parent[key]`` (``{}`` where absent or null); anything but an object is an error naming the node
        and the field."""
        value = parent.get(key)
        if value is None:
            return {}
        if not isinstance(value, dict):
            raise ParseError(what, f"node {name}: {key} is {type(value).__name__}, not an object")
        return value

    spec, status = member(data, "spec"), member(data, "status")
    raw_taints = spec.get("taints") or []
    if not isinstance(raw_taints, list):
        raise ParseError(what, f"node {name}: spec.taints is {type(raw_taints).__name__}, not a list")
    taints: list[Taint] = []
    for index, item in enumerate(raw_taints):
        if not isinstance(item, dict) or not isinstance(item.get("key"), str) \
                or not isinstance(item.get("effect"), str):
            raise ParseError(what, f"node {name}: spec.taints[{index}] has no key or effect")
        taints.append(Taint(item["key"], item["effect"], str(item.get("value") or "")))
    raw_gpus = member(status, "allocatable").get(GPU_RESOURCE, "0")
    try:
        gpus = int(str(raw_gpus))
    except ValueError:
        raise ParseError(what, f"node {name}: allocatable {GPU_RESOURCE} is {raw_gpus!r}") from None
    ready = ready_condition(data)
    why = "no Ready condition" if ready is None else \
        f"{ready.get('reason', '')}: {ready.get('message', '')}".strip(": ")
    return KubeNode(name, None if ready is None else ready.get("status") == "True", bool(spec.get("unschedulable")),
                    tuple(taints), string_map(member(metadata, "annotations")), string_map(member(metadata, "labels")),
                    gpus, str(member(status, "nodeInfo").get("kubeletVersion") or ""), why)


def parse_pods(text: str) -> list[Pod]:
    """``kubectl get pods -o json`` (a ``List`` of ``Pod``) -> the pods, in the order listed."""
    what = "kubectl get pods -o json"
    pods: list[Pod] = []
    for index, item in enumerate(list_items(what, text)):
        metadata = item.get("metadata") if isinstance(item, dict) else None
        if not isinstance(metadata, dict) or not isinstance(metadata.get("name"), str) \
                or not isinstance(metadata.get("namespace"), str):
            raise ParseError(what, f"items[{index}] has no metadata.name or metadata.namespace")
        owners = [o for o in metadata.get("ownerReferences") or [] if isinstance(o, dict) and o.get("controller")]
        spec = item.get("spec") if isinstance(item.get("spec"), dict) else {}
        status = item.get("status") if isinstance(item.get("status"), dict) else {}
        volumes = [v for v in spec.get("volumes") or [] if isinstance(v, dict)]
        pods.append(Pod(
            metadata["namespace"], metadata["name"], str(status.get("phase") or "Unknown"),
            str(owners[0].get("kind", "")) if owners else "", str(owners[0].get("name", "")) if owners else "",
            mirror=MIRROR_ANNOTATION in string_map(metadata.get("annotations")),
            local_storage=any("emptyDir" in v for v in volumes),
            deleting=metadata.get("deletionTimestamp") is not None, gpus=_gpus(spec)))
    return pods


def _gpus_of(containers: Any) -> list[int]:
    counts = []
    for container in containers if isinstance(containers, list) else []:
        resources = container.get("resources") if isinstance(container, dict) else None
        resources = resources if isinstance(resources, dict) else {}
        asked = None
        for kind in ("limits", "requests"):
            values = resources.get(kind)
            if isinstance(values, dict) and values.get(GPU_RESOURCE) is not None:
                asked = values[GPU_RESOURCE]
                break
        text = str(asked) if asked is not None else "0"
        counts.append(int(text) if text.isdigit() else 0)
    return counts


def _gpus(spec: dict[str, Any]) -> int:
    """The pod's GPUs as the scheduler counts them: its containers' sum, or its largest init container's."""
    return max(sum(_gpus_of(spec.get("containers"))), max(_gpus_of(spec.get("initContainers")), default=0))
