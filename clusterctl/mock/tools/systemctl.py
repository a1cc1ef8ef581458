"""``systemctl``: unit states that last (is-active, is-enabled, enable, disable, start, stop,
restart, daemon-reload, reboot: the verbs clusterctl sends).

State (``host.json`` → ``services``): ``{unit: {"active": "active|inactive|failed",
"enabled": "enabled|disabled"}}``. Units exist when the profile's
``machine.services`` names them, an installed package ships them (``apt-get``) or their unit
file is in ``/etc/systemd/system`` (timers too: ``name.timer``).

Starting a unit runs its start check first (``STARTS``): containerd's reads
``/etc/containerd/config.toml`` and its imports from the tree and fails to start, like the
real daemon, on a file that is not TOML or whose ``version`` the installed containerd cannot
read. On an sshd mock host with a real containerd (``clusterctl.mock.tools.daemons``), the real
daemon is restarted instead and its exit decides. Messages and exit codes are systemd 252's
(Debian 12; see recordings/README.md).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from clusterctl.mock.power import boot
from clusterctl.mock.tools import daemons
from clusterctl.mock.tools import kube_state as ks
from clusterctl.mock.tools.base import ToolContext, ToolResult, each, gnu_options
from clusterctl.mock.tools.containerd_config import CONFIG, TOMLError, imported, installed_major, parse_toml
from clusterctl.mock.tools.ctr import containerd_version

JOB_FAILED = (
    "Job for {unit} failed because the control process exited with error code.\n"
    'See "systemctl status {unit}" and "journalctl -xeu {unit}" for details.\n'
)
#: What a verb that changes units says of one systemd does not know, and its exit status.
NO_SUCH_UNIT: dict[str, tuple[str, int]] = {
    **dict.fromkeys(("enable", "disable"), ("Failed to {verb} unit: Unit file {unit} does not exist.\n", 1)),
    **dict.fromkeys(("start", "restart"), ("Failed to {verb} {unit}: Unit {unit} not found.\n", 5)),
    "stop": ("Failed to {verb} {unit}: Unit {unit} not loaded.\n", 5),
}


def unit_name(name: str) -> str:
    return name if "." in name else f"{name}.service"


def containerd_start_check(ctx: ToolContext) -> str | None:
    """Why containerd would not start with the config in the tree, or None."""
    highest = 2 if installed_major(ctx) < 2 else (3 if containerd_version(ctx).startswith(("2.0", "2.1", "2.2")) else 4)
    data = ctx.fs.read(CONFIG)
    if data is None:
        return None
    files = [CONFIG]
    try:
        root = parse_toml(data)
    except TOMLError as exc:
        return f"containerd: failed to load TOML: {CONFIG}: {exc}"
    imports = root.get("imports") or []
    for pattern in imports if isinstance(imports, list) else []:
        files.extend(imported(ctx, pattern))
    root_version = int(root.get("version", 1) or 1)
    for file in files:
        content = ctx.fs.read(file)
        if content is None:
            continue
        try:
            doc = parse_toml(content)
        except TOMLError as exc:
            return f"containerd: failed to load TOML from {file}: {exc}"
        file_version = int(doc.get("version", root_version) or 1)
        if file_version > highest:
            return f"containerd: unsupported config version `{file_version}`"
    return None


def kubelet_state(ctx: ToolContext) -> str:
    """The kubelet restarts every 10 s until kubeadm writes its config: systemd shows "activating"."""
    return "active" if ctx.fs.is_file("/var/lib/kubelet/config.yaml") else "activating"


def kubelet_start(ctx: ToolContext) -> str | None:
    """A (re)started kubelet registers the installed binary's version on its Node; ``kubelet: fail`` on the
    host makes it exit at once (a broken kubelet package or flag)."""
    if ks.fault(ctx, ctx.host_name, "kubelet") == "fail":
        return "kubelet: failed to run Kubelet: validate service connection: validate CRI v1 runtime API"
    installed = ctx.installed_version("kubelet")
    if installed and ks.read(ctx).get("nodes"):
        with ks.edit(ctx) as kube:
            for node in (kube.get("nodes") or {}).values():
                if node.get("host") == ctx.host_name:
                    node["kubelet_version"] = "v" + installed.split("-")[0]
    return None


#: Unit -> check run before it starts; returns the reason it fails to start, or None.
STARTS: dict[str, Callable[[ToolContext], str | None]] = {"containerd": containerd_start_check,
                                                          "kubelet": kubelet_start}
#: Unit -> what an "active" unit really shows (a service that keeps exiting is "activating").
SETTLES: dict[str, Callable[[ToolContext], str]] = {"kubelet": kubelet_state}


#: Where unit files written by an administrator (or clusterctl) live; systemd loads them from there.
UNIT_DIRS = ("/etc/systemd/system", "/lib/systemd/system", "/usr/lib/systemd/system")


def _units(ctx: ToolContext, names: list[str] | None = None) -> dict[str, Any]:
    """The host's units, plus those of ``names`` whose unit file is in the tree (not yet started or enabled)."""
    units = dict(ctx.host.section("services"))
    for name in names or ():
        if name not in units and any(ctx.fs.is_file(f"{folder}/{unit_name(name)}") for folder in UNIT_DIRS):
            units[name] = {"active": "inactive", "enabled": "disabled"}
    return units


def _start(ctx: ToolContext, key: str, *, restart: bool) -> ToolResult:
    reason: str | None
    if daemons.is_real(ctx, key):
        if restart:
            daemons.stop(ctx, key)
        reason = daemons.start(ctx, key)
    else:
        check = STARTS.get(key)
        reason = check(ctx) if check else None
    _set_active(ctx, key, "failed" if reason else "active")
    return ctx.fail(JOB_FAILED.format(unit=unit_name(key))) if reason else ToolResult()


def _stop(ctx: ToolContext, key: str) -> None:
    if daemons.is_real(ctx, key):
        daemons.stop(ctx, key)
    _set_active(ctx, key, "inactive")


def _set_active(ctx: ToolContext, key: str, state: str) -> None:
    with ctx.host.edit() as data:
        data.setdefault("services", {}).setdefault(key, {"enabled": "disabled"})["active"] = state


def _set_enabled(ctx: ToolContext, key: str, enabled: bool) -> bool:
    """Whether the state changed."""
    with ctx.host.edit() as data:
        entry = data.setdefault("services", {}).setdefault(key, {"active": "inactive"})
        before = entry.get("enabled") == "enabled"
        entry["enabled"] = "enabled" if enabled else "disabled"
    return before != enabled


def _active_state(ctx: ToolContext, key: str, units: dict[str, Any]) -> str:
    state = str((units.get(key) or {}).get("active", "inactive"))  # a unit it does not know is inactive
    if state == "active" and daemons.is_real(ctx, key) and not daemons.running(ctx, key):
        return "failed"
    if state == "active" and key in SETTLES:
        return SETTLES[key](ctx)
    return state


def run(ctx: ToolContext) -> ToolResult:
    given, args = gnu_options(ctx.args, "ql", longs={"quiet": "q", "full": "l", "now": "now", "no-pager": "",
                                                     "no-block": "", "system": "", "no-ask-password": ""})
    quiet, now = "q" in given, "now" in given
    if not args:
        return ToolResult("", "systemctl: mock host lists no units; give a command verb\n", 1)
    verb, names = args[0], [n.removesuffix(".service") for n in args[1:]]
    if verb == "reboot":
        boot(ctx.host)  # a mock host restarts at once: the next command finds it booted
        return ToolResult("", "", 0)
    units = _units(ctx, names)
    if verb == "daemon-reload":
        with ctx.host.edit() as data:
            data["daemon_reloads"] = int(data.get("daemon_reloads", 0)) + 1
        return ToolResult()
    if verb == "is-active":
        states = [_active_state(ctx, n, units) for n in names]
        out = "" if quiet else "".join(s + "\n" for s in states)
        return ToolResult(out, "", 0 if states and all(s == "active" for s in states) else 3)
    if verb == "is-enabled":

        def enabled(name: str) -> ToolResult:
            if name not in units:
                return ctx.fail(f"Failed to get unit file state for {unit_name(name)}: No such file or directory\n")
            state = str(units[name].get("enabled", "disabled"))
            return ToolResult("" if quiet else state + "\n", "", 0 if state == "enabled" else 1)

        return each(names, enabled)
    missing = [n for n in names if n not in units]
    if missing and verb in NO_SUCH_UNIT:
        message, code = NO_SUCH_UNIT[verb]
        return ctx.fail(message.format(verb=verb, unit=unit_name(missing[0])), code)
    if verb in ("enable", "disable"):
        err = ""
        for name in names:
            if _set_enabled(ctx, name, verb == "enable"):
                target = "timers.target" if name.endswith(".timer") else "multi-user.target"
                link = f"/etc/systemd/system/{target}.wants/{unit_name(name)}"
                err += (f"Created symlink {link} \u2192 /lib/systemd/system/{unit_name(name)}.\n" if verb == "enable"
                        else f'Removed "{link}".\n')
        if now:
            for name in names:
                if verb == "disable":
                    _stop(ctx, name)
                elif (result := _start(ctx, name, restart=False)).exit_code:
                    return ToolResult("", err + result.stderr, result.exit_code)
        return ToolResult("", err, 0)
    if verb in ("start", "restart"):
        for name in names:
            if verb == "start" and _active_state(ctx, name, units) == "active":
                continue
            result = _start(ctx, name, restart=verb != "start")
            if result.exit_code:
                return result
        return ToolResult()
    if verb == "stop":
        for name in names:
            _stop(ctx, name)
        return ToolResult()
    return ToolResult("", f"Unknown command verb {verb}.\n", 1)

