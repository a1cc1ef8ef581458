"""``swapon`` (``--show``, ``-a``) and ``swapoff`` (``-a``, a device): swap areas that last.

``machine.swap`` in the profile lists the areas active at first boot (``name``, ``type``,
``size``, ``used``, ``prio``). util-linux 2.38's ``swapon --show`` prints nothing at all when no
swap is active (recorded on Debian 12), else a ``NAME TYPE SIZE USED PRIO`` table.
``swapon -a`` turns on the areas listed in the tree's ``/etc/fstab`` that the profile knows.
"""

from __future__ import annotations

from typing import Any

from clusterctl.mock.tools.base import ToolContext, ToolResult

COLUMNS = ("NAME", "TYPE", "SIZE", "USED", "PRIO")


def _areas(ctx: ToolContext) -> list[dict[str, Any]]:
    return [a for a in ctx.host.read().get("swap") or [] if isinstance(a, dict)]


def _fstab_swaps(ctx: ToolContext) -> list[str]:
    data = ctx.fs.read("/etc/fstab") or b""
    names = []
    for line in data.decode(errors="replace").splitlines():
        fields = line.split()
        if len(fields) >= 3 and not fields[0].startswith("#") and fields[2] == "swap":
            names.append(fields[0])
    return names


def show(ctx: ToolContext, args: list[str]) -> ToolResult:
    areas = _areas(ctx)
    columns = list(COLUMNS)
    for arg in args:
        if arg.startswith("--show="):
            columns = [c.upper() for c in arg.split("=", 1)[1].split(",")]
    headings = not any(a in ("--noheadings", "-h") for a in args)
    if not areas:
        return ToolResult()
    rows = [[str(a.get(c.lower(), {"TYPE": "file", "USED": "0B", "PRIO": "-2"}.get(c, ""))) for c in columns]
            for a in areas]
    if headings:
        rows.insert(0, columns)
    widths = [max(len(r[i]) for r in rows) for i in range(len(columns))]
    lines = []
    for row in rows:
        cells = [row[i].ljust(widths[i]) if i == 0 else row[i].rjust(widths[i]) for i in range(len(columns))]
        lines.append(" ".join(cells).rstrip())
    return ToolResult("\n".join(lines) + "\n")


def run(ctx: ToolContext) -> ToolResult:
    args = list(ctx.args)
    if ctx.name == "swapon":
        if not args or any(a == "--show" or a.startswith("--show=") for a in args) or args == ["-s"]:
            return show(ctx, args)
        if "-a" in args or "--all" in args:
            known = {str(a.get("name")): a for a in (ctx.machine.get("swap") or []) if isinstance(a, dict)}
            with ctx.host.edit() as data:
                active = [a for a in data.get("swap") or [] if isinstance(a, dict)]
                names = {str(a.get("name")) for a in active}
                for name in _fstab_swaps(ctx):
                    if name in known and name not in names:
                        active.append(dict(known[name]))
                data["swap"] = active
            return ToolResult()
        return ToolResult("", f"swapon: {args[-1]}: swapon failed: Invalid argument\n", 255)
    # swapoff
    with ctx.host.edit() as data:
        active = [a for a in data.get("swap") or [] if isinstance(a, dict)]
        if "-a" in args or "--all" in args:
            data["swap"] = []
            return ToolResult()
        targets = [a for a in args if not a.startswith("-")]
        if not targets:
            return ToolResult("", "swapoff: bad usage\nTry 'swapoff --help' for more information.\n", 1)
        for target in targets:
            if not any(str(a.get("name")) == target for a in active):
                return ToolResult("", f"swapoff: {target}: swapoff failed: Invalid argument\n", 255)
        data["swap"] = [a for a in active if str(a.get("name")) not in targets]
    return ToolResult()
