"""``apt-mark hold|unhold|showhold``: holds that last, with apt 2.6's messages.

Recorded on Debian 12 (recordings/ran-here-debian12.txt): a name apt does not know gives
``E: Unable to locate package X`` and ``E: No packages found``, exit 100.
"""

from __future__ import annotations

from clusterctl.mock.tools import packages as db
from clusterctl.mock.tools.base import ToolContext, ToolResult


def run(ctx: ToolContext) -> ToolResult:
    # apt reads its options itself, not with getopt (no abbreviation; the word as given), and the mock takes none.
    refused = next((a for a in ctx.args if a.startswith("-") and a != "-"), None)
    if refused is not None:
        said, end = (refused, "") if refused.startswith("--") else (f"'{refused[1]}' [from {refused}]", ".")
        return ctx.fail(f"E: Command line option {said} is not understood in combination with the other options{end}\n",
                        100)
    if not ctx.args:
        return ToolResult("", "E: No command given\n", 100)
    verb, names = ctx.args[0], ctx.args[1:]
    if verb == "showhold":
        held = sorted(db.holds(ctx))
        return ToolResult("".join(f"{name}\n" for name in held if not names or name in names))
    if verb not in ("hold", "unhold"):
        return ToolResult("", f"E: Invalid operation {verb}\n", 100)
    known = set(db.installed(ctx)) | {n for n, p in db.repository(ctx).items() if db.visible(ctx, p)}
    unknown = [n for n in names if n not in known]
    if unknown or not names:
        return ToolResult("", "".join(f"E: Unable to locate package {n}\n" for n in unknown) + "E: No packages found\n",
                          100)
    out = ""
    with ctx.host.edit() as data:
        holds = [str(h) for h in data.get("holds") or []]
        for name in names:
            if verb == "hold":
                out += f"{name} was already set on hold.\n" if name in holds else f"{name} set on hold.\n"
                if name not in holds:
                    holds.append(name)
            else:
                out += f"Canceled hold on {name}.\n" if name in holds else f"{name} was already not on hold.\n"
                if name in holds:
                    holds.remove(name)
        data["holds"] = holds
    return ToolResult(out)
