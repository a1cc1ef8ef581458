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
    from clusterctl.terminal_text import markup_safe

    for outcome in fleet.failed:
        assert outcome.failure is not None
        app.err_console.print(
            f"[bold red]FAILED[/] [bold]{markup_safe(outcome.host.name)}[/]: {markup_safe(outcome.failure.describe())}",
            markup=True, highlight=False, soft_wrap=True,
        )
    total = len(fleet.outcomes)
    failed = len(fleet.failed)
    if failed:
        app.err_console.print(
            f"{total} host{'s' if total != 1 else ''}: {total - failed} ok, [red]{failed} failed[/]",
            markup=True, highlight=False,
        )


def print_interrupted(exc: BaseException) -> None:
    """``interrupted``, then what finished and which hosts were still running, on stderr.

    Commands that can show their own partial results (``exec``) do so before this runs; for
    every other command this is the whole report of an interrupted fan-out.
    """
    import sys

    from clusterctl.fanout import FleetInterrupted
    from clusterctl.hostlist import compress
    from clusterctl.wording import plural

    signal_name = getattr(exc, "signal_name", "SIGINT")
    lines = [f"interrupted ({signal_name})"]
    if isinstance(exc, FleetInterrupted):
        finished = exc.finished.outcomes
        total = len(finished) + len(exc.unfinished)
        ok = [o.host.name for o in finished if o.ok]
        lines.append(f"finished: {len(finished)} of {plural(total, 'host')}" + (f"; ok: {compress(ok)}" if ok else ""))
        for o in exc.finished.failed:
            assert o.failure is not None
            lines.append(f"FAILED {o.host.name}: {o.failure.describe()}")
        if exc.running:
            lines.append(f"still running (stopped): {compress(h.name for h in exc.running)}")
        if exc.waiting:
            lines.append(f"not started: {compress(h.name for h in exc.waiting)}")
    sys.stderr.write("\n".join(lines) + "\n")

