"""``kubeadm upgrade plan [VERSION]``, ``upgrade apply VERSION [-y]``, ``upgrade node`` (simulated).

The version rules are kubeadm's (``cmd/kubeadm/app/phases/upgrade/policy.go``,
``EnforceVersionPolicies``): the target may not be above the kubeadm binary's own version
("Upgrade kubeadm first using the tool you used to install kubeadm"), nor more than one minor
above the cluster's ("kubeadm can upgrade only 1 minor version at a time"), nor a downgrade of
more than a patch without ``--force``. The messages quote those lines; the surrounding output
is cut to the lines clusterctl's users see in kubeadm's upgrade documentation.
"""

from __future__ import annotations

from clusterctl.mock.tools import kube_state as ks
from clusterctl.mock.tools.base import ToolContext, ToolResult, split_args
from clusterctl.mock.tools.kubeadm_config import TRACE, check_mixed_arguments, dry_run, kubeadm_version, load_config
from clusterctl.mock.tools.kubeadm_manifests import MANIFESTS, write_manifests

#: Flags of ``kubeadm upgrade`` that take a value as the next word.
VALUED_FLAGS = frozenset({"--config", "--kubeconfig", "--ignore-preflight-errors", "--feature-gates", "--patches",
                          "--skip-phases", "--certificate-renewal", "--etcd-upgrade", "-v", "--v"})
#: What a dry run ends with (cmd/kubeadm/app/cmd/upgrade/apply.go and node.go).
DRY_RUN_DONE = "[upgrade/successful] Finished dryrunning successfully!\n"


def _parse(version: str) -> tuple[int, int, int] | None:
    parts = version.lstrip("v").split("-")[0].split(".")
    try:
        major, minor, patch = (int(p) for p in parts)
    except ValueError:
        return None
    return major, minor, patch


def _policy_errors(cluster: str, target: str, kubeadm: str) -> list[str]:
    c, t, k = _parse(cluster), _parse(target), _parse(kubeadm)
    if t is None:
        return [f'Unable to parse normalized version "{target}" as a semantic version']
    errors: list[str] = []
    if c is not None and t[:2] < c[:2]:
        errors.append(f'Specified version to downgrade to "{target}" is too low; kubeadm can downgrade only '
                      "patch releases")
    if c is not None and t[1] > c[1] + 1:
        errors.append(f'Specified version to upgrade to "{target}" is too high; kubeadm can upgrade only 1 minor '
                      "version at a time")
    if k is not None and t > k:
        errors.append(f'Specified version to upgrade to "{target}" is higher than the kubeadm version "{kubeadm}". '
                      "Upgrade kubeadm first using the tool you used to install kubeadm")
    return errors


def _fatal(errors: list[str]) -> ToolResult:
    listed = "".join(f"\t- {e}\n" for e in errors)
    return ToolResult("", f"[upgrade/version] FATAL: the --version argument is invalid due to these fatal errors:"
                      f"\n\n{listed}\nCan be bypassed if you pass the --force flag\n{TRACE}", 1)


def _plan(ctx: ToolContext, kube: dict[str, object], target: str | None) -> ToolResult:
    cluster = str(kube.get("version") or "")
    kubeadm = kubeadm_version(ctx)
    wanted = target or kubeadm
    errors = _policy_errors(cluster, wanted, kubeadm)
    if errors:
        return _fatal(errors)
    head = ("[preflight] Running pre-flight checks.\n[upgrade/config] Reading configuration from the "
            '"kubeadm-config" ConfigMap in namespace "kube-system"...\n[upgrade] Running cluster health checks\n'
            f"[upgrade] Fetching available versions to upgrade to\n[upgrade/versions] Cluster version: {cluster}\n"
            f"[upgrade/versions] kubeadm version: {kubeadm}\n")
    if wanted == cluster:
        return ctx.ok(head + "\nAwesome, you're up-to-date! Enjoy!\n")
    nodes = sorted(name for name, n in (kube.get("nodes") or {}).items()  # type: ignore[attr-defined]
                   if n.get("control_plane"))
    rows = "".join(f"{component:<26}{node:<12}{cluster:<10}{wanted}\n" for component in
                   ("kube-apiserver", "kube-controller-manager", "kube-scheduler") for node in nodes)
    return ctx.ok(head + "\nUpgrade to the latest version in the v" + wanted.lstrip("v").rsplit(".", 1)[0]
                  + " series:\n\n" + f"{'COMPONENT':<26}{'NODE':<12}{'CURRENT':<10}TARGET\n" + rows
                  + f"\nYou can now apply the upgrade by executing the following command:\n\n\tkubeadm upgrade apply "
                  f"{wanted}\n\n_____________________________________________________________________\n")


def _apply(ctx: ToolContext, kube: dict[str, object], target: str, *, dry_run: bool, confirmed: bool) -> ToolResult:
    cluster = str(kube.get("version") or "")
    kubeadm = kubeadm_version(ctx)
    errors = _policy_errors(cluster, target, kubeadm)
    if errors:
        return _fatal(errors)
    if dry_run:
        # The phases' own dry-run lines (cmd/kubeadm/app/cmd/phases/upgrade/apply/*.go); nothing changes.
        return ctx.ok("[upgrade/preflight] Running preflight checks\n"
                      "[dryrun] Would pull the required images (like 'kubeadm config images pull')\n"
                      f'[dryrun] Would upgrade your static Pod-hosted control plane to version "{target}"'
                      "[dryrun] Would upload the kubeadm ClusterConfiguration to a ConfigMap\n"
                      "[dryrun] Would upload the kubelet configuration to a ConfigMap\n"
                      "[dryrun] Would write the CRISocket annotation for the control-plane node\n"
                      "[dryrun] Would configure bootstrap token and cluster-info RBAC rules\n" + DRY_RUN_DONE)
    if not confirmed and not ({"-y", "--yes", "-f", "--force"} & set(ctx.args)):
        return ToolResult("[upgrade/confirm] Are you sure you want to proceed? [y/N]: ",
                          "won't proceed; the user didn't answer (Y|y) in order to continue\n" + TRACE, 1)
    write_manifests(ctx, target)
    with ks.edit(ctx) as live:
        live["version"] = target
    return ctx.ok(f'[upgrade] Running cluster health checks\n[upgrade/version] You have chosen to change the cluster '
                  f'version to "{target}"\n[upgrade/versions] Cluster version: {cluster}\n[upgrade/versions] kubeadm '
                  f'version: {kubeadm}\n[upgrade/staticpods] Writing new Static Pod manifests to '
                  f'"/etc/kubernetes/tmp/kubeadm-upgraded-manifests"\n[upgrade/successful] SUCCESS! Your cluster was '
                  f'upgraded to "{target}". Enjoy!\n\n[upgrade/kubelet] Now that your control plane is upgraded, '
                  "please proceed with upgrading your kubelets if you haven't already done so.\n")


def _node(ctx: ToolContext, kube: dict[str, object], *, dry_run: bool) -> ToolResult:
    if not ctx.fs.exists(ks.KUBELET_CONF):
        return ctx.fail("couldn't create a Kubernetes client from file \"/etc/kubernetes/kubelet.conf\": failed to "
                        "load admin kubeconfig: open /etc/kubernetes/kubelet.conf: no such file or directory\n" + TRACE)
    cluster = str(kube.get("version") or "")
    kubeadm = kubeadm_version(ctx)
    if (_parse(kubeadm) or (0, 0, 0)) < (_parse(cluster) or (0, 0, 0)):
        return ctx.fail(f'[upgrade/version] FATAL: kubeadm version "{kubeadm}" is lower than the cluster version '
                        f'"{cluster}": upgrade kubeadm first\n' + TRACE)
    out = "[upgrade] Reading configuration from the \"kubeadm-config\" ConfigMap in namespace \"kube-system\"...\n"
    if dry_run:
        # cmd/kubeadm/app/cmd/phases/upgrade/node/*.go: only what it would do; nothing changes.
        out += "[upgrade/preflight] Would pull the required images (like 'kubeadm config images pull')\n"
        if ctx.fs.exists(f"/etc/kubernetes/manifests/{MANIFESTS[1]}"):
            out += f'[dryrun] Would upgrade your static Pod-hosted control plane to version "{cluster}"'
        return ctx.ok(out + DRY_RUN_DONE)
    if ctx.fs.exists(f"/etc/kubernetes/manifests/{MANIFESTS[1]}"):
        # kubeadm reads no version from a manifest: it replaces each that differs from the one it would write
        # (staticpods.go, ManifestFilesAreEqual), a hand edit or a digest too; one that is equal stays, as it would.
        write_manifests(ctx, cluster)
        out += "[upgrade] The control plane instance for this node was successfully upgraded!\n"
    else:
        out += "[upgrade] Skipping phase. Not a control plane node.\n"
    return ctx.ok(out + "[upgrade] The configuration for this node was successfully upgraded!\n[upgrade] Now you "
                  "should go ahead and upgrade the kubelet package using your package manager.\n")


def run(ctx: ToolContext) -> ToolResult:
    args = split_args(ctx.args[1:], VALUED_FLAGS)[0]
    verb = args[0] if args else ""
    check_mixed_arguments(ctx.args)
    config = load_config(ctx, ctx.args).get("UpgradeConfiguration") or {}
    section = config.get(verb) or {}
    # The positional version wins over the configuration's (cmd/kubeadm/app/cmd/upgrade/apply.go).
    target = args[1] if len(args) > 1 else str(section.get("kubernetesVersion") or "") or None
    kube = ks.read(ctx)
    if verb in ("plan", "apply") and (not ctx.fs.exists(ks.ADMIN_CONF) or not kube.get("initialized")):
        return ctx.fail("[upgrade/config] FATAL: failed to load admin kubeconfig: open /etc/kubernetes/admin.conf: "
                        "no such file or directory\n" + TRACE)
    if verb == "plan":
        return _plan(ctx, kube, "v" + target.lstrip("v") if target else None)
    if verb == "apply":
        if not target:
            return ctx.fail("[upgrade/version] FATAL: missing one or more required arguments. Required arguments: "
                            "[version]\n" + TRACE)
        return _apply(ctx, kube, "v" + target.lstrip("v"), dry_run=dry_run(ctx.args, section),
                      confirmed=bool(section.get("forceUpgrade")))
    if verb == "node":
        return _node(ctx, kube, dry_run=dry_run(ctx.args, section))
    return ctx.fail(f'unknown command "{verb}" for "kubeadm upgrade"\n')
