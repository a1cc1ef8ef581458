"""``modprobe`` and ``lsmod``: kernel modules loaded on the mock host.

``machine.modules`` in the profile: ``loaded`` (at first boot) and ``available`` (what
``modprobe`` can load besides a common set: overlay, br_netfilter, nvidia, mlx5...). An
unknown module fails as kmod does: ``modprobe: FATAL: Module X not found in directory
/lib/modules/<kernel>``, exit 1 (recorded on Debian 12, recordings/ran-here-debian12.txt).
"""

from __future__ import annotations

from clusterctl.mock.tools.base import ToolContext, ToolResult, gnu_options
from clusterctl.mock.tools.files import DEFAULT_KERNEL

#: Modules every mock host can load (stock Ubuntu/Debian kernels plus the NVIDIA and MOFED ones).
COMMON_MODULES = (
    "overlay", "br_netfilter", "nf_conntrack", "ip_tables", "iptable_nat", "ip_vs", "ip_vs_rr", "ip_vs_wrr",
    "ip_vs_sh", "vxlan", "veth", "bridge", "nvidia", "nvidia_uvm", "nvidia_modeset", "nvidia_drm",
    "nvidia_peermem", "ib_core", "ib_uverbs", "rdma_ucm", "mlx5_core", "mlx5_ib", "nvme_core", "xfs",
)
#: Approximate sizes for lsmod's column (bytes); anything else shows 16384.
SIZES = {"overlay": 212992, "br_netfilter": 32768, "bridge": 421888, "nvidia": 56696832, "nvidia_uvm": 4956160}
#: Modules that load others with them (modprobe resolves dependencies).
DEPENDS = {"br_netfilter": ["bridge"], "nvidia_uvm": ["nvidia"], "nvidia_drm": ["nvidia_modeset", "nvidia"],
           "nvidia_modeset": ["nvidia"], "mlx5_ib": ["mlx5_core", "ib_core"], "nvidia_peermem": ["nvidia", "ib_core"]}


def _available(ctx: ToolContext) -> set[str]:
    modules = ctx.machine.get("modules") or {}
    return set(COMMON_MODULES) | {str(m) for m in modules.get("available") or []} | \
        {str(m) for m in modules.get("loaded") or []}


def lsmod(ctx: ToolContext) -> ToolResult:
    loaded = [str(m) for m in ctx.host.read().get("modules") or []]
    users = {m: [d for d, deps in DEPENDS.items() if m in deps and d in loaded] for m in loaded}
    lines = ["Module                  Size  Used by"]
    for module in reversed(loaded):
        used = users.get(module) or []
        users_text = f" {','.join(used)}" if used else ""
        lines.append(f"{module:<19} {SIZES.get(module, 16384):>8}  {len(used)}{users_text}")
    return ToolResult("\n".join(lines) + "\n")


def modprobe(ctx: ToolContext) -> ToolResult:
    given, args = gnu_options(ctx.args, "rq", longs={"remove": "r", "quiet": "q"})
    remove, quiet = "r" in given, "q" in given
    if not args:
        return ToolResult("", "modprobe: ERROR: missing parameters. See -h.\n", 1)
    kernel = str(ctx.machine.get("kernel") or DEFAULT_KERNEL)
    names = args if remove else args[:1]  # modprobe NAME [param=value...]
    available = _available(ctx)
    with ctx.host.edit() as data:
        loaded = [str(m) for m in data.get("modules") or []]
        for raw in names:
            name = raw.replace("-", "_")
            if remove:
                if name in loaded:
                    loaded.remove(name)
                continue
            if name not in available:
                return ToolResult("", "" if quiet else
                                  f"modprobe: FATAL: Module {raw} not found in directory /lib/modules/{kernel}\n", 1)
            for module in [*DEPENDS.get(name, []), name]:
                if module not in loaded:
                    loaded.append(module)
        data["modules"] = loaded
    return ToolResult()


def run(ctx: ToolContext) -> ToolResult:
    return lsmod(ctx) if ctx.name == "lsmod" else modprobe(ctx)
