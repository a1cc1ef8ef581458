"""``swapon`` (``--show``, ``-a``) and ``swapoff -a``: swap areas that last.

``machine.swap`` in the profile lists the areas active at first boot (``name``, ``type``,
``size``, ``used``, ``prio``). util-linux 2.38's ``swapon --show`` prints nothing at all when no
swap is active (recorded on Debian 12), else a ``NAME TYPE SIZE USED PRIO`` table.
``swapon -a`` turns on the areas listed in the tree's ``/etc/fstab`` that the profile knows.
"""

from __future__ import annotations

from clusterctl.mock.tools.base import ToolContext, ToolResult

COLUMNS = ("NAME", "TYPE", "SIZE", "USED", "PRIO")


def _fstab_swaps(ctx: ToolContext) -> list[str]:
    data = ctx.fs.read("/etc/fstab") or b""
    return [fields[0] for line in data.decode(errors="replace").splitlines()
            if len(fields := line.split()) >= 3 and not fields[0].startswith("#") and fields[2] == "swap"]


def show(ctx: ToolContext) -> ToolResult:
    areas = [a for a in ctx.host.read().get("swap") or [] if isinstance(a, dict)]
    if not areas:
        return ToolResult()
    blank = {"TYPE": "file", "USED": "0B", "PRIO": "-2"}
    rows = [list(COLUMNS)] + [[str(a.get(c.lower(), blank.get(c, ""))) for c in COLUMNS] for a in areas]
    widths = [max(len(r[i]) for r in rows) for i in range(len(COLUMNS))]
    lines = [" ".join(row[i].ljust(widths[i]) if i == 0 else row[i].rjust(widths[i]) for i in range(len(COLUMNS)))
             .rstrip() for row in rows]
    return ToolResult("\n".join(lines) + "\n")


def run(ctx: ToolContext) -> ToolResult:
    args = list(ctx.args)
    if ctx.name == "swapon":
        if not args or args == ["--show"]:
            return show(ctx)
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
    if "-a" not in args and "--all" not in args:  # swapoff of one area: clusterctl turns them all off
        return ToolResult("", "swapoff: bad usage\nTry 'swapoff --help' for more information.\n", 1)
    with ctx.host.edit() as data:
        data["swap"] = []
    return ToolResult()
