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


def _got(found: list[dict[str, Any]], options: dict[str, str], *, one_named: bool) -> str:
    """What ``get`` prints of the Leases it found: with ``-o json`` the one named, or a ``List`` when several were
    named (of none too); else kubectl's table (nothing when none was found)."""
    if options.get("--output") == "json":
        if one_named:
            return "".join(json.dumps(lease, indent=4) + "\n" for lease in found)
        return json.dumps({"apiVersion": "v1", "items": found, "kind": "List", "metadata": {"resourceVersion": ""}},
                          indent=4) + "\n"
    rows = [("NAME", "HOLDER")] + [(lease["metadata"]["name"], str((lease.get("spec") or {}).get("holderIdentity", "")))
                                   for lease in found]
    width = max(len(name) for name, _holder in rows) + 3
    return "".join(f"{name.ljust(width)}{holder}\n" for name, holder in rows) if found else ""


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
        # Each name in turn, as kubectl gets them: those found printed, a NotFound line (exit 1) for each other.
        stored = ks.read(ctx).get("leases") or {}
        found = [stored[_key(namespace, name)] for name in words[2:] if _key(namespace, name) in stored]
        missing = [name for name in words[2:] if _key(namespace, name) not in stored]
        return ToolResult(_got(found, options, one_named=len(words) == 3),
                          "".join(ks.not_found(RESOURCE, name).stderr for name in missing), 1 if missing else 0)
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
        return ctx.ok(json.dumps(lease, indent=4) + "\n" if options.get("--output") == "json"
                      else f"lease.coordination.k8s.io/{name} {words[0]}d\n")
