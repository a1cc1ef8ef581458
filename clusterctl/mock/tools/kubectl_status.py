"""``kubectl patch node N --subresource=status`` (conditions, merged by type as a strategic merge patch
does) and the ServiceAccount token Secrets the token controller fills (``get secrets -l ... -o json``).

Conditions other writers put on a node (clusterctl's node agent, node-problem-detector) are kept in
``kubernetes.nodes.<name>.conditions`` and shown after the kubelet's ``Ready``. A Secret of type
``kubernetes.io/service-account-token`` whose annotated ServiceAccount exists gets a ``data.token``
(the same one every time, as kube-controller-manager's token controller keeps it), as on a cluster
with kube-controller-manager running.
"""

from __future__ import annotations

import base64
import hashlib
import json
from typing import Any

from clusterctl.mock.tools import kube_state as ks
from clusterctl.mock.tools.base import ToolContext, ToolResult

SA_ANNOTATION = "kubernetes.io/service-account.name"


def patch_node_status(ctx: ToolContext, name: str, options: dict[str, str]) -> ToolResult:
    if options.get("--subresource") != "status" or options.get("--type", "strategic") != "strategic":
        return ctx.fail("error: the simulated kubectl patches only node status with --type=strategic\n")
    try:
        body = json.loads(options.get("--patch", ""))
    except json.JSONDecodeError as exc:
        return ctx.fail(f"error: unable to parse \"{options.get('--patch', '')}\": {exc}\n")
    wanted = ((body.get("status") or {}).get("conditions") or []) if isinstance(body, dict) else []
    with ks.edit(ctx) as kube:
        node = (kube.get("nodes") or {}).get(name)
        if node is None:
            return ks.not_found("nodes", name)
        kept = {c.get("type"): c for c in node.get("conditions") or []}
        for condition in wanted:
            if not isinstance(condition, dict) or not condition.get("type"):
                return ctx.fail('The Node "' + name + '" is invalid: status.conditions: Required value\n')
            kept[condition["type"]] = {**kept.get(condition["type"], {}), **condition}
        node["conditions"] = list(kept.values())
    return ctx.ok(f"node/{name} patched\n")


def extra_conditions(node: dict[str, Any]) -> list[dict[str, Any]]:
    return [dict(c) for c in node.get("conditions") or [] if isinstance(c, dict) and c.get("type") != "Ready"]


def _token(kube: dict[str, Any], namespace: str, account: str) -> str:
    seed = f"{kube.get('endpoint', '')}/{namespace}/{account}".encode()
    return "eyJhbGciOiJSUzI1NiJ9." + base64.urlsafe_b64encode(hashlib.sha256(seed).digest()).decode().rstrip("=")


def secrets_list(ctx: ToolContext, namespace: str, selector: str) -> ToolResult:
    """``get secrets -n NS -l KEY[=VALUE] -o json``: the Secrets applied there with that label."""
    key, _, value = selector.partition("=")
    kube = ks.read(ctx)
    objects = kube.get("objects") or {}
    items = []
    for object_key, entry in sorted(objects.items()):
        kind, ns, _name = object_key.split("/", 2)
        if kind != "secret" or ns != namespace:
            continue
        doc = json.loads(entry.get("spec") or "{}")
        labels = (doc.get("metadata") or {}).get("labels") or {}
        if key not in labels or (value and labels[key] != value):
            continue
        account = ((doc.get("metadata") or {}).get("annotations") or {}).get(SA_ANNOTATION)
        if doc.get("type") == "kubernetes.io/service-account-token" and account and \
                f"serviceaccount/{ns}/{account}" in objects:
            token = _token(kube, ns, str(account))
            doc["data"] = {"token": base64.b64encode(token.encode()).decode(), "namespace":
                           base64.b64encode(ns.encode()).decode()}
        items.append(doc)
    return ctx.ok(ks.object_list(items, {}))
