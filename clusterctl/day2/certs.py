"""``clusterctl certs check|renew``: kubeadm's certificates on every control plane, renewed one host at a time.

``check`` runs ``kubeadm certs check-expiration`` on each control plane (read-only) and says
how many days each certificate has left; one under ``warn_days`` (30) is a warning, an expired
one an error. It also says when a control-plane static pod's manifest is missing from
``/etc/kubernetes/manifests`` (an error: that component is down), and where it is if a restart
left it parked.

``renew`` is an ordered list of phases on the action engine (``RENEW_PHASES``), one control plane
at a time (a batch of one), so the others keep serving. It follows kubeadm's "Certificate
Management with kubeadm": ``kubeadm certs renew all``, then each static pod restarted so it loads
the new certificates (its manifest moved out of ``manifests/`` for the kubelet's file check
period, 20 s by default, then back), the API server waited for (``/readyz``) and the certificates
read again. The move out carries how to put the manifest back, and is in the undo journal before
it is made: Ctrl-C puts it back at once (``undo_on_interrupt``), and a harder stop leaves a journal
that ``clusterctl undo`` completes, or ``certs renew --resume`` (a parked manifest is moved back
first).
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any, ClassVar

from clusterctl.bootstrap.cluster.kubeadm import MANIFESTS_DIR
from clusterctl.changes import MAKES_NO_TRACE, Change, GateRecord, HostGate, make_folders
from clusterctl.cluster_access import NO_CERTIFICATES, not_usable, read_answer, reason
from clusterctl.engine.phase import Phase, PhaseContext, ReadsNothing, Wait
from clusterctl.engine.progress import RunPlace
from clusterctl.engine.run import GivenOptions, RunSettings, command_line, run_phases, select_phases
from clusterctl.errors import UsageError
from clusterctl.facts.kube import kubectl
from clusterctl.facts.kubeadm_certs import COMMAND, CertExpiration, parse_check_expiration
from clusterctl.findings import Finding, Severity
from clusterctl.terminal_text import one_line
from clusterctl.transport.base import FailureKind, TransportError
from clusterctl.utc import utc_stamp

if TYPE_CHECKING:
    from clusterctl.engine.run import RunReport
    from clusterctl.fanout import Runner
    from clusterctl.host_reader import HostReader
    from clusterctl.inventory.model import Host, Inventory
    from clusterctl.transport.base import Transport

PARKED_DIR = "/etc/kubernetes/clusterctl/restart"
#: The static pods that read the renewed certificates (kubeadm: "You must restart the
#: kube-apiserver, kube-controller-manager, kube-scheduler and etcd").
COMPONENTS = ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler")
#: KubeletConfiguration ``fileCheckFrequency`` default: how long the kubelet takes to see a manifest go.
FILE_CHECK_S = 20
WARN_DAYS = 30
#: What to do about a certificate kubeadm lists as externally managed (its CA's key is not on the host).
EXTERNAL_FIX = "externally managed (no CA key on the host): renew it with the CA that signed it; kubeadm cannot"
#: kubeadm (1.29+) writes it on the first control plane only, and its docs advise keeping it off the host.
SUPER_ADMIN = "super-admin.conf"
#: The file kubeadm names when it could not load a certificate or key it needs (``phases/certs/certs.go``).
_NOT_LOADED = re.compile(r"couldn't load the (?:certificate|private key) file (\S+?):")


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
                "authorities": [_row(c, now) for c in self.expiration.authorities],
                "missing": list(self.expiration.missing)}


def _row(cert: Any, now: datetime) -> dict[str, Any]:
    return {"name": cert.name, "expires": utc_stamp(cert.expires.timestamp()), "days_left": cert.days_left(now),
            "residual": cert.residual, "authority": cert.authority, "externally_managed": cert.externally_managed}


@dataclass
class CertsReport:
    hosts: list[HostCerts] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)
    now: datetime = field(default_factory=lambda: datetime.now(timezone.utc))

    def to_json(self) -> dict[str, Any]:
        return {"hosts": [h.to_json(self.now) for h in self.hosts], "findings": [f.to_json() for f in self.findings]}


def control_planes(hosts: tuple[Host, ...] | list[Host]) -> list[Host]:
    chosen = [h for h in hosts if h.is_control_plane]
    if not chosen:
        raise UsageError("no control-plane host among the selected hosts: kubeadm's certificates live on the control "
                         "planes (roles: [control-plane] in the inventory; with -l, select one of them).")
    return chosen


def read_certs(transport: Transport | HostReader) -> CertExpiration:
    """The host's certificates; ``NO_CERTIFICATES`` (no cluster here) where kubeadm lists none of them."""
    expiration = read_answer(transport, COMMAND, parse_check_expiration, timeout_s=120)
    if not expiration.certificates and not expiration.authorities:
        raise TransportError(FailureKind.COMMAND_FAILED, NO_CERTIFICATES)
    return expiration


def unread_fix(why: str) -> str:
    """What to do when kubeadm could not read a host's certificates because a file of them is gone
    ("Error checking external CA condition ...: couldn't load the certificate file PATH")."""
    found = _NOT_LOADED.search(why)
    if found is None:
        return ""
    return (f"put {one_line(found.group(1))} back (a copy from another control plane, or a backup of "
            "/etc/kubernetes/pki): kubeadm checks none of this host's certificates without it")


@dataclass(frozen=True)
class Placement:
    """Where each control-plane component's static-pod manifest is: in ``manifests/``, parked by a
    restart (``PARKED_DIR``), or neither."""

    in_place: frozenset[str]
    parked: frozenset[str]

    def missing(self) -> list[str]:
        return [c for c in COMPONENTS if c not in self.in_place]


def _listing(reader: Transport | HostReader, folder: str) -> frozenset[str]:
    result = reader.run(f"ls -1 {shlex.quote(folder)}", sudo=True, timeout=60)
    if not result.ok:
        return frozenset()  # no such folder: nothing there
    return frozenset(line[:-len(".yaml")] for line in result.stdout.split() if line.endswith(".yaml"))


def read_placement(reader: Transport | HostReader) -> Placement:
    return Placement(_listing(reader, MANIFESTS_DIR), _listing(reader, PARKED_DIR))


def placement_findings(host: str, placement: Placement) -> list[Finding]:
    """A control-plane manifest missing from ``manifests/`` is an error: the kubelet runs no such pod."""
    found = []
    for component in placement.missing():
        if component in placement.parked:
            found.append(Finding(Severity.ERROR, "CONTROL_PLANE_MANIFEST_PARKED",
                                 f"{component}.yaml is not in {MANIFESTS_DIR} but in {PARKED_DIR} (a restart was "
                                 f"cut short): {component} is not running", host=host, subject=component,
                                 fix="clusterctl certs renew --resume --yes (or clusterctl undo on the renew's "
                                     "journal) moves it back"))
        else:
            phase = "etcd local" if component == "etcd" else "control-plane " + component.removeprefix("kube-")
            found.append(Finding(Severity.ERROR, "CONTROL_PLANE_MANIFEST_MISSING",
                                 f"{component}.yaml is missing from {MANIFESTS_DIR}: {component} is not running",
                                 host=host, subject=component, fix=f"kubeadm init phase {phase} writes it again"))
    return found


def expiration_findings(host: str, expiration: CertExpiration, now: datetime, warn_days: int) -> list[Finding]:
    """An expired certificate or CA is an error, one under ``warn_days`` or one kubeadm lists as missing a warning
    (but ``SUPER_ADMIN``)."""
    found = [Finding(Severity.WARNING, "CERT_MISSING", f"{name}: kubeadm lists it as !MISSING! (its file is not "
                     "under /etc/kubernetes)", host=host, fix="kubeadm init phase certs (or kubeconfig) writes it "
                     "again; an external etcd's certificates are not kubeadm's")
             for name in expiration.missing if name != SUPER_ADMIN]
    for cert in (*expiration.certificates, *expiration.authorities):
        days = cert.days_left(now)
        # kubeadm renews only what its own CA key signs: "Detected external ca, ... can't be renewed".
        renew = EXTERNAL_FIX if cert.externally_managed else "clusterctl certs renew"
        if days < 0:
            found.append(Finding(Severity.ERROR, "CERT_EXPIRED", f"{cert.name} expired on {cert.expires:%Y-%m-%d}",
                                 host=host, fix=EXTERNAL_FIX if cert.externally_managed else
                                 "clusterctl certs renew (a CA needs a new PKI: kubeadm docs)"))
        elif days < warn_days:
            found.append(Finding(Severity.WARNING, "CERT_EXPIRING", f"{cert.name} expires in {days} day(s) "
                                 f"({cert.expires:%Y-%m-%d})", host=host, fix=renew))
    return found


def check(runner: Runner, hosts: list[Host], *, warn_days: int = WARN_DAYS) -> CertsReport:
    """Every selected control plane's certificates; ``NoCluster`` (exit 2) when none could be read."""
    report = CertsReport()
    fleet = runner.run_task(control_planes(hosts), lambda t: (read_certs(t), read_placement(t)), label="certs")
    if not fleet.values:
        raise not_usable(fleet.outcomes[0].host.name, "read the certificates", fleet.outcomes[0].failure)
    for outcome in fleet.outcomes:
        name = outcome.host.name
        if not outcome.ok or outcome.value is None:
            why = reason(outcome.failure)
            report.hosts.append(HostCerts(name, error=why))
            report.findings.append(Finding(Severity.ERROR, "CERTS_UNREAD", f"cannot read the certificates: {why}",
                                           host=name, fix=unread_fix(why)))
            continue
        expiration, placement = outcome.value
        report.hosts.append(HostCerts(name, expiration))
        report.findings += placement_findings(name, placement)
        report.findings += expiration_findings(name, expiration, report.now, warn_days)
    return report


class PlacementPhase(Phase[Placement, PhaseContext]):
    """A renew phase on a control plane: its state is where the static-pod manifests are."""

    role = "control-plane"

    def check(self, ctx: PhaseContext) -> Placement:
        return read_placement(ctx.reader)


class RenewCertificates(PlacementPhase):
    name = "renew"
    description = "kubeadm certs renew all"
    timeout_s = 300.0

    def findings(self, ctx: PhaseContext, state: Placement) -> list[Finding]:
        # A parked manifest is what this run's restart phases put back; one gone altogether stops here.
        return [f for f in placement_findings(ctx.host.name, state) if f.code == "CONTROL_PLANE_MANIFEST_MISSING"]

    def plan(self, ctx: PhaseContext, state: Placement) -> list[Change]:
        return [Change.run(ctx.host.name, "kubeadm certs renew all", summary="kubeadm certs renew all",
                           timeout_s=300, cannot_undo="kubeadm keeps no copy of the certificates it replaces: "
                           "they stay renewed")]


def _moves(host: str, component: str, wait_s: int) -> tuple[Change, Change]:
    """The manifest of ``component`` out of ``manifests/`` for ``wait_s``, and back."""
    q = shlex.quote
    manifest, parked = q(f"{MANIFESTS_DIR}/{component}.yaml"), q(f"{PARKED_DIR}/{component}.yaml")
    # The way back, in the journal before the move: only a parked manifest with none in its place moves.
    back = f"if [ -f {parked} ] && [ ! -f {manifest} ]; then mv {parked} {manifest}; fi"
    return (Change.run(host, f"mv {manifest} {parked}", undo=back, timeout_s=60,
                       summary=f"stop static pod {component}: its manifest out of {MANIFESTS_DIR} for {wait_s} s"),
            Change.run(host, f"mv {parked} {manifest}", timeout_s=60, makes=(MAKES_NO_TRACE,),
                       cannot_undo="the manifest is back where it was before the run",
                       summary=f"start static pod {component}: its manifest back in {MANIFESTS_DIR}"))


class RestartStaticPod(PlacementPhase):
    """One control-plane static pod restarted: its manifest out for the kubelet's file check period, then
    back. A manifest a cut-short run left parked is only moved back (``--resume``)."""

    component: ClassVar[str]
    undo_on_interrupt = True

    def plan(self, ctx: PhaseContext, state: Placement) -> list[Change]:
        host = ctx.host.name
        out, back = _moves(host, self.component, ctx.options.wait_s)
        if self.component in state.in_place:
            return [*make_folders(ctx.reader, host, [PARKED_DIR]), out, back]
        return [back] if self.component in state.parked else []

    def apply(self, ctx: PhaseContext, gate: HostGate, changes: Sequence[Change]) -> list[GateRecord]:
        records = []
        for change in changes:
            records.append(gate.submit(change))
            if change.undo_command and not change.makes:  # moved out (not the folder it went to): the kubelet
                # stops the pod within its file check period
                ctx.reader.run(f"sleep {int(ctx.options.wait_s)}", timeout=ctx.options.wait_s + 30)
        return records

    def verify(self, ctx: PhaseContext) -> list[Finding]:
        placement = read_placement(ctx.reader)
        return [f for f in placement_findings(ctx.host.name, placement) if f.subject == self.component]


def _restart(component: str) -> type[RestartStaticPod]:
    return type(f"Restart_{component.replace('-', '_')}", (RestartStaticPod,), {
        "name": f"restart-{component}", "component": component,
        "description": f"restart static pod {component} (manifest out, then back)"})


class ApiServerReady(ReadsNothing, Phase[None, PhaseContext]):
    """Waits for the API server after the restarts, then reads the certificates again."""

    name = "api-ready"
    description = "wait for the API server (/readyz), then read the certificates again"
    role = "control-plane"

    def wait(self, ctx: PhaseContext) -> Wait:
        def ready(c: PhaseContext) -> str | None:
            result = c.reader.run(kubectl("get --raw /readyz"), sudo=True, timeout=30)
            return None if result.ok else (result.stderr_tail(2) or f"exit {result.exit_code}")

        return Wait("the API server answers /readyz", ready, timeout_s=ctx.options.ready_timeout_s)

    def verify(self, ctx: PhaseContext) -> list[Finding]:
        soonest = read_certs(ctx.reader).soonest()
        days = soonest.days_left(datetime.now(timezone.utc)) if soonest else None
        return [Finding(Severity.INFO, "CERTS_RENEWED", f"soonest certificate: {days} days left", host=ctx.host.name,
                        evidence={"soonest_days_left": days})]


RENEW_PHASES: tuple[Phase[Any, Any], ...] = (RenewCertificates(), *(_restart(c)() for c in COMPONENTS),
                                             ApiServerReady())


@dataclass(frozen=True)
class RenewRequest:
    """``certs renew``'s options, and the renew phases' ``ctx.options``."""

    apply: bool
    #: Seconds a manifest stays out (the kubelet's ``fileCheckFrequency``).
    wait_s: int = FILE_CHECK_S
    ready_timeout_s: float = 180.0
    resume: bool = False
    state_dir: str | None = None
    skip_phases: str | None = None
    #: The global options (-i, -l...) and the command's as typed: the line that goes on after an interrupt runs them.
    given: GivenOptions = field(default_factory=GivenOptions)


def renew(runner: Runner, inventory: Inventory, hosts: list[Host], request: RenewRequest) -> RunReport:
    """Plan or run ``RENEW_PHASES`` on the control planes, one at a time; a failure stops there."""
    place = RunPlace.of(inventory, "certs-renew", request.state_dir)
    progress = place.progress(apply=request.apply, resume=request.resume, first="clusterctl certs renew --yes")
    phases = select_phases(RENEW_PHASES, None, request.skip_phases, command="certs renew")
    check(runner, hosts)  # no certificates to renew where no cluster runs: exit 2 before any step
    chosen = control_planes(hosts)
    settings = RunSettings(apply=request.apply, resume=request.resume, options=request, progress=progress,
                           batches=[[h.name] for h in chosen],
                           journal=place.journal("certs renew") if request.apply else None,
                           resume_hint=command_line("certs", "renew", given=request.given, resume=True))
    return run_phases(inventory, chosen, runner, phases, settings)


def renew_summary(report: RunReport) -> list[dict[str, Any]]:
    """Per control plane: how it went, what it changed (or would), the soonest certificate after it."""
    out = []
    for host in report.hosts:
        results = [r for r in report.results if r.host == host]
        row: dict[str, Any] = {"host": host, "changes": [c.to_json() for r in results for c in r.changes],
                               "waits": [w for r in results for w in r.waits]}
        if host in report.failed_hosts:
            row.update(status="failed", message=report.failed_hosts[host])
        elif not results:
            row.update(status="not started", message="an earlier control plane failed or the run was interrupted")
        else:
            row["status"] = ("renewed" if "renew" in report.phases else "done") if report.applied else "planned"
        days = [f.evidence.get("soonest_days_left") for r in results for f in r.findings if f.code == "CERTS_RENEWED"]
        if days:
            row["soonest_days_left"] = days[0]
        out.append(row)
    return out
