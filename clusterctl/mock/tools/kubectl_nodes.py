"""``kubectl`` verbs on nodes and their pods: taint, cordon/uncordon, annotate, pods by node, evictions.

Messages and exit codes are kubectl's (``staging/src/k8s.io/kubectl/pkg/cmd/taint``, ``drain``
for cordon/uncordon, ``annotate``), as quoted in recordings/README.md:

* ``node/N tainted`` / ``node/N untainted``, and ``node/N modified`` whenever ``--overwrite`` is
  given (the real kubectl 1.37 says so; ``tests/upstream/test_contract_kubectl_nodes.py``); a
  taint of the same key and effect without ``--overwrite``: ``error: node N already has K
  taint(s) with same effect(s) and --overwrite is false``; removing a taint the node lacks:
  ``error: taint "K:E" not found``;
* ``node/N cordoned`` / ``node/N already cordoned`` (``uncordoned`` likewise);
* ``node/N annotated``; an annotation already set without ``--overwrite``: ``error: --overwrite is
  false but found the following declared annotation(s): 'K' already has a value (V)``;
* an unknown node: ``Error from server (NotFound): nodes "N" not found``;
* ``create --raw .../pods/NAME/eviction -f -``: the API's ``Status`` (201) on stdout, or
  ``Error from server (TooManyRequests): Cannot evict pod as it would violate the pod's
  disruption budget.`` (429), ``(NotFound)``, ``(InternalError)``, ``(BadRequest)``; exit 1.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

from clusterctl.mock.tools import kube_state as ks
from clusterctl.mock.tools import kube_workloads as kw
from clusterctl.mock.tools.base import ToolContext, ToolResult

EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")
EVICTION_PATH = re.compile(r"^/api/v1/namespaces/(?P<ns>[^/]+)/pods/(?P<name>[^/]+)/eviction$")
_STATUS_REASON = {400: "BadRequest", 404: "NotFound", 429: "TooManyRequests", 500: "InternalError"}


def update_node(ctx: ToolContext, words: list[str], flags: set[str], what: str,
                update: Callable[[ToolContext, str, dict[str, Any], list[str], bool], ToolResult]) -> ToolResult:
    """``kubectl taint``/``annotate node N SPEC...`` (``words``: from the kind on, as ``kubectl.run`` read them):
    ``update(ctx, N, node, specs, overwrite)`` (``taint``, ``annotate``) edits the node inside the cluster's state."""
    node_name = words[1] if words[:1] == ["node"] and len(words) >= 2 else None
    specs = words[2:]
    if node_name is None or not specs:
        return ctx.fail(f"error: at least one {what} update is required\n")
    overwrite = "--overwrite" in flags or "--overwrite=true" in ctx.args
    with ks.edit(ctx) as kube:
        node = (kube.get("nodes") or {}).get(node_name)
        return ks.not_found("nodes", node_name) if node is None else update(ctx, node_name, node, specs, overwrite)


def taint(ctx: ToolContext, node_name: str, node: dict[str, Any], specs: list[str], overwrite: bool) -> ToolResult:
    """``KEY[=VALUE]:EFFECT`` (add) or ``KEY[:EFFECT]-`` (remove)."""
    old = [dict(t) for t in node.get("taints") or []]
    adds: list[dict[str, str]] = []
    removes: list[tuple[str, str]] = []
    for spec in specs:
        if spec.endswith("-"):
            key, _, effect = spec[:-1].partition(":")
            removes.append((key, effect))
            continue
        key_value, _, effect = spec.rpartition(":")
        key, _, value = key_value.partition("=")
        if effect not in EFFECTS or not key:
            return ctx.fail(f'error: invalid taint spec: {spec}, unknown taint effect "{effect}"\n'
                            if key else f"error: invalid taint spec: {spec}\n")
        if any(t["key"] == key and t["effect"] == effect for t in old) and not overwrite:
            return ctx.fail(f"error: node {node_name} already has {key} taint(s) with same effect(s) and "
                            "--overwrite is false\n")
        adds.append({"key": key, "value": value, "effect": effect} if value else {"key": key, "effect": effect})
    # kubectl's reorganizeTaints: the new taints first, then the old ones not replaced; "modified" with
    # --overwrite (or adding and removing at once), else "tainted" when the list grew, else "untainted".
    taints = adds + [t for t in old if not any(a["key"] == t["key"] and a["effect"] == t["effect"] for a in adds)]
    added = len(taints) != len(old)
    for key, effect in removes:
        kept = [t for t in taints if not (t["key"] == key and (not effect or t["effect"] == effect))]
        if len(kept) == len(taints):
            return ctx.fail(f'error: taint "{key}{":" + effect if effect else ""}" not found\n')
        taints = kept
    node["taints"] = taints
    verb = "modified" if (added and removes) or overwrite else "tainted" if added else "untainted"
    return ctx.ok(f"node/{node_name} {verb}\n")


def cordon(ctx: ToolContext, verb: str, words: list[str]) -> ToolResult:
    if not words:
        return ctx.fail(f"error: USAGE: {verb} NODE [flags]\nSee 'kubectl {verb} -h' for help and examples\n")
    name = words[0].split("/", 1)[1] if "/" in words[0] else words[0]
    wanted = verb == "cordon"
    with ks.edit(ctx) as kube:
        node = (kube.get("nodes") or {}).get(name)
        if node is None:
            return ks.not_found("nodes", name)
        if bool(node.get("unschedulable")) == wanted:
            return ctx.ok(f"node/{name} already {verb}ed\n")
        node["unschedulable"] = wanted
    return ctx.ok(f"node/{name} {verb}ed\n")


def annotate(ctx: ToolContext, node_name: str, node: dict[str, Any], specs: list[str], overwrite: bool) -> ToolResult:
    """``KEY=VALUE`` (set) or ``KEY-`` (remove)."""
    annotations = dict(node.get("annotations") or {})
    for spec in specs:
        if spec.endswith("-") and "=" not in spec:
            annotations.pop(spec[:-1], None)
            continue
        key, sep, value = spec.partition("=")
        if not sep or not key:
            return ctx.fail(f"error: invalid annotation format: {spec}\n")
        if key in annotations and annotations[key] != value and not overwrite:
            return ctx.fail("error: --overwrite is false but found the following declared annotation(s): "
                            f"'{key}' already has a value ({annotations[key]})\n")
        annotations[key] = value
    node["annotations"] = annotations
    return ctx.ok(f"node/{node_name} annotated\n")


def node_object(name: str, node: dict[str, Any], labels: dict[str, str], status: dict[str, Any]) -> dict[str, Any]:
    spec: dict[str, Any] = {}
    taints = kw.node_taints(node)
    if taints:
        spec["taints"] = taints
    if node.get("unschedulable"):
        spec["unschedulable"] = True
    metadata: dict[str, Any] = {"name": name, "labels": labels}
    if node.get("annotations"):
        metadata["annotations"] = dict(node["annotations"])
    return {"apiVersion": "v1", "kind": "Node", "metadata": metadata, "spec": spec, "status": status}


def pod_object(key: str, pod: dict[str, Any]) -> dict[str, Any]:
    namespace, name = key.split("/", 1)
    metadata: dict[str, Any] = {"name": name, "namespace": namespace, "labels": dict(pod.get("labels") or {})}
    owner = pod.get("owner")
    if owner:
        group = "v1" if owner.get("kind") == "ReplicationController" else "apps/v1"
        metadata["ownerReferences"] = [{"apiVersion": group, "kind": owner["kind"], "name": owner["name"],
                                        "controller": True, "blockOwnerDeletion": True,
                                        "uid": kw.suffix(str(owner), 8) + "-0000-4000-8000-000000000000"}]
    if pod.get("mirror"):
        metadata["annotations"] = {"kubernetes.io/config.mirror": kw.suffix(key, 12)}
    volumes: list[dict[str, Any]] = [{"name": "kube-api-access", "projected": {"sources": []}}]
    if pod.get("emptydir"):
        volumes.append({"name": "scratch", "emptyDir": {}})
    container: dict[str, Any] = {"name": "main"}
    if pod.get("gpus"):
        container["resources"] = {"limits": {"nvidia.com/gpu": str(pod["gpus"])}}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata,
            "spec": {"nodeName": pod.get("node", ""), "volumes": volumes, "containers": [container]},
            "status": {"phase": pod.get("phase", "Pending")}}


def pods_list(ctx: ToolContext, options: dict[str, str], flags: set[str]) -> ToolResult:
    """``kubectl get pods -A --field-selector spec.nodeName=N -o json``."""
    kube = ks.read(ctx)
    selector = options.get("--field-selector", "")
    node = selector.split("=", 1)[1] if selector.startswith("spec.nodeName=") else None
    everywhere = "-A" in flags or "--all-namespaces" in flags
    namespace = options.get("--namespace", "default")
    pods = kw.pods_on(kube, node) if node is not None else kw.pods_on_any(kube) + [
        (k, p) for k, p in sorted((kube.get("pods") or {}).items()) if not p.get("node")]
    items = [pod_object(k, p) for k, p in pods if everywhere or k.startswith(namespace + "/")]
    return ctx.ok(ks.object_list(items))


def raw_body(ctx: ToolContext, options: dict[str, str]) -> bytes | ToolResult:
    """What ``create --raw PATH -f SOURCE`` sends, or kubectl's refusal (the real 1.36.3 and 1.37.2 words)."""
    source = options.get("--filename", "")
    data = ks.filename_data(ctx, source)
    if data is None:
        return ctx.fail(f"error: open {source}: no such file or directory\n" if source else
                        "error: must specify one of -f and -k\n")
    return data


def create_raw(ctx: ToolContext, path: str, data: bytes) -> ToolResult:
    match = EVICTION_PATH.match(path)
    if match is None:
        return ctx.fail("Error from server (NotFound): the server could not find the requested resource\n")
    try:
        body = json.loads(data.decode() or "null")
    except (UnicodeDecodeError, json.JSONDecodeError):
        body = None
    meta = body.get("metadata") if isinstance(body, dict) else None
    if not isinstance(body, dict) or body.get("kind") != "Eviction" or not isinstance(meta, dict):
        return _status_error(400, "the body of the request was in an unknown format - accepted media types "
                             "include: application/json, application/yaml, application/vnd.kubernetes.protobuf")
    if meta.get("name") != match["name"]:
        return _status_error(400, "name in URL does not match name in Eviction object")
    code, message = kw.evict(ctx, match["ns"], match["name"])
    if code != 201:
        return _status_error(code, message)
    return ctx.ok('{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Success","code":201}\n')


def _status_error(code: int, message: str) -> ToolResult:
    return ToolResult("", f"Error from server ({_STATUS_REASON.get(code, 'InternalError')}): {message}\n", 1)
