"""``clusterctl undo JOURNAL``: revert what a run changed, from the journal it wrote."""

from __future__ import annotations

import shlex
from typing import TYPE_CHECKING, Any

import typer

from clusterctl.cli.confirm import YES, confirm_change
from clusterctl.cli.context import STATE_DIR, AppContext, app_context
from clusterctl.errors import ExitCode, UsageError
from clusterctl.terminal_text import one_line

if TYPE_CHECKING:
    from pathlib import Path

    from clusterctl.changes import GateRecord

HELP = """Revert the changes a run made on hosts, from the undo journal it wrote.

Every command that changes hosts keeps its journals in the state folder's undo/ (--state-dir,
else $CLUSTERCTL_STATE_DIR, else ~/.local/state/clusterctl) and prints the path ("undo with:
clusterctl undo FILE"). --last takes the newest journal there (the newest of one kind of run
with --last KIND: quarantine, bootstrap, upgrade, tune-nccl, ...); --list lists them. Each
replaced file is restored from the backup kept on its host, a file that was new is removed.
With -l, only what the run changed on those hosts (a quarantined node's taint, though kubectl
ran on a control plane), and --last takes the newest journal that changed them; with
--dry-run, say what would be done and touch nothing.

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

  clusterctl undo --list

  clusterctl undo --last quarantine --dry-run

  clusterctl -l gpu-a1 undo --last tune-nccl --yes

  clusterctl undo ~/.local/state/clusterctl/undo/copy-20240101-120000.json
"""


def register(app: typer.Typer) -> None:
    app.command("undo", help=HELP)(undo_command)


def undo_command(
    ctx: typer.Context,
    journal: str | None = typer.Argument(None, metavar="JOURNAL|KIND", help="Undo journal written by the run to "
                                         "revert; with --last, the kind of run (quarantine, bootstrap, ...)."),
    last: bool = typer.Option(False, "--last", help="Revert the newest journal in the state folder (of KIND)."),
    list_journals: bool = typer.Option(False, "--list", help="List the state folder's journals, oldest first; "
                                       "revert nothing."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Say what would be restored; change nothing."),
    force: bool = typer.Option(False, "--force", help="Undo files changed since the run, and replay a journal "
                               "that was already used or written for another cluster."),
    yes: bool = YES,
    skip_checks: bool = typer.Option(False, "--skip-checks", help="Return quarantined nodes to service without "
                                     "release's health and NCCL checks."),
    state_dir: str | None = STATE_DIR,
) -> None:
    from clusterctl.quarantine.slurm import node_name as slurm_node_name
    from clusterctl.undo_journal import changed_on, mark_journal_used, newest_journal, read_journal, undo_on_hosts
    from clusterctl.writable import state_dir as chosen_state_dir

    app = app_context(ctx)
    folder = chosen_state_dir(state_dir) / "undo"
    if list_journals:
        if journal is not None or last:
            raise UsageError("--list lists the journals; it takes no JOURNAL and no --last.")
        return _list(app, folder)
    if last and journal is not None and (journal.endswith(".json") or "/" in journal):
        raise UsageError(f"--last takes a kind of run (quarantine, bootstrap, ...), not a file: {journal!r}.",
                         hint=f"To revert that journal: clusterctl undo {shlex.quote(journal)}")
    if journal is None and not last:
        raise UsageError("name the undo journal to revert, or take the newest with --last [KIND].",
                         hint="'clusterctl undo --list' lists the journals in the state folder.")
    # -l selects what the journal changed: a node changed through its cluster's control plane is the node
    # (named as Slurm names it, for a Slurm drain).
    selected = {n for h in app.hosts() for n in (h.name, slurm_node_name(h))} if app.limit else None
    cluster = app.inventory().name
    read = newest_journal(folder, journal, cluster, selected) if last else read_journal(str(journal), folder)
    journal = str(read.path) if last else str(journal)
    if read.cluster not in (None, cluster) and not force:
        raise UsageError(f"this journal was written for the cluster '{read.cluster}', not '{cluster}': undoing it "
                         "here would change this cluster's hosts of the same names.", file=journal,
                         hint="Give that cluster's inventory (-i), or pass --force to undo it here anyway.")
    if last:
        app.say(f"the newest {read.command} journal: {journal}", err=True, soft_wrap=False)
    records = [r for r in read.records if selected is None or changed_on(r) in selected]
    if not records:
        every = sorted({changed_on(r) for r in read.records})
        raise UsageError(f"the journal changed {', '.join(every) or 'no host'}; none of them is selected", file=journal)
    in_journal = {changed_on(r) for r in records}
    # A journal of an earlier release marked the host each undo ran on (a control plane, for its nodes).
    used = {h: when for h, when in read.used.items() if h in in_journal | {r.change.host for r in records}}
    if used and not force and not dry_run:
        listed = ", ".join(f"{h} at {when}" for h, when in sorted(used.items()))
        raise UsageError(f"this journal was already used to undo {listed}: replaying it would remove or overwrite "
                         "what was made since.", file=journal,
                         hint="Narrow the hosts with -l, or pass --force to replay it anyway.")
    if not dry_run and not skip_checks:
        _refuse_unhealthy_returns(app, records, journal)
    confirm_change("revert the changes of this journal", sorted(in_journal), yes=yes,
                   dry_run=dry_run, preview=f"clusterctl undo --dry-run {shlex.quote(journal)}")
    with app.runner() as runner:
        fleet = undo_on_hosts(runner, app.inventory().hosts, records, apply=not dry_run, force=force)
    if not dry_run:
        # A host whose undo ran is marked, even if some files were refused: its other files are reverted.
        done = {o.host.name for o in fleet.outcomes if o.ok}
        mark_journal_used(journal, list(dict.fromkeys(changed_on(r) for r in records if r.change.host in done)))
    payload = {"journal": journal, "dry_run": dry_run, "hosts": [
        {"host": o.host.name, "ok": o.ok, "done": [line.text for line in o.value or []],
         "error": o.failure.describe() if o.failure else None} for o in fleet.outcomes]}

    def human() -> None:
        from clusterctl.changes import WOULD_RUN
        from clusterctl.cli.changes_view import say_plan_step, say_run_end
        from clusterctl.cli.host_failures import print_failures

        # Each line names the host its step changed: a node changed through the control plane is the node.
        for outcome, line in ((o, line) for o in fleet.outcomes for line in o.value or []):
            where = changed_on(line.record) if line.record else outcome.host.name
            if line.would_run is None:
                app.say(f"{where}: {one_line(line.text)}", soft_wrap=False)
            else:  # a dry run's command: whole on a line of its own, to be copied (not wrapped)
                app.say(f"{where}: {WOULD_RUN.strip()}")
                say_plan_step(app, [one_line(line.would_run)], [], indent="  ")
        say_run_end(app, dry_run=dry_run)
        print_failures(app, fleet)

    app.emit(payload, human, failed=not fleet.ok or any(line.left for o in fleet.outcomes for line in o.value or []))


def _refuse_unhealthy_returns(app: AppContext, records: list[GateRecord], journal: str) -> None:
    """An undo that would return quarantined nodes to service passes release's checks first (exit 1 when
    a node fails them: it stays quarantined, as 'clusterctl release' would keep it)."""
    from clusterctl.quarantine.release import undo_refusals

    with app.runner() as runner:
        refused = undo_refusals(runner, app.inventory(), records)
    if not refused:
        return
    for node, why in refused.items():
        app.say(f"REFUSED {node}: stays quarantined: {one_line('; '.join(why))}", err=True, soft_wrap=False)
    app.say(f"nothing was undone: undoing {journal} would return these nodes to service, and they fail release's "
            "checks. Fix what the checks name, or pass --skip-checks when you know better.", err=True, soft_wrap=False)
    raise typer.Exit(int(ExitCode.FAILED))


def _list(app: AppContext, folder: Path) -> None:
    """``--list``: the journals in the state folder, oldest first (``--last`` takes the one at the end)."""
    from clusterctl.hostlist import compress
    from clusterctl.terminal_layout import Column, print_table
    from clusterctl.undo_journal import changed_on, journals_in

    journals, unreadable = journals_in(folder)
    rows: list[dict[str, Any]] = [{"journal": str(j.path), "command": j.command, "created": j.created,
                                   "hosts": sorted({changed_on(r) for r in j.records}), "used": j.used}
                                  for j in journals]

    def human() -> None:
        app.say(f"undo journals in {folder}, oldest first:" if rows else f"no undo journal in {folder}",
                soft_wrap=False)
        if rows:
            print_table(app.console, [Column("JOURNAL", keep=True), Column("HOSTS"), Column("UNDONE ON")],
                        [(one_line(j.path.name), one_line(compress(row["hosts"])), one_line(compress(j.used)) or "-")
                         for j, row in zip(journals, rows, strict=True)], boxed=False)
        for path, why in unreadable.items():
            app.warn(f"{path}: not read: {why}")

    app.emit({"folder": str(folder), "journals": rows, "unreadable": unreadable}, human)
