"""``sysctl``: read (``-n``, ``-a`` not simulated), write (``-w``) and ``--system``.

Runtime values live in ``host.json`` → ``sysctl``; first-boot values come from the profile's
``machine.sysctl`` on top of Linux defaults (``DEFAULTS``). ``--system`` applies the
``/etc/sysctl.d``, ``/run/sysctl.d``, ``/usr/lib/sysctl.d`` files of the tree in procps 4's order
and prints ``* Applying FILE ...`` and each setting. An unknown key fails as procps 4.0.2
does (recorded on Debian 12): ``sysctl: cannot stat /proc/sys/a/b: No such file or directory``,
exit 1. Keys under ``net.bridge`` exist only once ``br_netfilter`` is loaded, as on Linux.
"""

from __future__ import annotations

from typing import Any

from clusterctl.mock.tools.base import ToolContext, ToolResult, each, gnu_options

#: Linux defaults of the keys bootstrap and tuning care about.
DEFAULTS = {
    "net.ipv4.ip_forward": "0",
    "net.ipv6.conf.all.forwarding": "0",
    "net.ipv4.conf.all.rp_filter": "2",
    "net.core.somaxconn": "4096",
    "net.core.rmem_max": "212992",
    "net.core.wmem_max": "212992",
    "vm.swappiness": "60",
    "vm.max_map_count": "65530",
    "vm.overcommit_memory": "0",
    "kernel.panic": "0",
    "kernel.pid_max": "4194304",
    "kernel.numa_balancing": "1",
    "fs.inotify.max_user_watches": "65536",
    "fs.inotify.max_user_instances": "128",
    "fs.file-max": "9223372036854775807",
}
BRIDGE_KEYS = {"net.bridge.bridge-nf-call-iptables": "1", "net.bridge.bridge-nf-call-ip6tables": "1",
               "net.bridge.bridge-nf-call-arptables": "1"}
SYSTEM_DIRS = ("/etc/sysctl.d", "/run/sysctl.d", "/usr/local/lib/sysctl.d", "/usr/lib/sysctl.d", "/lib/sysctl.d")


def _norm(key: str) -> str:
    return key.replace("/", ".").strip()


def _known(ctx: ToolContext, data: dict[str, Any]) -> dict[str, str]:
    values = dict(DEFAULTS)
    values.update({str(k): str(v) for k, v in (ctx.machine.get("sysctl") or {}).items()})
    if "br_netfilter" in (data.get("modules") or []):
        values.update(BRIDGE_KEYS)
    values.update({str(k): str(v) for k, v in (data.get("sysctl") or {}).items()})
    return values


def _missing(key: str) -> str:
    return f"sysctl: cannot stat /proc/sys/{key.replace('.', '/')}: No such file or directory\n"


def _apply_lines(text: str) -> list[tuple[str, str, bool]]:
    """(key, value, ignore_errors) for each setting line of a sysctl.conf file."""
    settings = [line.strip().partition("=") for line in text.splitlines()]
    return [(_norm(key.lstrip("-")), value.strip(), key.startswith("-")) for key, assigned, value in settings
            if assigned and not key.startswith(("#", ";"))]


def _system_files(ctx: ToolContext) -> list[str]:
    chosen: dict[str, str] = {}
    for folder in SYSTEM_DIRS:
        for path in ctx.fs.glob(f"{folder}/*.conf"):
            chosen.setdefault(path.rsplit("/", 1)[1], path)
    files = [chosen[name] for name in sorted(chosen)]
    if ctx.fs.is_file("/etc/sysctl.conf"):
        files.append("/etc/sysctl.conf")
    return files


def run(ctx: ToolContext) -> ToolResult:
    # -w needs nothing: a NAME=VALUE operand is a write anyway.
    given, operands = gnu_options(ctx.args, "nqw", longs={"values": "n", "quiet": "q", "write": "w",
                                                          "system": "system"})
    system, value_only, quiet = "system" in given, "n" in given, "q" in given
    with ctx.host.edit() as data:
        runtime = data.setdefault("sysctl", {})

        def set_value(key: str, value: str, ignore_unknown: bool = False) -> ToolResult:
            if key not in _known(ctx, data):
                return ToolResult() if ignore_unknown else ctx.fail(_missing(key))
            runtime[key] = value
            return ToolResult("" if quiet else f"{key} = {value}\n")

        def apply_file(path: str) -> ToolResult:
            content = ctx.fs.read(path)
            if content is None:
                return ctx.fail(f"sysctl: cannot open \"{path}\": No such file or directory\n")
            applied = each(_apply_lines(content.decode(errors="replace")), lambda line: set_value(*line))
            return ToolResult(f"* Applying {path} ...\n" + applied.stdout, applied.stderr, applied.exit_code)

        def operand(text: str) -> ToolResult:
            name, assigned, value = text.partition("=")
            key = _norm(name)
            if assigned:
                return set_value(key, value.strip())
            known = _known(ctx, data)
            if key not in known:
                return ctx.fail(_missing(key))
            return ToolResult(f"{known[key]}\n" if value_only else f"{key} = {known[key]}\n")

        return each(_system_files(ctx), apply_file) if system else each(operands, operand)
