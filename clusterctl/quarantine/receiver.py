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

import json
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TextIO

from clusterctl.changes import Gate
from clusterctl.quarantine.drain import DrainOptions
from clusterctl.quarantine.policy import Action, Wanted, cap, decide

if TYPE_CHECKING:
    from clusterctl.fanout import Runner
    from clusterctl.inventory.model import Host, Inventory

#: What each of bootstrap's DCGM alert rules asks of the receiver by default.
ALERT_ACTIONS: dict[str, str] = {
    "GPUFellOffTheBus": "drain", "GPURowRemapFailure": "drain", "GPUDoubleBitECCErrors": "drain",
    "NVLinkBandwidthZero": "drain", "GPUXidError": "quarantine", "NVLinkCRCErrors": "quarantine",
    "GPUUncorrectableRemappedRows": "report", "GPUTemperatureHigh": "report", "GPUMemoryTemperatureHigh": "report",
    "GPUPowerAtLimit": "report", "GPUPCIeReplaysRising": "report",
}
HOST_LABELS = ("Hostname", "hostname", "node", "instance")
MAX_BODY = 1 << 20
_STRENGTH = {"report": 0, "quarantine": 1, "drain": 2}


class BadPayload(ValueError):
    """Not an Alertmanager webhook payload; the message says what is wrong."""


@dataclass(frozen=True)
class Alert:
    name: str
    host_label: str
    status: str


def parse_payload(body: bytes) -> list[Alert]:
    """The alerts of one webhook POST; ``BadPayload`` for anything else."""
    try:
        data = json.loads(body.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise BadPayload(f"not JSON: {exc}") from None
    if not isinstance(data, dict) or not isinstance(data.get("alerts"), list):
        raise BadPayload("no 'alerts' list: not an Alertmanager webhook payload")
    alerts: list[Alert] = []
    for index, item in enumerate(data["alerts"]):
        labels = item.get("labels") if isinstance(item, dict) else None
        if not isinstance(labels, dict) or not isinstance(labels.get("alertname"), str):
            raise BadPayload(f"alerts[{index}] has no labels.alertname")
        status = item.get("status", data.get("status", "firing"))
        if status not in ("firing", "resolved"):
            raise BadPayload(f"alerts[{index}].status is {status!r}, not firing or resolved")
        host = next((str(labels[k]) for k in HOST_LABELS if isinstance(labels.get(k), str) and labels[k]), "")
        if host and host == labels.get("instance") and ":" in host and not host.startswith("["):
            host = host.rsplit(":", 1)[0]
        alerts.append(Alert(labels["alertname"], host, str(status)))
    return alerts


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

    def _say(self, **entry: object) -> None:
        entry = {"time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(self.clock())), **entry}
        self.log.write(json.dumps(entry, sort_keys=False) + "\n")
        self.log.flush()

    def action_for(self, alert: str) -> str:
        return self.inventory.quarantine.alerts.get(alert) or ALERT_ACTIONS.get(alert, "report")

    def _host(self, label: str) -> Host | None:
        for host in self.inventory.hosts:
            if label in (host.name, host.address, host.connect_address):
                return host
        return None

    def handle(self, body: bytes) -> tuple[int, dict[str, Any]]:
        """One POST: (HTTP status, JSON answer). 400 for a bad body, with nothing done."""
        try:
            alerts = parse_payload(body)
        except BadPayload as exc:
            self._say(decision="rejected", why=str(exc))
            return 400, {"error": str(exc)}
        with self._lock:
            return 200, self._batch(alerts)

    def _batch(self, alerts: list[Alert]) -> dict[str, Any]:
        from clusterctl.quarantine.run import QuarantineRequest, quarantine_hosts
        from clusterctl.quarantine.status import quarantined_nodes

        wanted: dict[str, tuple[Host, str, list[str]]] = {}
        decisions: list[dict[str, Any]] = []

        def note(host: str, alert: str, decision: str, why: str) -> None:
            decisions.append({"host": host, "alert": alert, "decision": decision})
            self._say(host=host, alert=alert, decision=decision, why=why)

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
        asks = [Wanted(name, action == "drain", tuple(names)) for name, (_, action, names) in wanted.items()]
        chosen: dict[Action, list[tuple[Host, list[str]]]] = {Action.DRAIN: [], Action.QUARANTINE: []}
        for decision in decide(asks, out_of_service=unavailable, limit=limit):
            host, _, names = wanted[decision.host]
            if decision.action is Action.ALREADY_OUT:
                self.acted[decision.host] = "found quarantined"
                note(decision.host, ",".join(names), "duplicate", "quarantined or cordoned already")
            elif decision.action is Action.HELD:
                note(decision.host, ",".join(names), "held", decision.reason)
            elif decision.acts:
                unavailable.add(decision.host)
                chosen[decision.action].append((host, names))
        journals: list[str] = []
        gate = Gate(apply=not self.dry_run)
        for action, hosts in chosen.items():
            if not hosts:
                continue
            codes = tuple(dict.fromkeys(n for _, names in hosts for n in names))
            request = request_type(reason=f"alert {', '.join(codes)} (clusterctl remediate)", codes=codes,
                                   drain=action is Action.DRAIN, drain_options=self.drain_options,
                                   who=f"clusterctl remediate serve@{_machine()}")
            for result in quarantine_hosts(runner, self.inventory, [h for h, _ in hosts], request, gate):
                names = next(n for h, n in hosts if h.name == result.host)
                verb = ("would " if self.dry_run else "") + action.value
                if result.error:
                    note(result.host, ",".join(names), "failed", result.error)
                    continue
                if not self.dry_run:
                    self.acted[result.host] = "drained" if action is Action.DRAIN else "quarantined"
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


def serve(remediator: Remediator, host: str, port: int, *, ready: Callable[[int], None] | None = None) -> None:
    """Answer Alertmanager's POSTs on ``host:port`` until interrupted (``POST /`` or ``/webhook``; ``GET
    /healthz``)."""
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    class Handler(BaseHTTPRequestHandler):
        server_version = "clusterctl-remediate"

        def log_message(self, format: str, *args: Any) -> None:
            return  # every decision is logged as JSON by the remediator instead

        def _answer(self, status: int, payload: dict[str, Any]) -> None:
            data = (json.dumps(payload) + "\n").encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            if self.path == "/healthz":
                self._answer(200, {"status": "ok"})
            else:
                self._answer(404, {"error": "POST Alertmanager webhooks to / or /webhook"})

        def do_POST(self) -> None:
            if self.path not in ("/", "/webhook"):
                self._answer(404, {"error": "POST Alertmanager webhooks to / or /webhook"})
                return
            try:
                length = int(self.headers.get("Content-Length", ""))
            except ValueError:
                self._answer(411, {"error": "Content-Length required"})
                return
            if length < 0 or length > MAX_BODY:
                self._answer(413, {"error": f"body over {MAX_BODY} bytes"})
                return
            status, payload = remediator.handle(self.rfile.read(length))
            self._answer(status, payload)

    httpd = ThreadingHTTPServer((host, port), Handler)
    httpd.daemon_threads = True
    try:
        if ready is not None:
            ready(httpd.server_address[1])
        httpd.serve_forever(poll_interval=0.2)
    finally:
        httpd.server_close()


def webhook_config(url: str) -> str:
    """The Alertmanager configuration that sends every alert to the receiver (``alertmanager.yml``)."""
    return (
        "route:\n"
        "  receiver: clusterctl-remediate\n"
        "  group_by: [alertname, Hostname]\n"
        "  group_wait: 10s\n"
        "  group_interval: 1m\n"
        "  repeat_interval: 4h\n"
        "receivers:\n"
        "  - name: clusterctl-remediate\n"
        "    webhook_configs:\n"
        f"      - url: {json.dumps(url)}\n"
        "        send_resolved: false\n"
        "        max_alerts: 0\n"
    )
