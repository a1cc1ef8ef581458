"""``dpkg-query``: ``-W``/``--show`` (with ``-f``/``--showformat``), ``-s``/``--status``.

Output recorded on Debian 12 (dpkg 1.21, recordings/ran-here-debian12.txt): the default
format is ``${binary:Package}\\t${Version}\\n``; a name no package matches prints
``dpkg-query: no packages found matching X`` on stderr, exit 1. A held package (``apt-mark
hold``) is ``hi`` / ``hold ok installed``, not ``ii`` (tests/fixtures/apt/dpkg-query-held-debian12.txt).
"""

from __future__ import annotations

import fnmatch
import re

from clusterctl.mock.tools import packages as db
from clusterctl.mock.tools.base import ToolContext, ToolResult, each, option, split_args

DEFAULT_FORMAT = "${binary:Package}\\t${Version}\\n"
#: What ``-s`` prints of a package (the fields simulated).
STATUS_FORMAT = "Package: ${Package}\\nStatus: ${Status}\\nArchitecture: ${Architecture}\\nVersion: ${Version}\\n\\n"
FORMAT_OPTIONS = ("-f", "--showformat")
#: The actions simulated, as dpkg-query names them in its refusals.
ACTIONS = {"-W": "-W (--show)", "--show": "-W (--show)", "-s": "-s (--status)", "--status": "-s (--status)"}


def _fields(name: str, installed: dict[str, dict[str, object]], held: set[str]) -> dict[str, str]:
    # A held package's wanted action is "hold" (apt-mark hold): "hi ", as real dpkg-query says.
    want = "hold" if name in held else "install"
    return {
        "Package": name, "binary:Package": name, "Version": str(installed[name]["version"]), "Architecture": "amd64",
        "Status": f"{want} ok installed", "db:Status-Abbrev": f"{want[0]}i ", "db:Status-Status": "installed",
        "db:Status-Want": want,
    }


def _format(fmt: str, fields: dict[str, str]) -> str:
    text = re.sub(r"\$\{([^}:;]+(?::[^};]+)?)(?:;-?\d+)?\}", lambda m: fields.get(m.group(1), ""), fmt)
    return text.replace("\\n", "\n").replace("\\t", "\t")


def run(ctx: ToolContext) -> ToolResult:
    names = split_args(ctx.args, FORMAT_OPTIONS)[0]
    fmt = option(ctx.args, *FORMAT_OPTIONS)
    fmt = DEFAULT_FORMAT if fmt is None else fmt
    # dpkg 1.21 takes one action, checked as its options are read (before the format): a second one,
    # even the same again, is a conflict.
    actions = [ACTIONS[arg] for arg in ctx.args if arg in ACTIONS]
    if len(actions) != 1:
        error = f"conflicting actions {actions[1]} and {actions[0]}" if actions else "need an action option"
        return ToolResult("", f"dpkg-query: error: {error}\n\nUse --help for help about querying packages.\n", 2)
    if fmt == "":
        return ToolResult("", "dpkg-query: error in show format: may not be empty string\n", 1)
    installed = db.installed(ctx)
    held = set(db.holds(ctx))

    def status(name: str) -> ToolResult:
        if name not in installed:
            return ctx.fail(f"dpkg-query: package '{name}' is not installed and no information is available\n"
                            "Use dpkg --info (= dpkg-deb --info) to examine archive files.\n")
        return ToolResult(_format(STATUS_FORMAT, _fields(name, installed, held)))

    def show(pattern: str) -> ToolResult:
        matched = sorted(n for n in installed if fnmatch.fnmatchcase(n, pattern))
        if not matched:
            return ctx.fail(f"dpkg-query: no packages found matching {pattern}\n")
        return ToolResult("".join(_format(fmt, _fields(name, installed, held)) for name in matched))

    return each(names, status) if actions[0] == ACTIONS["-s"] else each(names or ["*"], show)
