"""``kubectl -n kube-system exec etcd-NODE -- etcdctl ...``: etcdctl in a control plane's etcd static pod.

The members are the simulated cluster's control-plane nodes (kubeadm's stacked etcd: one member per
control plane, named after its node) less those removed (``kubeadm reset phase remove-etcd-member`` or
``etcdctl member remove``); none, and no etcd pod, when the ClusterConfiguration kubeadm init was
given sets ``etcd.external``. A member is unhealthy when its host is switched off (``power: off``) or
set to ``etcd: down``. Output shapes are etcdctl 3.5's (``-w json``: decimal IDs, one health object per
endpoint, "Error: unhealthy cluster" and exit 1 when any endpoint is unhealthy; ``member remove HEXID``:
"Member ID removed from cluster CLUSTERID"); tests/fixtures/etcdctl/README.md names the public
sources. Simplification: a control plane's Node deleted before its member is removed takes the member
with it (the real cluster keeps it).
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from clusterctl.mock.power import powered_off
from clusterctl.mock.tools import kube_state as ks
from clusterctl.mock.tools.base import ToolContext, ToolResult, option, split_args

CLUSTER_ID = 0x7B8914296AFE3773


def _member_id(name: str) -> int:
    return int.from_bytes(hashlib.sha256(f"etcd-member/{name}".encode()).digest()[:8], "big") | 1


def _address(name: str) -> str:
    digest = hashlib.sha256(name.encode()).digest()
    return f"192.168.{digest[0]}.{digest[1] or 1}"


def members(kube: dict[str, Any]) -> list[dict[str, Any]]:
    removed = set(kube.get("etcd_removed") or [])
    found = []
    for name, node in sorted((kube.get("nodes") or {}).items()):
        if node.get("control_plane") and str(node.get("host", name)) not in removed and name not in removed:
            address = _address(name)
            found.append({"ID": _member_id(name), "name": name, "peerURLs": [f"https://{address}:2380"],
                          "clientURLs": [f"https://{address}:2379"], "host": str(node.get("host", name))})
    return found


def _healthy(ctx: ToolContext, host: str) -> bool:
    return not powered_off(ks.other_host(ctx, host)) and ks.fault(ctx, host, "etcd") != "down"


def run(ctx: ToolContext, pod: str, argv: list[str]) -> ToolResult:
    kube = ks.read(ctx)
    node = pod.removeprefix("etcd-")
    record = (kube.get("nodes") or {}).get(node)
    external = "external" in ((kube.get("cluster_configuration") or {}).get("etcd") or {})
    if not pod.startswith("etcd-") or record is None or not record.get("control_plane") or external:
        return ks.not_found("pods", pod)
    if not _healthy(ctx, str(record.get("host", node))):
        return ToolResult("", "error: unable to upgrade connection: container not found (\"etcd\")\n", 1)
    if argv[:1] != ["etcdctl"]:
        return ToolResult("", f'error: exec: "{argv[0] if argv else ""}": executable file not found in $PATH\n', 1)
    words = split_args(argv[1:], ("-w", "--write-out"))[0]
    json_out = option(argv, "-w", "--write-out") == "json"
    listed = members(kube)
    header = {"cluster_id": CLUSTER_ID, "member_id": _member_id(node), "raft_term": 4}
    if words[:2] == ["member", "list"] and json_out:
        shown = [{k: v for k, v in m.items() if k != "host"} for m in listed]
        return ctx.ok(json.dumps({"header": header, "members": shown}) + "\n")
    if words[:2] == ["endpoint", "health"] and "--cluster" in argv and json_out:
        health = []
        for m in listed:
            ok = _healthy(ctx, m["host"])
            entry = {"endpoint": m["clientURLs"][0], "health": ok, "took": "1.893ms" if ok else "5.000811362s"}
            if not ok:
                entry["error"] = "context deadline exceeded"
            health.append(entry)
        bad = not all(e["health"] for e in health)
        return ToolResult(json.dumps(health) + "\n", "Error: unhealthy cluster\n" if bad else "", 1 if bad else 0)
    if words[:2] == ["member", "remove"] and len(words) == 3:
        try:  # etcdctl reads the ID as hexadecimal (ParseUint base 16): leading zeros are allowed.
            wanted: int | None = int(words[2], 16)
        except ValueError:
            wanted = None
        target = next((m for m in listed if m["ID"] == wanted), None)
        if target is None:
            return ToolResult("", "Error: etcdserver: member not found\n", 1)
        with ks.edit(ctx) as live:
            ks.remove_etcd_member(live, target["host"])
        # etcdctl prints both IDs with Go's %16x: an ID under 16 hex digits is padded with spaces.
        return ctx.ok(f"Member {target['ID']:16x} removed from cluster {CLUSTER_ID:16x}\n")
    return ToolResult("", f"Error: unknown command {' '.join(words[:2])!r} for \"etcdctl\"\n", 1)
