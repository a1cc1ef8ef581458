"""``clusterctl undo JOURNAL``: revert what a run changed, from the journal it wrote."""

from __future__ import annotations

from typing import TYPE_CHECKING

import typer

from clusterctl.cli.confirm import YES, confirm_change
from clusterctl.cli.context import AppContext, app_context
from clusterctl.errors import ExitCode, UsageError
from clusterctl.terminal_text import one_line

if TYPE_CHECKING:
    from clusterctl.changes import GateRecord

HELP = """Revert the changes a run made on hosts, from the undo journal it wrote.

Every command that changes hosts keeps its journals in the state folder's undo/ (--state-dir,
else $CLUSTERCTL_STATE_DIR, else ~/.local/state/clusterctl) and prints the path ("undo with:
clusterctl undo FILE"). Each replaced
file is restored from the backup kept on its host, a file that was new is removed. With -l,
only those hosts; with --dry-run, say what would be done and touch nothing.

A change nothing can revert is named with the reason ("cannot undo 'kubeadm upgrade apply
v1.36.3': ... kubeadm does not support downgrades") and undo exits 1; one that leaves nothing to
put back is named too ("nothing to undo: 'evict pod ...': an evicted pod is recreated by its
controller, not brought back") and does not fail undo. A file whose content is no
longer what the run wrote (edited by hand since) is left alone and reported as refused; a
journal already used for a host is refused for it (replaying it would delete what was made
since). --force does both anyway. It asks first, naming the hosts; --yes confirms without asking
(required off a terminal). Undoing a quarantine returns its nodes to service only once they pass
release's health and NCCL checks (--skip-checks: without them).

Examples:

  clusterctl undo ~/.local/state/clusterctl/undo/tune-nccl-push-20240101-120000.json

  clusterctl -l gpu-a1 undo --dry-run ~/.local/state/clusterctl/undo/quarantine-20240101-120000.json
"""


def register(app: typer.Typer) -> None:
    app.command("undo", help=HELP)(undo_command)


def undo_command(
    ctx: typer.Context,
    journal: str = typer.Argument(..., metavar="JOURNAL", help="Undo journal written by the run to revert."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Say what would be restored; change nothing."),
    force: bool = typer.Option(False, "--force", help="Undo files changed since the run, and replay a journal "
                               "that was already used."),
    yes: bool = YES,
    skip_checks: bool = typer.Option(False, "--skip-checks", help="Return quarantined nodes to service without "
                                     "release's health and NCCL checks."),
) -> None:
    from clusterctl.changes import undo_incomplete
    from clusterctl.undo_journal import mark_journal_used, read_journal, undo_on_hosts

    app = app_context(ctx)
    read = read_journal(journal)
    records = read.records
    hosts = app.hosts()
    in_journal = {r.change.host for r in records}
    used = {h: when for h, when in read.used.items() if h in {x.name for x in hosts}}
    if used and not force and not dry_run:
        listed = ", ".join(f"{h} at {when}" for h, when in sorted(used.items()))
        raise UsageError(f"this journal was already used to undo {listed}: replaying it would remove or overwrite "
                         "what was made since.", file=journal,
                         hint="Narrow the hosts with -l, or pass --force to replay it anyway.")
    if not dry_run and not skip_checks:
        _refuse_unhealthy_returns(app, records, journal)
    confirm_change("revert the changes of this journal", [h.name for h in hosts if h.name in in_journal], yes=yes,
                   dry_run=dry_run, preview=f"clusterctl undo --dry-run {journal}")
    with app.runner() as runner:
        fleet = undo_on_hosts(runner, hosts, records, apply=not dry_run, force=force)
    if not dry_run:
        # A host whose undo ran is marked, even if some files were refused: its other files are reverted.
        mark_journal_used(journal, [o.host.name for o in fleet.outcomes if o.ok])
    payload = {"journal": journal, "dry_run": dry_run, "hosts": [
        {"host": o.host.name, "ok": o.ok, "done": o.value or [], "error": o.failure.describe() if o.failure else None}
        for o in fleet.outcomes]}

    def human() -> None:
        from clusterctl.cli.host_failures import print_failures

        for outcome in fleet.outcomes:
            for line in outcome.value or []:
                app.say(f"{outcome.host.name}: {one_line(line)}", soft_wrap=False)
        if dry_run:
            from clusterctl.cli.changes_view import say_nothing_changed

            say_nothing_changed(app)
        print_failures(app, fleet)

    app.emit(payload, human, failed=not fleet.ok or any(undo_incomplete(o.value or []) for o in fleet.outcomes))


def _refuse_unhealthy_returns(app: AppContext, records: list[GateRecord], journal: str) -> None:
    """An undo that would return quarantined nodes to service passes release's checks first (exit 1 when
    a node fails them: it stays quarantined, as 'clusterctl release' would keep it)."""
    from clusterctl.quarantine.release import undo_refusals

    selected = {h.name for h in app.hosts()}
    with app.runner() as runner:
        refused = undo_refusals(runner, app.inventory(), [r for r in records if r.change.host in selected])
    if not refused:
        return
    for node, why in refused.items():
        app.say(f"REFUSED {node}: stays quarantined: {one_line('; '.join(why))}", err=True)
    app.say(f"nothing was undone: undoing {journal} would return these nodes to service, and they fail release's "
            "checks. Fix what the checks name, or pass --skip-checks when you know better.", err=True, soft_wrap=False)
    raise typer.Exit(int(ExitCode.FAILED))
