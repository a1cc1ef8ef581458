"""``clusterctl remove-node HOST``: take one host out of the cluster, in kubeadm's order.

kubeadm's documentation ("kubeadm reset", "Remove the node"): drain the node, ``kubeadm
reset`` on it (for a control plane with stacked etcd its etcd member leaves first: ``kubeadm
reset phase remove-etcd-member``), clean up what reset leaves (CNI, iptables: bootstrap's own
``reset`` phase), then ``kubectl delete node``. The Node object goes last, once the kubelet is
gone, or the still-running kubelet would register it again.

A control plane is refused when its member leaving would break etcd's quorum: with stacked
etcd each control-plane node runs one member, so after the removal the healthy members left
must still be a majority of the members left. The last control plane is refused too (that is
the end of the cluster: ``clusterctl reset``). The host stays in the inventory: a later
``clusterctl bootstrap`` joins it again as a fresh node.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from clusterctl.changes import Change, Gate
from clusterctl.day2.drain import DEFAULT_DRAIN_TIMEOUT_S, DrainFailed, drain_change, drain_node
from clusterctl.day2.steps import Step
from clusterctl.errors import UsageError
from clusterctl.facts.kube import kubectl, parse_nodes
from clusterctl.secret import mask_text

if TYPE_CHECKING:
    from clusterctl.facts.kube import KubeNode
    from clusterctl.fanout import Runner
    from clusterctl.inventory.model import Host, Inventory
    from clusterctl.transport.base import Transport

CONTROL_PLANE_LABEL = "node-role.kubernetes.io/control-plane"


@dataclass
class RemovalReport:
    host: str
    control_plane: bool
    applied: bool
    #: Host whose kubectl the cluster-side steps use.
    via: str
    etcd: str = ""
    steps: list[Step] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    failed: str | None = None

    @property
    def nothing_to_do(self) -> bool:
        return not any(s.changes for s in self.steps)

    def to_json(self) -> dict[str, Any]:
        return {"host": self.host, "control_plane": self.control_plane, "mode": "apply" if self.applied else "plan",
                "via": self.via, "etcd": self.etcd, "ok": self.failed is None, "nothing_to_do": self.nothing_to_do,
                "failed": mask_text(self.failed) if self.failed else None,
                "steps": [s.to_json() for s in self.steps], "notes": self.notes}


def quorum_check(members: list[KubeNode], leaving: str) -> str:
    """Why removing ``leaving`` would break etcd's quorum ("" when it would not): one member per control plane."""
    left = [m for m in members if m.name != leaving]
    if not left:
        return f"{leaving} is the last control plane: removing it ends the cluster (use 'clusterctl reset')"
    healthy = [m for m in left if m.ready]
    needed = len(left) // 2 + 1
    if len(healthy) < needed:
        sick = ", ".join(m.name for m in left if not m.ready)
        return (f"removing {leaving} would leave {len(healthy)} healthy etcd member(s) of {len(left)}; quorum needs "
                f"{needed} (not Ready: {sick}). Bring those back first")
    return ""


def remove_node(inventory: Inventory, name: str, runner: Runner, *, apply: bool,
                drain_timeout_s: float = DEFAULT_DRAIN_TIMEOUT_S) -> RemovalReport:
    from clusterctl.bootstrap.cluster.settings import control_plane_hosts
    from clusterctl.day2.phases import run_phases

    host = next((h for h in inventory.hosts if h.name == name), None)
    if host is None:
        raise UsageError(f"there is no host named {name!r} in the inventory", field="HOST")
    via = next((h for h in control_plane_hosts(inventory) if h.name != name), None)
    is_cp = "control-plane" in host.roles
    if via is None:
        raise UsageError(f"{name} is the only control plane: removing it ends the cluster.",
                         hint="Use 'clusterctl reset' to take the whole cluster down.")
    nodes = _nodes(runner, via)
    node = nodes.get(name)
    report = RemovalReport(name, is_cp, apply, via.name)
    if is_cp or (node is not None and CONTROL_PLANE_LABEL in node.labels):
        report.control_plane = True
        members = [n for n in nodes.values() if CONTROL_PLANE_LABEL in n.labels]
        why = quorum_check(members, name)
        if why:
            raise UsageError(f"refusing to remove {name}: {why}.", field="HOST")
        left = [m for m in members if m.name != name]
        report.etcd = f"{len(members)} etcd member(s) now, {len(left)} after ({sum(m.ready for m in left)} Ready)"
    q = shlex.quote
    if node is not None:
        report.steps.append(Step("drain", via.name, f"drain {name}",
                                        [drain_change(via.name, name, drain_timeout_s)]))
    else:
        report.notes.append(f"{name} is not a node of the cluster: nothing to drain or delete")
    if report.control_plane and node is not None:
        report.steps.append(Step("etcd-member", name, f"{name}'s etcd member leaves the cluster", [
            Change.run(name, "kubeadm reset phase remove-etcd-member", timeout_s=180,
                       summary="kubeadm reset phase remove-etcd-member")]))
    reset = run_phases(runner, inventory, [host], ["reset"], apply=False)
    reset_changes = [c for r in reset.results for c in r.changes]
    if reset.failed_hosts:
        raise UsageError(f"cannot plan the reset of {name}: {reset.failed_hosts[name]}")
    report.steps.append(Step("reset", name, "kubeadm reset and what it leaves (bootstrap's reset phase)",
                                    reset_changes))
    if node is not None:
        report.steps.append(Step("delete-node", via.name, f"delete the Node object {name}", [
            Change.run(via.name, kubectl(f"delete node {q(name)} --ignore-not-found"),
                       summary=f"kubectl delete node {name}")]))
    if not apply:
        return report
    gate = Gate(apply=True)
    for step in report.steps:
        if not step.changes:
            step.status = "done"
            continue
        try:
            if step.name == "reset":
                done = run_phases(runner, inventory, [host], ["reset"], apply=True)
                if done.failed_hosts:
                    raise RuntimeError(done.failed_hosts[name])
            else:
                target = via if step.runs_on == via.name else host

                def task(transport: Transport, step: Step = step) -> None:
                    _run(transport, gate, step, name, drain_timeout_s)

                outcome = runner.run_task([target], task, label=step.name,
                                          timeout_s=max(runner.timeout_s, drain_timeout_s + 60))
                result = outcome.outcomes[0]
                if not result.ok:
                    raise RuntimeError(result.failure.message if result.failure else "no result")
            step.status = "done"
        except (RuntimeError, DrainFailed) as exc:
            step.status, step.message = "failed", str(exc)
            report.failed = f"step {step.name}: {exc}"
            for later in report.steps[report.steps.index(step) + 1:]:
                later.status = "not started"
            break
    return report


def _run(transport: Transport, gate: Gate, step: Step, node: str, drain_timeout_s: float) -> None:
    if step.name == "drain":
        drain_node(transport, gate, node, drain_timeout_s)
    else:
        gate.submit_all(transport, step.changes)


def _nodes(runner: Runner, via: Host) -> dict[str, KubeNode]:
    from clusterctl.cluster_access import command_failed, on_control_plane
    from clusterctl.facts.kube import NODES_COMMAND

    def read(transport: Transport) -> dict[str, KubeNode]:
        result = transport.run(NODES_COMMAND, sudo=True, timeout=60)
        if not result.ok:
            raise command_failed(result)
        return {n.name: n for n in parse_nodes(result.stdout)}

    return on_control_plane(runner, via, read, what="read the cluster's nodes", label="nodes")
