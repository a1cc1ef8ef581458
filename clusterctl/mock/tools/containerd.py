"""``containerd --version`` and ``containerd config dump`` on a mock host (the daemon itself is
``systemctl``'s business).

``--version`` prints what the installed package's binary prints (recorded lines in
``tests/fixtures/containerd/``): Docker's ``containerd.io`` 2.x ``containerd containerd.io
v2.2.1 <revision>``, 1.x without the ``v`` (``containerd containerd.io 1.7.27 <revision>``),
Debian's ``containerd github.com/containerd/containerd 1.6.20~ds1 1.6.20~ds1-1+deb12u3``.
``config dump`` prints the configuration as read (root file, then its imports as 1.x merges
them), or containerd's "failed to load TOML" error, exit 1.
"""

from __future__ import annotations

from clusterctl.mock.tools import containerd_config as cc
from clusterctl.mock.tools.base import ToolContext, ToolResult, option, split_args

PACKAGES = ("containerd", "containerd.io")
#: A revision for the version line (the real one is the release's git commit).
REVISION = "0000000000000000000000000000000000000000"


def run(ctx: ToolContext) -> ToolResult:
    args = list(ctx.args)
    if args[:1] in (["--version"], ["-v"]):
        debian = ctx.installed_version("containerd")
        if debian:
            upstream = debian.split("-", 1)[0]
            return ToolResult(f"containerd github.com/containerd/containerd {upstream} {debian}\n")
        package = ctx.installed_version("containerd.io") or "1.7.0-1"
        upstream = package.rsplit("-", 1)[0]
        shown = f"v{upstream}" if not upstream.startswith("1.") else upstream
        return ToolResult(f"containerd containerd.io {shown} {REVISION}\n")
    path = option(args, "--config") or cc.CONFIG
    args = split_args(args, ("--config",))[0]
    if args[:2] == ["config", "dump"]:
        data = ctx.fs.read(path)
        if data is None:
            return ToolResult("", f"containerd: failed to load TOML from {path}: open {path}: no such file or "
                              "directory\n", 1)
        try:
            cc.parse_toml(data)
        except cc.TOMLError as exc:
            return ToolResult("", f"containerd: failed to load TOML: {path}: {exc}\n", 1)
        return ToolResult(cc.dumps(cc.effective(ctx)) if path == cc.CONFIG else data.decode(errors="replace"))
    return ToolResult("", f"containerd: mock host does not simulate 'containerd {' '.join(args[:2])}'\n", 1)
