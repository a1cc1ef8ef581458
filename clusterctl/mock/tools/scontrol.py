"""``scontrol show node`` and ``scontrol update nodename=... state=drain|resume reason=...``.

Slurm's node states live in the mock cluster's ``cluster.json`` under ``slurm.nodes``
(``{"gpu-a3": {"state": "IDLE", "reason": "", "reason_by": "root@..."}}``); every host of the
mock cluster is a Slurm node, IDLE until drained. Messages are Slurm 23.02's
(``src/scontrol/update_node.c``, ``src/api/node_info.c``), modelled: ``Node X not found``
(exit 1), ``You must specify a reason when DOWNING or DRAINING a node. Request denied`` (exit
1), a drained idle node shows ``State=IDLE+DRAIN`` and its ``Reason=... [user@time]``.
"""

from __future__ import annotations

import time

from clusterctl.mock.tools import kube_state as ks
from clusterctl.mock.tools.base import ToolContext, ToolResult

PACKAGES = ("slurm-client", "slurmd", "slurm-wlm")


def _known(ctx: ToolContext, name: str) -> bool:
    """Every host of the mock cluster is a Slurm node (those used so far, and every Kubernetes node)."""
    return (ctx.host.folder.parent / name).is_dir() or name in (ctx.host_name, ctx.hostname) \
        or name in (ks.read(ctx).get("nodes") or {})


def _record(ctx: ToolContext, name: str) -> dict[str, str]:
    nodes = (ctx.cluster.read().get("slurm") or {}).get("nodes") or {}
    found = nodes.get(name)
    return dict(found) if isinstance(found, dict) else {"state": "IDLE", "reason": ""}


def _show(ctx: ToolContext, name: str, oneliner: bool) -> ToolResult:
    if not _known(ctx, name):
        return ctx.fail(f"Node {name} not found\n")
    node = _record(ctx, name)
    sep = " " if oneliner else "\n   "
    fields = [f"NodeName={name} Arch=x86_64 CoresPerSocket=64", "CPUAlloc=0 CPUTot=256 CPULoad=0.50",
              "Gres=gpu:8", f"NodeAddr={name} NodeHostName={name}",
              f"State={node['state']} ThreadsPerCore=2 TmpDisk=0 Weight=1 Owner=N/A MCS_label=N/A"]
    # node_info.c: a reason's stamp after its first line, each next line on its own, 7 spaces in (blank ones dropped).
    if lines := [line for line in str(node.get("reason", "")).split("\n") if line]:
        fields.append(f"Reason={lines[0]} [{node.get('reason_by', 'root')}]" + "".join(f"{sep}       {line}"
                                                                                     for line in lines[1:]))
    return ctx.ok(sep.join(fields) + "\n")


def _update(ctx: ToolContext, args: list[str]) -> ToolResult:
    values = {key.lower(): value for key, _, value in (arg.partition("=") for arg in args)}
    name = values.get("nodename", "")
    state = values.get("state", "").upper()
    if not name or not _known(ctx, name):
        return ctx.fail("slurm_update error: Invalid node name specified\n")
    if state in ("DRAIN", "DOWN") and not values.get("reason"):
        return ctx.fail("You must specify a reason when DOWNING or DRAINING a node. Request denied\n")
    if state not in ("DRAIN", "DOWN", "RESUME", "IDLE", "UNDRAIN"):
        return ctx.fail(f"Invalid input: state={values.get('state', '')}\nRequest aborted\n")
    with ctx.cluster.edit() as data:
        nodes = data.setdefault("slurm", {}).setdefault("nodes", {})
        if state in ("RESUME", "IDLE", "UNDRAIN"):
            nodes[name] = {"state": "IDLE", "reason": ""}
        else:
            stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(ks.now(data.get("kubernetes") or {})))
            nodes[name] = {"state": "IDLE+DRAIN" if state == "DRAIN" else "DOWN", "reason": values["reason"],
                           "reason_by": f"root@{stamp}"}
    return ctx.ok()


def run(ctx: ToolContext) -> ToolResult:
    args = list(ctx.args)
    oneliner = False
    while args and args[0] in ("-o", "--oneliner"):
        oneliner = True
        args = args[1:]
    if args[:2] == ["show", "node"] and len(args) >= 3:
        return _show(ctx, args[2], oneliner)
    if args[:1] == ["update"]:
        return _update(ctx, args[1:])
    return ctx.fail(f"invalid keyword: {args[0] if args else ''}\n")
