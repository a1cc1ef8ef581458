"""``dpkg --print-architecture`` (what clusterctl asks of ``dpkg`` itself; queries go to ``dpkg-query``)."""

from __future__ import annotations

from clusterctl.mock.tools.base import ToolContext, ToolResult


def run(ctx: ToolContext) -> ToolResult:
    if ctx.args[:1] == ["--print-architecture"]:
        return ToolResult("amd64\n")
    return ToolResult("", "dpkg: error: the mock host only answers --print-architecture\n", 2)
