"""``remediate serve``: an Alertmanager webhook receiver that quarantines the hosts alerts name.

Alertmanager POSTs its webhook payload (version 4: ``{"version": "4", "status": ...,
"alerts": [{"status": "firing", "labels": {"alertname": ..., "Hostname": ...}, ...}]}``). For
each firing alert the receiver finds the host (label ``Hostname`` as dcgm-exporter sets it, else
``hostname``, ``node``, ``instance`` without its port), decides what the alert asks
(``ALERT_ACTIONS``, overridden by the inventory's ``quarantine.alerts``) and runs the same
quarantine path as ``clusterctl quarantine`` — one batch at a time, so nothing is acted on
twice:

* a host not in the inventory is never acted on (logged);
* a host quarantined already (by an earlier alert, an operator, anyone who cordoned it) is not
  quarantined again: repeats and resends of the same alert are de-duplicated;
* never more than ``--max-unavailable`` hosts out of service at once (cordoned nodes count);
  the alerts over the cap are logged as held;
* a body that is not a webhook payload is answered 400 and changes nothing.

Every decision is one JSON line in the log (``time``, ``host``, ``alert``, ``decision``, ``why``).
``Remediator.handle`` is the logic; ``serve`` wraps it in the standard library's HTTP server.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TextIO

from clusterctl.bootstrap.cluster.alerts import ReceiverAuth, render_alertmanager_receiver
from clusterctl.changes import Gate
from clusterctl.errors import ClusterctlError
from clusterctl.quarantine import webhook_server
from clusterctl.quarantine.drain import DrainOptions
from clusterctl.quarantine.policy import cap
from clusterctl.quarantine.webhook_payload import Alert, BadPayload, DecisionLog, parse_payload

if TYPE_CHECKING:
    from clusterctl.fanout import Runner
    from clusterctl.inventory.model import Host, Inventory

#: What each of bootstrap's DCGM alert rules asks of the receiver by default.
ALERT_ACTIONS: dict[str, str] = {
    "GPUFellOffTheBus": "drain", "GPURowRemapFailure": "drain", "GPUDoubleBitECCErrors": "drain",
    "NVLinkBandwidthZero": "drain", "GPUXidError": "quarantine", "NVLinkCRCErrors": "quarantine",
    "GPUUncorrectableRemappedRows": "report", "GPUTemperatureHigh": "report", "GPUMemoryTemperatureHigh": "report",
    "GPUPowerAtLimit": "report", "GPUPCIeReplaysRising": "report",
    # The node health agent's rules (phase node-agent): an error-level finding on the node itself.
    "NodeHealthCheckFailed": "quarantine", "NodeHealthAgentStale": "report", "NodeHealthAgentCannotPublish": "report",
}
_STRENGTH = {"report": 0, "quarantine": 1, "drain": 2}


@dataclass
class Remediator:
    """The receiver's decisions, one webhook batch at a time (thread-safe)."""

    inventory: Inventory
    runner_factory: Callable[[], Any]
    log: TextIO
    dry_run: bool = False
    max_unavailable: str | None = None
    drain_options: DrainOptions = field(default_factory=DrainOptions)
    journal_folder: str | None = None
    clock: Callable[[], float] = time.time
    #: host -> the decision that acted on it in this process (the de-duplication, across batches).
    acted: dict[str, str] = field(default_factory=dict)
    #: How long the cluster's list of nodes out of service is reused between batches (a burst of
    #: alerts reads it once); what this receiver quarantines is added to it at once.
    refresh_s: float = 10.0
    _unavailable: set[str] = field(default_factory=set)
    _read_at: float | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def __post_init__(self) -> None:
        self.decision_log = DecisionLog(self.log, self.clock)

    def _say(self, **entry: object) -> None:
        self.decision_log.say(**entry)

    def action_for(self, alert: str) -> str:
        return self.inventory.quarantine.alerts.get(alert) or ALERT_ACTIONS.get(alert, "report")

    def _host(self, label: str) -> Host | None:
        for host in self.inventory.hosts:
            if label in (host.name, host.address, host.connect_address):
                return host
        return None

    def handle(self, body: bytes, caller: str = "") -> tuple[int, dict[str, Any]]:
        """One POST: (HTTP status, JSON answer). 400 for a bad body, with nothing done."""
        try:
            alerts = parse_payload(body)
        except BadPayload as exc:
            self._say(decision="rejected", caller=caller, why=str(exc))
            return 400, {"error": str(exc)}
        with self._lock:
            return 200, self._batch(alerts, caller)

    def _batch(self, alerts: list[Alert], caller: str = "") -> dict[str, Any]:
        from clusterctl.quarantine.run import QuarantineRequest, quarantine_hosts
        from clusterctl.quarantine.status import quarantined_nodes

        wanted: dict[str, tuple[Host, str, list[str]]] = {}
        decisions: list[dict[str, Any]] = []

        def note(host: str, alert: str, decision: str, why: str) -> None:
            decisions.append({"host": host, "alert": alert, "decision": decision})
            self._say(host=host, alert=alert, decision=decision, why=why, **({"caller": caller} if caller else {}))

        for alert in alerts:
            if alert.status != "firing":
                note(alert.host_label, alert.name, "ignored", "resolved: release needs 'clusterctl release'")
                continue
            host = self._host(alert.host_label)
            if host is None:
                note(alert.host_label, alert.name, "ignored", "not a host of the inventory: never acted on")
                continue
            action = self.action_for(alert.name)
            if action == "report":
                note(host.name, alert.name, "reported", "this alert only reports (quarantine.alerts to change)")
                continue
            if host.name in self.acted:
                note(host.name, alert.name, "duplicate", f"already {self.acted[host.name]} by this receiver")
                continue
            before = wanted.get(host.name)
            if before is not None:
                before[2].append(alert.name)
                if _STRENGTH[action] > _STRENGTH[before[1]]:
                    wanted[host.name] = (host, action, before[2])
                continue
            wanted[host.name] = (host, action, [alert.name])
        if not wanted:
            return {"decisions": decisions}
        with self.runner_factory() as runner:
            out = self._act(runner, wanted, note, quarantine_hosts, QuarantineRequest, quarantined_nodes)
        return {"decisions": decisions, **out}

    def _act(self, runner: Runner, wanted: Mapping[str, tuple[Host, str, list[str]]], note: Callable[..., None],
             quarantine_hosts: Any, request_type: Any, quarantined_nodes: Any) -> dict[str, Any]:
        now = self.clock()
        if self._read_at is None or now - self._read_at >= self.refresh_s:
            try:
                self._unavailable = {n.host for n in quarantined_nodes(runner, self.inventory)}
            except Exception as exc:  # the control plane is down: act on nothing rather than guess the cap
                for name, (_, _, names) in wanted.items():
                    note(name, ",".join(names), "failed", f"cannot read the cluster's nodes: {exc}")
                return {}
            self._read_at = now
        unavailable = self._unavailable
        limit = cap(self.max_unavailable or self.inventory.quarantine.max_unavailable, len(self.inventory.hosts))
        chosen: dict[str, list[tuple[Host, list[str]]]] = {"drain": [], "quarantine": []}
        for name, (host, action, names) in wanted.items():
            if name in unavailable:
                self.acted[name] = "found quarantined"
                note(name, ",".join(names), "duplicate", "quarantined or cordoned already")
                continue
            if len(unavailable) >= limit:
                note(name, ",".join(names), "held", f"{len(unavailable)} host(s) out of service already, the most "
                     f"--max-unavailable allows ({limit})")
                continue
            unavailable.add(name)
            chosen[action].append((host, names))
        journals: list[str] = []
        gate = Gate(apply=not self.dry_run)
        for action, hosts in chosen.items():
            if not hosts:
                continue
            codes = tuple(dict.fromkeys(n for _, names in hosts for n in names))
            request = request_type(reason=f"alert {', '.join(codes)} (clusterctl remediate)", codes=codes,
                                   drain=action == "drain", drain_options=self.drain_options,
                                   who=f"clusterctl remediate serve@{_machine()}")
            try:
                results = quarantine_hosts(runner, self.inventory, [h for h, _ in hosts], request, gate)
            except ClusterctlError as exc:  # the control plane went away since it was read: say so per host
                for host, names in hosts:
                    note(host.name, ",".join(names), "failed", str(exc))
                continue
            for result in results:
                names = next(n for h, n in hosts if h.name == result.host)
                verb = ("would " if self.dry_run else "") + ("drain" if action == "drain" else "quarantine")
                if result.error:
                    note(result.host, ",".join(names), "failed", result.error)
                    continue
                if not self.dry_run:
                    self.acted[result.host] = "drained" if action == "drain" else "quarantined"
                left = ""
                if result.drain is not None and result.drain.not_evicted:
                    left = "; not evicted: " + ", ".join(p.pod for p in result.drain.not_evicted)
                note(result.host, ",".join(names), verb, "; ".join(result.done) + left)
        if not self.dry_run:
            from clusterctl.undo_journal import save_journal

            path = save_journal([r for r in gate.records if not r.failed], command="remediate",
                                folder=self.journal_folder)
            if path is not None:
                journals.append(str(path))
                self._say(decision="journal", why=f"undo with: clusterctl undo {path}")
        return {"journals": journals}


def _machine() -> str:
    import socket

    return socket.gethostname()


def serve(remediator: Remediator, address: webhook_server.ListenAddress, security: webhook_server.Security, *,
          limits: webhook_server.Limits | None = None, ready: Callable[[int], None] | None = None) -> None:
    """Answer Alertmanager's POSTs on ``address`` until interrupted (``POST /`` or ``/webhook``; ``GET
    /healthz``), callers authenticated as ``security`` says."""
    webhook_server.serve(remediator.handle, address, security, remediator.decision_log.say, limits=limits,
                         ready=ready)


def webhook_config(url: str, auth: ReceiverAuth | None = None) -> str:
    """The Alertmanager configuration that sends every alert to the receiver (``alertmanager.yml``)."""
    return render_alertmanager_receiver(url, auth)
