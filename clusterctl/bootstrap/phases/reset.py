"""reset: take a host back to before ``clusterctl bootstrap`` (``clusterctl reset``).

What bootstrap made is read from its own undo journals (``<state dir>/undo/``, see
``bootstrap.reset_journals``), never guessed from names: on a host they name, ``kubeadm reset``
(its ResetConfiguration on stdin: forced, the inventory's CRI socket, kubeadm's tmp folder too)
runs only when bootstrap's ``kubeadm init``/``join`` made the host a node (kubeadm
removes its own files; etcd data only where bootstrap made an etcd member); the CNI files and
interfaces, kube-proxy/Calico/Flannel iptables lines and IPVS tables only on such a node and for
the CNI bootstrap installed; then every file bootstrap created is removed and every file it
changed comes back from the gate's backup, each only while it still holds what bootstrap wrote
(``reset_from_journal``); commands are reverted by the undo the journal kept; folders it made go
when empty; packages it installed are listed (``--purge-packages`` purges them). Anything else (a
user's ``/etc/cni/net.d/99-user.conflist``, ``/var/lib/etcd`` on a worker, a file edited since)
is listed and left in place unless ``--force``.

A host no journal of the fleet names (bootstrapped by an older clusterctl, or another
``--state-dir``) gets the conservative known-names rules instead, and the plan says so: kubeadm's
files, the CNI files Calico and Flannel write, CNI interfaces, kubelet state with kubeadm's files,
etcd data on a control plane, clusterctl's own folder. With ``--restore-containerd`` there,
containerd's config comes back from the first backup the gate kept (``config.toml.bak.<UTC
time>.<random>``), and reset says which, or why nothing was restored. It never runs as part of
``clusterctl bootstrap``: only ``clusterctl reset`` or ``clusterctl bootstrap phase reset`` run it.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field, replace
from typing import Any

from clusterctl.bootstrap.cluster import kubeadm
from clusterctl.bootstrap.cluster.settings import DEFAULT_CRI_SOCKET
from clusterctl.bootstrap.phase import Phase, PhaseContext
from clusterctl.bootstrap.phases import cluster_common as cc
from clusterctl.bootstrap.phases import reset_from_journal as rj
from clusterctl.bootstrap.phases.packages import APT_ENV, APT_LOCK
from clusterctl.changes import MAKES_ETCD_MEMBER, MAKES_KUBEADM_NODE, MAKES_NO_TRACE, Change, ChangeKind
from clusterctl.errors import UsageError
from clusterctl.facts.kube import ADMIN_KUBECONFIG
from clusterctl.facts.packages import DPKG_FORMAT, parse_dpkg_query
from clusterctl.findings import Finding, Severity

ETCD_MEMBER_DIR = "/var/lib/etcd/member"
KUBEADM_LEFTOVERS = (kubeadm.APISERVER_MANIFEST, kubeadm.KUBELET_CONF, ADMIN_KUBECONFIG, kubeadm.CA_CERT,
                     ETCD_MEMBER_DIR)
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
#: CNI configuration each CNI clusterctl installs writes on every node (their DaemonSets' install step).
CNI_FILES = {"calico": frozenset({"10-calico.conflist", "calico-kubeconfig"}),
             "flannel": frozenset({"10-flannel.conflist"})}
#: kubeadm's kubelet files: a /var/lib/kubelet with one of them is the one bootstrap's join made.
KUBEADM_KUBELET_FILES = ("/var/lib/kubelet/config.yaml", "/var/lib/kubelet/kubeadm-flags.env")
#: Finding codes (the run marks a host's journals used only when reset kept none of bootstrap's files).
#: Why undo does not revert what reset did (a restart aside): bootstrap makes it again, nothing puts it back.
TAKEN_FOR_GOOD = "reset takes it away for good: 'clusterctl bootstrap' makes it again"
LEFT_IN_PLACE = "RESET_LEFT_IN_PLACE"
KEPT_CHANGED = "RESET_KEPT_CHANGED"
NO_JOURNAL = "RESET_NO_JOURNAL"
#: How reset knew what bootstrap made on a host.
BY_JOURNAL = "journal"
BY_KNOWN_NAMES = "known names"  # no journal names the host: said in the plan
BY_KNOWN_NAMES_QUIETLY = "known names (journals not read)"  # a day-2 action planning one node's reset
#: Marks each change the known-names rules chose, in the plan.
KNOWN_NAMES_MARK = " (known names: no journal)"


@dataclass
class ResetState:
    basis: str = BY_KNOWN_NAMES_QUIETLY
    kubeadm: bool = False
    cni_files: list[str] = field(default_factory=list)
    interfaces: list[str] = field(default_factory=list)
    iptables_rules: int = 0
    ipvs: bool = False
    leftover_dirs: list[str] = field(default_factory=list)
    #: Those of ``leftover_dirs`` that are mount points (a kubelet or etcd disk): emptied, not removed.
    mount_points: list[str] = field(default_factory=list)
    clusterctl_paths: list[str] = field(default_factory=list)
    #: clusterctl's first backup of containerd's config, when asked for and different from now.
    containerd_backup: str | None = None
    #: Paths bootstrap did not make, left in place (removed only with --force).
    left: list[str] = field(default_factory=list)
    #: Why --restore-containerd restores nothing, when it does not.
    not_restored: str | None = None
    #: containerd runs now: a restored config needs a restart (a stopped one reads it when started).
    containerd_active: bool = False
    #: What the journals ask (``reset_from_journal``); None: no journal names the host.
    journal: rj.JournalPlan | None = None
    #: ``rmdir`` of the folders bootstrap made, once empty.
    folder_steps: list[Change] = field(default_factory=list)
    #: Packages bootstrap installed that are installed now.
    packages: list[str] = field(default_factory=list)
    purge: bool = False
    #: Whether kubeadm may take /var/lib/etcd: only where bootstrap made an etcd member (kubeadm's own
    #: remove-etcd-member phase cleans the default data folder even on a worker: skipped there).
    etcd_ours: bool = False


def _lines(ctx: PhaseContext, command: str) -> list[str] | None:
    result = ctx.reader.run(command, sudo=True, timeout=60)
    return result.stdout.splitlines() if result.ok else None


def _containerd_active(ctx: PhaseContext) -> bool:
    return ctx.reader.run("systemctl is-active containerd", sudo=True, timeout=30).stdout.strip() == "active"


def first_containerd_backup(names: list[str]) -> str | None:
    """The oldest ``config.toml.bak.<YYYYmmddHHMMSS>.<random>`` (the gate's backup names) in /etc/containerd."""
    stamped = sorted((m.group(1), name) for name in names if (m := _BACKUP.match(name.strip())))
    return f"/etc/containerd/{stamped[0][1]}" if stamped else None


def _cri_socket(ctx: PhaseContext) -> str:
    """The inventory's CRI socket; the default when the inventory is not fit for bootstrap any more."""
    try:
        return ctx.settings().cri_socket
    except UsageError:
        return DEFAULT_CRI_SOCKET


def _installed(ctx: PhaseContext, names: tuple[str, ...]) -> list[str]:
    if not names:
        return []
    # dpkg-query exits 1 when one name is unknown, and still lists the others.
    result = ctx.reader.run(f"dpkg-query -W -f='{DPKG_FORMAT}' " + " ".join(shlex.quote(n) for n in names),
                            sudo=True, timeout=60)
    found = parse_dpkg_query(result.stdout)
    return [n for n in names if n in found and found[n].installed]


class Reset(Phase[ResetState]):
    name = "reset"
    description = "kubeadm reset, then what bootstrap's undo journals say it made (files, folders, packages listed)"
    timeout_s = 600.0

    def check(self, ctx: PhaseContext) -> ResetState:
        state = ResetState()
        journals = ctx.options.reset_journals
        entries = journals.hosts.get(ctx.host.name) if journals is not None else None
        force = ctx.options.force
        control_plane = ctx.host.is_control_plane
        if entries is None:
            state.basis = BY_KNOWN_NAMES if journals is not None else BY_KNOWN_NAMES_QUIETLY
            # etcd data is kubeadm's only on a control plane; on a worker it is someone else's.
            ours_node, ours_etcd, cnis = True, control_plane, frozenset(CNI_FILES)
        else:
            state.basis = BY_JOURNAL
            state.journal = rj.plan_from_journals(ctx, entries, force=force)
            ours_node, ours_etcd = MAKES_KUBEADM_NODE in state.journal.tags, MAKES_ETCD_MEMBER in state.journal.tags
            cnis = journals.cnis if journals is not None and ours_node else frozenset()
        state.etcd_ours = ours_etcd or force
        present = any(cc.exists(ctx, p) for p in KUBEADM_LEFTOVERS if ours_etcd or p != ETCD_MEMBER_DIR)
        if present and (ours_node or force):
            state.kubeadm = True
        elif present:
            state.left.append("kubeadm's node state in /etc/kubernetes (no run of clusterctl bootstrap joined "
                              "this host; --force runs kubeadm reset)")
        ours_cni = frozenset().union(*(CNI_FILES.get(c, frozenset()) for c in cnis))
        for name in (n.strip() for n in _lines(ctx, f"ls -1A {CNI_DIR}") or [] if n.strip()):
            if force or name in ours_cni:
                state.cni_files.append(name)
            else:
                state.left.append(f"{CNI_DIR}/{name}")
        interfaces = [n for n in _lines(ctx, "ls -1 /sys/class/net") or [] if CNI_INTERFACE.match(n.strip())]
        rules = sum(1 for line in _lines(ctx, "iptables-save") or [] if CLUSTER_RULE.search(line))
        has_ipvs = any(line.startswith(("TCP", "UDP")) for line in _lines(ctx, "ipvsadm -Ln") or [])
        if ours_node or force:
            state.interfaces, state.iptables_rules, state.ipvs = interfaces, rules, has_ipvs
        else:
            state.left += [f"interface {n}" for n in interfaces]
            state.left += [f"{rules} iptables line(s) of kube-proxy/Calico/Flannel"] if rules else []
            state.left += ["IPVS tables"] if has_ipvs else []
        for folder in ("/var/lib/kubelet", "/var/lib/etcd"):
            if not _lines(ctx, f"ls -1A {folder}"):
                continue
            mine = (ours_node and any(cc.exists(ctx, p) for p in KUBEADM_KUBELET_FILES) if folder == "/var/lib/kubelet"
                    else ours_etcd and cc.exists(ctx, ETCD_MEMBER_DIR))
            (state.leftover_dirs if force or mine else state.left).append(folder)
            if (force or mine) and ctx.reader.run(f"mountpoint -q {folder}", sudo=True, timeout=30).ok:
                # A data disk mounted there: the folder itself cannot go ("Device or resource busy").
                state.mount_points.append(folder)
        if state.journal is not None:
            self._check_journal_rest(ctx, state, state.journal, force=force)
        else:
            self._check_known_rest(ctx, state)
        return state

    def _check_journal_rest(self, ctx: PhaseContext, state: ResetState, plan: rj.JournalPlan, *, force: bool) -> None:
        if force:
            plan.steps += [Change.remove_file(ctx.host.name, p, summary=f"remove {p} (a command of bootstrap wrote "
                                              "it; --force)") for p in plan.command_files]
            plan.removed.update(plan.command_files)
        else:
            state.left += [f"{p} (a command of bootstrap wrote it; no hash kept)" for p in plan.command_files]
        state.folder_steps, left = rj.folder_steps(ctx, plan, force=force)
        state.left += left
        journals = ctx.options.reset_journals
        state.packages = _installed(ctx, journals.packages.get(ctx.host.name, ()) if journals else ())
        state.purge = ctx.options.purge_packages and bool(state.packages)
        config_dir = ctx.options.containerd.config.rsplit("/", 1)[0] + "/"
        touched = any((c.path or "").startswith(config_dir) for c in plan.steps)
        containerd_purged = state.purge and any(p.startswith("containerd") for p in state.packages)
        if touched and not containerd_purged:
            state.containerd_active = _containerd_active(ctx)

    def _check_known_rest(self, ctx: PhaseContext, state: ResetState) -> None:
        state.clusterctl_paths = [p for p in CLUSTERCTL_PATHS if cc.exists(ctx, p)]
        if ctx.options.restore_containerd:
            backup = first_containerd_backup(_lines(ctx, "ls -1A /etc/containerd") or [])
            if backup is None:
                state.not_restored = (f"no backup of {CONTAINERD_CONFIG} kept by clusterctl on this host "
                                      "(config.toml.bak.<time>.<id>): nothing to restore")
            elif ctx.reader.get(backup, sudo=True) == ctx.reader.get(CONTAINERD_CONFIG, sudo=True):
                state.not_restored = f"{CONTAINERD_CONFIG} is already the same as its first backup {backup}"
            else:
                state.containerd_backup = backup
                state.containerd_active = _containerd_active(ctx)

    def findings(self, ctx: PhaseContext, state: ResetState) -> list[Finding]:
        out: list[Finding] = []

        def add(severity: Severity, code: str, message: str, **more: Any) -> None:
            out.append(Finding(severity, code, message, host=ctx.host.name, **more))

        journals = ctx.options.reset_journals
        if state.basis == BY_KNOWN_NAMES and journals is not None:
            add(Severity.INFO, NO_JOURNAL, f"no undo journal of clusterctl bootstrap names this host in "
                f"{journals.folder} (bootstrapped by an older clusterctl, or with another --state-dir): reset "
                f"goes by known names instead (marked{KNOWN_NAMES_MARK} in the plan)",
                fix="Pass the --state-dir bootstrap used, if it was another one.")
        if journals is not None and journals.unreadable:
            add(Severity.INFO, "RESET_JOURNAL_UNREADABLE", "undo journals that could not be read, not used: "
                + "; ".join(f"{p}: {why}" for p, why in journals.unreadable.items()))
        if state.left:
            add(Severity.INFO, LEFT_IN_PLACE, "left in place, not clusterctl bootstrap's alone to remove: "
                + ", ".join(state.left), evidence={"paths": list(state.left)},
                fix="Remove them yourself, or rerun reset with --force to remove them too.")
        plan = state.journal
        if plan is not None and plan.kept_changed:
            add(Severity.WARNING, KEPT_CHANGED, "kept, changed since clusterctl bootstrap wrote them: "
                + ", ".join(plan.kept_changed), evidence={"paths": list(plan.kept_changed)},
                fix="Keep what you need from them, then rerun reset with --force to remove or restore them too "
                "(their journals stay unused until then).")
        if plan is not None and plan.not_reverted:
            add(Severity.INFO, "RESET_NOT_REVERTED", "bootstrap's steps that nothing reverts (gone at the next "
                "reboot, or harmless): " + ", ".join(plan.not_reverted))
        if state.packages and not state.purge:
            add(Severity.INFO, "RESET_PACKAGES_KEPT", "left installed, installed by clusterctl bootstrap (its "
                "journal says so): " + ", ".join(state.packages), evidence={"packages": list(state.packages)},
                fix="Rerun reset with --purge-packages to purge them (only these).")
        if ctx.options.purge_packages and state.basis != BY_JOURNAL:
            add(Severity.INFO, "RESET_PACKAGES_UNKNOWN",
                "no journal says which packages bootstrap installed here: none is purged")
        if state.not_restored:
            add(Severity.INFO, "CONTAINERD_NOT_RESTORED", state.not_restored)
        if ctx.options.restore_containerd and state.basis == BY_JOURNAL:
            add(Severity.INFO, "CONTAINERD_FROM_JOURNAL", "containerd's config follows bootstrap's journal here "
                "(restored from the backup the gate kept, or removed when bootstrap made it); --restore-containerd "
                "is for hosts without a journal")
        return out

    def plan(self, ctx: PhaseContext, state: ResetState) -> list[Change]:
        host, q = ctx.host.name, shlex.quote
        mark = KNOWN_NAMES_MARK if state.basis == BY_KNOWN_NAMES else ""
        changes: list[Change] = []
        if state.kubeadm:
            # kubeadm's remove-etcd-member phase empties /var/lib/etcd whenever it holds anything, with or
            # without an etcd manifest (cmd/kubeadm/app/cmd/phases/reset/removeetcdmember.go): on a host where
            # bootstrap made no etcd member that data is someone else's, so the phase is skipped there.
            skip = () if state.etcd_ours else ("remove-etcd-member",)
            what = "static pods, etcd member, certificates, kubelet config" if state.etcd_ours else \
                "static pods, certificates, kubelet config; etcd data left alone"
            config = kubeadm.render_reset_config(_cri_socket(ctx), skip_phases=skip).encode()
            changes.append(Change.run(host, kubeadm.RESET_COMMAND, stdin=config, timeout_s=600,
                                      summary=f"kubeadm reset ({what}){mark}"))
        # What the known-names rules may choose too: (command, summary), each summary marked as such.
        steps: list[tuple[str, str]] = []
        if state.cni_files:
            steps.append(("rm -f " + " ".join(q(f"{CNI_DIR}/{n}") for n in state.cni_files),
                          f"remove CNI configuration: {', '.join(state.cni_files)}"))
        steps += [(f"ip link delete {q(name)}", f"delete interface {name}") for name in state.interfaces]
        if state.iptables_rules:
            steps.append(("sh -c " + q(f"iptables-save | grep -v -E {q(CLUSTER_RULE.pattern)} | iptables-restore"),
                          f"remove {state.iptables_rules} iptables line(s) of kube-proxy/Calico/Flannel (others kept)"))
        if state.ipvs:
            steps.append(("ipvsadm --clear", "clear IPVS tables left by kube-proxy"))
        steps += [(f"find {q(folder)} -mindepth 1 -maxdepth 1 -exec rm -rf -- {{}} +",
                   f"remove what is left in {folder} (a mount point: kept)") if folder in state.mount_points
                  else (f"rm -rf {q(folder)}", f"remove what is left in {folder}") for folder in state.leftover_dirs]
        if state.clusterctl_paths:
            steps.append(("rm -rf " + " ".join(q(p) for p in state.clusterctl_paths),
                          "remove clusterctl's cluster files"))
        if state.containerd_backup:
            steps.append((f"cp -p {q(state.containerd_backup)} {CONTAINERD_CONFIG}",
                          f"restore containerd's config from clusterctl's first backup {state.containerd_backup}"))
        changes += [Change.run(host, command, summary=summary + mark) for command, summary in steps]
        if state.journal is not None:
            changes += state.journal.steps
            changes += state.folder_steps
        if state.purge:
            changes.append(Change.run(
                host, f"apt-get purge -y {APT_LOCK} --allow-change-held-packages "
                + " ".join(q(p) for p in state.packages), env=APT_ENV, timeout_s=600,
                summary="purge the packages clusterctl bootstrap installed: " + ", ".join(state.packages)))
        if state.containerd_active and (state.containerd_backup or state.journal is not None):
            changes.append(Change.run(host, ctx.options.containerd.restart, summary="restart containerd",
                                      makes=(MAKES_NO_TRACE,)))
        return [replace(c, cannot_undo=TAKEN_FOR_GOOD) if c.kind is ChangeKind.RUN_COMMAND
                and MAKES_NO_TRACE not in c.makes else c for c in changes]
