"""Pieces of output every fan-out command shares: the failure lines and the summary."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from clusterctl.hostlist import compress
from clusterctl.plain_json import to_plain
from clusterctl.terminal_layout import print_wrapped, stderr_width, wrap_lines
from clusterctl.terminal_text import markup_safe
from clusterctl.wording import plural

if TYPE_CHECKING:
    from clusterctl.cli.context import AppContext
    from clusterctl.fanout import FleetResult, HostOutcome


def outcome_record(outcome: HostOutcome[Any]) -> dict[str, Any]:
    """The JSON shape of a host's failure, shared by every command's machine output."""
    # A failure's JSON is its fields (kind, message, exit_code, stderr_tail), as every dataclass's is.
    return {"host": outcome.host.name, "ok": outcome.ok, "failure": to_plain(outcome.failure),
            "duration_s": outcome.duration_s}


def print_failures(app: AppContext, fleet: FleetResult[Any]) -> None:
    """One clear line per failed host, on stderr (wrapped at the terminal's width, under its message), then
    a one-line summary."""
    from rich.text import Text

    for outcome in fleet.failed:
        assert outcome.failure is not None
        line = f"[bold red]FAILED[/] [bold]{markup_safe(outcome.host.name)}[/]: "
        line += markup_safe(outcome.failure.describe())
        print_wrapped(app.err_console, Text.from_markup(line, emoji=False), 4)
    total, failed = len(fleet.outcomes), len(fleet.failed)
    if failed:
        app.err_console.print(f"{plural(total, 'host')}: {total - failed} ok, [red]{failed} failed[/]", markup=True)


def print_interrupted(exc: BaseException, *, output: str = "table") -> None:
    """``interrupted``, what finished, what was running, what never started and how to retry.

    On stderr for people; with ``-o json``/``yaml`` the same facts also go to stdout as one
    document, so a script that was reading the output learns what happened. Commands that can
    show their own partial results (``exec``) do so before this runs; for every other command
    this is the whole report of an interrupted fan-out.
    """
    import sys

    from clusterctl.fanout import FleetInterrupted

    signal_name = getattr(exc, "signal_name", "SIGINT")
    lines = [f"interrupted ({signal_name})"]
    record: dict[str, Any] = {"interrupted": True, "signal": signal_name}
    if isinstance(exc, FleetInterrupted):
        finished = exc.finished.outcomes
        step_hosts = [o.host.name for o in finished] + [h.name for h in exc.unfinished]
        ok = [o.host.name for o in finished if o.ok]
        failed = list(exc.finished.failed)
        step = f" during {exc.label}" if exc.label else ""
        lines[0] += step
        lines.append(f"finished: {len(finished)} of the {plural(len(step_hosts), 'host')} in this step"
                     + (f"; ok: {compress(ok)}" if ok else ""))
        for o in failed:
            assert o.failure is not None
            lines.append(f"FAILED {o.host.name}: {o.failure.describe()}")
        if exc.running:
            lines.append(f"still running (stopped): {compress(h.name for h in exc.running)}")
        if exc.waiting:
            lines.append(f"not started: {compress(h.name for h in exc.waiting)}")
        others = [name for name in exc.run_hosts if name not in set(step_hosts)]
        if others:
            lines.append(f"not part of this step ({plural(len(exc.run_hosts), 'host')} in the run): "
                         f"{compress(others)}")
        if exc.retry_hint:
            lines.append(exc.retry_hint)
        elif exc.unfinished or failed:
            lines.append("retry: run the same command with --limit @retry (the hosts that failed or did not finish)")
        record.update(step=exc.label or None, run_hosts=list(exc.run_hosts) or step_hosts, ok=ok,
                      failed=[outcome_record(o) for o in failed],
                      still_running=[h.name for h in exc.running], not_started=[h.name for h in exc.waiting],
                      retry=exc.retry_hint or "--limit @retry")
    hint = getattr(exc, "retry_hint", None)
    if not isinstance(exc, FleetInterrupted) and hint:
        lines.append(hint)
        record["retry"] = hint
    if output in ("json", "yaml") and not getattr(exc, "reported", False):
        from clusterctl.cli.output import dump

        sys.stdout.write(dump(record, output))
        sys.stdout.flush()
    sys.stderr.write(wrap_lines("\n".join(lines), stderr_width()) + "\n")
