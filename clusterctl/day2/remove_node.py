"""``clusterctl remove-node HOST``: take one host out of the cluster, in kubeadm's order.

kubeadm's documentation ("kubeadm reset", "Remove the node"): drain the node, ``kubeadm
reset`` on it (for a control plane with stacked etcd its etcd member leaves first: ``kubeadm
reset phase remove-etcd-member``), clean up what reset leaves (CNI, iptables: bootstrap's own
``reset`` phase), then ``kubectl delete node``. The Node object goes last, once the kubelet is
gone, or the still-running kubelet would register it again. These are phases on the action engine
(``REMOVAL``: ``drain`` and ``delete-node`` run from another control plane, ``etcd-member`` and
bootstrap's ``reset`` on the host), with its lock, undo journal and interrupt handling.

A node that is gone (no SSH answer, its Node NotReady) takes kubeadm's path for a node that is
gone: drain what the API can drain without waiting for a kubelet that will not answer (its pods
go when the Node does: the pod garbage collector), delete the Node, skip the reset, and say what
was left on the dead host (its kubelet would register the Node again were it to come back).

A control plane, alive or gone, is refused when its etcd member leaving would break etcd's quorum,
as etcd itself tells it (never by the Nodes' Ready: a NotReady kubelet may run a healthy etcd member,
a Ready one a dead member): from another control plane, read the members (``etcdctl member list``)
and their health (``etcdctl endpoint health --cluster``); the members left that answer healthy must
be a majority of those left. The member is the one named after the node, or with a peer URL at its
address. etcdctl runs in a control plane's etcd static pod (``clusterctl.facts.etcd``), the first of
them that answers; none answering refuses, unless the cluster's etcd is external (kubeadm's
``etcd.external``): a control plane then has no member, and nothing is removed from etcd. A control
plane that is gone takes the same path as a node that is gone plus kubeadm's step for its member
(kubeadm's docs, "Remove the node" for a control plane that cannot run ``kubeadm reset``): removed by
its ID (``etcdctl member remove``) before the Node is deleted. The last control plane is refused (that
is the end of the cluster: ``clusterctl reset``). The host stays in the inventory: a later
``clusterctl bootstrap`` joins it again as a fresh node.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from clusterctl.bootstrap.registry import phase_named
from clusterctl.bootstrap.run import BootstrapRequest, run_bootstrap, run_options
from clusterctl.changes import Change
from clusterctl.cluster_access import cluster_nodes, on_control_plane, read_answer, read_node
from clusterctl.day2.drain import DEFAULT_DRAIN_TIMEOUT_S, DrainNode
from clusterctl.engine.phase import Phase, PhaseContext, ReadsNothing
from clusterctl.engine.progress import RunPlace
from clusterctl.engine.run import GivenOptions, RunSettings, SkipReason, Status, command_line, step_json
from clusterctl.errors import UsageError
from clusterctl.facts.etcd import (
    CLUSTER_CONFIGURATION,
    EndpointHealth,
    EtcdMember,
    etcd_quorum,
    etcdctl,
    member_of,
    parse_endpoint_health,
    parse_external_etcd,
    parse_member_list,
)
from clusterctl.facts.kube import kubectl
from clusterctl.facts.kube_nodes import KubeNode
from clusterctl.secret import mask_text
from clusterctl.transport.base import FailureKind, TransportError

#: Why undo does not bring a removed node back.
REJOIN = "a removed node comes back only by joining again ('clusterctl bootstrap')"

if TYPE_CHECKING:
    from clusterctl.engine.run import RunReport
    from clusterctl.fanout import Runner
    from clusterctl.inventory.model import Host, Inventory
    from clusterctl.transport.base import Transport

CONTROL_PLANE_LABEL = "node-role.kubernetes.io/control-plane"
#: ``RemovalReport.etcd`` where the cluster's etcd is external (kubeadm's ``etcd.external``).
EXTERNAL = "external"


@dataclass
class RemovalReport:
    host: str
    control_plane: bool
    applied: bool
    #: Host whose kubectl the cluster-side phases use.
    via: str
    etcd: str = ""
    #: One row per phase that concerns the host: its name, where it runs, its engine ``Status``, changes.
    steps: list[dict[str, Any]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    failed: str | None = None
    undo_journal: str | None = None

    @property
    def nothing_to_do(self) -> bool:
        return self.failed is None and not any(s["changes"] for s in self.steps)

    def to_json(self) -> dict[str, Any]:
        return {"host": self.host, "control_plane": self.control_plane, "mode": "apply" if self.applied else "plan",
                "via": self.via, "etcd": self.etcd, "ok": self.failed is None, "nothing_to_do": self.nothing_to_do,
                "failed": mask_text(self.failed) if self.failed else None, "undo_journal": self.undo_journal,
                "steps": [step_json(s) for s in self.steps],
                "notes": self.notes}


class EtcdMemberLeaves(ReadsNothing, Phase[None, PhaseContext]):
    name = "etcd-member"
    description = "the node's etcd member leaves the cluster (kubeadm reset phase remove-etcd-member)"

    def plan(self, ctx: PhaseContext, state: None) -> list[Change]:
        return [Change.run(ctx.host.name, "kubeadm reset phase remove-etcd-member", timeout_s=180,
                           summary="kubeadm reset phase remove-etcd-member", cannot_undo=REJOIN)]


class DeadMemberRemoved(Phase["EtcdMember | None", PhaseContext]):
    """The etcd member of a control plane that is gone leaves, removed by its ID in the etcd pod of a
    healthy control plane (``etcdctl member remove``, through ``via``'s kubectl); the quorum was checked
    before the run began."""

    name = "etcd-member"
    description = "remove the dead node's etcd member, from a healthy control plane (etcdctl member remove)"
    via: str

    def __init__(self, via: str, pod: str, member: EtcdMember) -> None:
        self.via, self.pod, self.member = via, pod, member

    def check(self, ctx: PhaseContext) -> EtcdMember | None:
        # Read again: a second run (after an interrupt) finds the member gone and has nothing to do.
        members = read_answer(ctx.reader, etcdctl(self.pod, "member list -w json"), parse_member_list)
        return next((m for m in members if m.id == self.member.id), None)

    def plan(self, ctx: PhaseContext, state: EtcdMember | None) -> list[Change]:
        if state is None:
            return []
        label = state.name or ", ".join(state.peer_urls)
        return [Change.run(self.via, etcdctl(self.pod, f"member remove {state.hex_id}"), timeout_s=60,
                           summary=f"etcdctl member remove {state.hex_id} ({label}), in etcd-{self.pod}",
                           cannot_undo=REJOIN)]


class DeleteNode(Phase["KubeNode | None", PhaseContext]):
    """The Node deleted from the control plane ``via``; its state: the Node as the API shows it, or None."""

    name = "delete-node"
    description = "delete the Node object (once the kubelet is gone)"
    via: str

    def __init__(self, via: str) -> None:
        self.via = via

    def check(self, ctx: PhaseContext) -> KubeNode | None:
        return read_node(ctx.reader, ctx.host.name)

    def plan(self, ctx: PhaseContext, state: KubeNode | None) -> list[Change]:
        if state is None:
            return []
        name = ctx.host.name
        return [Change.run(self.via, kubectl(f"delete node {shlex.quote(name)} --ignore-not-found"),
                           summary=f"kubectl delete node {name}", cannot_undo=REJOIN)]


def remove_node(inventory: Inventory, host: Host, runner: Runner, *, apply: bool,
                drain_timeout_s: float = DEFAULT_DRAIN_TIMEOUT_S, state_dir: str | None = None,
                given: GivenOptions = GivenOptions()) -> RemovalReport:
    """``given``: the command's options as typed, which the line that goes on after an interrupt keeps."""
    name = host.name
    via = next((h for h in inventory.control_planes if h.name != name), None)
    if via is None:
        raise UsageError(f"{name} is the only control plane: removing it ends the cluster.",
                         hint="Use 'clusterctl reset' to take the whole cluster down.")
    nodes = cluster_nodes(runner, via)
    node = nodes.get(name)
    is_cp = host.is_control_plane
    report = RemovalReport(name, is_cp or (node is not None and CONTROL_PLANE_LABEL in node.labels), apply, via.name)
    if node is None:
        report.notes.append(f"{name} is not a node of the cluster: nothing to drain or delete")
    gone = _unreachable(runner, host)
    if gone:
        _may_remove_gone(name, gone, node, report)
    found = _etcd_member(runner, via, host, nodes, report) if report.control_plane else None
    reset = phase_named("reset")
    drain, delete = DrainNode(via.name, drain_timeout_s, gone=bool(gone)), DeleteNode(via.name)
    leaves = report.control_plane and node is not None and report.etcd != EXTERNAL
    phases: list[Phase[Any, Any]] = [drain, *([EtcdMemberLeaves()] if leaves else []), reset, delete]
    if gone:
        # Nothing can run on the host: only what the cluster's API (and etcd) do for it, from another
        # control plane.
        phases = [drain, *([DeadMemberRemoved(via.name, *found)] if found else []), delete]
        if found:
            report.notes.append(f"Its etcd member is removed by its ID from {via.name}, etcd's quorum checked first.")
    place = RunPlace.of(inventory, "remove-node", state_dir)
    settings = RunSettings(apply=apply, options=run_options(inventory, [host], [reset], BootstrapRequest(apply=apply)),
                           journal=place.journal(f"remove-node {name}") if apply else None,
                           # Each phase reads where the host stands: a second run goes on from there.
                           resume_hint=command_line("remove-node", name, given=given, resume=False))
    run = run_bootstrap(inventory, [host], runner, phases, settings)
    _fill(report, run, {p.name: p for p in phases})
    return report


def _unreachable(runner: Runner, host: Host) -> str:
    """Why ``host`` does not answer over SSH ("" when it does): unreachable or timed out only."""
    fleet = runner.run_task([host], lambda t: t.run("true", timeout=20), label="reach", timeout_s=60)
    failure = fleet.outcomes[0].failure
    return failure.describe() if failure and failure.kind in (FailureKind.UNREACHABLE, FailureKind.TIMED_OUT) else ""


def _may_remove_gone(name: str, why: str, node: KubeNode | None, report: RemovalReport) -> None:
    """kubeadm's path for a node that is gone, where it is safe; a refusal naming what to do where not."""
    if node is not None and node.ready:
        raise UsageError(f"refusing to remove {name}: it does not answer over SSH ({why}) but its Node is Ready: "
                         "the cluster still hears its kubelet, so the path from here to it is what is broken.",
                         field="HOST", hint="Fix the SSH path (clusterctl -l HOST exec -- true) and run this again.")
    report.notes.append(
        f"{name} does not answer ({why}): it is removed as a node that is gone: what the API could evict is "
        "evicted (its pods go with the Node), the Node is deleted, and its reset is skipped.")
    etcd_data = ", its etcd data in /var/lib/etcd" if report.control_plane else ""
    report.notes.append(
        f"left on {name}: everything bootstrap put there (kubelet and its config, /etc/kubernetes, containerd, the "
        f"CNI's files{etcd_data}); if it comes back its kubelet registers the Node again: run "
        f"'clusterctl -l {name} reset --yes' first, or reinstall it.")


def _fill(report: RemovalReport, run: RunReport, phases: dict[str, Phase[Any, Any]]) -> None:
    for result in run.results:
        if result.skipped is SkipReason.NOT_THIS_HOST:
            continue
        phase = phases[result.phase]
        if isinstance(phase, (DrainNode, DeleteNode)) and not result.changes and result.status is not Status.FAILED:
            continue  # not a node of the cluster (or nothing on it): nothing to drain or delete, nor wait for
        report.steps.append(result.step(phase.description, phase.via or report.host))
    if run.failed_hosts:
        report.failed = "; ".join(run.failed_hosts.values())
    report.notes += run.notes
    report.undo_journal = run.undo_journal


def _etcd_member(runner: Runner, via: Host, host: Host, nodes: dict[str, KubeNode],
                 report: RemovalReport) -> tuple[str, EtcdMember] | None:
    """The etcd pod that answered and the control plane's etcd member (the members and their health are
    read in each other control plane's etcd pod in turn, ``via``'s first, through ``via``'s kubectl); a
    refusal when removing it would break etcd's quorum, or when no pod answered. None (and a note) when
    it has no member: none left, or an external etcd."""
    pods = [via.name, *(n for n, node in nodes.items()
                        if CONTROL_PLANE_LABEL in node.labels and n not in (via.name, host.name))]

    def read(transport: Transport) -> tuple[str, list[EtcdMember], list[EndpointHealth]] | str:
        """The pod that answered, the members and their health; else ``EXTERNAL``, or what was tried."""
        tried = []
        for pod in pods:
            try:
                return (pod, read_answer(transport, etcdctl(pod, "member list -w json"), parse_member_list),
                        read_answer(transport, etcdctl(pod, "endpoint health --cluster -w json"),
                                    parse_endpoint_health, stdout_answers=True))
            except TransportError as exc:
                tried.append(f"etcd-{pod} ({exc})")
        # Asked only once no etcd pod answered (a stacked etcd pays nothing for it). kubeadm's own
        # ClusterConfiguration, not the etcd pods' absence: kubeadm decides by it (reset and upgrade leave an
        # external etcd alone), and a stacked etcd whose pods are missing or down never reads as external.
        try:
            return EXTERNAL if read_answer(transport, CLUSTER_CONFIGURATION, parse_external_etcd) else "; ".join(tried)
        except TransportError as exc:  # not known to be external: refused as stacked, the reason named
            return "; ".join([*tried, f"the kubeadm-config ConfigMap ({exc})"])

    answer = on_control_plane(runner, via, read, what="read etcd's members (etcdctl in the etcd pods)", label="etcd")
    if answer == EXTERNAL:
        report.etcd = EXTERNAL
        report.notes.append("external etcd: its members are not the cluster's to change; nothing removed from etcd")
        return None
    if isinstance(answer, str):
        raise UsageError(f"refusing to remove {host.name}: no etcd member answered, so etcd's quorum cannot be "
                         f"checked (tried {answer}). Nothing was changed.", field="HOST",
                         hint="Bring a control plane's etcd back, then run this again.")
    pod, members, health = answer
    member = member_of(members, host.name, host.address or "")
    healthy = sum(1 for h in health if h.healthy)
    if member is None:
        report.etcd = f"{len(members)} etcd member(s), {healthy} healthy; none is {host.name}'s"
        report.notes.append(f"etcd has no member named {host.name} or with a peer URL at {host.address}: "
                            "nothing to remove from etcd")
        return None
    why = etcd_quorum(members, health, member)
    if why:
        raise UsageError(f"refusing to remove {host.name}: {why}. Nothing was changed.", field="HOST",
                         hint=f"See 'kubectl -n kube-system exec etcd-{pod} -- etcdctl ... endpoint health "
                              "--cluster' (the command is in docs/day2.md).")
    left = [m for m in members if m.id != member.id]
    report.etcd = (f"{len(members)} etcd member(s) now, {len(left)} after; {healthy} healthy; removing "
                   f"{member.hex_id} ({member.name or host.address})")
    return pod, member
