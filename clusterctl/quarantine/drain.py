"""Drain one node the way ``kubectl drain --ignore-daemonsets`` does, one eviction at a time through the gate.

Why pod by pod rather than running ``kubectl drain`` on the control-plane host: each eviction
is then one ``Change`` the gate records (a dry run lists exactly the pods that would go, a real
run keeps what it did), the pods that cannot go are listed with their reason instead of ending
the whole drain at the first one, and the behaviour does not depend on the kubectl version of
the host. The rules are kubectl's (``k8s.io/kubectl/pkg/drain/filters.go``):

* DaemonSet pods are left (their controller would put them back at once, tolerating the
  cordon); mirror pods (static pods the kubelet owns) cannot be evicted and are left too;
* finished pods (Succeeded, Failed) go whatever else is true of them;
* a pod with no controller is lost for good when evicted: only with ``force``;
* a pod with ``emptyDir`` data loses it: only with ``delete_emptydir_data``;
* every eviction goes through the Eviction API, which honours PodDisruptionBudgets: a 429
  ("would violate the pod's disruption budget") is retried every ``retry_every_s`` until
  ``timeout_s``; what is left then is reported, never deleted around the budget;
* an evicted pod counts as gone once it has left the node's pod list (graceful termination).

The node is expected to be cordoned first (``node_ops.cordon``), as kubectl drain does, or the
scheduler may put the replacements back on it. ``drain_node`` is the one entry point; the
upgrade of day 2 calls it too.
"""

from __future__ import annotations

import json
import shlex
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING

from clusterctl.changes import MAKES_EVICTION, MAKES_NO_TRACE, Change, ChangeFailed, Gate
from clusterctl.cluster_access import no_cluster_here, read_pods, server_refused
from clusterctl.facts.kube import kubectl
from clusterctl.facts.kube_nodes import Pod, pods_command
from clusterctl.transport.base import FailureKind, Transport, TransportError

if TYPE_CHECKING:
    from clusterctl.host_reader import HostReader

DEFAULT_TIMEOUT_S = 300.0


@dataclass(frozen=True)
class DrainOptions:
    #: The whole drain's limit: evictions a budget keeps refusing and pods still terminating by then are reported.
    timeout_s: float = DEFAULT_TIMEOUT_S
    #: Evict pods that declare no controller (they are not recreated anywhere).
    force: bool = False
    #: Evict pods with emptyDir volumes (their data is lost): off for every drain of a failing host (their
    #: --delete-emptydir-data), on for maintenance (upgrade, remove-node: ``day2.drain.DrainNode``), as kured's.
    delete_emptydir_data: bool = False
    #: kubectl drain's pause between two tries of an eviction a budget refused.
    retry_every_s: float = 5.0
    #: The command offers ``--force`` (quarantine): a pod refused for want of a controller names it.
    offers_force: bool = False


@dataclass(frozen=True)
class PodLeft:
    """A pod drain did not take off the node, and why."""

    pod: str
    reason: str


class PodsUnreadable(TransportError):
    """One node's pod list could not be read: the drain of that node stops, named; the other nodes' go on."""


@dataclass
class DrainReport:
    node: str
    #: Applied: the pods evicted and gone. Dry run: the pods that would be evicted.
    evicted: list[str] = field(default_factory=list)
    #: DaemonSet and mirror pods, left on purpose (not a failure).
    ignored: list[PodLeft] = field(default_factory=list)
    #: Pods that could not be evicted (no controller, local data, budget until the timeout, API errors).
    not_evicted: list[PodLeft] = field(default_factory=list)
    #: Pods already terminating, and those evicted at a cost (no controller: gone for good; emptyDir data lost).
    warnings: list[str] = field(default_factory=list)
    dry_run: bool = False

    @property
    def complete(self) -> bool:
        return not self.not_evicted

    def to_json(self) -> dict[str, object]:
        return {"node": self.node, "dry_run": self.dry_run, "complete": self.complete} | asdict(self)  # keys' order


def eviction_command(pod: Pod) -> str:
    """POST an ``Eviction`` for ``pod`` (policy/v1) through ``kubectl create --raw``, the body on stdin."""
    body = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": pod.name, "namespace": pod.namespace}}
    path = f"/api/v1/namespaces/{pod.namespace}/pods/{pod.name}/eviction"
    return (f"printf '%s' {shlex.quote(json.dumps(body, separators=(',', ':')))} | "
            + kubectl(f"create --raw {shlex.quote(path)} -f -"))


def sort_pods(pods: list[Pod], options: DrainOptions, report: DrainReport) -> list[Pod]:
    """The pods to evict; the others go to ``report.ignored`` / ``report.not_evicted`` with kubectl's reasons."""
    chosen: list[Pod] = []
    for pod in pods:
        if pod.deleting:
            report.warnings.append(f"{pod.ref} is already terminating")
            continue
        if pod.mirror:
            report.ignored.append(PodLeft(pod.ref, "mirror pod (a static pod the kubelet owns)"))
            continue
        if pod.finished:
            chosen.append(pod)
            continue
        if pod.controller_kind == "DaemonSet":
            report.ignored.append(PodLeft(pod.ref, f"DaemonSet-managed ({pod.controller_name})"))
            continue
        # kubectl drain's refusals in its words; every command that may refuse emptyDir data offers its switch.
        if not pod.controller_kind and not options.force:
            override = " (use --force to override)" if options.offers_force else ""
            report.not_evicted.append(PodLeft(pod.ref, f"declares no controller: nothing would recreate it{override}"))
            continue
        if pod.local_storage and not options.delete_emptydir_data:
            report.not_evicted.append(PodLeft(pod.ref, "has local storage (emptyDir) that eviction deletes "
                                                       "(use --delete-emptydir-data to override)"))
            continue
        if not pod.controller_kind:
            report.warnings.append(f"{pod.ref} declares no controller: evicted for good (--force)")
        elif pod.local_storage:
            report.warnings.append(f"{pod.ref}: its emptyDir data is deleted (--delete-emptydir-data)")
        chosen.append(pod)
    return chosen


def drain_node(transport: Transport, gate: Gate, node: str, options: DrainOptions, *,
               sleep: Callable[[float], None] = time.sleep,
               clock: Callable[[], float] = time.monotonic) -> DrainReport:
    """Evict ``node``'s pods through ``transport`` (a control-plane host running kubectl as root).

    With ``gate.apply`` false, nothing is evicted: the report lists what would be. A budget's
    refusal is retried until ``options.timeout_s``; what cannot go is in ``not_evicted``. A pod list
    that cannot be read is ``PodsUnreadable``: the caller fails that host only and goes on with the others.
    """
    report = DrainReport(node, dry_run=not gate.apply)
    pending = sort_pods(_node_pods(transport, node), options, report)
    deadline = clock() + options.timeout_s
    asked: list[Pod] = []
    last_refusal: dict[str, str] = {}
    while pending:
        still: list[Pod] = []
        for pod in pending:
            try:
                gate.submit(transport, eviction(transport.host.name, pod, node))
                asked.append(pod)
            except ChangeFailed as exc:
                message = exc.result.stderr.strip().rpartition("\n")[2] or str(exc)
                if server_refused(exc.result, "NotFound"):
                    asked.append(pod)  # gone already: what an eviction wanted
                elif server_refused(exc.result, "TooManyRequests"):
                    last_refusal[pod.ref] = message
                    still.append(pod)
                else:
                    report.not_evicted.append(PodLeft(pod.ref, f"eviction refused: {message}"))
        pending = still
        if pending and clock() + options.retry_every_s > deadline:
            for pod in pending:
                report.not_evicted.append(PodLeft(pod.ref, f"its PodDisruptionBudget allowed no eviction within "
                                                           f"{options.timeout_s:g} s ({last_refusal[pod.ref]})"))
            break
        if pending:
            sleep(options.retry_every_s)
    if not gate.apply:  # a dry run: every eviction recorded, none refused
        report.evicted = [pod.ref for pod in asked]
        return report
    _wait_gone(transport, node, asked, report, options, deadline, sleep, clock)
    return report


def pods_to_evict(transport: Transport | HostReader, node: str,
                  options: DrainOptions) -> tuple[list[Pod], list[PodLeft]]:
    """The pods a drain of ``node`` takes now and those it refuses (``sort_pods``), read through ``transport`` (a
    plan: its read-only view); a pod list that cannot be read is ``PodsUnreadable``."""
    report = DrainReport(node)
    return sort_pods(_node_pods(transport, node), options, report), report.not_evicted


def _node_pods(transport: Transport | HostReader, node: str) -> list[Pod]:
    """``read_pods``, a failed command raised as ``PodsUnreadable`` naming what to check; no cluster on the control
    plane (``cluster_access.no_cluster_here``) or a transport failure (unreachable...) is every host's: raised."""
    try:
        return read_pods(transport, node)
    except TransportError as exc:
        if exc.kind is not FailureKind.COMMAND_FAILED or no_cluster_here(exc):
            raise
        raise PodsUnreadable(FailureKind.COMMAND_FAILED, f"drain of {node} stopped: {exc.message}; check on "
                             f"{transport.host.name} that 'sudo {pods_command(node)}' lists them") from None


def eviction(cp: str, pod: Pod, node: str) -> Change:
    """The eviction of ``pod`` from ``node`` through the control plane ``cp``."""
    return Change.run(cp, eviction_command(pod), summary=f"evict pod {pod.ref} from node {node}", timeout_s=60,
                      makes=(MAKES_NO_TRACE, MAKES_EVICTION), node=node,
                      cannot_undo="an evicted pod is recreated by its controller, not brought back")


def _wait_gone(transport: Transport, node: str, asked: list[Pod], report: DrainReport, options: DrainOptions,
               deadline: float, sleep: Callable[[float], None], clock: Callable[[], float]) -> None:
    """Wait until every evicted pod has left the node (terminated), as kubectl drain waits for deletion."""
    waiting = {p.ref for p in asked}
    while waiting:
        present = {p.ref for p in _node_pods(transport, node)}
        report.evicted += sorted(waiting - present)
        waiting &= present
        if not waiting:
            return
        if clock() + min(options.retry_every_s, 2.0) > deadline:
            for ref in sorted(waiting):
                report.not_evicted.append(PodLeft(ref, f"evicted but still terminating after {options.timeout_s:g} s"))
            return
        sleep(min(options.retry_every_s, 2.0))
