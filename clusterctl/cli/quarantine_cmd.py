"""``clusterctl quarantine``, ``release`` and ``status``: take a failing host out of service and back."""

from __future__ import annotations

from functools import partial

import typer

from clusterctl.cli.confirm import YES, confirm_change, refuse_off_terminal
from clusterctl.cli.context import DELETE_EMPTYDIR_DATA, DRAIN_TIMEOUT, STATE_DIR, app_context
from clusterctl.cli.quarantine_view import print_host_status, print_quarantine, print_release, print_status
from clusterctl.errors import UsageError

QUARANTINE_HELP = """\
Take hosts out of service: taint their nodes clusterctl.dev/unhealthy=CODE:NoSchedule, cordon
them, note who, when, why and the finding codes on the node, and with --drain evict their pods
the way 'kubectl drain --ignore-daemonsets' does (PodDisruptionBudgets honoured and retried
until --drain-timeout, DaemonSet pods left, pods without a controller or with emptyDir data
only with --force / --delete-emptydir-data; what could not be evicted is listed). Hosts that
run slurmd are drained in Slurm too. Kubernetes is reached through the inventory's first
control-plane host. Asks first (--yes for scripts; required off a terminal); --dry-run shows
every change and touches nothing. Prints the undo journal: 'clusterctl undo FILE' (or 'undo
--last quarantine') puts the nodes back as they were (evicted pods are not brought back: their
controllers made new ones).

Examples:

  clusterctl quarantine gpu-a3 --reason "Xid 74" --code NVLINK_DOWN --drain

  clusterctl quarantine gpu-a3 gpu-b3 --reason nvlink --dry-run
"""

RELEASE_HELP = """\
Bring quarantined hosts back, only once they prove healthy: the health checks (--level, 1 by
default) and a single-host 'bench nccl' run on each host first; a host that passes both has its
taint removed, is uncordoned and resumed in Slurm; a host that fails stays quarantined and the
reasons are printed (exit 1). --skip-checks releases without the checks. Asks before releasing
the hosts that passed (--yes for scripts; required off a terminal).

Examples:

  clusterctl release gpu-a3

  clusterctl release gpu-a3 --dry-run
"""

QUARANTINE_SHORT = "Take hosts out of service: taint, cordon and (--drain) drain them, in Kubernetes and Slurm."
RELEASE_SHORT = "Bring quarantined hosts back once their health and a one-host NCCL test pass."
STATUS_HELP = """\
Which nodes are quarantined: since when, by whom, why (reason and finding codes), and what
their release needs. Nodes cordoned outside clusterctl are listed too, marked so. Named hosts
are shown in full: their quarantine, where their healing stands ('clusterctl heal'), every
remediation step and every quarantine kept on the node.

Examples:

  clusterctl status

  clusterctl status gpu-a3

  clusterctl status -o json
"""


def register(app: typer.Typer) -> None:
    app.command("quarantine", help=QUARANTINE_HELP, short_help=QUARANTINE_SHORT)(quarantine_command)
    app.command("release", help=RELEASE_HELP, short_help=RELEASE_SHORT)(release_command)
    app.command("status", help=STATUS_HELP)(status_command)


def quarantine_command(
    ctx: typer.Context,
    hosts: list[str] = typer.Argument(..., metavar="HOST...", help="Hosts to quarantine (inventory names)."),
    reason: str = typer.Option(..., "--reason", metavar="TEXT", help="Why: kept on the node for whoever looks next."),
    code: list[str] | None = typer.Option(
        None, "--code", metavar="CODE", help="Finding code(s) behind it (repeatable); the first is the taint's value."),
    drain: bool = typer.Option(False, "--drain", help="Also evict the nodes' pods (PodDisruptionBudgets honoured)."),
    drain_timeout: float = DRAIN_TIMEOUT,
    force: bool = typer.Option(False, "--force", help="With --drain: evict pods that declare no controller too."),
    delete_emptydir_data: bool = DELETE_EMPTYDIR_DATA,
    dry_run: bool = typer.Option(False, "--dry-run", help="Show every change; touch nothing."),
    yes: bool = YES,
    state_dir: str | None = STATE_DIR,
) -> None:
    from clusterctl.quarantine.drain import DrainOptions
    from clusterctl.quarantine.run import QuarantineRequest, quarantine

    given = [name for name, on in (("--force", force), ("--delete-emptydir-data", delete_emptydir_data)) if on]
    if given and not drain:  # a drain's switch alone would be ignored: the user meant a drain
        raise UsageError(f"{given[0]} goes with --drain (without it no pod is evicted)")
    app = app_context(ctx)
    targets = app.named_hosts(hosts)
    names = [h.name for h in targets]
    confirm_change("taint, cordon" + (" and drain" if drain else "") + " (quarantine)", names, yes=yes,
                   dry_run=dry_run, preview=f"clusterctl quarantine {' '.join(names)} ... --dry-run")
    request = QuarantineRequest(reason=reason, codes=tuple(code or ()), drain=drain,
                                drain_options=DrainOptions(timeout_s=drain_timeout, force=force, offers_force=True,
                                                           delete_emptydir_data=delete_emptydir_data))
    with app.runner() as runner:
        results, journal = quarantine(runner, app.inventory(), targets, request, apply=not dry_run,
                                     state_dir=state_dir)
    payload = {"dry_run": dry_run, "undo_journal": journal, "hosts": [r.to_json() for r in results]}
    app.emit(payload, lambda: print_quarantine(app, results, dry_run=dry_run, journal=journal),
             failed=not all(r.ok for r in results))


def release_command(
    ctx: typer.Context,
    hosts: list[str] = typer.Argument(..., metavar="HOST...", help="Quarantined hosts to bring back."),
    skip_checks: bool = typer.Option(False, "--skip-checks", help="Release without the health and NCCL checks."),
    level: int = typer.Option(1, "--level", min=0, max=3, help="Health check level that must pass (0-3)."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Run the checks, show what release would change; "
                                 "touch nothing."),
    yes: bool = YES,
    state_dir: str | None = STATE_DIR,
) -> None:
    from clusterctl.quarantine.release import health_and_nccl_checks, release

    app = app_context(ctx)
    targets = app.named_hosts(hosts)
    what = "untaint, uncordon and resume in Slurm (release)" + (" with the checks skipped" if skip_checks else "")
    preview = f"clusterctl release {' '.join(h.name for h in targets)} --dry-run"
    # Off a terminal the refusal comes first; at one, the question comes after the checks: a host
    # that stays quarantined needs no answer from anyone.
    refuse_off_terminal(what, [h.name for h in targets], yes=yes, dry_run=dry_run, preview=preview)
    ask = partial(confirm_change, what, yes=yes, dry_run=dry_run, preview=preview)
    inventory = app.inventory()
    checks = None if skip_checks else health_and_nccl_checks(level, inventory.hosts, inventory.quarantine)
    with app.runner() as runner:
        results, journal = release(runner, inventory, targets, apply=not dry_run, confirm=ask, checks=checks,
                                   state_dir=state_dir)
    payload = {"dry_run": dry_run, "undo_journal": journal, "checks_skipped": skip_checks,
               "hosts": [r.to_json() for r in results]}
    app.emit(payload, lambda: print_release(app, results, dry_run=dry_run, journal=journal, skipped=skip_checks),
             failed=not all(r.ok for r in results))


def status_command(
    ctx: typer.Context,
    hosts: list[str] | None = typer.Argument(
        None, metavar="[HOST]...", help="Show these hosts in full: their quarantine, healing and history."),
) -> None:
    from clusterctl.quarantine.status import quarantined_nodes

    app = app_context(ctx)
    if hosts:
        from clusterctl.heal.status import hosts_status

        with app.runner() as runner:
            found = hosts_status(runner, app.inventory(), app.named_hosts(hosts))
        app.emit({"hosts": [h.to_json() for h in found]}, lambda: print_host_status(app, found))
        return
    with app.runner() as runner:
        nodes = quarantined_nodes(runner, app.inventory())
    app.emit({"quarantined": [n.to_json() for n in nodes]}, lambda: print_status(app, nodes))
