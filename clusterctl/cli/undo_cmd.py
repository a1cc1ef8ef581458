"""``clusterctl undo JOURNAL``: revert what a run changed, from the journal it wrote."""

from __future__ import annotations

import typer

from clusterctl.cli.context import app_context
from clusterctl.errors import ExitCode
from clusterctl.terminal_text import one_line

HELP = """Revert the changes a run made on hosts, from the undo journal it wrote.

tune-nccl --push prints the journal's path ("undo with: clusterctl undo FILE"). Each replaced
file is restored from the backup kept on its host, a file that was new is removed. With -l,
only those hosts; with --dry-run, say what would be done and touch nothing.

Examples:

  clusterctl undo clusterctl-results/undo/tune-nccl-push-20240101-120000.json

  clusterctl -l gpu-a1 undo --dry-run clusterctl-results/undo/tune-nccl-push-20240101-120000.json
"""


def register(app: typer.Typer) -> None:
    app.command("undo", help=HELP)(undo_command)


def undo_command(
    ctx: typer.Context,
    journal: str = typer.Argument(..., metavar="JOURNAL", help="Undo journal written by the run to revert."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Say what would be restored; change nothing."),
) -> None:
    from clusterctl.undo_journal import load_journal, undo_on_hosts

    app = app_context(ctx)
    records = load_journal(journal)
    with app.runner() as runner:
        fleet = undo_on_hosts(runner, app.hosts(), records, apply=not dry_run)
    payload = {"journal": journal, "dry_run": dry_run, "hosts": [
        {"host": o.host.name, "ok": o.ok, "done": o.value or [], "error": o.failure.describe() if o.failure else None}
        for o in fleet.outcomes]}

    def human() -> None:
        from clusterctl.cli.host_failures import print_failures

        for outcome in fleet.outcomes:
            for line in outcome.value or []:
                app.console.print(f"{outcome.host.name}: {one_line(line)}", markup=False, highlight=False)
        print_failures(app, fleet)

    app.emit(payload, human)
    if not fleet.ok or any(line.startswith(("failed", "cannot")) for o in fleet.outcomes for line in o.value or []):
        raise typer.Exit(int(ExitCode.FAILED))
