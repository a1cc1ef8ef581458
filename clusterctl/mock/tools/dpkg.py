"""``dpkg --print-architecture``, and ``dpkg -l``/``-s``/``-W`` handed to ``dpkg-query`` as dpkg does."""

from __future__ import annotations

from clusterctl.mock.tools import dpkg_query
from clusterctl.mock.tools.base import ToolContext, ToolResult


def run(ctx: ToolContext) -> ToolResult:
    if ctx.args[:1] == ["--print-architecture"]:
        return ToolResult("amd64\n")
    if ctx.args[:1] and ctx.args[0] in ("-l", "--list", "-s", "--status", "-W", "--show"):
        return dpkg_query.run(ctx)
    return ToolResult("", "dpkg: error: the mock host only answers --print-architecture, -l, -s and -W\n", 2)
