"""``clusterctl upgrade plan|apply --to X``: Kubernetes and the node stack, node by node, in kubeadm's order.

The order is the one of kubeadm's upgrade documentation ("Upgrading kubeadm clusters"):

1. the first control plane: its kubeadm package (unhold, install ``X-*``, hold), ``kubeadm
   upgrade plan X`` then ``kubeadm upgrade apply X``; then the node is drained, kubelet and
   kubectl upgraded the same way, the kubelet restarted, and the node uncordoned once Ready;
2. every further control plane, one at a time: the same with ``kubeadm upgrade node``;
3. the workers, ``--max-unavailable`` at a time: the same with ``kubeadm upgrade node``.

While a node is drained, bootstrap's own node phases run on it (``packages``, ``containerd``,
``nvidia-runtime``) with the inventory's pins, so a changed containerd or NVIDIA Container
Toolkit pin rolls out with the node: the package is upgraded and held, containerd's
configuration re-rendered at the installed version's config version with the NVIDIA runtime
kept. After the last node, the cluster phases ``network`` and ``gpu-addons`` bring the CNI and
the charts to their pins. A node whose packages, kubelet and control plane already run the
target, with nothing left for those phases, is up to date and not touched.

One minor at a time (``versions.check_upgrade``); the target must exist in the pinned
repository (its ``Packages`` index, read from the first control plane). A failure on a node
stops the rollout there: the nodes after it are not started and the report says which are
upgraded, which failed at which step, which were not touched; ``--resume`` continues from the
cluster's state (an upgraded node is found up to date and skipped).
"""

from __future__ import annotations

import shlex
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from clusterctl.bootstrap.apt_sources import KEYRING_DIR, chosen_repos
from clusterctl.bootstrap.cluster.kubeadm import render_upgrade_config, upgrade_command
from clusterctl.changes import Change, ChangeFailed, Gate
from clusterctl.cluster_access import FIRST, NoCluster, command_failed, on_control_plane
from clusterctl.day2.drain import DEFAULT_DRAIN_TIMEOUT_S, DrainFailed, drain_change, drain_node, uncordon_change
from clusterctl.day2.steps import Step
from clusterctl.day2.versions import Version, check_upgrade, parse, static_pod_version
from clusterctl.errors import Interrupted, ParseError, UsageError
from clusterctl.facts.kube import NODES_COMMAND, KubeNode, parse_nodes
from clusterctl.findings import Finding, Severity
from clusterctl.secret import mask_text

if TYPE_CHECKING:
    from clusterctl.engine.progress import RunPlace
    from clusterctl.engine.run import RunReport
    from clusterctl.fanout import Runner
    from clusterctl.inventory.model import Host, Inventory
    from clusterctl.transport.base import Transport

APT_ENV = {"DEBIAN_FRONTEND": "noninteractive"}
INSTALL = "apt-get install -y --allow-downgrades -o Dpkg::Options::=--force-confold"
APISERVER_MANIFEST = "/etc/kubernetes/manifests/kube-apiserver.yaml"
NODE_PHASES = ("packages", "containerd", "nvidia-runtime")
CLUSTER_PHASES = ("network", "gpu-addons")
DEFAULT_READY_TIMEOUT_S = 300.0
READY_POLL_S = 2.0
#: The Kubernetes packages the upgrade moves itself (in kubeadm's order), the others are the node phases'.
PACKAGE_NAMES = ("kubeadm", "kubelet", "kubectl")
#: Steps of one node, in order (``Step.name``).
STEP_ORDER = ("kubeadm", "kubeadm-upgrade", "drain", "kubelet", "node-stack", "restart-kubelet", "ready", "uncordon")


@dataclass
class HostUpgrade:
    host: str
    #: ``first control plane``, ``control plane``, ``worker``.
    role: str
    kubelet: str = ""
    control_plane: str | None = None
    packages: dict[str, str] = field(default_factory=dict)
    steps: list[Step] = field(default_factory=list)
    #: ``up to date``, ``planned``, ``upgrading`` (its batch is running), ``upgraded``, ``failed``,
    #: ``interrupted`` (Ctrl-C during its batch), ``not started``.
    status: str = "planned"
    message: str = ""

    @property
    def pending(self) -> bool:
        return bool(self.steps)

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"host": self.host, "role": self.role, "status": self.status,
                                "kubelet": self.kubelet, "packages": dict(self.packages),
                                "steps": [s.to_json() for s in self.steps]}
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
    #: The cluster phases (network, gpu-addons) after the last node.
    addons: list[Step] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    #: Why the rollout stopped early (a node's failure); None: it ran to the end (or was a plan).
    stopped: str | None = None
    #: Nodes this upgrade (or the interrupted one it resumes) cordoned and has not uncordoned yet.
    cordoned: set[str] = field(default_factory=set)
    #: Host -> the steps an earlier, interrupted rollout to the same target finished there (a hint).
    done_before: dict[str, frozenset[str]] = field(default_factory=dict)

    @property
    def nothing_to_do(self) -> bool:
        return not any(h.pending for h in self.hosts) and not any(s.changes for s in self.addons)

    @property
    def ok(self) -> bool:
        return self.stopped is None

    def to_json(self) -> dict[str, Any]:
        return {"cluster": self.cluster, "mode": "apply" if self.applied else "plan", "current": self.current,
                "target": self.target, "ok": self.ok, "nothing_to_do": self.nothing_to_do,
                "stopped": mask_text(self.stopped) if self.stopped else None,
                "hosts": [h.to_json() for h in self.hosts], "addons": [s.to_json() for s in self.addons],
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
    ready_poll_s: float = READY_POLL_S


# --- reading the cluster -----------------------------------------------------------------------------------


@dataclass
class HostState:
    packages: dict[str, str]
    holds: frozenset[str]
    control_plane: str | None


@dataclass
class ClusterState:
    nodes: dict[str, KubeNode]
    hosts: dict[str, HostState]
    current: Version


def _read_host(transport: Transport, control_plane: bool) -> HostState:
    from clusterctl.facts.packages import packages_probe, parse_packages_probe

    facts = parse_packages_probe(transport.run(packages_probe(PACKAGE_NAMES, (), KEYRING_DIR), sudo=True).stdout)
    installed = {name: p.version for name, p in facts.packages.items() if p.installed and p.version}
    cp_version = None
    if control_plane:
        result = transport.run(f"cat {APISERVER_MANIFEST}", sudo=True)
        if result.ok:
            cp_version = static_pod_version(result.stdout)
    return HostState(installed, facts.holds, cp_version)


def _read_nodes(transport: Transport) -> dict[str, KubeNode]:
    result = transport.run(NODES_COMMAND, sudo=True, timeout=60)
    if not result.ok:
        raise command_failed(result)
    return {n.name: n for n in parse_nodes(result.stdout)}


def read_cluster(runner: Runner, first_cp: Host, hosts: Sequence[Host]) -> ClusterState:
    nodes = on_control_plane(runner, first_cp, _read_nodes, what="read the cluster's nodes", label="nodes")
    states = runner.run_task(list(hosts), lambda t: _read_host(t, "control-plane" in t.host.roles), label="read")
    found: dict[str, HostState] = {}
    for o in states.outcomes:
        if not o.ok or o.value is None:
            raise UsageError(f"cannot read {o.host.name}: {o.failure.describe() if o.failure else 'no answer'}",
                             hint="Every host of the rollout must answer before anything changes.")
        found[o.host.name] = o.value
    cp_text = found[first_cp.name].control_plane
    if cp_text is None:
        raise NoCluster(f"no working cluster: {first_cp.name} runs no control plane ({APISERVER_MANIFEST} is "
                        "missing).", hint=FIRST)
    return ClusterState(nodes, found, parse(cp_text, where=APISERVER_MANIFEST))


def repository_versions(transport: Transport, inventory: Inventory, target: Version) -> tuple[str, list[str]]:
    """The Kubernetes apt repository of ``target``'s minor (mirrors applied) and the kubeadm versions it offers."""
    from clusterctl.bootstrap.artifacts_probe import parse_packages_index
    from clusterctl.inventory.model import StackPin

    repos = chosen_repos(StackPin(kubernetes=target.text), inventory.bootstrap, None, None)
    repo = next((r for r in repos if r.name == "kubernetes"), None)
    if repo is None:
        return "", []
    base = repo.url.rstrip("/")
    suite = repo.suites[0] if repo.suites else "/"
    url = f"{base}/Packages" if suite == "/" else \
        f"{base}/dists/{suite}/{(repo.components or ('main',))[0]}/binary-amd64/Packages"
    result = transport.run(f"curl -fsS --max-time 30 {shlex.quote(url)}", timeout=60)
    if not result.ok:
        raise OSError(result.stderr_tail(2) or f"exit {result.exit_code}")
    return url, parse_packages_index(result.stdout).get("kubeadm", [])


# --- planning ----------------------------------------------------------------------------------------------


def _apt_step(host: str, names: Sequence[str], target: Version) -> Change:
    q = " ".join(shlex.quote(n) for n in names)
    pins = " ".join(shlex.quote(f"{n}={target.apt}") for n in names)
    return Change.run(host, f"apt-mark unhold {q} && {INSTALL} {pins} && apt-mark hold {q}", env=APT_ENV,
                      timeout_s=600, summary=f"upgrade {', '.join(names)} to {target.text} (unhold, install, hold)")


def _at(version: str | None, target: Version) -> bool:
    return bool(version) and str(version).lstrip("v").split("-")[0] == target.text


def target_inventory(inventory: Inventory, target: Version) -> Inventory:
    """The inventory as the upgraded cluster has it: every host's Kubernetes pin at ``target``."""
    hosts = tuple(replace(h, stack=replace(h.stack, kubernetes=target.text)) for h in inventory.hosts)
    return replace(inventory, hosts=hosts)


def _covered(change: Change) -> bool:
    """A change of the packages phase that the upgrade's own kubeadm/kubelet steps already make."""
    summary = change.summary
    if summary.startswith(("apt source 'kubernetes'", "signing key of 'kubernetes'", "fetch the signing key of "
                           "'kubernetes'", "refresh apt's package lists")):
        return True
    if summary.startswith(("install ", "hold ")):
        names = [part.strip().split(" ")[0] for part in summary.split(" ", 1)[1].split(",")]
        return all(n in PACKAGE_NAMES for n in names)
    return False


def _source_changes(report: RunReport | None, host: str) -> list[Change]:
    """The packages phase's new apt source for the target minor, and the update after it."""
    if report is None:
        return []
    changes = [c for r in report.results if r.host == host and r.phase == "packages" for c in r.changes]
    return [c for c in changes if c.summary.startswith(("apt source 'kubernetes'", "signing key of 'kubernetes'",
                                                       "fetch the signing key of 'kubernetes'",
                                                       "create the keyring folder", "refresh apt's package lists"))]


def plan_host(host: Host, role: str, first_cp: str, state: HostState, node: KubeNode | None, target: Version,
              stack_plan: RunReport | None, request: UpgradeRequest, *,
              cordoned_by_us: bool = False, done_before: frozenset[str] = frozenset()) -> HostUpgrade:
    """The node's steps. A node someone else cordoned (a quarantine) is upgraded and left cordoned.

    ``done_before``: the steps an interrupted rollout to the same target finished on this node (its
    progress file). A hint only, as for bootstrap's ``--resume``: every step whose effect the host
    shows is decided by what the host shows; ``kubeadm upgrade node`` leaves nothing to read, so
    it is skipped when the hint says it ran and the host's kubeadm is at the target.
    """
    name = host.name
    packages = {n: state.packages.get(n, "") for n in PACKAGE_NAMES}
    plan = HostUpgrade(name, role, node.kubelet_version if node else "", state.control_plane, packages)
    stack = [c for r in (stack_plan.results if stack_plan else []) if r.host == name for c in r.changes
             if not _covered(c)]
    kubeadm_done = _at(packages.get("kubeadm"), target)
    kubelet_done = _at(packages.get("kubelet"), target) and _at(packages.get("kubectl"), target)
    cp_done = role == "worker" or _at(state.control_plane, target)
    keep_cordoned = node is not None and node.unschedulable and not cordoned_by_us
    node_done = node is not None and _at(node.kubelet_version, target) and node.ready and \
        (not node.unschedulable or keep_cordoned)
    if kubeadm_done and kubelet_done and cp_done and node_done and not stack:
        plan.status = "up to date"
        return plan
    steps: list[Step] = []
    # kubeadm's UpgradeConfiguration (v1beta4) on stdin: the target, certificate renewal, etcd, image pulls.
    config = render_upgrade_config(target.tag).encode()
    sources = _source_changes(stack_plan, name)
    if not kubeadm_done:
        steps.append(Step("kubeadm", name, f"kubeadm {target.text} from the v{target.major}.{target.minor} repository",
                          [*sources, _apt_step(name, ["kubeadm"], target)]))
    elif sources:  # kubeadm is there already (a resumed rollout): only the repository is left to set
        steps.append(Step("kubeadm", name, f"the v{target.major}.{target.minor} repository (kubeadm {target.text} is "
                          "installed)", sources))
    if role == "first control plane":
        if not cp_done:
            steps.append(Step("kubeadm-upgrade", name, f"control plane to {target.tag} (kubeadm upgrade apply)", [
                Change.run(name, upgrade_command("plan", target.tag), stdin=config,
                           summary="kubeadm upgrade plan (checks)", timeout_s=300),
                Change.run(name, upgrade_command("apply", target.tag), stdin=config, timeout_s=900,
                           summary=f"kubeadm upgrade apply {target.tag}")]))
    elif not (kubeadm_done and cp_done and "kubeadm-upgrade" in done_before):
        what = "control plane and kubelet configuration" if role == "control plane" else "kubelet configuration"
        steps.append(Step("kubeadm-upgrade", name, f"{what} (kubeadm upgrade node)",
                          [Change.run(name, upgrade_command("node"), stdin=config, summary="kubeadm upgrade node",
                                      timeout_s=900)]))
    steps.append(Step("drain", first_cp, f"drain {name}", [drain_change(first_cp, name, request.drain_timeout_s)]))
    if not kubelet_done:
        steps.append(Step("kubelet", name, f"kubelet and kubectl {target.text}",
                          [_apt_step(name, ["kubelet", "kubectl"], target)]))
    steps.append(Step("node-stack", name, "packages, containerd config, NVIDIA runtime at the inventory's pins "
                      "(bootstrap's node phases)", stack))
    # A kubelet the node already reports at the target was restarted since its upgrade (an
    # interrupted rollout got that far), unless the node stack changes under it now.
    if not (kubelet_done and node is not None and _at(node.kubelet_version, target) and not stack):
        steps.append(Step("restart-kubelet", name, "restart the kubelet", [
            Change.run(name, "systemctl daemon-reload && systemctl restart kubelet", summary="restart the kubelet")]))
    steps.append(Step("ready", first_cp, f"wait until {name} is Ready at {target.tag} "
                      f"(up to {int(request.ready_timeout_s)} s)"))
    if keep_cordoned:
        plan.message = "cordoned before the upgrade: left cordoned"
    else:
        steps.append(Step("uncordon", first_cp, f"uncordon {name}", [uncordon_change(first_cp, name)]))
    plan.steps = steps
    return plan


def rollout_order(inventory: Inventory, hosts: Sequence[Host]) -> list[tuple[Host, str]]:
    from clusterctl.bootstrap.cluster.settings import first_control_plane

    first = first_control_plane(inventory)
    chosen = {h.name for h in hosts}
    order: list[tuple[Host, str]] = []
    if first is not None and first.name in chosen:
        order.append((first, "first control plane"))
    order += [(h, "control plane") for h in hosts if "control-plane" in h.roles and h is not first
              and (first is None or h.name != first.name)]
    order += [(h, "worker") for h in hosts if "control-plane" not in h.roles]
    return order


def batches(order: Sequence[HostUpgrade], max_unavailable: int) -> list[list[HostUpgrade]]:
    """Control planes one by one; workers ``max_unavailable`` at a time (in inventory order)."""
    out: list[list[HostUpgrade]] = [[h] for h in order if h.role != "worker"]
    workers = [h for h in order if h.role == "worker"]
    step = max(1, max_unavailable)
    out += [workers[i:i + step] for i in range(0, len(workers), step)]
    return out


# --- progress (for --resume) -------------------------------------------------------------------------------


def progress_place(inventory: Inventory, state_dir: str | None) -> RunPlace:
    """Where the rollout's progress is kept: the engine's one progress file, under ``upgrade/``."""
    from clusterctl.engine.progress import RunPlace

    return RunPlace.of(inventory, "upgrade", state_dir)


def save_progress(place: RunPlace, report: UpgradeReport) -> None:
    """Target, each node's finished steps, the nodes it cordoned (no command, no output): written atomically."""
    store = place.progress(resume=False, first="")
    for h in report.hosts:
        for name in sorted({*report.done_before.get(h.host, ()), *(s.name for s in h.steps if s.status == "done")}):
            store.record(h.host, name, "ok", 0.0)
    store.run = {"target": report.target, "stopped": mask_text(report.stopped or ""),
                 "statuses": {h.host: h.status for h in report.hosts}, "cordoned": sorted(report.cordoned)}
    store.save()


def load_progress(place: RunPlace, *, resume: bool) -> dict[str, Any]:
    """What the last rollout left: its target, the nodes it cordoned, each node's finished steps."""
    store = place.progress(resume=True, first="clusterctl upgrade apply --to X") if resume else place.last_progress()
    if store is None:
        return {}
    if not isinstance(store.run.get("target"), str):
        raise UsageError(f"not a clusterctl upgrade progress file: no target version. Remove {store.path} and run "
                         "'clusterctl upgrade apply --to X' without --resume (nodes already upgraded are skipped).",
                         file=str(store.path))
    steps = {host: [name for name, entry in phases.items() if entry.get("status") == "ok"]
             for host, phases in store.hosts.items()}
    return {**store.run, "steps": steps}


# --- running -----------------------------------------------------------------------------------------------


def _stack_report(runner: Runner, inventory: Inventory, hosts: Sequence[Host], phases: Sequence[str], *,
                  apply: bool, lock: Any = None) -> RunReport:
    from clusterctl.day2.phases import run_phases

    return run_phases(runner, inventory, hosts, phases, apply=apply, lock=lock)


def _failure(report: RunReport, host: str) -> str | None:
    return report.failed_hosts.get(host)


def upgrade(inventory: Inventory, hosts: Sequence[Host], runner: Runner, request: UpgradeRequest,
            on_step: Callable[[HostUpgrade, Step], None] | None = None) -> UpgradeReport:
    """Plan (``request.apply`` False) or run the rollout; never raises for a node's failure (it is in the report)."""
    from clusterctl.bootstrap.cluster.settings import first_control_plane

    first = first_control_plane(inventory)
    if first is None:
        raise UsageError("the inventory has no control-plane host", field="roles")
    progress = progress_place(inventory, request.state_dir)
    wanted = request.to
    if request.resume:
        if not request.apply:
            raise UsageError("--resume continues an 'upgrade apply'; 'upgrade plan' always reads the cluster afresh")
        saved = load_progress(progress, resume=True)
        if wanted and parse(wanted).text != saved["target"]:
            raise UsageError(f"--resume: the interrupted upgrade was to {saved['target']}, not {wanted}",
                             field="--to", hint=f"Resume with --to {saved['target']} (or without --to).")
        wanted = str(saved["target"])
    pin = first.stack.kubernetes
    if not wanted:
        if not pin:
            raise UsageError("no version to upgrade to: give --to X or pin stack.kubernetes", field="--to")
        wanted = pin
    target = parse(wanted)
    earlier = load_progress(progress, resume=False)
    order = rollout_order(inventory, hosts)
    state = read_cluster(runner, first, [h for h, _ in order])
    check_upgrade(state.current, target)
    report = UpgradeReport(inventory.name, state.current.text, target.text, request.apply)
    report.cordoned = {str(h) for h in earlier.get("cordoned") or []}
    if earlier.get("target") == target.text and isinstance(earlier.get("steps"), dict):
        report.done_before = {str(h): frozenset(str(n) for n in names) for h, names in earlier["steps"].items()
                              if isinstance(names, list)}
    if pin and parse(pin, where="stack.kubernetes") != target:
        report.notes.append(f"the inventory pins Kubernetes {pin}: set stack.kubernetes to {target.text} so that "
                            "'clusterctl bootstrap' keeps this version")
    _check_repository(runner, first, inventory, target, report)
    upgraded = target_inventory(inventory, target)
    up_hosts = [upgraded.host(h.name) for h, _ in order]
    stack_plan = _stack_report(runner, upgraded, up_hosts, NODE_PHASES, apply=False)
    for name, why in stack_plan.failed_hosts.items():
        report.findings.append(Finding(Severity.ERROR, "UPGRADE_STACK_BLOCKED", f"the node phases cannot plan: {why}",
                                       host=name))
    for host, role in order:
        node = state.nodes.get(host.name)
        if node is None:
            report.findings.append(Finding(Severity.ERROR, "UPGRADE_NODE_MISSING",
                                           f"{host.name} is not a node of the cluster", host=host.name,
                                           fix="Add it with 'clusterctl bootstrap' before upgrading."))
        elif not node.ready:
            report.findings.append(Finding(Severity.WARNING, "UPGRADE_NODE_NOT_READY",
                                           f"{host.name} is not Ready before the upgrade ({node.not_ready_reason})",
                                           host=host.name))
        report.hosts.append(plan_host(host, role, first.name, state.hosts[host.name], node, target, stack_plan,
                                      request, cordoned_by_us=host.name in report.cordoned,
                                      done_before=report.done_before.get(host.name, frozenset())))
    cluster_plan = _stack_report(runner, upgraded, [upgraded.host(first.name)], CLUSTER_PHASES, apply=False)
    report.addons.append(Step("addons", first.name, "CNI and add-on charts at their pins (bootstrap's network and "
                              "gpu-addons phases)", [c for r in cluster_plan.results for c in r.changes]))
    blocking = [f for f in report.findings if f.severity is Severity.ERROR]
    if not request.apply:
        for host_plan in report.hosts:
            for step in host_plan.steps:
                if on_step is not None:
                    on_step(host_plan, step)
        return report
    if blocking:
        report.stopped = "; ".join(f.message for f in blocking[:3])
        for host_plan in report.hosts:
            if host_plan.pending:
                host_plan.status = "not started"
        return report
    _apply(runner, upgraded, first, report, request, progress, on_step)
    return report


def _check_repository(runner: Runner, first: Host, inventory: Inventory, target: Version,
                      report: UpgradeReport) -> None:
    def ask(transport: Transport) -> tuple[str, list[str]]:
        return repository_versions(transport, inventory, target)

    outcome = runner.run_task([first], ask, label="repository").outcomes[0]
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


def _apply(runner: Runner, inventory: Inventory, first: Host, report: UpgradeReport, request: UpgradeRequest,
           progress: RunPlace, on_step: Callable[[HostUpgrade, Step], None] | None) -> None:
    """Run the rollout under every node's lock; the progress file is written after each step, so
    that Ctrl-C (or a crash) anywhere leaves what ``--resume`` needs: which nodes this rollout
    cordoned (recorded before the drain starts) and which steps each node finished."""
    from clusterctl.engine.lock import LockInfo

    for host_plan in report.hosts:
        if not host_plan.pending:
            host_plan.status = "up to date"
    lock = LockInfo.mine(uuid.uuid4().hex)
    hosts = [inventory.host(h.host) for h in report.hosts]
    refused = _lock_hosts(runner, hosts, lock)
    if refused:
        report.stopped = "; ".join(f"{host}: {why}" for host, why in refused.items())
        _not_started(report.hosts)
        return
    try:
        save_progress(progress, report)
        _roll_out(runner, inventory, first, report, request, progress, on_step, lock)
    except Interrupted as exc:
        running = [h for h in report.hosts if h.status == "upgrading"]
        for h in running:
            h.status = "interrupted"
            step = next((s for s in h.steps if s.status == "running"), None)
            h.message = f"interrupted ({exc.signal_name})" + (f" at step {step.name}" if step else "")
            if step is not None:
                step.status = "interrupted"
        _not_started(report.hosts)
        report.stopped = "; ".join(f"{h.host}: {h.message}" for h in running) or f"interrupted ({exc.signal_name})"
        save_progress(progress, report)
        exc.retry_hint = _interrupted_summary(report)
        _unlock_hosts(runner, hosts, lock, interrupted=True)
        raise
    _unlock_hosts(runner, hosts, lock)


def _interrupted_summary(report: UpgradeReport) -> str:
    from clusterctl.hostlist import compress

    def named(status: str) -> str:
        return compress(h.host for h in report.hosts if h.status == status) or "none"

    lines = [f"upgrade to {report.target} interrupted: {mask_text(report.stopped or '')}",
             f"upgraded: {named('upgraded')}; up to date: {named('up to date')}; not started: {named('not started')}"]
    if report.cordoned:
        lines.append(f"cordoned by this upgrade (uncordoned when it finishes): {compress(sorted(report.cordoned))}")
    lines.append("resume: clusterctl upgrade apply --resume --yes (the same target; what the hosts show done is "
                 "not done again)")
    return "\n".join(lines)


def _lock_hosts(runner: Runner, hosts: Sequence[Host], lock: Any) -> dict[str, str]:
    """Take every node's lock (the engine's: a bootstrap and an upgrade never interleave); host -> why it
    was refused (then none is kept)."""
    from clusterctl.engine.run import give_back_locks, take_locks

    locked, refused = take_locks(runner, hosts, lock)
    if refused:
        give_back_locks(runner, locked, lock)
    return refused


def _unlock_hosts(runner: Runner, hosts: Sequence[Host], lock: Any, *, interrupted: bool = False) -> None:
    from clusterctl.engine.run import give_back_locks

    give_back_locks(runner, hosts, lock, interrupted=interrupted)


def _not_started(hosts: Sequence[HostUpgrade]) -> None:
    for h in hosts:
        if h.status == "planned":
            h.status = "not started"
            for s in h.steps:
                s.status = "not started"


def _roll_out(runner: Runner, inventory: Inventory, first: Host, report: UpgradeReport, request: UpgradeRequest,
              progress: RunPlace, on_step: Callable[[HostUpgrade, Step], None] | None, lock: Any) -> None:
    gate = Gate(apply=True)
    pending = [h for h in report.hosts if h.pending]
    for batch in batches(pending, request.max_unavailable):
        for h in batch:
            h.status = "upgrading"
        for name in STEP_ORDER:
            live = [h for h in batch if h.status != "failed"]
            work = [(h, s) for h in live for s in h.steps if s.name == name]
            if not work:
                continue
            for h, s in work:
                s.status = "running"
                if s.name == "drain" and not h.message:
                    report.cordoned.add(h.host)  # before the cordon: an interrupt may come right after it
            save_progress(progress, report)
            _run_step(runner, inventory, first, gate, work, request, parse(report.target), lock)
            for h, s in work:
                if s.name == "uncordon" and s.status == "done":
                    report.cordoned.discard(h.host)
                if on_step is not None:
                    on_step(h, s)
                if s.status == "failed":
                    h.status, h.message = "failed", f"step {s.name}: {s.message}"
                    for later in h.steps[h.steps.index(s) + 1:]:
                        later.status = "not started"
            save_progress(progress, report)
        for h in batch:
            if h.status != "failed":
                h.status = "upgraded"
        save_progress(progress, report)
        failed = [h for h in batch if h.status == "failed"]
        if failed:
            report.stopped = "; ".join(f"{h.host}: {h.message}" for h in failed)
            _not_started(pending)
            save_progress(progress, report)
            return
    addons = report.addons[0]
    if addons.changes:
        result = _stack_report(runner, inventory, [inventory.host(first.name)], CLUSTER_PHASES, apply=True, lock=lock)
        why = _failure(result, first.name)
        addons.status, addons.message = ("failed", why) if why else ("done", "")
        if why:
            report.stopped = f"add-ons: {why}"
    else:
        addons.status = "done"
    save_progress(progress, report)


def _run_step(runner: Runner, inventory: Inventory, first: Host, gate: Gate, work: list[tuple[HostUpgrade, Step]],
              request: UpgradeRequest, target: Version, lock: Any = None) -> None:
    """One step on every node of a batch: node-side steps in parallel, control-plane-side ones in turn."""
    name = work[0][1].name
    if name == "node-stack":
        hosts = [inventory.host(h.host) for h, _ in work]
        result = _stack_report(runner, inventory, hosts, NODE_PHASES, apply=True, lock=lock)
        for h, step in work:
            why = _failure(result, h.host)
            step.changes = [c for r in result.results if r.host == h.host for c in r.changes]
            step.status, step.message = ("failed", why) if why else ("done", "")
        return
    if work[0][1].runs_on != work[0][0].host:  # drain, ready, uncordon: from the first control plane
        for h, step in work:
            def on_cp(transport: Transport, h: HostUpgrade = h, step: Step = step) -> None:
                if step.name == "drain":
                    drain_node(transport, gate, h.host, request.drain_timeout_s)
                elif step.name == "ready":
                    _wait_ready(transport, h.host, target, request)
                else:
                    gate.submit_all(transport, step.changes)

            outcome = runner.run_task([first], on_cp, label=f"{name} {h.host}",
                                      timeout_s=max(runner.timeout_s, request.drain_timeout_s + 60,
                                                    request.ready_timeout_s + 60)).outcomes[0]
            _settle(step, outcome)
        return
    by_host = {h.host: step for h, step in work}

    def on_node(transport: Transport) -> None:
        gate.submit_all(transport, by_host[transport.host.name].changes)

    fleet = runner.run_task([inventory.host(h.host) for h, _ in work], on_node, label=name,
                            timeout_s=max(runner.timeout_s, 900))
    for outcome in fleet.outcomes:
        _settle(by_host[outcome.host.name], outcome)


def _settle(step: Step, outcome: Any) -> None:
    if outcome.ok:
        step.status = "done"
        return
    failure = outcome.failure
    step.status = "failed"
    step.message = failure.message if failure is not None else "no result"


class NotReady(Exception):
    pass


def _wait_ready(transport: Transport, node: str, target: Version, request: UpgradeRequest) -> None:
    deadline = time.monotonic() + request.ready_timeout_s
    last = "not listed"
    while True:
        result = transport.run(NODES_COMMAND, sudo=True, timeout=60)
        if result.ok:
            try:
                found = {n.name: n for n in parse_nodes(result.stdout)}.get(node)
            except ParseError as exc:
                found, last = None, str(exc)
            if found is not None:
                if found.ready and _at(found.kubelet_version, target):
                    return
                last = (f"kubelet {found.kubelet_version or '?'}, "
                        + ("Ready" if found.ready else f"NotReady ({found.not_ready_reason})"))
        if time.monotonic() >= deadline:
            raise NotReady(f"{node} did not come back Ready at {target.tag} within "
                           f"{int(request.ready_timeout_s)} s (last seen: {last}); it stays cordoned")
        time.sleep(request.ready_poll_s)


__all__ = ["ChangeFailed", "DrainFailed", "HostUpgrade", "Step", "UpgradeReport", "UpgradeRequest", "upgrade"]
