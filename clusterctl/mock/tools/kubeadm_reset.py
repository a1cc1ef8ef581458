"""``kubeadm reset`` (simulated): flags or a ResetConfiguration, ``--dry-run`` honoured.

The phases and their lines are kubeadm's (1.35 to 1.37 print the same:
``cmd/kubeadm/app/cmd/phases/reset/{preflight,removeetcdmember,cleanupnode}.go`` and
``cmd/kubeadm/app/cmd/reset.go``): ``preflight`` asks unless forced or dry-running;
``remove-etcd-member`` removes this control plane's member when the cluster's configuration can
be read (a kubeconfig and a cluster that answers), and empties the etcd data folder whenever it
holds anything (unless ``skipPhases``/``--skip-phases`` names it); ``cleanup-node`` stops the
kubelet, unmounts and empties ``/var/lib/kubelet``
when it exists, empties the manifests and certificates folders (and ``/etc/kubernetes/tmp`` with
``cleanupTmpDir``) and deletes kubeadm's kubeconfig files. With ``--dry-run`` (or ``dryRun:
true``) each step says what it "Would" do and nothing changes.
"""

from __future__ import annotations

from clusterctl.mock.tools import kube_state as ks
from clusterctl.mock.tools.base import ToolContext, ToolResult, option_values
from clusterctl.mock.tools.kubeadm_config import check_mixed_arguments, dry_run, klog, load_config

ETCD_MANIFEST = "/etc/kubernetes/manifests/etcd.yaml"
ETCD_DATA = "/var/lib/etcd"
KUBELET_DIR = "/var/lib/kubelet"
KUBECONFIGS = tuple(f"/etc/kubernetes/{name}" for name in (
    "admin.conf", "super-admin.conf", "kubelet.conf", "bootstrap-kubelet.conf", "controller-manager.conf",
    "scheduler.conf"))
CLOSING = ("\nThe reset process does not perform cleanup of CNI plugin configuration,\nnetwork filtering rules and "
           "kubeconfig files.\n\nFor information on how to perform this cleanup manually, please see:\n"
           "    https://k8s.io/docs/reference/setup-tools/kubeadm/kubeadm-reset/\n\n")
#: What the remove-etcd-member phase says with ``--dry-run``.
ETCD_DRY_RUN = ("[dryrun] Would remove the etcd member on this node from the etcd cluster",
                f"[dryrun] Would delete contents of the etcd data directory: {ETCD_DATA}")
REFUSED = ("[reset] Are you sure you want to proceed? [y/N]: error: won't proceed; the user didn't answer (Y|y) in "
           "order to continue\n")


def _empty(ctx: ToolContext, folder: str) -> None:
    """kubeadm's ``CleanDir``: everything inside goes, the folder itself stays."""
    if ctx.fs.is_dir(folder):
        for name in ctx.fs.listdir(folder):
            ctx.fs.remove(f"{folder}/{name}", recursive=True)


def run(ctx: ToolContext) -> ToolResult:
    args = ctx.args
    check_mixed_arguments(args)
    config = load_config(ctx, args).get("ResetConfiguration") or {}
    dry = dry_run(args, config)
    force = bool({"--force", "-f"} & set(args)) or bool(config.get("force"))
    if not force and not dry:
        return ctx.fail(REFUSED, 1)
    cleanup_tmp = "--cleanup-tmp-dir" in args or bool(config.get("cleanupTmpDir"))
    certs = str(config.get("certificatesDir") or "/etc/kubernetes/pki")
    # The cluster's configuration is read through the kubeconfig; without it kubeadm skips the member.
    cluster_config = ks.admin_reachable(ctx)
    out = ["[preflight] Running pre-flight checks"]
    # skipPhases (or --skip-phases): a skipped remove-etcd-member neither removes a member nor empties
    # the etcd data folder (reset.go runs the workflow without it).
    skipped = {str(p) for p in config.get("skipPhases") or []}
    skipped |= {p for value in option_values(args, "--skip-phases") for p in value.split(",")}
    etcd_phase = "remove-etcd-member" not in skipped
    etcd_data = etcd_phase and bool(ctx.fs.is_dir(ETCD_DATA) and ctx.fs.listdir(ETCD_DATA))
    if etcd_phase and ctx.fs.exists(ETCD_MANIFEST) and cluster_config:
        if dry:
            out += ETCD_DRY_RUN
        else:
            with ks.edit(ctx) as live:
                ks.remove_etcd_member(live, ctx.host_name)
    if etcd_data and not dry:
        _empty(ctx, ETCD_DATA)
        out.append(f"[reset] Deleted contents of the etcd data directory: {ETCD_DATA}")
    out.append("[dryrun] Would stop the kubelet service" if dry else "[reset] Stopping the kubelet service")
    dirs = ["/etc/kubernetes/manifests"]
    if dry:
        out.append(f'[dryrun] Would unmount mounted directories in "{KUBELET_DIR}"')
        out.append("[dryrun] Would remove Kubernetes-managed containers")
    elif ctx.fs.is_dir(KUBELET_DIR):
        out.append(f'[reset] Unmounting mounted directories in "{KUBELET_DIR}"')
        dirs.append(KUBELET_DIR)
    dirs.append(certs)
    if cleanup_tmp:
        dirs.append("/etc/kubernetes/tmp")
    out.append(f"[dryrun] Would delete contents of directories: [{' '.join(dirs)}]" if dry
               else f"[reset] Deleting contents of directories: [{' '.join(dirs)}]")
    out.append(f"[dryrun] Would delete files: [{' '.join(KUBECONFIGS)}]" if dry
               else f"[reset] Deleting files: [{' '.join(KUBECONFIGS)}]")
    if not dry:
        for folder in dirs:
            _empty(ctx, folder)
        for path in KUBECONFIGS:
            ctx.fs.remove(path)
        with ks.edit(ctx) as live:
            nodes = live.get("nodes") or {}
            for name in [n for n, v in nodes.items() if v.get("host") == ctx.host_name]:
                del nodes[name]
            if not any(v.get("control_plane") for v in nodes.values()):
                live.clear()  # the last control plane is gone: so is the cluster
    return ctx.ok("\n".join(out) + "\n" + CLOSING)


def remove_etcd_member(ctx: ToolContext) -> ToolResult:
    """``kubeadm reset phase remove-etcd-member``: this control plane's member leaves etcd."""
    if not ctx.fs.exists(ETCD_MANIFEST) and not ks.admin_reachable(ctx):
        # No manifest and no cluster configuration (before init, after a reset): kubeadm falls back to the
        # default data folder (removeetcdmember.go, getEtcdDataDir) and empties it unless it is an empty folder.
        ctx.log(klog("W", "removeetcdmember.go:105", "[reset] No kubeadm config, using etcd pod spec to get data "
                     "directory"))
        if dry_run(ctx.args) or (ctx.fs.is_dir(ETCD_DATA) and not ctx.fs.listdir(ETCD_DATA)):
            return ctx.ok()
    elif dry_run(ctx.args):
        return ctx.ok("".join(line + "\n" for line in ETCD_DRY_RUN))
    else:
        with ks.edit(ctx) as kube:
            ks.remove_etcd_member(kube, ctx.host_name)
    _empty(ctx, ETCD_DATA)
    return ctx.ok(f"[reset] Deleted contents of the etcd data directory: {ETCD_DATA}\n")
