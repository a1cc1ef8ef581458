"""``kubelet --version`` on a mock host: what the installed ``kubelet`` package's binary prints
(``Kubernetes v1.36.2``, as the real binary answers). The kubelet service itself is
``systemctl``'s business, and the node it registers is the simulated cluster's
(``kube_state``); only the version is simulated here, so a survey sees what bootstrap installed.
"""

from __future__ import annotations

from clusterctl.mock.tools.base import ToolContext, ToolResult

PACKAGES = ("kubelet",)


def run(ctx: ToolContext) -> ToolResult:
    if list(ctx.args)[:1] in (["--version"], ["version"]):
        package = ctx.installed_version("kubelet") or "0.0.0-0"
        return ToolResult(f"Kubernetes v{package.split('-', 1)[0]}\n")
    return ToolResult("", f"kubelet: mock host does not simulate 'kubelet {' '.join(ctx.args[:2])}'\n", 1)
