"""Who goes out of service, decided from the cluster and marked there, one receiver at a time.

The receiver's hosts hand their requests here; one thread takes every request waiting, holds
the cluster's Lease (``cluster_lease``: the cap holds across receivers), reads the nodes once,
decides each request in arrival order and marks the nodes chosen (taint, cordon, annotations:
``quarantine_node`` without its drain), then gives the Lease back. Only the control plane is
touched while the Lease is held, and only for reads and the three marks of each node; the long
parts (the drain, Slurm on the host) run afterwards in the host's own queue.

What is out of service is the cluster's word, never this process's memory:

* ``duplicate``: the node is quarantined already (clusterctl's taint and cordon), or cordoned
  by someone else;
* ``complete``: a half-finished quarantine (clusterctl's taint or annotations without the
  cordon, or without each other: a receiver stopped between two changes) is finished; it
  counts as out already;
* ``act``: a node in service, with room under the cap (nodes out of service counted as they are
  now, plus those chosen before it in this batch); a host that ``clusterctl release`` brought
  back and that fails again is in service, so it is acted on;
* ``held``: no room under the cap;
* ``failed``: no such node, or the cluster could not be read or marked.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from clusterctl.cluster_access import read_nodes, reason
from clusterctl.errors import ClusterctlError
from clusterctl.facts.kube_nodes import KubeNode
from clusterctl.fanout.outcomes import failure_from
from clusterctl.quarantine import node_ops
from clusterctl.quarantine.cluster_lease import ClusterLease, Hold
from clusterctl.quarantine.policy import Action, Wanted, decide
from clusterctl.quarantine.run import QuarantineRequest, control_plane, quarantine_node
from clusterctl.utc import utc_stamp

if TYPE_CHECKING:
    from clusterctl.changes import Gate
    from clusterctl.fanout import Runner
    from clusterctl.inventory.model import Inventory
    from clusterctl.transport.base import Transport


#: Why a request the receiver had not marked yet when it was stopped fails (it is taken up again as an
#: alert that still fires, or from the pending-work file).
STOPPING = "the receiver is stopping: not decided, nothing marked (the next receiver takes it up)"


@dataclass
class MarkRequest:
    host: str
    request: QuarantineRequest
    #: The gate the marks go through (the host's, so its journal has them).
    gate: Gate
    verdict: str = ""
    why: str = ""
    done: list[str] = field(default_factory=list)
    #: The reason and codes a node quarantined already carries (kept: a repeat changes no annotation).
    kept: tuple[str, tuple[str, ...]] | None = None
    finished: threading.Event = field(default_factory=threading.Event)


def judge(node: KubeNode | None, out: set[str], limit: int) -> tuple[str, str]:
    """(verdict, why) for one node, given the nodes out of service and the cap (see the module text)."""
    if node is None:
        return "failed", "not a node of the cluster"
    ours = node_ops.is_quarantined(node)
    tainted = node.taint(node_ops.TAINT_KEY) is not None
    noted = node_ops.annotation("at") in node.annotations
    if ours and node.unschedulable and tainted and noted:
        return "duplicate", f"quarantined already (since {node.annotations[node_ops.annotation('at')]})"
    if node.unschedulable and not ours:
        return "duplicate", "cordoned outside clusterctl: left as it is"
    if ours:
        missing = [what for what, there in (("taint", tainted), ("cordon", node.unschedulable),
                                            ("annotations", noted)) if not there]
        return "complete", f"a half-finished quarantine (no {', no '.join(missing)}): finished"
    # In service: the cap is the one quarantine decision's (policy.decide), as for health --quarantine.
    (decision,) = decide([Wanted(node.name, drain=False, reason="in service")], out_of_service=out, limit=limit)
    return "held" if decision.action is Action.HELD else "act", decision.reason


class Marker:
    """Decides and marks, one batch at a time, in its own thread."""

    def __init__(self, inventory: Inventory, runner_factory: Callable[[], Runner], limit: Callable[[], int], *,
                 lease: ClusterLease | None, lease_wait_s: float = 120.0) -> None:
        self.inventory, self.runner_factory, self.limit = inventory, runner_factory, limit
        #: None: a dry run (no Lease is written, nothing is marked).
        self.lease = lease
        self.lease_wait_s = lease_wait_s
        self._lock = threading.Condition()
        self._waiting: list[MarkRequest] = []
        #: A dry run's own "would" decisions: counted against the cap as if they had been marked.
        self._would: set[str] = set()
        self._thread: threading.Thread | None = None
        #: Held by the batch's task on the control plane: a task the fan-out gave up on (its time limit)
        #: may still be running, and the next batch must not decide beside it under the same holder.
        self._deciding = threading.Lock()
        #: Set by ``stop``: no batch starts, no node is marked, no Lease is waited for.
        self._stopping = threading.Event()

    def stop(self, timeout_s: float) -> bool:
        """Stop deciding (Ctrl-C, SIGTERM): requests not yet marked fail ("the receiver is stopping"); the
        marks in flight for one node end, and the batch gives the Lease back as it ends. True once no batch
        holds the Lease; False when the one in flight did not end within ``timeout_s`` (its hold is then
        left to expire: giving the Lease back beside a node write in flight would let another receiver
        decide on a count that write has not reached)."""
        self._stopping.set()
        with self._lock:
            self._lock.notify_all()
        if not self._deciding.acquire(timeout=timeout_s):
            return False
        self._deciding.release()
        return True

    def decide(self, item: MarkRequest) -> MarkRequest:
        """Queue ``item`` for the next batch and wait for its verdict."""
        with self._lock:
            self._waiting.append(item)
            if self._thread is None:
                self._thread = threading.Thread(target=self._loop, name="remediate-marker", daemon=True)
                self._thread.start()
            self._lock.notify_all()
        item.finished.wait()
        return item

    def _loop(self) -> None:
        while True:
            with self._lock:
                self._lock.wait_for(lambda: bool(self._waiting))
                batch, self._waiting = self._waiting, []
            try:
                retry = [] if self._stopping.is_set() else self._run_batch(batch)
            except Exception as exc:  # never leave a host waiting on a verdict that cannot come
                retry = []
                for item in batch:
                    if not item.verdict:
                        item.verdict, item.why = "failed", failure_from(exc).message
            for item in batch:
                if not item.verdict and self._stopping.is_set():
                    item.verdict, item.why = "failed", STOPPING
                if item not in retry:
                    item.finished.set()
            if retry:
                with self._lock:
                    self._waiting = retry + self._waiting

    def _run_batch(self, batch: list[MarkRequest]) -> list[MarkRequest]:
        """Decide (and mark) ``batch``; the requests left for the next batch (the hold ran short)."""
        retry: list[MarkRequest] = []

        def task(transport: Transport) -> None:
            with self._deciding:
                hold = self.lease.acquire(transport, self.lease_wait_s, stopping=self._stopping.is_set) \
                    if self.lease is not None else None
                try:
                    self._decide_all(transport, batch, hold, retry)
                finally:
                    if hold is not None and self.lease is not None:
                        self.lease.release(transport, hold)

        try:
            cp = control_plane(self.inventory)
        except ClusterctlError as exc:
            for item in batch:
                item.verdict, item.why = "failed", str(exc)
            return []
        with self.runner_factory() as runner:
            timeout = self.lease_wait_s + 60.0 * (3 * len(batch) + 3)
            fleet = runner.run_task([cp], task, label="remediate", timeout_s=timeout)
        (outcome,) = fleet.outcomes
        if outcome.failure is not None:
            why = reason(outcome.failure)
            for item in batch:
                if not item.verdict:
                    item.verdict, item.why = "failed", f"the control plane {cp.name} failed ({why})"
            return []
        return retry

    def _decide_all(self, transport: Transport, batch: list[MarkRequest], hold: Hold | None,
                    retry: list[MarkRequest]) -> None:
        nodes = read_nodes(transport)
        out = {name for name, node in nodes.items() if node_ops.out_of_service(node)} | (self._would & set(nodes))
        limit = self.limit()
        for item in batch:
            if self._stopping.is_set():
                item.verdict, item.why = "failed", STOPPING
                continue
            if hold is not None and not hold.allows():
                retry.append(item)  # the hold is running short: the next batch decides it, under a new one
                continue
            node = nodes.get(item.host)
            item.verdict, item.why = judge(node, out, limit)
            earlier = node_ops.reason_and_codes(node) if node is not None else ("", ())
            if earlier[0]:
                item.kept = earlier
            if item.verdict not in ("act", "complete"):
                continue
            out.add(item.host)
            if hold is None:
                self._would.add(item.host)
                continue
            reason, codes = item.kept or (item.request.reason, item.request.codes)
            marked = quarantine_node(transport, item.gate, item.host,
                                     QuarantineRequest(reason, codes, drain=False, who=item.request.who),
                                     when=utc_stamp())
            item.done = list(marked.done)
            if marked.error:
                item.verdict, item.why = "failed", marked.error
