"""``clusterctl heal HOST...``: the escalation chain on quarantined hosts, and their return once proven healthy."""

from __future__ import annotations

import typer

from clusterctl.cli.confirm import YES, confirm_change
from clusterctl.cli.context import DELETE_EMPTYDIR_DATA, STATE_DIR, app_context
from clusterctl.cli.quarantine_view import print_heal

HEAL_HELP = """\
Run the escalation chain on quarantined hosts until one step makes them healthy, then bring them
back. First the release gate (the health checks and a one-host NCCL test, as 'release' runs
them); then each step of the host's chain, from the action of each finding that keeps it out
(quarantine.heal.chains by code first; RMA, CHECK_MECHANICALS: straight to needs hardware):
restart-app (the drain restarted the application elsewhere: check again), reset-gpu ('nvidia-smi
-r -i N' on the GPUs the findings name, only when no process uses them), reboot (over SSH),
power-cycle (through the BMC: 'clusterctl power'). The node is drained before the first step
that stops its GPUs (pods with emptyDir data only with --delete-emptydir-data, as 'quarantine
--drain'); a reboot or power cycle waits, bounded, for a new boot id and the node Ready. After
each step the release gate must pass quarantine.heal.passes times in a row (2 by default); then the
host is released by 'release's own code. A host nothing cures stays quarantined as 'needs
hardware', with a report to paste into a ticket (serials, findings, steps tried, nvidia-bug-report's
log). A host quarantined flapping.count times within flapping.window_h (3 in 24 h) stays out for a
person. Every step is kept on the node: 'clusterctl status HOST' shows it. Asks first (--yes for
scripts); --dry-run runs the checks and prints the whole chain, changing nothing, and fails
(exit 1) where a step already would (no BMC, or one that does not answer), as the run would.

Examples:

  clusterctl heal gpu-a3 --dry-run

  clusterctl heal gpu-a3 --yes -o json
"""
HEAL_SHORT = "Heal quarantined hosts: reset GPU, reboot, power-cycle via the BMC; release once proven healthy."


def register(app: typer.Typer) -> None:
    app.command("heal", help=HEAL_HELP, short_help=HEAL_SHORT)(heal_command)


def heal_command(
    ctx: typer.Context,
    hosts: list[str] = typer.Argument(..., metavar="HOST...", help="Quarantined hosts (inventory names)."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Run the checks and print the whole chain; change "
                                 "nothing."),
    yes: bool = YES,
    state_dir: str | None = STATE_DIR,
    delete_emptydir_data: bool = DELETE_EMPTYDIR_DATA,
) -> None:
    from clusterctl.heal.run import heal
    from clusterctl.quarantine.drain import DrainOptions

    app = app_context(ctx)
    targets = app.named_hosts(hosts)
    confirm_change("run the escalation chain (GPU reset, reboot, power cycle) and release once healthy",
                   [h.name for h in targets], yes=yes, dry_run=dry_run,
                   preview=f"clusterctl heal {' '.join(h.name for h in targets)} --dry-run")
    with app.runner() as runner:
        results, journal = heal(runner, app.inventory(), targets, apply=not dry_run, state_dir=state_dir,
                                drain=DrainOptions(delete_emptydir_data=delete_emptydir_data))
    payload = {"dry_run": dry_run, "undo_journal": journal, "hosts": [r.to_json() for r in results]}
    app.emit(payload, lambda: print_heal(app, results, dry_run=dry_run, journal=journal),
             failed=not all(r.ok for r in results))
