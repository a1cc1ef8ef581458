"""``ctr version`` and ``ctr plugins ls`` against the simulated containerd.

Client lines are those of Debian's ctr 1.6.20 (recorded, recordings/ran-here-debian12.txt);
when containerd is not active, ctr fails to dial its socket as recorded, exit 1. On an sshd
mock host with a real containerd the real ``ctr`` answers instead.
"""

from __future__ import annotations

from clusterctl.mock.tools import containerd_config as cc
from clusterctl.mock.tools.base import ToolContext, ToolResult, option, split_args

PACKAGES = ("containerd", "containerd.io")


def containerd_version(ctx: ToolContext) -> str:
    return ctx.installed_version(*PACKAGES) or "1.7.0"


def active(ctx: ToolContext) -> bool:
    return (ctx.host.section("services").get("containerd") or {}).get("active") == "active"


def dial_error(address: str) -> str:
    return (f'ctr: failed to dial "{address}": context deadline exceeded: connection error: desc = "transport: '
            f'error while dialing: dial unix://{address}: timeout"\n')


def run(ctx: ToolContext) -> ToolResult:
    args = split_args(ctx.args, ("--address", "-a", "--connect-timeout"))[0]
    address = option(ctx.args, "--address", "-a") or cc.SOCKET
    package = containerd_version(ctx)
    upstream = package.rsplit("-", 1)[0]
    if args[:1] == ["version"]:
        client = f"Client:\n  Version:  {upstream}\n  Revision: {package}\n  Go version: go1.19.8\n\n"
        if not active(ctx) or address != cc.SOCKET:
            return ToolResult(client, dial_error(address), 1)
        return ToolResult(client + f"Server:\n  Version:  {upstream}\n  Revision: {package}\n"
                          "  UUID: 3f1c2a56-mock-4f7e-9d0b-containerd\n")
    if not active(ctx):
        return ToolResult("", dial_error(address), 1)
    if args[:2] in (["plugins", "ls"], ["plugin", "ls"], ["plugins", "list"]):
        config = cc.effective(ctx)
        cri = "skip" if cc.cri_disabled(config) else "ok"
        rows = [("io.containerd.content.v1", "content", "-", "ok"),
                ("io.containerd.snapshotter.v1", "overlayfs", "linux/amd64", "ok"),
                ("io.containerd.runtime.v2", "task", "linux/amd64", "ok"),
                ("io.containerd.grpc.v1", "cri", "linux/amd64", cri)]
        lines = [f"{'TYPE':<40}{'ID':<24}{'PLATFORMS':<16}STATUS"]
        lines += [f"{t:<40}{i:<24}{p:<16}{s}" for t, i, p, s in rows]
        return ToolResult("\n".join(lines) + "\n")
    return ToolResult("", f"ctr: mock host does not simulate 'ctr {' '.join(args[:2])}'\n", 1)
