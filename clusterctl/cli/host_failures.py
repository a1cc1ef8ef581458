"""Pieces of output every fan-out command shares: the failure lines and the summary."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from clusterctl.cli.context import AppContext
    from clusterctl.fanout import FleetResult, HostOutcome


def outcome_record(outcome: HostOutcome[Any]) -> dict[str, Any]:
    """The JSON shape of a host's failure, shared by every command's machine output."""
    failure = outcome.failure
    return {
        "host": outcome.host.name,
        "ok": failure is None,
        "failure": None
        if failure is None
        else {
            "kind": failure.kind.value,
            "message": failure.message,
            "exit_code": failure.exit_code,
            "stderr_tail": failure.stderr_tail,
        },
        "duration_s": outcome.duration_s,
    }


def print_failures(app: AppContext, fleet: FleetResult[Any]) -> None:
    """One clear line per failed host, on stderr, then a one-line summary."""
    for outcome in fleet.failed:
        assert outcome.failure is not None
        app.err_console.print(
            f"[bold red]FAILED[/] [bold]{outcome.host.name}[/]: {outcome.failure.describe()}",
            markup=True, highlight=False, soft_wrap=True,
        )
    total = len(fleet.outcomes)
    failed = len(fleet.failed)
    if failed:
        app.err_console.print(
            f"{total} host{'s' if total != 1 else ''}: {total - failed} ok, [red]{failed} failed[/]",
            markup=True, highlight=False,
        )
