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
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from clusterctl.errors import ParseError
from clusterctl.facts.kube import GPU_RESOURCE, json_member, kubectl, list_items, load_json, ready_condition, string_map

MIRROR_ANNOTATION = "kubernetes.io/config.mirror"
#: MIG instances, by profile, under the NVIDIA device plugin's ``migStrategy=mixed`` (``nvidia.com/mig-1g.10gb``);
#: under ``single`` they are ``nvidia.com/gpu`` and GFD names the product ``<GPU>-MIG-<profile>``.
MIG_RESOURCE_PREFIX = "nvidia.com/mig-"
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
    #: GPU resources offered to pods by name (``nvidia.com/gpu``, ``nvidia.com/mig-<profile>``): none without a plugin.
    gpu_resources: dict[str, int] = field(default_factory=dict)
    #: ``status.nodeInfo.kubeletVersion`` (``v1.36.2``): what the running kubelet reports.
    kubelet_version: str = ""
    #: Why it is not Ready (the condition's reason and message), for reports.
    not_ready_reason: str = ""

    def taint(self, key: str) -> Taint | None:
        return next((t for t in self.taints if t.key == key), None)

    @property
    def allocatable_gpus(self) -> int:
        """The GPU devices it offers to pods, whole GPUs and MIG instances, whatever the MIG strategy names them."""
        return sum(self.gpu_resources.values())

    def offered(self) -> Counter[str]:
        """What it offers to pods as it is, by unit: ``GPU(s)``, ``MIG instance(s) (mixed)`` (``nvidia.com/mig-*``),
        ``MIG instance(s) (single)`` (``nvidia.com/gpu`` where GFD names the product ``...-MIG-<profile>``)."""
        gpu = "MIG instance(s) (single)" if "-MIG-" in self.labels.get("nvidia.com/gpu.product", "") else "GPU(s)"
        units: Counter[str] = Counter()
        for name, count in self.gpu_resources.items():
            units[gpu if name == GPU_RESOURCE else "MIG instance(s) (mixed)"] += count
        return +units

    def offers_gpus(self, gpus: int) -> bool:
        """Whether its devices account for ``gpus`` GPUs: one each, or, cut into MIG instances, one or more each."""
        mig = any(unit != "GPU(s)" for unit in self.offered())
        return self.allocatable_gpus >= gpus if mig else self.allocatable_gpus == gpus


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
    #: GPU devices (whole or MIG) its containers ask for (limits, else requests; init containers' largest counts too).
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
        """``parent[key]``, an object (``json_member``), an error naming the node and the field."""
        return json_member(what, parent, key, dict, named=f"node {name}: {key}")

    spec, status = member(data, "spec"), member(data, "status")
    taints: list[Taint] = []
    for index, item in enumerate(json_member(what, spec, "taints", list, named=f"node {name}: spec.taints")):
        if not isinstance(item, dict) or not isinstance(item.get("key"), str) \
                or not isinstance(item.get("effect"), str):
            raise ParseError(what, f"node {name}: spec.taints[{index}] has no key or effect")
        taints.append(Taint(item["key"], item["effect"], str(item.get("value") or "")))
    gpus = gpu_resources(what, f"node {name}: allocatable", member(status, "allocatable"))
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
        node = spec.get("nodeName")
        where = f"pod {metadata['namespace']}/{metadata['name']}" \
            + (f" on node {node}" if isinstance(node, str) else "")
        pods.append(Pod(
            metadata["namespace"], metadata["name"], str(status.get("phase") or "Unknown"),
            str(owners[0].get("kind", "")) if owners else "", str(owners[0].get("name", "")) if owners else "",
            mirror=MIRROR_ANNOTATION in string_map(metadata.get("annotations")),
            local_storage=any("emptyDir" in v for v in volumes),
            deleting=metadata.get("deletionTimestamp") is not None, gpus=_gpus(what, where, spec)))
    return pods


def gpu_resources(what: str, where: str, resources: dict[str, Any]) -> dict[str, int]:
    """The GPU resources among ``resources`` (a node's allocatable, a container's limits or requests) and their
    counts: ``nvidia.com/gpu`` and ``nvidia.com/mig-<profile>``. Extended resources are whole numbers (the API
    server refuses ``500m`` or ``8Gi`` for them and writes ``"8"``); a hand-made or proxied object may carry a
    JSON number. Anything else (a unit, a sign, a fraction, "", a list) is no count at all, an error naming
    ``where``: reading it as 0 would call a busy node idle."""
    counts: dict[str, int] = {}
    for name, raw in resources.items():
        if raw is None or (name != GPU_RESOURCE and not name.startswith(MIG_RESOURCE_PREFIX)):
            continue  # null is "not asked": the API server leaves the key out, a hand-made object may not
        count = int(raw) if isinstance(raw, str) and raw.isascii() and raw.isdigit() else raw
        if not isinstance(count, int) or isinstance(count, bool) or count < 0:
            raise ParseError(what, f"{where} {name} is {raw!r}, not a whole number")
        counts[name] = count
    return counts


def _gpus_of(what: str, where: str, field_name: str, spec: dict[str, Any]) -> list[int]:
    counts = []
    for index, container in enumerate(json_member(what, spec, field_name, list, named=f"{where}: spec.{field_name}")):
        resources = container.get("resources") if isinstance(container, dict) else None
        asked = [gpu_resources(what, f"{where}: spec.{field_name}[{index}].resources.{kind}", values)
                 for kind in ("limits", "requests") if isinstance(resources, dict)
                 and isinstance(values := resources.get(kind), dict)]
        counts.append(sum(next((named for named in asked if named), {}).values()))
    return counts


def _gpus(what: str, where: str, spec: dict[str, Any]) -> int:
    """The pod's GPUs as the scheduler counts them: its containers' sum, or its largest init container's."""
    return max(sum(_gpus_of(what, where, "containers", spec)),
               max(_gpus_of(what, where, "initContainers", spec), default=0))
