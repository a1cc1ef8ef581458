"""reset: take a host back to before ``clusterctl bootstrap``'s cluster phases (``clusterctl reset``).

What it removes, each only when it is there (so a second run finds nothing to do):
``kubeadm reset --force`` when kubeadm left anything (static pod manifests, kubeconfigs, etcd
data); CNI configuration files in ``/etc/cni/net.d``; CNI interfaces (``cni0``, ``flannel.1``,
``vxlan.calico``, ``tunl0``, ``cali*``, ``kube-ipvs0``); iptables rules of kube-proxy, Calico
and Flannel (only those: the host's own rules stay); IPVS tables; what is left under
``/var/lib/kubelet`` and ``/var/lib/etcd``; clusterctl's own files. With
``--restore-containerd``, containerd's config comes back from clusterctl's first backup.
It never runs as part of ``clusterctl bootstrap``: only ``clusterctl reset`` or
``clusterctl bootstrap phase reset`` run it.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field

from clusterctl.bootstrap.phase import Phase, PhaseContext
from clusterctl.bootstrap.phases import cluster_common as cc
from clusterctl.changes import Change

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
_BACKUP = re.compile(r"^config\.toml\.bak\.(\d{14})$")


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


def _lines(ctx: PhaseContext, command: str) -> list[str] | None:
    result = ctx.reader.run(command, sudo=True, timeout=60)
    return result.stdout.splitlines() if result.ok else None


def first_containerd_backup(names: list[str]) -> str | None:
    """The oldest ``config.toml.bak.<YYYYmmddHHMMSS>`` (the transport's backup names) in /etc/containerd."""
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
        state.kubeadm = any(cc.exists(ctx, p) for p in KUBEADM_LEFTOVERS)
        state.cni_files = [n for n in _lines(ctx, f"ls -1A {CNI_DIR}") or [] if n.strip()]
        state.interfaces = [n for n in _lines(ctx, "ls -1 /sys/class/net") or [] if CNI_INTERFACE.match(n.strip())]
        saved = _lines(ctx, "iptables-save")
        state.iptables_rules = sum(1 for line in saved or [] if CLUSTER_RULE.search(line))
        ipvs = _lines(ctx, "ipvsadm -Ln")
        state.ipvs = ipvs is not None and any(line.startswith(("TCP", "UDP")) for line in ipvs)
        for folder in ("/var/lib/kubelet", "/var/lib/etcd"):
            if _lines(ctx, f"ls -1A {folder}"):
                state.leftover_dirs.append(folder)
        state.clusterctl_paths = [p for p in CLUSTERCTL_PATHS if cc.exists(ctx, p)]
        if ctx.options.restore_containerd:
            backup = first_containerd_backup(_lines(ctx, "ls -1 /etc/containerd") or [])
            if backup and cc.read(ctx, backup) != cc.read(ctx, CONTAINERD_CONFIG):
                state.containerd_backup = backup
        return state

    def plan(self, ctx: PhaseContext, state: ResetState) -> list[Change]:
        host, q = ctx.host.name, shlex.quote
        changes: list[Change] = []
        if state.kubeadm:
            socket = _cri_socket(ctx)
            changes.append(Change.run(host, f"kubeadm reset --force --cri-socket {q(socket)}",
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
            changes.append(Change.run(host, "systemctl restart containerd", summary="restart containerd"))
        return changes
