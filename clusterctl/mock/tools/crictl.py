"""``crictl info`` against the simulated containerd's CRI plugin.

``info`` reports the runtimes containerd would run with (config.toml and its imports, merged
as containerd 1.x does), so a missing NVIDIA drop-in shows. When containerd is down, or runs
with ``disabled_plugins = ["cri"]`` (containerd.io's packaged config), crictl fails as it does
for real (crictl 1.37's ``level=error`` line): ``validate CRI v1 runtime API for endpoint ...``
with ``Unavailable`` or ``Unimplemented``, exit 1.
"""

from __future__ import annotations

import json
import time

from clusterctl.mock.tools import containerd_config as cc
from clusterctl.mock.tools.base import ToolContext, ToolResult, split_args
from clusterctl.mock.tools.ctr import active

PACKAGES = ("cri-tools",)
ENDPOINT = f"unix://{cc.SOCKET}"


def _connect_error(ctx: ToolContext) -> str | None:
    if not active(ctx):
        error = ("Unavailable desc = connection error: desc = \"transport: Error while dialing: "
                 f"dial unix {cc.SOCKET}: connect: no such file or directory\"")
    elif cc.cri_disabled(cc.effective(ctx)):
        error = "Unimplemented desc = unknown service runtime.v1.RuntimeService"
    else:
        return None
    # crictl 1.37 logs through logrus: the message quoted as Go's %q quotes it (as JSON does here).
    message = f'validate service connection: validate CRI v1 runtime API for endpoint "{ENDPOINT}": rpc error: ' \
              f"code = {error}"
    return f'time="{time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}" level=error msg={json.dumps(message)}\n'


def run(ctx: ToolContext) -> ToolResult:
    # The CRI socket is containerd's, however named; how long to wait does not matter to a simulated daemon.
    args = split_args(ctx.args, ("-r", "--runtime-endpoint", "-t", "--timeout"))[0]
    error = _connect_error(ctx)
    if error:
        return ToolResult("", error, 1)
    if args[:1] == ["info"]:
        config = cc.effective(ctx)
        runtimes, default = cc.runtimes(config)
        info = {
            "status": {"conditions": [
                {"type": "RuntimeReady", "status": True, "reason": "", "message": ""},
                {"type": "NetworkReady", "status": False, "reason": "NetworkPluginNotReady",
                 "message": "Network plugin returns error: cni plugin not initialized"},
            ]},
            "config": {"containerd": {"defaultRuntimeName": default, "runtimes": runtimes},
                       "enableCDI": bool(((config.get("plugins") or {}).get(
                           cc.cri_plugin(int(config.get("version", 1) or 1))) or {}).get("enable_cdi", False))},
        }
        return ToolResult(json.dumps(info, indent=2) + "\n")
    return ToolResult("", f"crictl: mock host does not simulate 'crictl {' '.join(args[:1])}'\n", 1)
