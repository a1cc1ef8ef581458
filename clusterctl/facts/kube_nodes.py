"""One node's scheduling state and the pods on it, read through ``kubectl ... -o json``.

``parse_node`` reads ``kubectl get node NAME -o json`` (taints, ``spec.unschedulable``,
annotations); ``parse_pods`` reads ``kubectl get pods -A --field-selector spec.nodeName=NAME
-o json``: what drain needs of each pod (its controller, whether it is a mirror pod, whether it
has emptyDir data, its phase, whether it is already being deleted). Bad JSON or an object
without what the API server always writes is a ``ParseError`` naming it.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field
from typing import Any

from clusterctl.errors import ParseError
from clusterctl.facts.kube import GPU_RESOURCE, kubectl, list_items, load_json, ready_condition, string_map

MIRROR_ANNOTATION = "kubernetes.io/config.mirror"


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
class NodeState:
    name: str
    unschedulable: bool
    taints: tuple[Taint, ...] = ()
    annotations: dict[str, str] = field(default_factory=dict)
    labels: dict[str, str] = field(default_factory=dict)
    #: The Ready condition: True, False (NotReady: the kubelet posts it, or stopped posting), None: none reported.
    ready: bool | None = None

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


def parse_node(text: str) -> NodeState:
    """``kubectl get node NAME -o json`` -> its name, cordon state, taints, annotations and labels."""
    what = "kubectl get node -o json"
    return _node(what, load_json(what, text))


def _node(what: str, data: Any) -> NodeState:
    if not isinstance(data, dict) or data.get("kind") != "Node":
        raise ParseError(what, "not a Node object")
    metadata = data.get("metadata")
    if not isinstance(metadata, dict) or not isinstance(metadata.get("name"), str):
        raise ParseError(what, "the Node has no metadata.name")
    raw_spec = data.get("spec")
    spec: dict[str, Any] = raw_spec if isinstance(raw_spec, dict) else {}
    taints: list[Taint] = []
    for index, item in enumerate(spec.get("taints") or []):
        if not isinstance(item, dict) or not isinstance(item.get("key"), str) or not isinstance(item.get("effect"),
                                                                                               str):
            raise ParseError(what, f"spec.taints[{index}] has no key or effect")
        taints.append(Taint(item["key"], item["effect"], str(item.get("value") or "")))
    ready = ready_condition(data)
    return NodeState(metadata["name"], bool(spec.get("unschedulable")), tuple(taints),
                     string_map(metadata.get("annotations")), string_map(metadata.get("labels")),
                     None if ready is None else ready.get("status") == "True")


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


def parse_node_list(text: str) -> list[NodeState]:
    """``kubectl get nodes -o json`` (a ``List`` of ``Node``) -> every node's scheduling state."""
    what = "kubectl get nodes -o json"
    nodes: list[NodeState] = []
    for index, item in enumerate(list_items(what, text)):
        try:
            nodes.append(_node(what, item))
        except ParseError as exc:
            raise ParseError(what, f"items[{index}]: {exc.reason}") from None
    return nodes
