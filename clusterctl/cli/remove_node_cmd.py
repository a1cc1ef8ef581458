"""``clusterctl remove-node HOST``: drain, reset and delete one node (etcd member first for a control plane)."""

from __future__ import annotations

import typer

from clusterctl.cli.confirm import YES, confirm_change
from clusterctl.cli.context import DRAIN_TIMEOUT, STATE_DIR, app_context, given_options
from clusterctl.errors import ExitCode

HELP = """\
Take one host out of the cluster: drain, etcd member, kubeadm reset, delete node.

It is drained, its etcd member removed (a control plane; refused
when that would break etcd's quorum, and for the last control plane), 'kubeadm reset' and the
cleanup bootstrap's reset phase does, then 'kubectl delete node'. The host stays in the
inventory: 'clusterctl bootstrap' later joins it again as a fresh node. Asks first, naming the
host; --yes skips the question.

Examples:

  clusterctl -i inventories/demo.yaml remove-node gpu-b3 --dry-run

  clusterctl remove-node gpu-b3 --yes

  clusterctl bootstrap                 # joins gpu-b3 again
"""


def register(app: typer.Typer) -> None:
    app.command("remove-node", help=HELP)(remove_node_command)


def remove_node_command(
    ctx: typer.Context,
    host: str = typer.Argument(..., metavar="HOST", help="Inventory name of the host to remove."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Show the steps; touch nothing."),
    yes: bool = YES,
    drain_timeout: float = DRAIN_TIMEOUT,
    state_dir: str | None = STATE_DIR,
) -> None:
    from clusterctl.cli.changes_view import say_plan_step
    from clusterctl.day2.remove_node import remove_node

    app = app_context(ctx)
    inventory = app.inventory()
    target = app.named_hosts([host])[0]
    confirm_change(f"remove {host} from the cluster '{inventory.name}' (drain, kubeadm reset, delete the node)",
                   [host], yes=yes, dry_run=dry_run, preview=f"clusterctl remove-node {host} --dry-run")
    with app.runner() as runner:
        report = remove_node(inventory, target, runner, apply=not dry_run, drain_timeout_s=drain_timeout,
                             state_dir=state_dir, given=given_options(ctx))

    def human() -> None:
        say = app.say
        kind = "control plane" if report.control_plane else "worker"
        say(f"remove {report.host} ({kind}) through {report.via}" + (f"; etcd: {report.etcd}" if report.etcd else ""))
        for number, step in enumerate(report.steps, 1):
            state = "" if not report.applied else f" [{step['status']}]"
            say(f"  {number}. {step['step']}: {step['summary']} (on {step['runs_on']}){state}"
                + (f": {step['message']}" if step["message"] else ""), soft_wrap=False, indent=5)
            if not report.applied:
                say_plan_step(app, [change.describe() for change in step["changes"]], step["waits"])
        for note in report.notes:
            app.note(note)
        if report.nothing_to_do:
            say("nothing to do: the host is not part of the cluster")
        elif not report.applied:
            say("PLAN (nothing was changed)")
        elif not report.failed:
            say(f"removed: {report.host} (still in the inventory; 'clusterctl bootstrap' joins it again)")

    app.emit(report.to_json(), human)
    if report.failed:
        app.say(f"FAILED {host}: {report.failed}", err=True, soft_wrap=False)
        raise typer.Exit(ExitCode.FAILED)
