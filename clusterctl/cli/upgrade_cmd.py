"""``clusterctl upgrade plan|apply``: Kubernetes and the node stack, node by node, in kubeadm's order."""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional

import typer

from clusterctl.cli.context import AppContext, app_context
from clusterctl.errors import ExitCode, UsageError

if TYPE_CHECKING:
    from clusterctl.day2.upgrade import HostUpgrade, Step, UpgradeReport

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
"""

upgrade_app = typer.Typer(help=HELP, no_args_is_help=True, rich_markup_mode=None)

_TO = typer.Option(None, "--to", metavar="X.Y.Z", help="Kubernetes version to reach (default: the inventory's pin).")
_MAX = typer.Option(1, "--max-unavailable", min=1, metavar="N", help="Workers upgraded at once (control planes: one).")
_STATE = typer.Option(None, "--state-dir", metavar="DIR", envvar="CLUSTERCTL_STATE_DIR",
                      help="Where the rollout's progress is kept (default ~/.local/state/clusterctl).")


def register(app: typer.Typer) -> None:
    app.add_typer(upgrade_app, name="upgrade")


@upgrade_app.command("plan", help="Per node, in order: the steps 'upgrade apply' would take. Touches nothing.")
def upgrade_plan(
    ctx: typer.Context,
    to: Optional[str] = _TO,  # noqa: UP045 - typer needs Optional on 3.10
    max_unavailable: int = _MAX,
) -> None:
    _execute(app_context(ctx), to=to, apply=False, max_unavailable=max_unavailable, resume=False, yes=True,
             state_dir=None, drain_timeout_s=300, ready_timeout_s=300)


@upgrade_app.command("apply", help="Upgrade node by node; stops at the first node that fails (--resume continues).")
def upgrade_apply(
    ctx: typer.Context,
    to: Optional[str] = _TO,  # noqa: UP045
    max_unavailable: int = _MAX,
    yes: bool = typer.Option(False, "--yes", "-y", help="Do not ask for confirmation."),
    resume: bool = typer.Option(False, "--resume", help="Continue a rollout that stopped (same target)."),
    dry_run: bool = typer.Option(False, "--dry-run", help="The same as 'upgrade plan': touch nothing."),
    drain_timeout: int = typer.Option(300, "--drain-timeout", min=1, metavar="S", help="Seconds a drain may take."),
    ready_timeout: int = typer.Option(300, "--ready-timeout", min=1, metavar="S",
                                      help="Seconds a node has to come back Ready."),
    state_dir: Optional[str] = _STATE,  # noqa: UP045
) -> None:
    _execute(app_context(ctx), to=to, apply=not dry_run, max_unavailable=max_unavailable, resume=resume, yes=yes,
             state_dir=state_dir, drain_timeout_s=drain_timeout, ready_timeout_s=ready_timeout)


def _execute(app: AppContext, *, to: str | None, apply: bool, max_unavailable: int, resume: bool, yes: bool,
             state_dir: str | None, drain_timeout_s: float, ready_timeout_s: float) -> None:
    from clusterctl.day2.upgrade import UpgradeRequest, upgrade

    if max_unavailable < 1:
        raise UsageError("--max-unavailable must be 1 or more", field="--max-unavailable")
    if drain_timeout_s < 1 or ready_timeout_s < 1:
        raise UsageError("timeouts must be 1 second or more", field="--drain-timeout/--ready-timeout")
    inventory = app.inventory()
    hosts = app.hosts()
    from clusterctl.cli.confirm import confirm_change

    confirm_change(f"drain, upgrade and restart every node of the cluster '{inventory.name}', node by node",
                   [h.name for h in hosts], yes=yes, dry_run=not apply,
                   preview=f"clusterctl upgrade plan{f' --to {to}' if to else ''}")
    request = UpgradeRequest(to=to, apply=apply, max_unavailable=max_unavailable, resume=resume, state_dir=state_dir,
                             drain_timeout_s=drain_timeout_s, ready_timeout_s=ready_timeout_s)
    show = None if app.machine_output or not apply else (lambda h, s: _print_step(app, h, s))
    with app.runner() as runner:
        report = upgrade(inventory, hosts, runner, request, on_step=show)
    app.emit(report.to_json(), lambda: _print_report(app, report))
    if apply and not report.ok:
        app.err_console.print(f"STOPPED: {report.stopped}", markup=False, highlight=False, soft_wrap=True)
        raise typer.Exit(ExitCode.FAILED)


def _print_step(app: AppContext, host: HostUpgrade, step: Step) -> None:
    from clusterctl.secret import mask_text

    line = f"{host.host:<16} {step.name:<16} {step.status:<12} {mask_text(step.summary)}"
    if step.message:
        line += f": {mask_text(step.message)}"
    app.console.print(line, markup=False, highlight=False, soft_wrap=True)


def _print_report(app: AppContext, report: UpgradeReport) -> None:
    from clusterctl.secret import mask_text

    console = app.console

    def say(text: str) -> None:
        console.print(mask_text(text), markup=False, highlight=False, soft_wrap=True)

    say(f"cluster {report.cluster}: Kubernetes {report.current} -> {report.target}")
    for f in report.findings:
        say(f"{f.severity.value.upper():<7} {f.where} {f.code}: {f.message}")
    if not report.applied:
        number = 0
        for host in report.hosts:
            if not host.pending:
                say(f"\n{host.host} ({host.role}): up to date")
                continue
            say(f"\n{host.host} ({host.role}): kubelet {host.kubelet or '?'}"
                + (f", control plane {host.control_plane}" if host.control_plane else ""))
            for step in host.steps:
                number += 1
                where = "" if step.runs_on == host.host else f" [on {step.runs_on}]"
                say(f"  {number:>2}. {step.name}: {step.summary}{where}")
                for change in step.changes:
                    say(f"      $ {change.describe()}")
        addons = report.addons[0] if report.addons else None
        if addons is not None and addons.changes:
            say(f"\nthen on {addons.runs_on}: {addons.summary}")
            for change in addons.changes:
                say(f"      $ {change.describe()}")
    else:
        say("")
        for host in report.hosts:
            say(f"{host.host:<16} {host.status}" + (f": {host.message}" if host.message else ""))
    for note in report.notes:
        say(f"note: {note}")
    if report.nothing_to_do:
        say("nothing to do: every node runs " + report.target + " with the inventory's pins")
    elif report.applied and report.ok:
        say(f"upgraded: every node runs {report.target}")
    elif not report.applied:
        say("PLAN (nothing was changed): run 'clusterctl upgrade apply --to " + report.target + "' to carry it out")


