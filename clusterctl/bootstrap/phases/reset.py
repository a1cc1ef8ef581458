"""reset: take a host back to before ``clusterctl bootstrap``'s cluster phases (``clusterctl reset``).

It removes only what the cluster bootstrap made, each only when it is there (so a second run
finds nothing to do): ``kubeadm reset`` (its ResetConfiguration on stdin: forced, the inventory's
CRI socket, kubeadm's tmp folder too) when kubeadm left anything (static pod
manifests, kubeconfigs, etcd data; kubeadm removes its own files); the CNI configuration the
CNIs clusterctl installs write (Calico's ``10-calico.conflist`` and ``calico-kubeconfig``,
Flannel's ``10-flannel.conflist``); CNI interfaces (``cni0``, ``flannel.1``, ``vxlan.calico``,
``tunl0``, ``cali*``, ``kube-ipvs0``); iptables rules of kube-proxy, Calico and Flannel (only
those: the host's own rules stay); IPVS tables; what kubeadm's kubelet left in
``/var/lib/kubelet``; etcd data on a control-plane host; clusterctl's own files. Anything else
(a user's ``/etc/cni/net.d/99-user.conflist``, ``/var/lib/etcd`` on a worker) is listed and left
in place unless ``--force``. With ``--restore-containerd``, containerd's config comes back from
the first backup the gate kept (``config.toml.bak.<UTC time>.<random>``), and reset says which,
or why nothing was restored. It never runs as part of ``clusterctl bootstrap``: only
``clusterctl reset`` or ``clusterctl bootstrap phase reset`` run it.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field

from clusterctl.bootstrap.phase import Phase, PhaseContext
from clusterctl.bootstrap.phases import cluster_common as cc
from clusterctl.changes import Change
from clusterctl.findings import Finding, Severity

KUBEADM_LEFTOVERS = ("/etc/kubernetes/manifests/kube-apiserver.yaml", "/etc/kubernetes/kubelet.conf",
                     "/etc/kubernetes/admin.conf", "/etc/kubernetes/pki/ca.crt", "/var/lib/etcd/member")
CNI_DIR = "/etc/cni/net.d"
CNI_INTERFACE = re.compile(r"^(cni0|flannel\.\d+|vxlan\.calico|vxlan-v6\.calico|tunl0|cali[0-9a-f]+|kube-ipvs0|"
                           r"kube-bridge|nodelocaldns)$")
#: iptables-save lines that belong to kube-proxy, Calico or Flannel.
CLUSTER_RULE = re.compile(r"KUBE-|cali-|CALI|FLANNEL|flannel")
CLUSTERCTL_PATHS = ("/etc/kubernetes/clusterctl", "/etc/kubernetes/node-feature-discovery/features.d/"
                    "clusterctl-topology")
CONTAINERD_CONFIG = "/etc/containerd/config.toml"
#: The gate's backup names (``transport.base``: ``PATH.bak.<UTC %Y%m%d%H%M%S>.<mktemp XXXXXX>``).
_BACKUP = re.compile(r"^config\.toml\.bak\.(\d{14})\.[A-Za-z0-9]{6}$")
#: CNI configuration the CNIs clusterctl installs write on every node (their DaemonSets' install step).
OWN_CNI_FILES = frozenset({"10-calico.conflist", "calico-kubeconfig", "10-flannel.conflist"})
#: kubeadm's kubelet files: a /var/lib/kubelet with one of them is the one bootstrap's join made.
KUBEADM_KUBELET_FILES = ("/var/lib/kubelet/config.yaml", "/var/lib/kubelet/kubeadm-flags.env")


@dataclass
class ResetState:
    kubeadm: bool = False
    cni_files: list[str] = field(default_factory=list)
    interfaces: list[str] = field(default_factory=list)
    iptables_rules: int = 0
    ipvs: bool = False
    leftover_dirs: list[str] = field(default_factory=list)
    clusterctl_paths: list[str] = field(default_factory=list)
    #: clusterctl's first backup of containerd's config, when asked for and different from now.
    containerd_backup: str | None = None
    #: Paths bootstrap did not make, left in place (removed only with --force).
    left: list[str] = field(default_factory=list)
    #: Why --restore-containerd restores nothing, when it does not.
    not_restored: str | None = None
    #: containerd runs now: a restored config needs a restart (a stopped one reads it when started).
    containerd_active: bool = False


def _lines(ctx: PhaseContext, command: str) -> list[str] | None:
    result = ctx.reader.run(command, sudo=True, timeout=60)
    return result.stdout.splitlines() if result.ok else None


def first_containerd_backup(names: list[str]) -> str | None:
    """The oldest ``config.toml.bak.<YYYYmmddHHMMSS>.<random>`` (the gate's backup names) in /etc/containerd."""
    stamped = sorted((m.group(1), name) for name in names if (m := _BACKUP.match(name.strip())))
    return f"/etc/containerd/{stamped[0][1]}" if stamped else None


def _cri_socket(ctx: PhaseContext) -> str:
    """The inventory's CRI socket; the default when the inventory is not fit for bootstrap any more."""
    from clusterctl.bootstrap.cluster.settings import DEFAULT_CRI_SOCKET
    from clusterctl.errors import UsageError

    try:
        return cc.settings(ctx).cri_socket
    except UsageError:
        return DEFAULT_CRI_SOCKET


class Reset(Phase[ResetState]):
    name = "reset"
    description = "kubeadm reset, CNI files and interfaces, iptables/IPVS leftovers, kubelet state"
    timeout_s = 600.0

    def check(self, ctx: PhaseContext) -> ResetState:
        state = ResetState()
        force = ctx.options.force
        # etcd data is kubeadm's only on a control plane; on a worker it is someone else's.
        control_plane = "control-plane" in ctx.host.roles
        state.kubeadm = any(cc.exists(ctx, p) for p in KUBEADM_LEFTOVERS
                            if control_plane or not p.startswith("/var/lib/etcd"))
        for name in (n.strip() for n in _lines(ctx, f"ls -1A {CNI_DIR}") or [] if n.strip()):
            (state.cni_files if force or name in OWN_CNI_FILES else state.left).append(
                name if force or name in OWN_CNI_FILES else f"{CNI_DIR}/{name}")
        state.interfaces = [n for n in _lines(ctx, "ls -1 /sys/class/net") or [] if CNI_INTERFACE.match(n.strip())]
        saved = _lines(ctx, "iptables-save")
        state.iptables_rules = sum(1 for line in saved or [] if CLUSTER_RULE.search(line))
        ipvs = _lines(ctx, "ipvsadm -Ln")
        state.ipvs = ipvs is not None and any(line.startswith(("TCP", "UDP")) for line in ipvs)
        for folder in ("/var/lib/kubelet", "/var/lib/etcd"):
            if not _lines(ctx, f"ls -1A {folder}"):
                continue
            if force or self._made_by_bootstrap(ctx, folder):
                state.leftover_dirs.append(folder)
            else:
                state.left.append(folder)
        state.clusterctl_paths = [p for p in CLUSTERCTL_PATHS if cc.exists(ctx, p)]
        if ctx.options.restore_containerd:
            backup = first_containerd_backup(_lines(ctx, "ls -1A /etc/containerd") or [])
            if backup is None:
                state.not_restored = (f"no backup of {CONTAINERD_CONFIG} kept by clusterctl on this host "
                                      "(config.toml.bak.<time>.<id>): nothing to restore")
            elif cc.read(ctx, backup) == cc.read(ctx, CONTAINERD_CONFIG):
                state.not_restored = f"{CONTAINERD_CONFIG} is already the same as its first backup {backup}"
            else:
                state.containerd_backup = backup
                active = ctx.reader.run("systemctl is-active containerd", sudo=True, timeout=30)
                state.containerd_active = active.stdout.strip() == "active"
        return state

    @staticmethod
    def _made_by_bootstrap(ctx: PhaseContext, folder: str) -> bool:
        """Whether what is in ``folder`` is the cluster's: kubeadm's kubelet state, etcd on a control plane."""
        if folder == "/var/lib/kubelet":
            return any(cc.exists(ctx, p) for p in KUBEADM_KUBELET_FILES)
        # kubeadm init puts etcd's data under /var/lib/etcd/member on control-plane hosts only.
        return "control-plane" in ctx.host.roles and cc.exists(ctx, "/var/lib/etcd/member")

    def findings(self, ctx: PhaseContext, state: ResetState) -> list[Finding]:
        out: list[Finding] = []
        if state.left:
            out.append(Finding(Severity.INFO, "RESET_LEFT_IN_PLACE",
                               "left in place, not made by clusterctl bootstrap: " + ", ".join(state.left),
                               host=ctx.host.name, evidence={"paths": list(state.left)},
                               fix="Remove them yourself, or rerun reset with --force to remove them too."))
        if state.not_restored:
            out.append(Finding(Severity.INFO, "CONTAINERD_NOT_RESTORED", state.not_restored, host=ctx.host.name))
        return out

    def plan(self, ctx: PhaseContext, state: ResetState) -> list[Change]:
        host, q = ctx.host.name, shlex.quote
        changes: list[Change] = []
        if state.kubeadm:
            from clusterctl.bootstrap.cluster.kubeadm import RESET_COMMAND, render_reset_config

            config = render_reset_config(_cri_socket(ctx)).encode()
            changes.append(Change.run(host, RESET_COMMAND, stdin=config,
                                      summary="kubeadm reset (static pods, etcd member, certificates, kubelet config)",
                                      timeout_s=600))
        if state.cni_files:
            changes.append(Change.run(host, "rm -f " + " ".join(q(f"{CNI_DIR}/{n}") for n in state.cni_files),
                                      summary=f"remove CNI configuration: {', '.join(state.cni_files)}"))
        for name in state.interfaces:
            changes.append(Change.run(host, f"ip link delete {q(name)}", summary=f"delete interface {name}"))
        if state.iptables_rules:
            changes.append(Change.run(
                host, "sh -c " + q(f"iptables-save | grep -v -E {q(CLUSTER_RULE.pattern)} | iptables-restore"),
                summary=f"remove {state.iptables_rules} iptables line(s) of kube-proxy/Calico/Flannel (others kept)"))
        if state.ipvs:
            changes.append(Change.run(host, "ipvsadm --clear", summary="clear IPVS tables left by kube-proxy"))
        for folder in state.leftover_dirs:
            changes.append(Change.run(host, f"rm -rf {q(folder)}", summary=f"remove what is left in {folder}"))
        if state.clusterctl_paths:
            changes.append(Change.run(host, "rm -rf " + " ".join(q(p) for p in state.clusterctl_paths),
                                      summary="remove clusterctl's cluster files"))
        if state.containerd_backup:
            changes.append(Change.run(
                host, f"cp -p {q(state.containerd_backup)} {CONTAINERD_CONFIG}",
                summary=f"restore containerd's config from clusterctl's first backup {state.containerd_backup}"))
            if state.containerd_active:
                changes.append(Change.run(host, "systemctl restart containerd", summary="restart containerd"))
        return changes
