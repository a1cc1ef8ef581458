"""``clusterctl reset``: take hosts back from a bootstrapped cluster (behind a confirmation)."""

from __future__ import annotations

import typer

from clusterctl.cli.bootstrap_cmd import FORCE_UNLOCK, ONLY, _execute, hosts_of_run
from clusterctl.cli.confirm import YES, confirm_change
from clusterctl.cli.context import STATE_DIR, app_context

HELP = """\
Undo what 'clusterctl bootstrap' did on the selected hosts, as its own undo journals say.

Bootstrap keeps a journal of every change under <state dir>/undo/. Reset reads this fleet's:
'kubeadm reset' where bootstrap's kubeadm init/join made the host a node (then the CNI files,
interfaces and kube-proxy/Calico/Flannel iptables lines of that node); every file bootstrap
created is removed and every file it changed is restored from the gate's backup, each only
while it holds what bootstrap wrote (a file edited since is listed and kept); commands with an
undo are reverted (swap, sysctls, package holds); empty folders it made go. Packages bootstrap
installed are listed; --purge-packages purges them (only those). Anything else (a user's
/etc/cni/net.d file, /var/lib/etcd on a worker) is listed and left in place; --force removes it
too. A host no journal names (an older clusterctl, another --state-dir) gets known-name rules,
marked so in the plan; --restore-containerd there puts back containerd's first gate backup.
A second run finds nothing to do. Asks first, naming the hosts; --yes skips the question.

Examples:

  clusterctl -i inventories/demo.yaml reset --dry-run

  clusterctl reset -l gpu-b3 --yes

  clusterctl reset --yes --restore-containerd
"""


def register(app: typer.Typer) -> None:
    app.command("reset", help=HELP)(reset_command)


def reset_command(
    ctx: typer.Context,
    yes: bool = YES,
    dry_run: bool = typer.Option(False, "--dry-run", help="Show what would be removed; touch nothing."),
    restore_containerd: bool = typer.Option(False, "--restore-containerd",
                                            help="Put back containerd's config from clusterctl's first backup."),
    only: str | None = ONLY,
    force_unlock: bool = FORCE_UNLOCK,
    force: bool = typer.Option(False, "--force", help="Also remove files bootstrap did not make (listed otherwise)."),
    purge_packages: bool = typer.Option(False, "--purge-packages",
                                        help="Purge the packages bootstrap's journals say it installed."),
    state_dir: str | None = STATE_DIR,
) -> None:
    confirm_change("tear Kubernetes down (kubeadm reset, CNI files, iptables rules, kubelet state)",
                   [h.name for h in hosts_of_run(app_context(ctx), only)], yes=yes, dry_run=dry_run,
                   preview="clusterctl reset --dry-run")
    _execute(ctx, phase="reset", **{**ctx.params, "yes": True})  # asked above
