"""``clusterctl reset``: take hosts back from a bootstrapped cluster (behind a confirmation)."""

from __future__ import annotations

from typing import Optional

import typer

from clusterctl.cli.context import app_context

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
    yes: bool = typer.Option(False, "--yes", "-y", help="Do not ask for confirmation."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Show what would be removed; touch nothing."),
    restore_containerd: bool = typer.Option(False, "--restore-containerd",
                                            help="Put back containerd's config from clusterctl's first backup."),
    only: Optional[str] = typer.Option(None, "--only", metavar="PATTERN",  # noqa: UP045
                                       help="Only these hosts (like -l/--limit)."),
    force_unlock: bool = typer.Option(False, "--force-unlock", help="Clear a lock left by a dead run first."),
    force: bool = typer.Option(False, "--force", help="Also remove files bootstrap did not make (listed otherwise)."),
    purge_packages: bool = typer.Option(False, "--purge-packages",
                                        help="Purge the packages bootstrap's journals say it installed."),
    state_dir: Optional[str] = typer.Option(None, "--state-dir", metavar="DIR",  # noqa: UP045
                                            envvar="CLUSTERCTL_STATE_DIR",
                                            help="Where bootstrap kept its progress and undo journals "
                                                 "(default ~/.local/state/clusterctl)."),
) -> None:
    from clusterctl.cli.bootstrap_cmd import _execute
    from clusterctl.inventory.limit import select_hosts

    app = app_context(ctx)
    hosts = app.hosts()
    if only:
        keep = {h.name for h in select_hosts(app.inventory(), only)}
        hosts = tuple(h for h in hosts if h.name in keep)
    if not dry_run:
        from clusterctl.cli.confirm import confirm_change

        confirm_change("tear Kubernetes down (kubeadm reset, CNI files, iptables rules, kubelet state)",
                       [h.name for h in hosts], yes=yes, preview="clusterctl reset --dry-run")
    _execute(app, phase="reset", skip_phases=None, only=only, dry_run=dry_run, resume=False,
             force_unlock=force_unlock, state_dir=state_dir, out=None, restore_containerd=restore_containerd,
             force=force, yes=True, purge_packages=purge_packages)  # asked above
