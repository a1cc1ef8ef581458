"""``kubectl drain`` and ``delete node`` against the simulated cluster (``uncordon``: ``kubectl_nodes``).

Messages are kubectl's (``staging/src/k8s.io/kubectl/pkg/cmd/drain``): ``node/N cordoned``,
``node/N drained``, ``node "N" deleted`` (nothing with
``--ignore-not-found`` when it is gone), ``Error from server
(NotFound): nodes "N" not found``. A drain evicts the pods the simulation schedules on the node
(clusterctl's one-GPU test pods). A host whose state sets ``drain: hang`` never finishes: the
drain gives up at ``--timeout`` with kubectl's "global timeout reached" error.
"""

from __future__ import annotations

from clusterctl.mock.tools import kube_state as ks
from clusterctl.mock.tools.base import ToolContext, ToolResult


def run(ctx: ToolContext, words: list[str], options: dict[str, str], flags: set[str]) -> ToolResult:
    verb = words[0]
    names = words[2:] if verb == "delete" else words[1:]
    if not names:
        return ctx.fail(f"error: USAGE: {verb} NODE [flags]\n")
    name = names[0].split("/", 1)[-1]
    with ks.edit(ctx) as kube:
        nodes = kube.setdefault("nodes", {})
        node = nodes.get(name)
        if node is None:
            if verb == "delete" and ks.ignores_not_found(ctx, flags):
                return ctx.ok()
            return ks.not_found("nodes", name)
        if verb == "delete":
            del nodes[name]
            return ctx.ok(f'node "{name}" deleted\n')
        already = bool(node.get("unschedulable"))
        node["unschedulable"] = True
        out = f"node/{name} {'already cordoned' if already else 'cordoned'}\n"
        if ks.fault(ctx, str(node.get("host", "")), "drain") == "hang":
            timeout = options.get("--timeout", "0s")
            return ToolResult(out, f'error: unable to drain node "{name}" due to error: [error when waiting for pod '
                              f'"trainer-0" in namespace "default" to terminate: global timeout reached: {timeout}], '
                              f"continuing command...\nThere are pending nodes to be drained:\n {name}\n", 1)
        pods = kube.setdefault("pods", {})
        for key in [k for k, pod in pods.items() if pod.get("node") == name]:
            out += f"evicting pod {key}\npod/{key.split('/', 1)[1]} evicted\n"
            del pods[key]
    return ctx.ok(out + f"node/{name} drained\n")
