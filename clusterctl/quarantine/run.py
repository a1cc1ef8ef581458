"""``quarantine`` as one call: taint, cordon, annotate and (asked) drain nodes; drain them in Slurm too.

The Kubernetes side runs on the inventory's first control-plane host (kubectl as root with the
admin kubeconfig, as bootstrap does), one node after the other; the Slurm side runs on each
quarantined host that runs ``slurmd``. Every change passes the one ``Gate`` given by the caller
(record mode for ``--dry-run``), so the caller keeps one journal that ``clusterctl undo`` reads.
A host that is not a node of the cluster, or whose drain leaves pods, is reported for that
host; the others go on.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from clusterctl.changes import ChangeFailed, Gate
from clusterctl.cluster_access import UnreadableAnswer, read_node
from clusterctl.cluster_access import on_control_plane as through
from clusterctl.engine.journaled import journaled_gate
from clusterctl.engine.lock import who_runs_this
from clusterctl.errors import UsageError
from clusterctl.hostlist import compress
from clusterctl.quarantine import node_ops, slurm
from clusterctl.quarantine.drain import DrainOptions, DrainReport, PodsUnreadable, drain_node
from clusterctl.terminal_text import one_line
from clusterctl.utc import utc_stamp

if TYPE_CHECKING:
    from clusterctl.fanout import Runner
    from clusterctl.inventory.model import Host, Inventory
    from clusterctl.slurm_changes import SlurmOutcome
    from clusterctl.transport.base import Transport


@dataclass(frozen=True)
class QuarantineRequest:
    reason: str
    #: Finding codes that led here (health, an alert); the first is the taint's value.
    codes: tuple[str, ...] = ()
    drain: bool = False
    drain_options: DrainOptions = field(default_factory=DrainOptions)
    #: Who asked: ``user@machine`` (the annotation); default: this process's user and machine.
    who: str | None = None


@dataclass
class HostQuarantine:
    host: str
    #: What was done (or would be), one line per change, in order.
    done: list[str] = field(default_factory=list)
    drain: DrainReport | None = None
    #: Slurm's part (``None``: not asked): drained, already drained, no slurmd, or an error.
    slurm: SlurmOutcome | None = None
    error: str | None = None
    already: bool = False
    #: False: no Kubernetes node of that name (a Slurm-only host): Slurm is all there is to do.
    kubernetes_node: bool = True

    @property
    def ok(self) -> bool:
        return self.error is None and (self.drain is None or self.drain.complete)

    def to_json(self) -> dict[str, object]:
        return {"host": self.host, "ok": self.ok, "already_quarantined": self.already, "done": self.done,
                "kubernetes_node": self.kubernetes_node,
                "drain": self.drain.to_json() if self.drain else None, "slurm": self.slurm.said if self.slurm else "",
                "error": self.error}


def control_plane(inventory: Inventory) -> Host:
    host = inventory.first_control_plane
    if host is None:
        raise UsageError("no host has the control-plane role: quarantine reaches the cluster through the first "
                         "control-plane host", field="hosts", hint="Give one host 'roles: [control-plane]'.")
    return host


def quarantine_node(transport: Transport, gate: Gate, name: str, request: QuarantineRequest,
                    *, when: str) -> HostQuarantine:
    """Taint, cordon, annotate and (asked) drain one node through ``transport`` (the control plane)."""
    outcome = HostQuarantine(name)
    try:
        node = read_node(transport, name)
    except UnreadableAnswer as exc:  # kubectl answered, but not a node clusterctl can read: this host's failure
        outcome.error = f"{name} was not quarantined: its node could not be read ({one_line(exc.message)})"
        return outcome
    if node is None:
        outcome.kubernetes_node = False  # a Slurm-only host, or no node at all: the Slurm side says which
        return outcome
    outcome.already = node_ops.is_quarantined(node)
    code = node_ops.taint_value(request.codes[0] if request.codes else request.reason)
    cp = transport.host.name
    annotations = node_ops.quarantine_annotations(who=request.who or "@".join(who_runs_this()), when=when,
                                                  reason=request.reason, codes=list(request.codes))
    if outcome.already:
        # A second quarantine keeps the first one's who and when: status says since when.
        annotations.update({key: kept for key in map(node_ops.annotation, ("by", "at"))
                            if (kept := node.annotations.get(key))})
    else:
        annotations.update(node_ops.with_history(node, when))
    changes = node_ops.taint(cp, node, code) + node_ops.cordon(cp, node) + node_ops.annotate(cp, node, annotations)
    try:
        for record in gate.submit_all(transport, changes):
            outcome.done.append(record.change.summary)
    except ChangeFailed as exc:
        outcome.error = str(exc)
        return outcome
    if request.drain:
        # One node's unreadable pod list fails that host's drain only (what it evicted is in the journal).
        try:
            outcome.drain = drain_node(transport, gate, name, request.drain_options)
        except PodsUnreadable as exc:
            outcome.error = exc.message
    return outcome


def quarantine_hosts(runner: Runner, inventory: Inventory, hosts: Sequence[Host], request: QuarantineRequest,
                     gate: Gate) -> list[HostQuarantine]:
    """Quarantine ``hosts`` (Kubernetes through the first control plane, then Slurm on each host)."""
    if not hosts:
        raise UsageError("no host to quarantine")
    if not request.reason.strip():
        raise UsageError("--reason must say why (it is kept on the node for whoever looks next)")
    cp = inventory.first_control_plane  # None: a Slurm-only cluster
    when = utc_stamp()

    timeout = 120.0 + len(hosts) * (request.drain_options.timeout_s + 120.0 if request.drain else 60.0)
    if cp is None:  # a Slurm-only cluster: no Kubernetes side at all
        done = [HostQuarantine(h.name, kubernetes_node=False) for h in hosts]
    else:
        done = through(runner, cp, lambda t: [quarantine_node(t, gate, h.name, request, when=when) for h in hosts],
                       what="quarantine " + compress([h.name for h in hosts]), label="quarantine", timeout_s=timeout)
    results = {r.host: r for r in done}
    # Every host is drained in Slurm, whatever its Kubernetes side answered (a drain whose pods could not
    # be read included): a host being quarantined takes no new job. Its first failure stays its error.
    for host_name, outcome in slurm.drain_or_resume(runner, hosts, gate, request.reason).items():
        result = results[host_name]
        result.slurm = outcome
        if outcome.failed:
            result.error = result.error or outcome.said
        elif not result.kubernetes_node and not outcome.runs_slurmd:
            result.error = f"{host_name} is not a node of the cluster (kubectl get node: NotFound) and runs no slurmd"
    return [results[h.name] for h in hosts]


def quarantine(runner: Runner, inventory: Inventory, hosts: Sequence[Host], request: QuarantineRequest, *,
               apply: bool, state_dir: str | None = None) -> tuple[list[HostQuarantine], str | None]:
    """``clusterctl quarantine``: ``quarantine_hosts`` through the engine's journaled gate (each change in
    the undo journal before it reaches the cluster, the journal finished on Ctrl-C too); the results
    and the journal (``None``: nothing changed, or a dry run)."""
    with journaled_gate("quarantine", inventory, apply=apply, state_dir=state_dir) as step:
        results = quarantine_hosts(runner, inventory, hosts, request, step.gate)
    return results, step.journal
