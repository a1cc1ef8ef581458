"""``remediate serve``: an Alertmanager webhook receiver that quarantines the hosts alerts name.

Alertmanager POSTs its webhook payload (version 4: ``{"version": "4", "status": ...,
"alerts": [{"status": "firing", "labels": {"alertname": ..., "Hostname": ...}, ...}]}``). For
each firing alert the receiver finds the host (label ``Hostname`` as dcgm-exporter sets it, else
``hostname``, ``node``, ``instance`` without its port), decides what the alert asks
(``ALERT_ACTIONS``, overridden by the inventory's ``quarantine.alerts``) and answers at once:
the work is queued per host (``host_queue``), so one hung host (a drain a budget holds up, a
host that does not answer) delays no other host and no answer:

* a host not in the inventory is never acted on (logged);
* each host's work asks the cluster, under its Lease (``cluster_marker``), whether the host is
  out of service already: quarantined (a repeat: ``duplicate``), half quarantined (finished),
  or back in service after ``clusterctl release`` (acted on again);
* never more than ``--max-unavailable`` hosts out of service at once (cordoned nodes count),
  across every receiver of the cluster; the alerts over the cap are logged as held;
* then, outside the Lease, the same quarantine path as ``clusterctl quarantine`` (drain, Slurm),
  and an undo journal per host;
* a body that is not a webhook payload is answered 400 and changes nothing; one alert that cannot be
  read among alerts that can (a label over its size) is ``rejected`` alone, named, and the others are
  decided (a 400 would make Alertmanager drop its whole group).

Every decision is one JSON line in the log (``time``, ``host``, ``alert``, ``decision``, ``why``).
``Remediator.handle`` is the logic; ``serve`` wraps it in ``webhook_server``.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, TextIO

from clusterctl.changes import Gate
from clusterctl.engine.journaled import journaled_gate
from clusterctl.errors import ClusterctlError, Interrupted
from clusterctl.fanout.outcomes import failure_from
from clusterctl.quarantine import webhook_server
from clusterctl.quarantine.cluster_lease import ClusterLease
from clusterctl.quarantine.cluster_marker import Marker, MarkRequest
from clusterctl.quarantine.drain import DrainOptions
from clusterctl.quarantine.host_queue import HostQueue
from clusterctl.quarantine.pending_work import PendingHost, PendingWork
from clusterctl.quarantine.policy import cap
from clusterctl.quarantine.run import QuarantineRequest, quarantine_hosts
from clusterctl.quarantine.webhook_payload import HOST_LABELS, BadPayload, DecisionLog, parse_payload
from clusterctl.undo_journal import undo_line, undoable
from clusterctl.wording import plural

if TYPE_CHECKING:
    from clusterctl.inventory.model import Host, Inventory

#: How long a stopping receiver waits for the node marks in flight before it leaves the Lease to expire
#: (each mark is one kubectl call; three per node).
STOP_WAIT_S = 20.0
#: Unreadable alerts of one POST named one by one in the log and the answer; the rest are counted in one
#: line, so a body of a million empty alerts beside a good one cannot write a million log lines.
REJECTED_NAMED = 20

#: What each of bootstrap's DCGM alert rules asks of the receiver by default.
ALERT_ACTIONS: dict[str, str] = {
    "GPUFellOffTheBus": "drain", "GPURowRemapFailure": "drain", "GPUDoubleBitECCErrors": "drain",
    "NVLinkBandwidthZero": "drain", "GPUXidError": "quarantine", "NVLinkCRCErrors": "quarantine",
    "GPUUncorrectableRemappedRows": "report", "GPUTemperatureHigh": "report", "GPUMemoryTemperatureHigh": "report",
    "GPUPowerAtLimit": "report", "GPUPCIeReplaysRising": "report",
    # The node health agent's rules (phase node-agent): an error-level finding on the node itself.
    "NodeHealthCheckFailed": "quarantine", "NodeHealthAgentStale": "report", "NodeHealthAgentCannotPublish": "report",
}


@dataclass
class Remediator:
    """The receiver: accepts webhook bodies at once, acts per host in the background (thread-safe)."""

    inventory: Inventory
    runner_factory: Callable[[], Any]
    log: TextIO
    dry_run: bool = False
    max_unavailable: str | None = None
    drain_options: DrainOptions = field(default_factory=DrainOptions)
    #: The state folder (``--state-dir``, made absolute at start): the undo journals go to its ``undo``.
    state_dir: str | None = None
    clock: Callable[[], float] = time.time
    #: The cluster's Lease this receiver decides under (another receiver of the cluster shares it).
    lease: ClusterLease = field(default_factory=ClusterLease)
    #: Hosts worked on at once (each in its own thread); more wait their turn.
    workers: int = 32
    #: Where accepted alerts wait until acted on (``pending_work``); None: kept in memory only.
    pending_file: str | None = None
    #: Called in the host's own queue once it is drained (``remediate serve --heal``: the escalation chain
    #: and the validated return, ``clusterctl.heal``), with a runner and the host; it logs through ``say``.
    after_drain: Callable[[Any, Host, Callable[..., None]], None] | None = None

    def __post_init__(self) -> None:
        self.decision_log = DecisionLog(self.log, self.clock)
        self._say = self.decision_log.say
        self._by_label: dict[str, Host] = {label: host for host in self.inventory.hosts
                                           for label in (host.connect_address, host.address, host.name) if label}
        self._marker = Marker(self.inventory, self.runner_factory, self._limit,
                              lease=None if self.dry_run else self.lease)
        self._queue: HostQueue[PendingHost] = HostQueue(self._work, PendingHost.merged, self._crashed,
                                                    workers=self.workers)
        self._pending = PendingWork(self.pending_file) if self.pending_file and not self.dry_run else None
        self._stopping = threading.Event()
        #: The runners of the work in flight (a drain, a heal's chain): ``stop`` interrupts their runs.
        self._runners: set[Any] = set()
        self._runners_lock = threading.Lock()

    def _limit(self) -> int:
        return cap(self.max_unavailable or self.inventory.quarantine.max_unavailable, len(self.inventory.hosts))

    def handle(self, body: bytes, caller: str = "") -> tuple[int, dict[str, Any]]:
        """One POST: (HTTP status, JSON answer), at once. 400 for a bad body, with nothing done; else each
        alert is decided on its face (ignored, reported, rejected: it cannot be read) or accepted and
        queued for its host."""
        try:
            alerts, unreadable, truncated = parse_payload(body)
        except BadPayload as exc:
            self._say(decision="rejected", caller=caller, why=str(exc))
            return 400, {"error": str(exc)}
        decisions: list[dict[str, str]] = []

        def note(host: str, alert: str, decision: str, why: str) -> None:
            # A rejection's reason goes back to the caller too: only it says what to mend in the alert.
            decisions.append({"host": host, "alert": alert, "decision": decision,
                              **({"why": why} if decision == "rejected" else {})})
            self._say(host=host, alert=alert, decision=decision, why=why, **({"caller": caller} if caller else {}))

        for alert in alerts:
            host = self._by_label.get(alert.host_label)
            if alert.status != "firing":  # named as every decision is: the inventory's name where it has one
                note(host.name if host else alert.host_label, alert.name, "ignored",
                     "resolved: release needs 'clusterctl release'")
                continue
            if host is None:
                why = "not a host of the inventory" if alert.host_label else f"names no host ({', '.join(HOST_LABELS)})"
                note(alert.host_label, alert.name, "ignored", f"{why}: never acted on")
                continue
            action = self.inventory.quarantine.alerts.get(alert.name) or ALERT_ACTIONS.get(alert.name, "report")
            if action == "report":
                note(host.name, alert.name, "reported", "this alert only reports (quarantine.alerts to change)")
                continue
            seq = self._pending.accept(host.name, action, alert.name, caller) if self._pending else 0
            self._queue.submit(host.name, PendingHost(host.name, action, (alert.name,), caller, seq))
            note(host.name, alert.name, "accepted", f"queued: {action} once the cluster says it may")
        for bad in unreadable[:REJECTED_NAMED]:  # left out: a 400 would make Alertmanager drop the good alerts
            note("", bad.name, "rejected", bad.why)
        if len(unreadable) > REJECTED_NAMED:
            note("", plural(len(unreadable) - REJECTED_NAMED, "more alert"), "rejected",
                 f"could not be read either; only the first {REJECTED_NAMED} are named")
        if truncated:  # Alertmanager's max_alerts, Grafana's Max Alerts: never seen here, so said
            note("", plural(truncated, "more alert"), "ignored",
                 "left out of this POST by the sender (truncatedAlerts: its max_alerts): never acted on")
        return 200, {"decisions": decisions}

    def resume(self) -> int:
        """Queue the work an earlier run accepted and did not finish (the pending-work file); how many hosts."""
        if self._pending is None:
            return 0
        waiting = self._pending.waiting()
        for entry in waiting:
            host = self._by_label.get(entry.host)
            if host is None or host.name != entry.host:
                self._say(host=entry.host, alert=",".join(entry.alerts), decision="ignored",
                          why="accepted by an earlier run, no longer a host of the inventory")
                self._pending.done(entry.host, entry.seq)
                continue
            self._queue.submit(host.name, entry)
            self._say(host=host.name, alert=",".join(entry.alerts), decision="accepted",
                      why=f"resumed: accepted by an earlier run, not yet acted on ({entry.action})")
        return len(waiting)

    def settle(self, timeout_s: float = 600.0) -> bool:
        """Wait until every accepted alert has been acted on (tests, and a clean stop)."""
        return self._queue.settle(timeout_s)

    def stop(self, timeout_s: float = STOP_WAIT_S) -> bool:
        """A clean stop (Ctrl-C, SIGTERM): nothing new is decided or started, the node marks in flight end,
        and the cluster's Lease is given back, so the next receiver decides at once instead of waiting out
        the hold. Logged; False when a node write still in flight after ``timeout_s`` kept the Lease."""
        with self._runners_lock:  # one step with ``_runner``'s: a runner is interrupted here, or never starts
            self._stopping.set()
            for runner in self._runners:  # as Ctrl-C stops a command: the step in order, the locks given back
                runner.interrupted.set()
        given_back = self._marker.stop(timeout_s)
        self._queue.settle(timeout_s)
        if self.dry_run:
            why = "dry run: no Lease was held"
        elif given_back:
            why = "the cluster's Lease is given back; accepted alerts not yet acted on are taken up by the next run"
        else:
            why = (f"a node write still ran after {timeout_s:g} s: the Lease is left to expire "
                   f"({self.lease.duration_s} s) rather than given back beside it")
        self._say(decision="stopped", why=why)
        return given_back

    @contextlib.contextmanager
    def _runner(self) -> Iterator[Any]:
        """A runner for one host's work, which ``stop`` interrupts. Once ``stop`` began none starts (Interrupted): no
        drain begins that the process's end would cut off; the next run finishes the host."""
        with self.runner_factory() as runner:
            with self._runners_lock:
                if self._stopping.is_set():
                    raise Interrupted("SIGTERM")
                self._runners.add(runner)
            try:
                yield runner
            finally:
                with self._runners_lock:
                    self._runners.discard(runner)

    def _crashed(self, host: str, wanted: PendingHost, exc: Exception) -> None:
        self._say(host=host, alert=",".join(wanted.alerts), decision="failed", why=failure_from(exc).message)

    def _work(self, name: str, wanted: PendingHost) -> None:
        """One host's work: the verdict under the cluster's Lease, then the rest of the quarantine, through the
        engine's journaled gate (each change in the undo journal before it is made, the journal finished
        however the work ends); the decision logged last. Its accepted alerts leave the pending-work file
        once the cluster gave a verdict (not when it failed); a stop in the middle (``stop``) leaves them for the
        next run."""
        host = self.inventory.host(name)
        try:
            with journaled_gate("remediate", self.inventory, apply=not self.dry_run,
                                state_dir=self.state_dir) as step:
                decision = self._decide_and_act(host, wanted, step.gate)
            if step.journal is not None:
                self._say(host=name, decision="journal", why=undo_line(step.journal))
            if self.after_drain is not None and decision == "drain":  # drained now (heal drains what was left)
                with self._runner() as runner:
                    self.after_drain(runner, host, self._say)
        except Interrupted as exc:
            self._say(host=name, alert=",".join(wanted.alerts), decision="failed", why="the receiver stopped in the "
                      "middle: the next run finishes it" + (f"; {exc.retry_hint}" if exc.retry_hint else ""))
            return
        if decision != "failed" and self._pending is not None:
            self._pending.done(name, wanted.seq)

    def _decide_and_act(self, host: Host, wanted: PendingHost, gate: Gate) -> str:
        name, alerts = host.name, ",".join(wanted.alerts)
        drain = wanted.action == "drain"
        request = QuarantineRequest(reason=f"alert {', '.join(wanted.alerts)} (clusterctl remediate)",
                                    codes=wanted.alerts, drain=drain, drain_options=self.drain_options,
                                    who=f"clusterctl remediate serve@{socket.gethostname()}")
        item = self._marker.decide(MarkRequest(name, request, gate))
        extra = {"caller": wanted.caller} if wanted.caller else {}
        outside = item.verdict == "duplicate" and "outside clusterctl" in item.why
        if item.verdict in ("failed", "held") or (item.verdict == "duplicate" and (not drain or outside)):
            self._say(host=name, alert=alerts, decision=item.verdict, why=item.why, **extra)
            return item.verdict
        if item.kept is not None and item.verdict != "act":  # quarantined before: its reason and codes stay
            request = replace(request, reason=item.kept[0], codes=item.kept[1])
        try:
            with self._runner() as runner:
                (result,) = quarantine_hosts(runner, self.inventory, [host], request, gate)
        except ClusterctlError as exc:  # the control plane went away since the decision: say so
            decision, why = "failed", str(exc)
        else:
            changed = undoable(gate.records) if not self.dry_run else gate.records
            if result.error:
                decision, why = "failed", result.error
            elif item.verdict == "duplicate" and not changed:
                decision, why = "duplicate", item.why
            else:
                decision = ("would " if self.dry_run else "") + wanted.action
                left = ""
                if result.drain is not None and result.drain.not_evicted:
                    left = "; not evicted: " + ", ".join(p.pod for p in result.drain.not_evicted)
                why = "; ".join(item.done + result.done) + left
                if item.verdict != "act":
                    why = f"{item.why}; {why}"
        self._say(host=name, alert=alerts, decision=decision, why=why, **extra)
        return decision


def serve(remediator: Remediator, address: webhook_server.ListenAddress, security: webhook_server.Security, *,
          limits: webhook_server.Limits | None = None, ready: Callable[[int], None] | None = None) -> None:
    """Answer Alertmanager's POSTs on ``address`` until interrupted (``POST /`` or ``/webhook``; ``GET
    /healthz``), callers authenticated as ``security`` says."""
    try:
        webhook_server.serve(remediator.handle, address, security, remediator.decision_log.say, limits=limits,
                             ready=ready)
    finally:  # Ctrl-C, SIGTERM (``Interrupted``): the Lease goes back at once, not after its takeover time
        remediator.stop()
