"""``kubectl`` on ``coordination.k8s.io`` Leases: get, create and replace with compare-and-swap.

What ``remediate serve`` coordinates its receivers with (``clusterctl/quarantine/cluster_lease.py``).
Every write takes the next ``resourceVersion`` of the simulated cluster under its one lock, so
the compare-and-swap is as atomic as the API server's. Messages are kubectl's:

* ``Error from server (NotFound): leases.coordination.k8s.io "N" not found``;
* ``Error from server (AlreadyExists): error when creating "STDIN": leases.coordination.k8s.io "N"
  already exists``;
* ``Error from server (Conflict): error when replacing "STDIN": Operation cannot be fulfilled on
  leases.coordination.k8s.io "N": the object has been modified; please apply your changes to the
  latest version and try again`` (a stale ``resourceVersion``);
* a replace without ``resourceVersion`` replaces whatever is there (as the real API server does: found
  by ``tests/upstream/test_real_remediate.py``; clusterctl always sends one);
* with ``-o json`` the object as stored (kubectl's four-space indent), else ``lease.coordination.k8s.io/N
  created|replaced``.
"""

from __future__ import annotations

import copy
import json
import time
from typing import Any

from clusterctl.mock.tools import kube_state as ks
from clusterctl.mock.tools.base import ToolContext, ToolResult

RESOURCE = "leases.coordination.k8s.io"


def handles(words: list[str], docs: list[dict[str, Any]]) -> bool:
    """Whether this line is a Lease verb: ``get lease`` (the kind as ``kubectl`` read it), or
    ``create``/``replace -f`` of a Lease (``docs``: what its ``-f`` holds); kubectl's ``delete`` deletes them."""
    if words[:2] == ["get", "lease"]:
        return True
    return words in (["create"], ["replace"]) and docs[:1] != [] and docs[0].get("kind") == "Lease"


def _key(namespace: str, name: str) -> str:
    return f"{namespace}/{name}"


def _printed(ctx: ToolContext, lease: dict[str, Any], options: dict[str, str], text: str) -> ToolResult:
    """With ``-o json`` the Lease as stored, else ``text``."""
    return ctx.ok(json.dumps(lease, indent=4) + "\n" if options.get("--output") == "json" else text)


def _stored(kube: dict[str, Any], doc: dict[str, Any], namespace: str, previous: dict[str, Any] | None) \
        -> dict[str, Any]:
    version = int(kube.get("resource_version", 1000)) + 1
    kube["resource_version"] = version
    meta = dict(doc.get("metadata") or {})
    meta.update(namespace=namespace, resourceVersion=str(version))
    if previous is not None:
        for key in ("uid", "creationTimestamp"):
            meta[key] = previous["metadata"][key]
    else:
        meta.update(uid=f"{version:08x}-0000-4000-8000-000000000000",
                    creationTimestamp=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(ks.now(kube))))
    return {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": meta,
            "spec": copy.deepcopy(doc.get("spec") or {})}


def run(ctx: ToolContext, words: list[str], options: dict[str, str], docs: list[dict[str, Any]],
        source: str) -> ToolResult:
    namespace = options.get("--namespace", "default")
    if words[0] == "get":
        if len(words) < 3:
            return ctx.fail("error: resource name may not be empty\n")
        name = words[2]
        lease = (ks.read(ctx).get("leases") or {}).get(_key(namespace, name))
        if lease is None:
            return ks.not_found(RESOURCE, name)
        holder = str((lease.get("spec") or {}).get("holderIdentity", ""))
        width = max(len(name), 4) + 3
        return _printed(ctx, lease, options, f"{'NAME'.ljust(width)}HOLDER\n{name.ljust(width)}{holder}\n")
    doc = docs[0]
    meta = doc.get("metadata") or {}
    name = str(meta.get("name") or "")
    namespace = str(meta.get("namespace") or namespace)
    with ks.edit(ctx) as kube:
        leases = kube.setdefault("leases", {})
        current = leases.get(_key(namespace, name))
        wanted = str(meta.get("resourceVersion") or "")
        if words[0] == "create" and current is not None:
            return ToolResult("", f'Error from server (AlreadyExists): error when creating "{source}": '
                                  f'{RESOURCE} "{name}" already exists\n', 1)
        if words[0] == "replace" and current is None:
            return ToolResult("", f'Error from server (NotFound): error when replacing "{source}": '
                                  f'{RESOURCE} "{name}" not found\n', 1)
        # Without a resourceVersion the API server replaces unconditionally (the real one does, for Leases).
        if current is not None and wanted and wanted != current["metadata"]["resourceVersion"]:
            return ToolResult("", f'Error from server (Conflict): error when replacing "{source}": Operation '
                                  f'cannot be fulfilled on {RESOURCE} "{name}": the object has been modified; '
                                  f'please apply your changes to the latest version and try again\n', 1)
        lease = _stored(kube, doc, namespace, current)
        leases[_key(namespace, name)] = lease
        return _printed(ctx, lease, options, f"lease.coordination.k8s.io/{name} {words[0]}d\n")
