"""``kubeadm upgrade plan [VERSION]``, ``upgrade apply VERSION [-y]``, ``upgrade node`` (simulated).

``apply``'s version rules are kubeadm's (``cmd/kubeadm/app/phases/upgrade/policy.go``,
``EnforceVersionPolicies``; ``plan`` applies none, it shows any target): the target may not be
above the kubeadm binary's own version ("Upgrade kubeadm first using the tool you used to install
kubeadm"), nor more than one minor above the cluster's ("kubeadm can upgrade only 1 minor version
at a time"), nor a downgrade of more than a patch without ``--force``. The messages quote those
lines; ``plan`` prints kubeadm 1.35-1.37's whole output (tests/fixtures/kubeadm-upgrade-plan), the
others are cut to the lines clusterctl's users see in kubeadm's upgrade documentation.
"""

from __future__ import annotations

import re
from typing import Any

from clusterctl.mock.tools import kube_state as ks
from clusterctl.mock.tools.base import ToolContext, ToolResult, split_args
from clusterctl.mock.tools.kubeadm_certs import tabwriter
from clusterctl.mock.tools.kubeadm_config import TRACE, check_mixed_arguments, dry_run, kubeadm_version, load_config
from clusterctl.mock.tools.kubeadm_manifests import MANIFESTS, image_tags, write_manifests

#: Flags of ``kubeadm upgrade`` that take a value as the next word.
VALUED_FLAGS = frozenset({"--config", "--kubeconfig", "--ignore-preflight-errors", "--feature-gates", "--patches",
                          "--skip-phases", "--certificate-renewal", "--etcd-upgrade", "-v", "--v"})
#: What a dry run ends with (cmd/kubeadm/app/cmd/upgrade/apply.go and node.go).
DRY_RUN_DONE = "[upgrade/successful] Finished dryrunning successfully!\n"
MANIFESTS_DIR = "/etc/kubernetes/manifests"
SEPARATOR = "_" * 69 + "\n\n"
#: What ``upgrade plan`` ends with: the component configs' table of kubeadm 1.35 to 1.37.
COMPONENT_CONFIGS = """
The table below shows the current state of component configs as understood by this version of kubeadm.
Configs that have a "yes" mark in the "MANUAL UPGRADE REQUIRED" column require manual config upgrade or
resetting to kubeadm defaults before a successful upgrade can be performed. The version to manually
upgrade to is denoted in the "PREFERRED VERSION" column.

API GROUP                 CURRENT VERSION   PREFERRED VERSION   MANUAL UPGRADE REQUIRED
kubeproxy.config.k8s.io   v1alpha1          v1alpha1            no
kubelet.config.k8s.io     v1beta1           v1beta1             no
"""


def _parse(version: str) -> tuple[int, int, int] | None:
    parts = version.lstrip("v").split("-")[0].split(".")
    try:
        major, minor, patch = (int(p) for p in parts)
    except ValueError:
        return None
    return major, minor, patch


def _version(version: str) -> tuple[int, int, int]:
    return _parse(version) or (0, 0, 0)


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


def _pod_tags(ctx: ToolContext, kube: dict[str, Any], component: str) -> list[tuple[str, str]]:
    """(image tag, node) of each control-plane node's static pod of ``component``, sorted: what kubeadm reads of
    the pods (versiongetter.go, ``ComponentVersions``), so a node not upgraded yet shows its own version."""
    found = []
    for name, node in (kube.get("nodes") or {}).items():
        manifest = ks.other_host(ctx, str(node.get("host", name))).fs.read(f"{MANIFESTS_DIR}/{component}.yaml") \
            if node.get("control_plane") else None
        image = re.search(rb"image: \S+:(\S+)", manifest or b"")
        if image:
            found.append((image.group(1).decode(), name))
    return sorted(found)


def _plan(ctx: ToolContext, kube: dict[str, Any], target: str | None, *, etcd_upgrade: bool) -> ToolResult:
    """cmd/kubeadm/app/cmd/upgrade/plan.go and phases/upgrade/compute.go (``GetAvailableUpgrades``): with a
    version given, that one (``OfflineVersionGetter``); without, offline, kubeadm's own. No version policy."""
    apiservers = _pod_tags(ctx, kube, "kube-apiserver")
    # The newest API server's tag, as Go's version.String() prints it (no "v").
    cluster = max((t for t, _ in apiservers), key=_version, default=str(kube.get("version"))).lstrip("v")
    kubeadm = kubeadm_version(ctx)
    given = target if target and _parse(target) else None
    stable = given or kubeadm
    c, s = _version(cluster), _version(stable)
    series = f"v{c[0]}.{c[1]}"
    out = ('[preflight] Running pre-flight checks.\n[upgrade/config] Reading configuration from the "kubeadm-config" '
           'ConfigMap in namespace "kube-system"...\n[upgrade/config] Use \'kubeadm init phase upload-config kubeadm '
           "--config your-config-file' to re-upload it.\n[upgrade] Running cluster health checks\n[upgrade] Fetching "
           f"available versions to upgrade to\n[upgrade/versions] Cluster version: {cluster}\n[upgrade/versions] "
           f"kubeadm version: {kubeadm}\n")
    if given:
        out += f"[upgrade/versions] Target version: {stable}\n" + \
            (f"[upgrade/versions] Latest version in the {series} series: {stable}\n" if s >= c else "")
    if s <= c:
        return ctx.ok(out + "\n")  # "Awesome, you're up-to-date!" only at -v1
    kubelets = sorted((str(n.get("kubelet_version", "")), name) for name, n in (kube.get("nodes") or {}).items())
    behind = {v for v, _ in kubelets} - {stable}  # Upgrade.CanUpgradeKubelets
    head = ("COMPONENT", "NODE", "CURRENT", "TARGET")
    rows = [(component, node, tag, stable) for component in ("kube-apiserver", "kube-controller-manager",
                                                             "kube-scheduler")
            for tag, node in (apiservers if component == "kube-apiserver" else _pod_tags(ctx, kube, component))]
    # CoreDNS: the one this cluster's release deployed, and kubeadm's own (constants.CoreDNSVersion).
    rows += [("kube-proxy", "", cluster, stable), ("CoreDNS", "", image_tags(cluster)[2], image_tags(kubeadm)[2])]
    rows += [("etcd", node, tag, image_tags(stable)[1]) for tag, node in _pod_tags(ctx, kube, "etcd")] \
        if etcd_upgrade else []
    note = f"Note: Before you can perform this upgrade, you have to update kubeadm to {stable}.\n\n" \
        if _version(kubeadm) < s else ""
    return ctx.ok(out + "\nComponents that must be upgraded manually after you have upgraded the control plane with "
                  "'kubeadm upgrade apply':\n"
                  + tabwriter([head, *(("kubelet", node, v, stable) for v, node in kubelets if behind)])
                  + f"\nUpgrade to the latest {f'version in the {series} series' if given else 'stable version'}:\n\n"
                  + tabwriter([head, *rows]) + "\nYou can now apply the upgrade by executing the following command:"
                  f"\n\n\tkubeadm upgrade apply {stable}\n\n{note}{SEPARATOR}{COMPONENT_CONFIGS}{SEPARATOR}")


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
    if _version(kubeadm) < _version(cluster):
        return ctx.fail(f'[upgrade/version] FATAL: kubeadm version "{kubeadm}" is lower than the cluster version '
                        f'"{cluster}": upgrade kubeadm first\n' + TRACE)
    out = "[upgrade] Reading configuration from the \"kubeadm-config\" ConfigMap in namespace \"kube-system\"...\n"
    if dry_run:
        # cmd/kubeadm/app/cmd/phases/upgrade/node/*.go: only what it would do; nothing changes.
        out += "[upgrade/preflight] Would pull the required images (like 'kubeadm config images pull')\n"
        if ctx.fs.exists(f"{MANIFESTS_DIR}/{MANIFESTS[1]}"):
            out += f'[dryrun] Would upgrade your static Pod-hosted control plane to version "{cluster}"'
        return ctx.ok(out + DRY_RUN_DONE)
    if ctx.fs.exists(f"{MANIFESTS_DIR}/{MANIFESTS[1]}"):
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
    if verb in ("plan", "apply") and not ks.admin_reachable(ctx):
        return ctx.fail("[upgrade/config] FATAL: failed to load admin kubeconfig: open /etc/kubernetes/admin.conf: "
                        "no such file or directory\n" + TRACE)
    if verb == "plan":
        return _plan(ctx, kube, "v" + target.lstrip("v") if target else None,
                     etcd_upgrade=section.get("etcdUpgrade") is not False)
    if verb == "apply":
        if not target:
            return ctx.fail("[upgrade/version] FATAL: missing one or more required arguments. Required arguments: "
                            "[version]\n" + TRACE)
        return _apply(ctx, kube, "v" + target.lstrip("v"), dry_run=dry_run(ctx.args, section),
                      confirmed=bool(section.get("forceUpgrade")))
    if verb == "node":
        return _node(ctx, kube, dry_run=dry_run(ctx.args, section))
    return ctx.fail(f'unknown command "{verb}" for "kubeadm upgrade"\n')
