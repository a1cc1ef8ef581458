"""``clusterctl upgrade plan|apply --to X``: Kubernetes and the node stack, node by node, in kubeadm's order.

The order is the one of kubeadm's upgrade documentation ("Upgrading kubeadm clusters"):

1. the first control plane: its kubeadm package (unhold, install ``X-*``, hold), ``kubeadm
   upgrade plan X`` then ``kubeadm upgrade apply X``; then the node is drained, kubelet and
   kubectl upgraded the same way, the kubelet restarted, and the node uncordoned once Ready;
2. every further control plane, one at a time: the same with ``kubeadm upgrade node``;
3. the workers, ``--max-unavailable`` at a time: the same with ``kubeadm upgrade node``.

The upgrade is an ordered list of phases on the action engine (``upgrade_phases``), run in
batches in that order (``RunSettings.batches``): the plan is apply's code with the gate recording,
and the engine gives it the host lock (every node's, taken before the first change), progress and
``--resume``, the write-ahead undo journal and Ctrl-C/SIGTERM handling. The drain and the wait for
the node to come back Ready are the engine's waiting kind (``Wait``), run from the first control
plane. While a node is drained, bootstrap's own node phases run on it (``packages``,
``containerd``, ``nvidia-runtime``) with the inventory's pins at the target, so a changed
containerd or NVIDIA Container Toolkit pin rolls out with the node. After the last batch, the
cluster phases ``network`` and ``gpu-addons`` bring the CNI and the charts to their pins, unless
the inventory leaves them to the site (bootstrap's own decision, ``settings.left_to_site``: the
plan and the report then say "nothing to do" and why).

A node is up to date, and left alone, when its packages, kubelet and control plane run the target,
it is Ready and schedulable (or was cordoned before the upgrade), and bootstrap's node phases plan
nothing there: its first phase decides that once per run (``Rollout.assess``), before anything
changes on it. One minor at a time (``versions.check_upgrade``); the target must exist in the
pinned repository (its ``Packages`` index, read from the first control plane). A failure on a node
stops the rollout after its batch; ``--resume`` goes on from the cluster's state.
"""

from __future__ import annotations

import shlex
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from enum import Enum
from typing import TYPE_CHECKING, Any, ClassVar

from clusterctl.bootstrap.apt_sources import KEYRING_DIR, chosen_repos, packages_index_url, upstream_part
from clusterctl.bootstrap.artifacts_probe import parse_packages_index
from clusterctl.bootstrap.cluster.kubeadm import APISERVER_MANIFEST, render_upgrade_config, upgrade_command
from clusterctl.bootstrap.cluster.settings import KubernetesVersion
from clusterctl.bootstrap.phase import Phase, PhaseContext
from clusterctl.bootstrap.phases.packages import (
    APT_ENV,
    APT_LOCK,
    UPDATE,
    Packages,
    read_downgrades,
    refused_downgrades,
)
from clusterctl.bootstrap.registry import phase_named
from clusterctl.bootstrap.run import BootstrapRequest, run_bootstrap, run_options
from clusterctl.bootstrap.run_data import RunOptions
from clusterctl.changes import MAKES_APT, MAKES_DIR, MAKES_NO_TRACE, MAKES_REPO, Change
from clusterctl.cluster_access import cluster_nodes, no_cluster_here, not_usable, read_answer, read_node, read_nodes
from clusterctl.day2.drain import DEFAULT_DRAIN_TIMEOUT_S, DrainNode
from clusterctl.day2.versions import check_upgrade, parse, static_pod_version
from clusterctl.engine.phase import ReadsNothing, Wait
from clusterctl.engine.progress import RunPlace
from clusterctl.engine.run import (
    GivenOptions,
    RunSettings,
    SkipReason,
    Status,
    command_line,
    finished,
    select_phases,
    step_json,
)
from clusterctl.errors import UsageError
from clusterctl.facts.kube_nodes import KubeNode
from clusterctl.findings import Finding, Severity, fails
from clusterctl.inventory.model import StackPin
from clusterctl.quarantine.node_ops import cordon
from clusterctl.secret import mask_text
from clusterctl.transport.base import FailureKind, TransportError
from clusterctl.wording import first_few

if TYPE_CHECKING:
    from clusterctl.engine.phase import Phase as EnginePhase
    from clusterctl.engine.phase import PhaseContext as EngineContext
    from clusterctl.engine.progress import ProgressStore
    from clusterctl.engine.run import HostPhaseResult, RunReport
    from clusterctl.facts.packages import PackageFacts
    from clusterctl.fanout import Runner
    from clusterctl.inventory.model import Host, Inventory
    from clusterctl.transport.base import CommandResult, Transport

#: Bootstrap's lock wait too: unattended-upgrades holding dpkg's lock must not fail a node mid-rollout. No
#: ``--allow-downgrades``: a node running a package newer than the target is refused before the run
#: (``_refuse_downgrades``), and apt refuses any other downgrade (exit 100) rather than make it silently.
INSTALL = f"apt-get install -y {APT_LOCK} -o Dpkg::Options::=--force-confold"
DEFAULT_READY_TIMEOUT_S = 300.0
READY_POLL_S = 2.0
#: How long (at most half the Ready timeout) a control plane whose kubelet this run restarted must stay
#: Ready, its API server answering every poll, before the rollout goes on: the new kubelet may recreate the
#: static pods (the API server among them) a few seconds after it first reports Ready, and the uncordon or
#: the next node's drain would then be refused.
CONTROL_PLANE_SETTLE_S = 10.0
#: The Kubernetes packages the upgrade moves itself (in kubeadm's order), the others are the node phases'.
PACKAGE_NAMES = ("kubeadm", "kubelet", "kubectl")
FIRST_CP, CONTROL_PLANE, WORKER = "first control plane", "control plane", "worker"
#: Why undo leaves an upgraded package or control plane as it is (kubeadm's upgrade documentation).
NO_DOWNGRADE = "kubeadm does not support downgrades"


class NodeOutcome(str, Enum):
    """Where one node stands in the report (its phases' own statuses are the engine's ``Status``)."""

    UP_TO_DATE = "up to date"
    PLANNED = "planned"
    UPGRADED = "upgraded"
    FAILED = "failed"
    NOT_STARTED = "not started"
    #: Some phases alone (``upgrade phase NAME``, ``--skip-phases``): what they did, not the node's version.
    CHANGED = "changed"
    NOTHING_TO_DO = "nothing to do"


@dataclass
class HostUpgrade:
    host: str
    #: ``first control plane``, ``control plane``, ``worker``.
    role: str
    kubelet: str = ""
    control_plane: str | None = None
    #: One row per phase that concerns the node and changes, or waits for, something there.
    steps: list[dict[str, Any]] = field(default_factory=list)
    status: NodeOutcome = NodeOutcome.PLANNED
    message: str = ""

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"host": self.host, "role": self.role, "status": self.status.value,
                                "kubelet": self.kubelet, "steps": [step_json(s) for s in self.steps]}
        if self.control_plane is not None:
            data["control_plane"] = self.control_plane
        if self.message:
            data["message"] = mask_text(self.message)
        return data


@dataclass
class UpgradeReport:
    cluster: str
    current: str
    target: str
    applied: bool
    hosts: list[HostUpgrade] = field(default_factory=list)
    #: The cluster phases (network, gpu-addons) after the last node: one row each, as a node's steps (skipped: not
    #: needed, the inventory leaves it to the site).
    addons: list[dict[str, Any]] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    #: Why the rollout stopped early (a node's failure, a lock); None: it ran to the end (or was a plan).
    stopped: str | None = None
    undo_journal: str | None = None
    #: The phases run when a node's own phase is left out (``upgrade phase NAME``, ``--skip-phases``); ``None``:
    #: every node's phases (the cluster's add-ons may be skipped: the nodes run the target all the same).
    only: list[str] | None = None

    @property
    def nothing_to_do(self) -> bool:
        return self.ok and not any(h.steps for h in self.hosts) and not any(s["changes"] for s in self.addons)

    @property
    def ok(self) -> bool:
        """The command exits 0: the rollout ran to its end (or the plan could be made) and found no error
        (an error finding is what 'upgrade apply' stops on before it starts: its plan says so too)."""
        return self.stopped is None and not fails(self.findings)

    def to_json(self) -> dict[str, Any]:
        return {"cluster": self.cluster, "mode": "apply" if self.applied else "plan", "current": self.current,
                "target": self.target, "ok": self.ok, "nothing_to_do": self.nothing_to_do,
                "stopped": mask_text(self.stopped) if self.stopped else None, "undo_journal": self.undo_journal,
                "hosts": [h.to_json() for h in self.hosts], "addons": [step_json(s) for s in self.addons],
                "findings": [f.to_json() for f in self.findings], "notes": [mask_text(n) for n in self.notes]}


@dataclass(frozen=True)
class UpgradeRequest:
    #: ``None``: the inventory's ``stack.kubernetes``.
    to: str | None
    apply: bool
    max_unavailable: int = 1
    resume: bool = False
    state_dir: str | None = None
    drain_timeout_s: float = DEFAULT_DRAIN_TIMEOUT_S
    ready_timeout_s: float = DEFAULT_READY_TIMEOUT_S
    #: ``upgrade phase NAME``: that phase alone; ``--skip-phases a,b``.
    phase: str | None = None
    skip_phases: str | None = None
    #: The global options (-i, -l...) and the command's as typed but ``--to``: the line that carries out a plan, or
    #: goes on after an interrupt, runs the same inventory, hosts and options.
    given: GivenOptions = field(default_factory=GivenOptions)

    def __post_init__(self) -> None:
        # A name that is no phase is the user's to mend: said first, before asking or reading the cluster.
        select_phases(listed_phases(), self.phase, self.skip_phases, command="upgrade")

    def command(self, target: str, *, going_on: bool = False) -> str:
        """The command line that runs this part of the upgrade (its hosts, its phases) to ``target``: what carries
        out a plan, and (``going_on``) what goes on after an interrupt: ``--resume`` (the target is the progress
        file's), but for 'upgrade phase', which has none: it runs again, each phase reading where its node stands."""
        resume = going_on and not self.phase
        return command_line("upgrade", *(("phase", self.phase) if self.phase else ("apply",)),
                            *(() if resume else ("--to", target)), given=self.given, resume=resume,
                            yes=going_on)


# --- what the phases share ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class NodeAssessment:
    """One node as its first phase of the run found it, before anything changed there."""

    packages: dict[str, str]
    control_plane: str | None
    #: Bootstrap's node phases plan something here (a pin moved): the kubelet restarts after them.
    stack_pending: bool
    up_to_date: bool


@dataclass
class Rollout:
    """What the upgrade's phases share: decided before the run, and each node as first read in it."""

    target: KubernetesVersion
    first_cp: str
    roles: dict[str, str]
    #: The cluster's nodes as read before the run.
    nodes: dict[str, KubeNode]
    #: Nodes cordoned before this rollout began (left cordoned; an interrupted rollout's own are not).
    cordoned_before: frozenset[str]
    drain_timeout_s: float = DEFAULT_DRAIN_TIMEOUT_S
    ready_timeout_s: float = DEFAULT_READY_TIMEOUT_S
    assessed: dict[str, NodeAssessment] = field(default_factory=dict)
    #: Nodes whose kubelet this run restarts (their control plane settles before the uncordon).
    kubelet_restarted: set[str] = field(default_factory=set)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def at_target(self, version: str | None) -> bool:
        return bool(version) and str(version).lstrip("v").split("-")[0] == self.target.text

    def assess(self, ctx: PhaseContext, facts: PackageFacts | None = None) -> NodeAssessment:
        """The node as found by its first phase in this run (read once, on the node itself); ``facts``: its
        packages, as that phase read them."""
        name = ctx.host.name
        with self._lock:
            known = self.assessed.get(name)
        if known is not None:
            return known
        facts = facts or NodePackages().check(ctx)
        packages = {n: facts.packages[n].version or "" for n in PACKAGE_NAMES
                    if n in facts.packages and facts.packages[n].installed}
        cp = read_control_plane(ctx.reader) if self.roles.get(name) != WORKER else None
        stack = any(not c.is_noop for c in NodePackages().plan(ctx, facts)) or any(
            not c.is_noop for p in _stack_phases()[1:] for c in p.plan(ctx, p.check(ctx)))
        node = self.nodes.get(name)
        done = all(self.at_target(packages.get(n)) for n in PACKAGE_NAMES) and \
            (self.roles.get(name) == WORKER or self.at_target(cp)) and node is not None and node.ready is True and \
            self.at_target(node.kubelet_version) and (not node.unschedulable or name in self.cordoned_before) \
            and not stack
        found = NodeAssessment(packages, cp, stack, done)
        with self._lock:
            return self.assessed.setdefault(name, found)

    def needs_work(self, name: str) -> bool:
        """Whether the node is upgraded in this run (not known yet: ``upgrade phase X`` runs X)."""
        found = self.assessed.get(name)
        return found is None or not found.up_to_date


def _stack_phases() -> list[EnginePhase[Any, Any]]:
    return [NodePackages(), phase_named("containerd"), phase_named("nvidia-runtime")]


def _apt(host: str, names: Sequence[str], target: KubernetesVersion) -> Change:
    """kubeadm's documented line: unhold, ``apt-get update``, install ``X-*``, hold. The update is
    not only for a new minor's source: a site's one mirror (a flat repository holding every
    version) gains the target after the bring-up read its lists, and apt offers only what its
    lists name ("Version '1.37.2-*' for 'kubeadm' was not found")."""
    q = " ".join(shlex.quote(n) for n in names)
    pins = " ".join(shlex.quote(f"{n}={target.apt}") for n in names)
    return Change.run(host, f"apt-mark unhold {q} && {UPDATE} && {INSTALL} {pins} && apt-mark hold {q}",
                      env=APT_ENV, timeout_s=600,
                      cannot_undo=f"{', '.join(names)} stay{'s' * (len(names) == 1)} at {target.text}: {NO_DOWNGRADE}",
                      summary=f"upgrade {', '.join(names)} to {target.text} (unhold, update, install, hold)")


def _source(change: Change) -> bool:
    """A change of the packages phase for the Kubernetes apt source of the target minor (its key, its file,
    apt's lists read again): the kubeadm phase makes it."""
    return MAKES_REPO + "kubernetes" in change.makes or change.command == UPDATE


def _covered(change: Change) -> bool:
    """A change of the packages phase that the upgrade's own kubeadm/kubelet phases already make."""
    made = {t.removeprefix(MAKES_APT) for t in change.makes if t.startswith(MAKES_APT)}
    return _source(change) or (bool(made) and made <= set(PACKAGE_NAMES))


# --- the phases --------------------------------------------------------------------------------------------


class NodePackages(Packages):
    """Bootstrap's packages phase without what the upgrade's kubeadm and kubelet phases do."""

    def plan(self, ctx: PhaseContext, state: PackageFacts) -> list[Change]:
        planned = [c for c in super().plan(ctx, state) if not c.is_noop]
        # The kubeadm phase read apt's lists again before this phase writes another source (NVIDIA's, Docker's, a
        # site's): with one changed here, apt must read them once more, or it installs from lists without it.
        other_source = any(t.startswith(MAKES_REPO) for c in planned if not _source(c) for t in c.makes)
        return [c for c in planned if not _covered(c) or (other_source and c.command == UPDATE)]


class UpgradePhase(Phase[Any]):
    #: Runs from the first control plane for the node (the wait for Ready, the uncordon), else None.
    from_control_plane = False

    def __init__(self, rollout: Rollout) -> None:
        self.rollout = rollout
        self.via = rollout.first_cp if self.from_control_plane else None

    def check(self, ctx: PhaseContext) -> Any:
        """The node as its first phase of the run found it (``Rollout.assess``)."""
        return self.rollout.assess(ctx)


class AptUpgrade(UpgradePhase):
    """Packages at the target, as kubeadm's documentation does it: unhold, install ``X-*``, hold; the first
    (kubeadm) with the apt source of the target minor before it, where the packages phase plans one."""

    packages: ClassVar[tuple[str, ...]]
    with_source: ClassVar[bool] = False
    timeout_s = 900.0

    def check(self, ctx: PhaseContext) -> PackageFacts:
        # The node's first phase reads its packages once, for its assessment too: the pre-check's read
        # (``RunSettings.answered``) unless the node changed since.
        facts = Packages().check(ctx)
        self.rollout.assess(ctx, facts)
        return facts

    def plan(self, ctx: PhaseContext, state: PackageFacts) -> list[Change]:
        sources = [c for c in Packages().plan(ctx, state) if _source(c) or MAKES_DIR + KEYRING_DIR in c.makes] \
            if self.with_source else []
        behind = [n for n in self.packages if n not in state.packages or not state.packages[n].installed
                  or not self.rollout.at_target(state.packages[n].version)]
        return sources + ([_apt(ctx.host.name, self.packages, self.rollout.target)] if behind else [])


class UpgradeKubeadm(AptUpgrade):
    name = "kubeadm"
    description = "kubeadm at the target, from the target minor's apt repository (unhold, install, hold)"
    packages = ("kubeadm",)
    with_source = True


class KubeadmUpgrade(UpgradePhase):
    """``kubeadm upgrade apply`` on the first control plane, ``kubeadm upgrade node`` on the others."""

    name = "kubeadm-upgrade"
    description = "kubeadm upgrade apply (first control plane) or kubeadm upgrade node"
    timeout_s = 900.0
    #: ``kubeadm upgrade node`` leaves nothing to read back: a resumed rollout trusts its progress file.
    done_when_recorded = True

    def plan(self, ctx: PhaseContext, state: NodeAssessment) -> list[Change]:
        name, target = ctx.host.name, self.rollout.target
        # kubeadm's UpgradeConfiguration (v1beta4) on stdin: the target, certificate renewal, etcd, image pulls.
        config = render_upgrade_config(target.tag, allow_cgroup_v1=ctx.inventory.bootstrap.allow_cgroup_v1).encode()
        if name == self.rollout.first_cp:
            if self.rollout.at_target(read_control_plane(ctx.reader)):
                return []
            return [Change.run(name, upgrade_command("plan", target.tag), stdin=config, makes=(MAKES_NO_TRACE,),
                               summary="kubeadm upgrade plan (checks)", timeout_s=300),
                    Change.run(name, upgrade_command("apply", target.tag), stdin=config, timeout_s=900,
                               summary=f"kubeadm upgrade apply {target.tag}",
                               cannot_undo=f"the control plane stays at {target.tag}: {NO_DOWNGRADE}")]
        if state.up_to_date:
            return []
        what = "control plane and kubelet configuration" if self.rollout.roles.get(name) == CONTROL_PLANE \
            else "kubelet configuration"
        return [Change.run(name, upgrade_command("node"), stdin=config, timeout_s=900,
                           summary=f"kubeadm upgrade node ({what})",
                           cannot_undo=f"the {what} stays at {target.tag}: {NO_DOWNGRADE}")]


class UpgradeDrain(DrainNode):
    def __init__(self, rollout: Rollout) -> None:
        super().__init__(rollout.first_cp, rollout.drain_timeout_s)
        self.rollout = rollout

    def needed(self, ctx: EngineContext) -> bool:
        return self.rollout.needs_work(ctx.host.name)


class UpgradeKubelet(AptUpgrade):
    name = "kubelet"
    description = "kubelet and kubectl at the target (unhold, install, hold)"
    packages = ("kubelet", "kubectl")


class RestartKubelet(UpgradePhase):
    name = "restart-kubelet"
    description = "restart the kubelet on its new version and configuration"

    def plan(self, ctx: PhaseContext, state: NodeAssessment) -> list[Change]:
        node = self.rollout.nodes.get(ctx.host.name)
        # A kubelet the node already reports at the target was restarted since its upgrade (an
        # interrupted rollout got that far), unless the node stack changes under it now.
        running = node is not None and self.rollout.at_target(node.kubelet_version) and \
            all(self.rollout.at_target(state.packages.get(n)) for n in ("kubelet", "kubectl"))
        if state.up_to_date or (running and not state.stack_pending):
            return []
        self.rollout.kubelet_restarted.add(ctx.host.name)
        return [Change.run(ctx.host.name, "systemctl daemon-reload && systemctl restart kubelet",
                           summary="restart the kubelet", makes=(MAKES_NO_TRACE,))]


class NodeReady(ReadsNothing, UpgradePhase):
    """Waits, from the first control plane, until the node is Ready at the target."""

    name = "ready"
    description = "wait until the node is Ready at the target"
    from_control_plane = True

    def wait(self, ctx: PhaseContext) -> Wait | None:
        name, rollout = ctx.host.name, self.rollout
        if not rollout.needs_work(name):
            return None
        settle_s = min(CONTROL_PLANE_SETTLE_S, rollout.ready_timeout_s / 2) if rollout.roles.get(name) != WORKER \
            and name in rollout.kubelet_restarted else 0.0
        # Counted in reads, READY_POLL_S apart at least: the same reads however loaded the machine is.
        reads_needed = 1 + int(settle_s // READY_POLL_S)
        ready_reads = [0]  # Ready at the target in a row, every read answered

        def ready(c: PhaseContext) -> str | None:
            try:
                found = read_nodes(c.reader).get(name)
            except TransportError as exc:
                ready_reads[0] = 0
                return exc.message
            if found is None:
                ready_reads[0] = 0
                return "not listed; it stays cordoned"
            if found.ready and rollout.at_target(found.kubelet_version):
                ready_reads[0] += 1
                held = ready_reads[0]
                return None if held >= reads_needed else \
                    f"Ready at the target ({held} of {reads_needed} reads in a row: its control plane settles)"
            ready_reads[0] = 0
            return (f"kubelet {found.kubelet_version or '?'}, "
                    + ("Ready" if found.ready else f"NotReady ({found.not_ready_reason})") + "; it stays cordoned")

        return Wait(f"{name} Ready at {rollout.target.tag} (up to {int(rollout.ready_timeout_s)} s)", ready,
                    timeout_s=rollout.ready_timeout_s, poll_s=READY_POLL_S)


class Uncordon(UpgradePhase):
    name = "uncordon"
    description = "uncordon the node (one cordoned before the upgrade stays cordoned)"
    from_control_plane = True

    def check(self, ctx: PhaseContext) -> KubeNode | None:
        return read_node(ctx.reader, ctx.host.name)

    def plan(self, ctx: PhaseContext, state: KubeNode | None) -> list[Change]:
        name = ctx.host.name
        if state is None or name in self.rollout.cordoned_before:
            return []
        # A plan shows the uncordon of the drain it planned (the node is not cordoned yet then).
        drained = state.unschedulable or not self.rollout.needs_work(name)
        return cordon(self.rollout.first_cp, state if drained else replace(state, unschedulable=True), on=False)


def upgrade_phases(rollout: Rollout) -> list[EnginePhase[Any, Any]]:
    """The rollout, in order: each node's phases, then the cluster's (once, after the last node)."""
    return [UpgradeKubeadm(rollout), KubeadmUpgrade(rollout), UpgradeDrain(rollout), UpgradeKubelet(rollout),
            *_stack_phases(), RestartKubelet(rollout), NodeReady(rollout), Uncordon(rollout),
            phase_named("network"), phase_named("gpu-addons")]


def listed_phases() -> list[EnginePhase[Any, Any]]:
    """The phases in order, by name and description (``upgrade phases``), before any cluster is read."""
    return upgrade_phases(Rollout(parse("1.0.0"), "", {}, {}, frozenset()))


# --- reading the cluster before the run --------------------------------------------------------------------


def read_control_plane(reader: Any) -> str | None:
    result = reader.run(f"cat {APISERVER_MANIFEST}", sudo=True)
    return static_pod_version(result.stdout) if result.ok else None


def _current(runner: Runner, inventory: Inventory, first_cp: Host) -> KubernetesVersion:
    """The oldest control plane's version: kubeadm's one minor at a time counts from it, and the skew policy keeps
    API servers one minor apart (a rollout stopped after the first control plane left the others behind). No API
    server manifest on the first: no control plane runs there (``no_cluster_here``); on another: none to count. Any
    other failure, on any control plane, stops the run: the one not read may be the oldest."""
    fleet = runner.run_task(inventory.control_planes, label="control plane",
                            task=lambda t: read_answer(t, f"cat {APISERVER_MANIFEST}", static_pod_version))
    for outcome in fleet.outcomes:
        if outcome.failure is not None and (outcome.host.name == first_cp.name or not no_cluster_here(outcome.failure)):
            raise not_usable(outcome.host.name, "read the API server's version", outcome.failure)
    return min(parse(version, where=APISERVER_MANIFEST) for version in fleet.values.values())


def repository_versions(transport: Transport, inventory: Inventory, target: KubernetesVersion) -> tuple[str, list[str]]:
    """The Kubernetes apt repository of ``target``'s minor (mirrors applied) and the kubeadm versions it offers."""
    repos = chosen_repos(StackPin(kubernetes=target.text), inventory.bootstrap, None, None)
    repo = next((r for r in repos if r.name == "kubernetes"), None)
    if repo is None:
        return "", []
    url = packages_index_url(repo)
    result = transport.run(f"curl -fsS --max-time 30 {shlex.quote(url)}", timeout=60)
    if not result.ok:
        raise TransportError(FailureKind.COMMAND_FAILED, result.stderr_tail(2) or f"exit {result.exit_code}")
    return url, parse_packages_index(result.stdout).get("kubeadm", [])


def _check_repository(runner: Runner, first: Host, inventory: Inventory, target: KubernetesVersion,
                      report: UpgradeReport) -> None:
    (outcome,) = runner.run_task([first], lambda t: repository_versions(t, inventory, target),
                                 label="repository").outcomes
    if not outcome.ok or outcome.value is None:
        why = outcome.failure.describe() if outcome.failure else "no answer"
        report.findings.append(Finding(Severity.WARNING, "UPGRADE_REPOSITORY_UNREAD",
                                       f"could not read the Kubernetes repository from {first.name}: {why}",
                                       host=first.name))
        return
    url, offered = outcome.value
    if url and not any(v.startswith(target.text + "-") for v in offered):
        shown = ", ".join(offered[-4:]) or "no kubeadm at all"
        raise UsageError(f"Kubernetes {target.text} is not in the pinned repository {url} (kubeadm there: {shown}).",
                         field="--to", hint="Pick a version the repository offers, or mirror it first "
                         "('clusterctl bootstrap artifacts').")


def _refuse_downgrades(runner: Runner, hosts: Sequence[Host], inventory: Inventory,
                       target: KubernetesVersion) -> dict[str, dict[tuple[str, bool], CommandResult]]:
    """Refuse, before anything changes, nodes where the upgrade would install a package older than the one
    they run (a kubelet upgraded there by hand, a newer patch): bootstrap's packages phase decides it
    (``Packages.downgrade_finding``, the pins at the target). A node that does not answer is the engine's
    to report, as every other failure. Returns what it read, for the run (``RunSettings.answered``)."""
    findings, answered = read_downgrades(runner, hosts, inventory, what="upgrade")
    refused = refused_downgrades(findings, dict.fromkeys(PACKAGE_NAMES, "--to"))
    if refused is None:
        return answered
    runs, pins, _ = refused
    raise UsageError(f"upgrade to {target.text} would downgrade what the nodes run, and does not: {runs}; the "
                     f"upgrade installs {pins}. Nothing was changed.", hint=downgrade_ways(findings))


def downgrade_ways(findings: Sequence[Finding]) -> str:
    """What the user of ``upgrade`` can do about nodes that run newer packages than it installs
    (``DOWNGRADE_REFUSED`` findings): the pre-check's hint, and the packages phase's fix in the run."""
    fields = {p: f for finding in findings for p, f in finding.evidence["fields"].items()}
    running = (KubernetesVersion.parse(upstream_part(v)) for f in findings
               for p, v in f.evidence["running"].items() if p in PACKAGE_NAMES)
    newest = max((v for v in running if v is not None), default=None)
    stack = sorted({f for p, f in fields.items() if p not in PACKAGE_NAMES})
    ways = "; ".join(([f"pick a target at least the version they run (clusterctl upgrade plan --to {newest.text})"]
                      if newest else []) + [f"set {field} to what they run" for field in stack])
    return f"{ways[:1].upper()}{ways[1:]}."


def rollout_order(inventory: Inventory, hosts: Sequence[Host]) -> list[tuple[Host, str]]:
    first = inventory.first_control_plane
    planes = [(h, FIRST_CP if first is not None and h.name == first.name else CONTROL_PLANE)
              for h in hosts if h.is_control_plane]
    # The first control plane first, wherever the selection put it; the others in their order.
    return sorted(planes, key=lambda pair: pair[1] != FIRST_CP) + [(h, WORKER) for h in hosts
                                                                    if not h.is_control_plane]


def batches(order: Sequence[tuple[Host, str]], max_unavailable: int) -> list[list[str]]:
    """Control planes one by one; workers ``max_unavailable`` at a time (in inventory order)."""
    out = [[h.name] for h, role in order if role != WORKER]
    workers = [h.name for h, role in order if role == WORKER]
    step = max(1, max_unavailable)
    return out + [workers[i:i + step] for i in range(0, len(workers), step)]


# --- the run -----------------------------------------------------------------------------------------------


def _target(request: UpgradeRequest, first: Host, store: ProgressStore | None) -> tuple[str, str | None]:
    """The version to reach, and the inventory's pin."""
    wanted = request.to
    if request.resume:
        saved = store.run.get("target") if store is not None else None
        if not isinstance(saved, str):
            path = store.path if store is not None else "?"
            raise UsageError(f"not a clusterctl upgrade progress file: no target version. Remove {path} and run "
                             "'clusterctl upgrade apply --to X' without --resume (nodes already upgraded are "
                             "skipped).", file=str(path))
        if wanted is not None and parse(wanted).text != saved:
            raise UsageError(f"--resume: the interrupted upgrade was to {saved}, not {wanted}",
                             field="--to", hint=f"Resume with --to {saved} (or without --to).")
        wanted = saved
    pin = first.stack.kubernetes
    if wanted is None:
        if not pin:
            raise UsageError("no version to upgrade to: give --to X or pin stack.kubernetes", field="--to")
        wanted = pin
    return wanted, pin


def _left_cordoned(place: RunPlace, nodes: Mapping[str, KubeNode]) -> frozenset[str]:
    """The nodes an earlier rollout cordoned (it drained them) and never uncordoned, because it was
    interrupted or failed: their cordon is clusterctl's, so a plain rerun (no ``--resume``) does not
    mistake it for one the user made before the upgrade. A rollout that finished left none."""
    try:
        last = place.last_progress()
    except UsageError:  # a damaged progress file only matters to --resume, which says so
        return frozenset()
    saved = last.run.get("cordoned_before")
    before = {str(n) for n in saved} if isinstance(saved, list) else set()
    return frozenset(nodes[host].name for host, phases in last.hosts.items()
                     if host in nodes and "drain" in phases and not finished(last, host, "uncordon")
                     and nodes[host].name not in before)


def upgrade(inventory: Inventory, hosts: Sequence[Host], runner: Runner, request: UpgradeRequest,
            on_phase: Callable[[EnginePhase[Any, Any], list[HostPhaseResult]], None] | None = None) -> UpgradeReport:
    """Plan (``request.apply`` False) or run the rollout; never raises for a node's failure (it is in the report).

    Ctrl-C or SIGTERM is the engine's: the ``Interrupted`` it raises again names the journal and
    ``upgrade apply --resume``.
    """
    first = inventory.first_control_plane
    if first is None:
        raise UsageError("the inventory has no control-plane host", field="roles")
    place = RunPlace.of(inventory, "upgrade", request.state_dir)
    store = place.progress(apply=request.apply, resume=request.resume, first="clusterctl upgrade apply --to X")
    wanted, pin = _target(request, first, store)
    target = parse(wanted)
    # Every connection of the run carries the hosts as the upgraded cluster has them, every Kubernetes pin at
    # the target (the phases read the pins from their connection's host).
    at_target = tuple(replace(h, stack=replace(h.stack, kubernetes=target.text)) for h in inventory.hosts)
    original, inventory = inventory, replace(inventory, hosts=at_target)
    hosts, first = [inventory.host(h.name) for h in hosts], inventory.host(first.name)
    nodes = cluster_nodes(runner, first)
    current = _current(runner, inventory, first)
    check_upgrade(current, target, where="--to" if request.to is not None or request.resume else "stack.kubernetes")
    if target.minor > current.minor and all(h.name != first.name for h in hosts):
        # Kubernetes' version skew policy: a kubelet is never newer than its API server.
        raise UsageError(f"the control plane runs {current.text}: a kubelet at {target.text} would be a minor newer "
                         "than its API server, which Kubernetes' version skew policy does not allow.", field="--limit",
                         hint=f"Upgrade {first.name} first: add it to -l, or leave -l out (it goes first).")
    report = UpgradeReport(inventory.name, current.text, target.text, request.apply)
    if pin and parse(pin, where="stack.kubernetes") != target:
        report.notes.append(f"the inventory pins Kubernetes {pin}: set stack.kubernetes to {target.text} so that "
                            "'clusterctl bootstrap' keeps this version")
    _check_repository(runner, first, original, target, report)
    answered = _refuse_downgrades(runner, hosts, inventory, target)
    order = rollout_order(inventory, hosts)
    saved = store.run.get("cordoned_before") if store is not None and request.resume else None
    cordoned = frozenset(str(n) for n in saved) if isinstance(saved, list) else \
        frozenset(n.name for n in nodes.values() if n.unschedulable) - _left_cordoned(place, nodes)
    rollout = Rollout(target, first.name, {h.name: role for h, role in order}, nodes, cordoned,
                      request.drain_timeout_s, request.ready_timeout_s)
    for host, _ in order:
        node = nodes.get(host.name)
        if node is None:
            report.findings.append(Finding(Severity.ERROR, "UPGRADE_NODE_MISSING",
                                           f"{host.name} is not a node of the cluster", host=host.name,
                                           fix="Add it with 'clusterctl bootstrap' before upgrading."))
        elif not node.ready:
            report.findings.append(Finding(Severity.WARNING, "UPGRADE_NODE_NOT_READY",
                                           f"{host.name} is not Ready before the upgrade ({node.not_ready_reason})",
                                           host=host.name))
    if request.apply and fails(report.findings):
        _fill(report, None, rollout, order)
        report.stopped = first_few([f.message for f in report.findings if f.severity is Severity.ERROR], 3)
        return report
    every = upgrade_phases(rollout)
    phases = select_phases(every, request.phase, request.skip_phases, command="upgrade")
    # Only a node's own phases move it to the target; the cluster's add-ons (once, after the nodes) do not.
    chosen = {p.name for p in phases}
    report.only = [p.name for p in phases] if any(p.name not in chosen and not p.once_per_cluster
                                                  for p in every) else None
    run_hosts = [h for h, _ in order]
    if store is not None:
        store.run = {"target": target.text, "cordoned_before": sorted(cordoned)}
    settings = RunSettings(
        apply=request.apply, resume=request.resume, progress=store, on_phase=on_phase,
        options=run_options(inventory, run_hosts, [p for p in phases if isinstance(p, Phase)],
                            BootstrapRequest(apply=request.apply, options=RunOptions(downgrade_fix=downgrade_ways))),
        batches=batches(order, request.max_unavailable), every_lock_or_none=True, answered=answered,
        journal=place.journal(f"upgrade {target.text}") if request.apply else None,
        resume_hint=request.command(target.text, going_on=True))
    run = run_bootstrap(inventory, run_hosts, runner, phases, settings)
    _fill(report, run, rollout, order, phases)
    return report


def _fill(report: UpgradeReport, run: RunReport | None, rollout: Rollout, order: Sequence[tuple[Host, str]],
          phases: Sequence[EnginePhase[Any, Any]] = ()) -> None:
    """The report per node from the engine's: each phase that changes or waits for something is a step."""
    by_name = {p.name: p for p in phases}
    results = [r for r in (run.results if run is not None else []) if r.phase in by_name]
    failed = run.failed_hosts if run is not None else {}
    for host, role in order:
        name = host.name
        node, found = rollout.nodes.get(name), rollout.assessed.get(name)
        row = HostUpgrade(name, role, node.kubelet_version if node else "", found.control_plane if found else None)
        mine = [r for r in results if r.host == name and not by_name[r.phase].once_per_cluster]
        row.steps = [_step(r, by_name[r.phase], rollout) for r in mine
                     if r.changes or r.waits or r.status is Status.FAILED]
        if not [r for r in mine if r.skipped is not SkipReason.EARLIER_FAILURE]:
            row.status, row.message = NodeOutcome.NOT_STARTED, failed.get(name, "")
        elif name in failed:
            row.status, row.message = NodeOutcome.FAILED, failed[name]
        elif not row.steps:
            row.status = NodeOutcome.UP_TO_DATE if report.only is None else NodeOutcome.NOTHING_TO_DO
        elif report.applied:
            row.status = NodeOutcome.UPGRADED if report.only is None else NodeOutcome.CHANGED
        else:
            row.status = NodeOutcome.PLANNED
        if name in rollout.cordoned_before and not row.message:
            row.message = "cordoned before the upgrade: left cordoned"
        report.hosts.append(row)
    # A cluster phase the inventory leaves to the site (its own CNI, no GPUs) says so, as bootstrap does.
    report.addons = [_step(r, by_name[r.phase], rollout) for r in results if by_name[r.phase].once_per_cluster
                     and r.skipped in (None, SkipReason.NOT_NEEDED)]
    if run is None:
        return
    report.notes += run.notes
    report.undo_journal = run.undo_journal
    if failed:
        report.stopped = "; ".join(f"{h}: {why}" for h, why in failed.items())


def _step(result: HostPhaseResult, phase: EnginePhase[Any, Any], rollout: Rollout) -> dict[str, Any]:
    return result.step(phase.description, phase.via or (rollout.first_cp if phase.once_per_cluster else result.host))
