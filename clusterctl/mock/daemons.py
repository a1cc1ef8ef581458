"""Real daemons behind simulated services (sshd mock hosts only; filled in with isolation)."""

from __future__ import annotations

from clusterctl.mock.tools.base import ToolContext


def is_real(ctx: ToolContext, service: str) -> bool:
    daemons = ctx.host.read().get("daemons") or {}
    return service in daemons


def running(ctx: ToolContext, service: str) -> bool:
    return False


def start(ctx: ToolContext, service: str) -> str | None:
    return f"{service}: real daemons are not available here"


def restart(ctx: ToolContext, service: str) -> str | None:
    return start(ctx, service)


def stop(ctx: ToolContext, service: str) -> None:
    return None
