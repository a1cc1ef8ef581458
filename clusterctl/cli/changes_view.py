"""The one way commands print what the change gate recorded or applied (push, dry-run, undo)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from clusterctl.changes import ChangeKind, GateRecord
from clusterctl.terminal_text import visible
from clusterctl.undo_journal import undo_line

if TYPE_CHECKING:
    from clusterctl.cli.context import AppContext
    from clusterctl.fanout import FleetResult, HostOutcome


def record_line(record: GateRecord) -> str:
    """One line for a change: what was (or would be) done on which host."""
    change = record.change
    if change.kind is ChangeKind.RUN_COMMAND:
        return f"{change.host}$ {change.describe()}"
    if not record.changed:
        return f"{change.host}: {change.path} already up to date"
    if not record.applied:
        return f"{change.host}: would {change.summary}"
    kept = f" (previous kept as {record.backup_path})" if record.backup_path else ""
    return f"{change.host}: wrote {change.path}{kept}"


def gate_outcome_record(outcome: HostOutcome[GateRecord], *, diff: bool = False) -> dict[str, Any]:
    """The JSON of one host's gated write (copy, tune-nccl --push); ``diff``: with the change's diff too."""
    record = outcome.value
    return {"host": outcome.host.name, "ok": outcome.ok, "applied": record.applied if record else False,
            "changed": record.changed if record else None,
            **({"diff": record.change.diff() if record else None} if diff else {}),
            "backup": record.backup_path if record else None,
            "error": outcome.failure.describe() if outcome.failure else None}


def print_gate_outcomes(app: AppContext, fleet: FleetResult[GateRecord]) -> None:
    """Per host: the line of its change (a file a dry run only recorded: its diff), or why the host failed."""
    for outcome in fleet.outcomes:
        record = outcome.value
        if outcome.failure is not None or record is None:
            reason = outcome.failure.describe() if outcome.failure else "no result"
            app.say(f"{outcome.host.name}: failed: {reason}", soft_wrap=False)
            continue
        diff = record.change.diff() if not record.applied and record.changed else ""
        app.say(visible(diff.rstrip("\n") or record_line(record)))


def say_plan_step(app: AppContext, commands: list[str], waits: list[str], indent: str = "      ") -> None:
    """A planned step's commands, each whole on its line to be copied, then what the step waits for."""
    for line in [f"$ {command}" for command in commands] + [f"(wait: {wait})" for wait in waits]:
        app.say(indent + line)


#: The last line of every dry run's table output (CONTRIBUTING.md, "Confirming changes").
NOTHING_CHANGED = "dry run: nothing was changed"

#: A dry run's words for a step it planned (bootstrap's plan, heal --dry-run): what it would do, never what it did.
PLANNED_WORDS = {"changed": "would change", "ok": "nothing to change"}


def say_run_end(app: AppContext, *, dry_run: bool, journal: object = None, err: bool = False) -> None:
    """The last line of a command that changes hosts: a dry run's ``NOTHING_CHANGED``, else the journal
    ``clusterctl undo`` takes, when the run wrote one (``err``: on stderr, after output a script reads)."""
    if dry_run:
        app.say(NOTHING_CHANGED, soft_wrap=False)
    elif journal:
        app.say(undo_line(journal), err=err, soft_wrap=False)
