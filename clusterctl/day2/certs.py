"""``clusterctl certs check|renew``: kubeadm's certificates on every control plane, renewed one host at a time.

``check`` runs ``kubeadm certs check-expiration`` on each control plane (read-only) and says
how many days each certificate has left; one under ``warn_days`` (30) is a warning, an expired
one an error. ``renew`` follows kubeadm's "Certificate Management with kubeadm": ``kubeadm certs
renew all``, then each control-plane static pod is restarted so it loads the new certificates
(its manifest moved out of ``/etc/kubernetes/manifests`` for the kubelet's file check period,
20 s by default, then back), the API server waited for (``/readyz``), and the certificates
read again; one control plane at a time, so the others keep serving. A failure stops there.
"""

from __future__ import annotations

import shlex
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

from clusterctl.changes import Change, Gate
from clusterctl.cluster_access import command_failed, not_usable, reason
from clusterctl.errors import UsageError
from clusterctl.facts.kube import kubectl
from clusterctl.facts.kubeadm_certs import COMMAND, CertExpiration, parse_check_expiration
from clusterctl.findings import Finding, Severity

if TYPE_CHECKING:
    from clusterctl.fanout import Runner
    from clusterctl.inventory.model import Host, Inventory
    from clusterctl.transport.base import Transport

MANIFESTS_DIR = "/etc/kubernetes/manifests"
PARKED_DIR = "/etc/kubernetes/clusterctl/restart"
#: The static pods that read the renewed certificates (kubeadm: "You must restart the
#: kube-apiserver, kube-controller-manager, kube-scheduler and etcd").
COMPONENTS = ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler")
#: KubeletConfiguration ``fileCheckFrequency`` default: how long the kubelet takes to see a manifest go.
FILE_CHECK_S = 20
WARN_DAYS = 30


@dataclass
class HostCerts:
    host: str
    expiration: CertExpiration | None = None
    error: str = ""

    def to_json(self, now: datetime) -> dict[str, Any]:
        if self.expiration is None:
            return {"host": self.host, "error": self.error}
        return {"host": self.host,
                "certificates": [_row(c, now) for c in self.expiration.certificates],
                "authorities": [_row(c, now) for c in self.expiration.authorities]}


def _row(cert: Any, now: datetime) -> dict[str, Any]:
    return {"name": cert.name, "expires": cert.expires.isoformat(), "days_left": cert.days_left(now),
            "authority": cert.authority, "externally_managed": cert.externally_managed}


@dataclass
class CertsReport:
    hosts: list[HostCerts] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)
    now: datetime = field(default_factory=lambda: datetime.now(timezone.utc))

    def to_json(self) -> dict[str, Any]:
        return {"hosts": [h.to_json(self.now) for h in self.hosts], "findings": [f.to_json() for f in self.findings]}


def control_planes(inventory: Inventory, hosts: tuple[Host, ...] | list[Host]) -> list[Host]:
    chosen = [h for h in hosts if "control-plane" in h.roles]
    if not chosen:
        raise UsageError("no control-plane host among the selected hosts", field="roles")
    return chosen


def read_certs(transport: Transport) -> CertExpiration:
    result = transport.run(COMMAND, sudo=True, timeout=120)
    if not result.ok:
        raise command_failed(result)
    return parse_check_expiration(result.stdout)


def check(runner: Runner, inventory: Inventory, hosts: list[Host], *, warn_days: int = WARN_DAYS) -> CertsReport:
    """Every selected control plane's certificates; ``NoCluster`` (exit 2) when none could be read."""
    report = CertsReport()
    fleet = runner.run_task(control_planes(inventory, hosts), read_certs, label="certs")
    if all(not o.ok or o.value is None for o in fleet.outcomes):
        first = fleet.outcomes[0]
        raise not_usable(first.host.name, "read the certificates", first.failure)
    for outcome in fleet.outcomes:
        name = outcome.host.name
        if not outcome.ok or outcome.value is None:
            why = reason(outcome.failure)
            report.hosts.append(HostCerts(name, error=why))
            report.findings.append(Finding(Severity.ERROR, "CERTS_UNREAD", f"cannot read the certificates: {why}",
                                           host=name))
            continue
        report.hosts.append(HostCerts(name, outcome.value))
        for cert in (*outcome.value.certificates, *outcome.value.authorities):
            days = cert.days_left(report.now)
            if days < 0:
                report.findings.append(Finding(Severity.ERROR, "CERT_EXPIRED", f"{cert.name} expired on "
                                               f"{cert.expires:%Y-%m-%d}", host=name,
                                               fix="clusterctl certs renew (a CA needs a new PKI: kubeadm docs)"))
            elif days < warn_days:
                report.findings.append(Finding(Severity.WARNING, "CERT_EXPIRING", f"{cert.name} expires in {days} "
                                               f"day(s) ({cert.expires:%Y-%m-%d})", host=name,
                                               fix="clusterctl certs renew"))
    return report


@dataclass
class RenewStep:
    host: str
    changes: list[Change]
    status: str = "planned"
    message: str = ""
    soonest_days: int | None = None

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"host": self.host, "status": self.status,
                                "changes": [c.to_json() for c in self.changes]}
        if self.message:
            data["message"] = self.message
        if self.soonest_days is not None:
            data["soonest_days_left"] = self.soonest_days
        return data


def renew_changes(host: str, wait_s: int = FILE_CHECK_S) -> list[Change]:
    q = shlex.quote
    changes = [Change.run(host, "kubeadm certs renew all", summary="kubeadm certs renew all", timeout_s=300)]
    for component in COMPONENTS:
        manifest, parked = f"{MANIFESTS_DIR}/{component}.yaml", f"{PARKED_DIR}/{component}.yaml"
        # ';' before the move back: it runs whatever sleep does (a manifest left out would stop
        # the component for good); when the first move failed, it fails too and says so.
        command = (f"mkdir -p {q(PARKED_DIR)} && mv {q(manifest)} {q(parked)} && sleep {int(wait_s)}; "
                   f"mv {q(parked)} {q(manifest)}")
        changes.append(Change.run(host, command, summary=f"restart static pod {component} (manifest out "
                                                         f"{int(wait_s)} s, back)", timeout_s=wait_s + 60))
    return changes


def renew(runner: Runner, inventory: Inventory, hosts: list[Host], *, apply: bool, wait_s: int = FILE_CHECK_S,
          ready_timeout_s: float = 180.0) -> list[RenewStep]:
    check(runner, inventory, hosts)  # no certificates to renew where no cluster runs: exit 2 before any step
    steps = [RenewStep(h.name, renew_changes(h.name, wait_s)) for h in control_planes(inventory, hosts)]
    if not apply:
        return steps
    gate = Gate(apply=True)
    by_name = {h.name: h for h in hosts}
    for step in steps:
        def task(transport: Transport, step: RenewStep = step) -> int | None:
            gate.submit_all(transport, step.changes)
            _wait_api(transport, ready_timeout_s)
            soonest = read_certs(transport).soonest()
            return soonest.days_left(datetime.now(timezone.utc)) if soonest else None

        outcome = runner.run_task([by_name[step.host]], task, label=f"renew {step.host}",
                                  timeout_s=max(runner.timeout_s, 6 * (wait_s + 60) + ready_timeout_s)).outcomes[0]
        if outcome.ok:
            step.status, step.soonest_days = "done", outcome.value
            continue
        step.status = "failed"
        step.message = outcome.failure.message if outcome.failure else "no result"
        for later in steps[steps.index(step) + 1:]:
            later.status = "not started"
        break
    return steps


def _wait_api(transport: Transport, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while True:
        result = transport.run(kubectl("get --raw /readyz"), sudo=True, timeout=30)
        if result.ok:
            return
        if time.monotonic() >= deadline:
            raise RuntimeError(f"the API server did not answer /readyz within {int(timeout_s)} s after the restart: "
                               f"{result.stderr_tail(2)}")
        time.sleep(2.0)



