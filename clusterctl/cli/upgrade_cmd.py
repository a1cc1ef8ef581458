"""``clusterctl upgrade plan|apply``: Kubernetes and the node stack, node by node, in kubeadm's order."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import typer

from clusterctl.cli.confirm import YES, confirm_change
from clusterctl.cli.context import DRAIN_TIMEOUT, SKIP_PHASES, STATE_DIR, app_context, given_options, with_options
from clusterctl.errors import ExitCode
from clusterctl.hostlist import compress
from clusterctl.secret import mask_text
from clusterctl.terminal_layout import print_wrapped

if TYPE_CHECKING:
    from clusterctl.cli.context import AppContext
    from clusterctl.day2.upgrade import UpgradeReport, UpgradeRequest
    from clusterctl.engine.phase import Phase
    from clusterctl.engine.run import HostPhaseResult

HELP = """\
Upgrade the cluster's Kubernetes and node stack, node by node, in kubeadm's order.

The first control plane ('kubeadm upgrade apply'), the other control planes, then the workers
('kubeadm upgrade node'); the node stack too when the inventory's pins changed. Each node is
drained, its packages unheld, upgraded and held again, the kubelet restarted, and the node
uncordoned once it is Ready at the new version. One minor version at a time.

Examples:

  clusterctl -i inventories/demo.yaml upgrade plan --to 1.36.3

  clusterctl upgrade plan --to 1.37.2

  clusterctl upgrade apply --to 1.37.2 --max-unavailable 2 --yes

  clusterctl upgrade apply --resume --yes

  clusterctl upgrade phase uncordon --to 1.37.2 -l gpu-b3 --yes

The steps are phases of the action engine, as bootstrap's are ('clusterctl upgrade phases'):
'upgrade phase NAME' runs one, --skip-phases leaves some out.
"""

upgrade_app = typer.Typer(help=HELP, no_args_is_help=True, rich_markup_mode=None)

_TO = typer.Option(None, "--to", metavar="X.Y.Z", help="Kubernetes version to reach (default: the inventory's pin).")
_MAX = typer.Option(1, "--max-unavailable", min=1, metavar="N", help="Workers upgraded at once (control planes: one).")


def _applied(
    yes: bool = YES,
    dry_run: bool = typer.Option(False, "--dry-run", help="The same as 'upgrade plan': touch nothing."),
    drain_timeout_s: float = DRAIN_TIMEOUT,
    ready_timeout_s: int = typer.Option(300, "--ready-timeout", min=1, metavar="S",
                                        help="Seconds a node has to come back Ready."),
    state_dir: str | None = STATE_DIR,
) -> None:
    """How 'upgrade apply' and 'upgrade phase' change the nodes (``with_options``)."""


def register(app: typer.Typer) -> None:
    app.add_typer(upgrade_app, name="upgrade")


@upgrade_app.command("plan", help="""Per node, in order: the steps 'upgrade apply' would take. Touches nothing.
Exits 1 when a node cannot be planned or it finds an error apply would stop on (a host that
is not a node).

Examples:

  clusterctl -i inventories/demo.yaml upgrade plan --to 1.36.3

  clusterctl upgrade plan --to 1.37.2 --max-unavailable 2 -o json
""")
def upgrade_plan(
    ctx: typer.Context,
    to: str | None = _TO,
    max_unavailable: int = _MAX,
    skip_phases: str | None = SKIP_PHASES,
) -> None:
    _execute(ctx, dry_run=True, yes=True, **ctx.params)


@upgrade_app.command("apply", help="""Upgrade node by node; stops at the first node that fails (--resume continues).

Examples:

  clusterctl upgrade apply --to 1.37.2 --dry-run

  clusterctl upgrade apply --to 1.37.2 --max-unavailable 2 --yes

  clusterctl upgrade apply --resume --yes
""")
@with_options(_applied)
def upgrade_apply(
    ctx: typer.Context,
    to: str | None = _TO,
    max_unavailable: int = _MAX,
    resume: bool = typer.Option(False, "--resume", help="Continue a rollout that stopped (same target)."),
    skip_phases: str | None = SKIP_PHASES,
    **options: Any,
) -> None:
    _execute(ctx, **ctx.params)


@upgrade_app.command("phase", help="""Run one phase of the upgrade by name (see 'upgrade phases').

Examples:

  clusterctl upgrade phase drain --to 1.37.2 -l gpu-b3 --dry-run

  clusterctl upgrade phase uncordon --to 1.37.2 -l gpu-b3 --yes
""")
@with_options(_applied)
def upgrade_phase(ctx: typer.Context, phase: str = typer.Argument(
        ..., metavar="NAME", help="kubeadm, kubeadm-upgrade, drain, kubelet, ..."), to: str | None = _TO,
                  **options: Any) -> None:
    _execute(ctx, **ctx.params)


@upgrade_app.command("phases", help="""List the upgrade's phases in the order they run.

Nodes go in batches (--max-unavailable N): control planes one at a time, then N
workers at a time; each batch runs every node phase before the next starts,
then the cluster's phases run once.

Example:

  clusterctl upgrade phases -o json
""")
def upgrade_phases(ctx: typer.Context) -> None:
    from clusterctl.cli.bootstrap_cmd import emit_phases
    from clusterctl.day2.upgrade import listed_phases

    phases = listed_phases()
    emit_phases(app_context(ctx), phases, default={p.name for p in phases}, batched=True)


def _execute(ctx: typer.Context, *, yes: bool, dry_run: bool, **fields: Any) -> None:
    """Every upgrade command: ask (unless a plan), run the engine's phases, print; exit 1 when a node failed.
    The other options are ``UpgradeRequest``'s fields by name (``ctx.params``); their ranges (``min=1``)
    already refused a count or a timeout below 1."""
    from clusterctl.day2.upgrade import UpgradeRequest, upgrade

    app = app_context(ctx)
    request = UpgradeRequest(apply=not dry_run, given=given_options(ctx, "to"), **fields)
    inventory = app.inventory()
    hosts = app.hosts()
    what = f"run the upgrade's phase {request.phase}" if request.phase else \
        f"drain, upgrade and restart every node of the cluster '{inventory.name}', node by node,"
    confirm_change(what, [h.name for h in hosts], yes=yes, dry_run=not request.apply,
                   preview=f"clusterctl upgrade plan{f' --to {request.to}' if request.to else ''}")

    show = None if app.machine_output or not request.apply else (lambda p, r: _print_phase(app, p, r))
    with app.runner() as runner:
        report = upgrade(inventory, hosts, runner, request, on_phase=show)
    app.emit(report.to_json(), lambda: _print_report(app, report, request))
    if report.stopped:  # a node that failed, in a plan too (it cannot be read, a phase's check refuses)
        app.say(f"STOPPED: {report.stopped}", err=True, soft_wrap=False)
    if not report.ok:  # that, or an error finding (a plan that finds errors exits 1, as every report)
        raise typer.Exit(ExitCode.FAILED)


def _print_phase(app: AppContext, phase: Phase[Any, Any], results: list[HostPhaseResult]) -> None:
    from clusterctl.engine.run import SkipReason

    # A phase the inventory leaves to the site (its own CNI, no GPUs) says "nothing to do" and why as it
    # ends, as bootstrap's progress does: one line for the phase, its hosts together.
    left: dict[str, list[str]] = {}
    for r in results:
        if r.skipped is SkipReason.NOT_NEEDED:
            left.setdefault(r.message, []).append(r.host)
    # Each row wraps under its message column on a narrow terminal (``print_wrapped``), one line off it.
    for message, names in left.items():
        print_wrapped(app.console, mask_text(message), first_indent=f"{compress(names):<16} {phase.name:<16} skipped  ")
    for r in results:
        if not (r.changes or r.waits or r.status.value == "failed"):
            continue  # nothing done or waited for there (the node is up to date, or not this node's phase)
        text = mask_text(phase.description) + (f": {mask_text(r.message)}" if r.message else "")
        print_wrapped(app.console, text, first_indent=f"{r.host:<16} {phase.name:<16} {r.status.value:<8} ")


def _print_report(app: AppContext, report: UpgradeReport, request: UpgradeRequest) -> None:
    from clusterctl.cli.changes_view import say_plan_step
    from clusterctl.cli.findings_view import print_findings
    from clusterctl.engine.run import Status

    say = app.say
    say(f"cluster {report.cluster}: Kubernetes {report.current} -> {report.target}")
    if report.findings:  # each with its fix, as every report prints findings
        print_findings(app.console, report.findings)
    if not report.applied:
        number = 0
        for host in report.hosts:
            if not host.steps:
                say(f"\n{host.host} ({host.role}): {host.status.value}")
                continue
            say(f"\n{host.host} ({host.role}): kubelet {host.kubelet or '?'}"
                + (f", control plane {host.control_plane}" if host.control_plane else ""))
            for step in host.steps:
                number += 1
                where = "" if step["runs_on"] == host.host else f" [on {step['runs_on']}]"
                say(f"  {number:>2}. {step['step']}: {step['summary']}{where}", soft_wrap=False, indent=6)
                say_plan_step(app, [change.describe() for change in step["changes"]], step["waits"])
        for step in (s for s in report.addons if s["changes"]):
            say(f"\nthen on {step['runs_on']}: {step['step']}: {step['summary']}", soft_wrap=False)
            say_plan_step(app, [change.describe() for change in step["changes"]], [])
    else:
        say("")
        for host in report.hosts:
            say(f"{host.host:<16} {host.status.value}" + (f": {host.message}" if host.message else ""), soft_wrap=False,
                indent=17)
    # The cluster phases the inventory leaves to the site: what bootstrap says of them, said here too.
    left = [s for s in report.addons if s["status"] == Status.SKIPPED.value]
    if left:
        say("")
    for step in left:
        say(f"{step['step']}: {step['message']}", soft_wrap=False)
    for note in report.notes:
        app.note(note)
    only = f"phase {', '.join(report.only)}" if report.only else None
    if report.nothing_to_do:
        say(f"nothing to do in {only}" if only else f"nothing to do: every node runs {report.target}, the rest of "
            "its stack as the inventory pins it")
    elif report.applied and report.ok:
        say(f"done: {only} (not the whole upgrade)" if only else f"upgraded: every node runs {report.target}")
    elif not report.applied and report.ok:
        # What carries out this plan: the same hosts and phases, not the whole upgrade when only some were asked for.
        say(f"PLAN (nothing was changed): run '{request.command(report.target)}' to carry it out", soft_wrap=False)
    elif not report.applied:
        say("PLAN (nothing was changed): " + ("incomplete, a node could not be planned" if report.stopped else
                                               "errors found") + " (above); fix that before 'clusterctl upgrade apply'",
            soft_wrap=False)
