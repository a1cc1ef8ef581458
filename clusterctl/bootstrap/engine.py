"""Runs bootstrap phases in order across hosts, in parallel, with a lock, progress and a recap.

For each phase the engine asks every host still in the run (in parallel through the fan-out
``Runner``): ``check`` -> ``findings`` (an error-level finding stops the host) -> ``plan``. In
plan mode (``bootstrap plan``, ``--dry-run``) the changes are recorded by the gate and nothing
else happens. In apply mode they pass through the gate, ``verify`` reads the host again, and a
failed change or verify triggers the phase's ``rollback``. A host that fails a phase is left
out of the later phases; the other hosts go on. See ``clusterctl.bootstrap`` for how to write a
phase.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Mapping, MutableMapping, Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import TYPE_CHECKING, Any

from clusterctl.bootstrap import lock as host_lock
from clusterctl.bootstrap.phase import Phase, PhaseContext
from clusterctl.changes import Change, ChangeFailed, Gate, GateRecord
from clusterctl.findings import Finding, Severity, has_errors, sorted_findings
from clusterctl.secret import mask_text
from clusterctl.transport.base import CommandResult, FailureKind, RunRequest, Transport, TransportError

if TYPE_CHECKING:
    from clusterctl.bootstrap.progress import ProgressStore
    from clusterctl.fanout import Runner
    from clusterctl.inventory.model import Host, Inventory


class Status(str, Enum):
    OK = "ok"
    CHANGED = "changed"
    FAILED = "failed"
    SKIPPED = "skipped"


@dataclass
class HostPhaseResult:
    """One phase on one host."""

    host: str
    phase: str
    status: Status
    duration_s: float = 0.0
    #: The changes planned (plan mode) or made (apply mode), no-ops left out.
    changes: list[Change] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)
    #: Why it failed or was skipped, for people.
    message: str = ""
    #: What rollback did, one line each.
    rollback: list[str] = field(default_factory=list)
    #: What ``check`` returned, for the phase's ``fleet_findings`` (not reported).
    state: Any = field(default=None, repr=False)

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"host": self.host, "phase": self.phase, "status": self.status.value,
                                "duration_s": round(self.duration_s, 3),
                                "changes": [c.to_json() for c in self.changes],
                                "findings": [f.to_json() for f in self.findings]}
        if self.message:
            data["message"] = mask_text(self.message)
        if self.rollback:
            data["rollback"] = [mask_text(line) for line in self.rollback]
        return data


@dataclass
class PhaseRecap:
    phase: str
    duration_s: float
    counts: dict[Status, int]

    def to_json(self) -> dict[str, Any]:
        return {"phase": self.phase, "duration_s": round(self.duration_s, 3),
                **{s.value: self.counts.get(s, 0) for s in Status}}


@dataclass
class BootstrapReport:
    cluster: str
    applied: bool
    phases: list[str]
    hosts: list[str]
    results: list[HostPhaseResult] = field(default_factory=list)
    recap: list[PhaseRecap] = field(default_factory=list)
    #: Host -> why it dropped out of the run (lock refused, a failed phase).
    failed_hosts: dict[str, str] = field(default_factory=dict)
    #: Notes about the run itself (a cleared stale lock, a resumed progress file).
    notes: list[str] = field(default_factory=list)
    duration_s: float = 0.0

    @property
    def ok(self) -> bool:
        return not self.failed_hosts

    @property
    def changed(self) -> bool:
        return any(r.status is Status.CHANGED for r in self.results)

    def host_counts(self) -> dict[str, dict[Status, int]]:
        out: dict[str, dict[Status, int]] = {h: {s: 0 for s in Status} for h in self.hosts}
        for r in self.results:
            out.setdefault(r.host, {s: 0 for s in Status})[r.status] += 1
        return out

    def all_findings(self) -> list[Finding]:
        return sorted_findings(f for r in self.results for f in r.findings)

    def to_json(self) -> dict[str, Any]:
        return {
            "cluster": self.cluster,
            "mode": "apply" if self.applied else "plan",
            "phases": self.phases,
            "hosts": self.hosts,
            "ok": self.ok,
            "changed": self.changed,
            "results": [r.to_json() for r in self.results],
            "recap": {"phases": [p.to_json() for p in self.recap],
                      "hosts": {h: {s.value: n for s, n in c.items()} for h, c in self.host_counts().items()}},
            "failed_hosts": {h: mask_text(m) for h, m in self.failed_hosts.items()},
            "notes": [mask_text(n) for n in self.notes],
            "duration_s": round(self.duration_s, 3),
        }


@dataclass
class RunSettings:
    #: False: plan / dry-run (the gate records, nothing is touched anywhere).
    apply: bool
    resume: bool = False
    force_unlock: bool = False
    lock_path: str = host_lock.DEFAULT_LOCK_PATH
    #: Where the run's progress is kept (apply mode); ``None``: not kept.
    progress: ProgressStore | None = None
    #: Options of the run given to every phase as ``ctx.options``.
    options: Mapping[str, Any] = field(default_factory=dict)
    #: Called with each phase's results as it finishes (the CLI prints them as they come).
    on_phase: Any = None


class _Unconnected(Transport):
    """What ``applies_to`` gets as a transport: using it is a bug in the phase."""

    def execute(self, request: RunRequest) -> CommandResult:
        raise TransportError(FailureKind.ERROR, "applies_to() must decide without running commands")


def run_bootstrap(
    inventory: Inventory,
    hosts: Sequence[Host],
    runner: Runner,
    phases: Sequence[Phase[Any]],
    settings: RunSettings,
) -> BootstrapReport:
    """Run ``phases`` on ``hosts``; never raises for a host's failure (it is in the report)."""
    began = time.monotonic()
    report = BootstrapReport(inventory.name, settings.apply, [p.name for p in phases], [h.name for h in hosts])
    shared: dict[str, Any] = {}
    gate = Gate(apply=settings.apply)
    lock_info = host_lock.LockInfo.mine(uuid.uuid4().hex)
    locked: list[Host] = []
    store = settings.progress
    if store is not None and settings.apply and not settings.resume:
        store.forget([h.name for h in hosts])
    try:
        # Read-only runs (preflight alone) change nothing, so they need no lock and may run
        # beside another run.
        if settings.apply and any(not p.read_only for p in phases):
            locked = _lock_hosts(runner, hosts, lock_info, settings, report)
        for phase in phases:
            live = [h for h in hosts if h.name not in report.failed_hosts]
            results, duration = _run_phase(phase, inventory, live, runner, gate, shared, settings)
            skipped_out = [HostPhaseResult(h.name, phase.name, Status.SKIPPED,
                                           message="left out: an earlier step failed")
                           for h in hosts if h.name in report.failed_hosts]
            phase_results = results + skipped_out
            phase_results.sort(key=lambda r: report.hosts.index(r.host))
            report.results.extend(phase_results)
            counts = {s: sum(1 for r in phase_results if r.status is s) for s in Status}
            report.recap.append(PhaseRecap(phase.name, duration, counts))
            for r in results:
                if r.status is Status.FAILED:
                    report.failed_hosts.setdefault(r.host, f"phase {phase.name}: {r.message}")
                if store is not None and settings.apply:
                    store.record(r.host, phase.name, r.status.value, r.duration_s, r.message)
            if store is not None and settings.apply:
                store.save()
            if settings.on_phase is not None:
                settings.on_phase(phase, phase_results)
    finally:
        if locked:
            _unlock_hosts(runner, locked, lock_info, settings)
    report.duration_s = time.monotonic() - began
    return report


def _lock_hosts(runner: Runner, hosts: Sequence[Host], info: host_lock.LockInfo, settings: RunSettings,
                report: BootstrapReport) -> list[Host]:
    def take(transport: Transport) -> str:
        return host_lock.acquire(transport, info, path=settings.lock_path, force=settings.force_unlock)

    fleet = runner.run_task(hosts, take, label="lock")
    locked: list[Host] = []
    for outcome in fleet.outcomes:
        if outcome.ok:
            locked.append(outcome.host)
            if outcome.value:
                report.notes.append(f"{outcome.host.name}: {outcome.value}")
        else:
            assert outcome.failure is not None
            report.failed_hosts[outcome.host.name] = f"lock: {outcome.failure.message}"
    return locked


def _unlock_hosts(runner: Runner, hosts: Sequence[Host], info: host_lock.LockInfo, settings: RunSettings) -> None:
    def drop(transport: Transport) -> None:
        host_lock.release(transport, info, path=settings.lock_path)

    runner.run_task(hosts, drop, label="unlock")


def _targets(phase: Phase[Any], inventory: Inventory, hosts: Sequence[Host], shared: MutableMapping[str, Any],
             options: Mapping[str, Any]) -> list[Host]:
    chosen = [h for h in hosts
              if phase.applies_to(PhaseContext(h, _Unconnected(h), inventory, shared, options))]
    if phase.once_per_cluster:
        return chosen[:1]
    return chosen


def _run_phase(
    phase: Phase[Any],
    inventory: Inventory,
    hosts: Sequence[Host],
    runner: Runner,
    gate: Gate,
    shared: MutableMapping[str, Any],
    settings: RunSettings,
) -> tuple[list[HostPhaseResult], float]:
    began = time.monotonic()
    targets = _targets(phase, inventory, hosts, shared, settings.options)
    names = {h.name for h in targets}
    why = "runs once per cluster, on another host" if phase.once_per_cluster else "does not apply to this host"
    results = [HostPhaseResult(h.name, phase.name, Status.SKIPPED, message=why) for h in hosts if h.name not in names]

    def task(transport: Transport) -> HostPhaseResult:
        ctx = PhaseContext(transport.host, transport, inventory, shared, settings.options)
        return _one_host(phase, ctx, gate, settings)

    limit = max(runner.timeout_s, phase.timeout_s)
    batches = [[h] for h in targets] if phase.serial else [list(targets)]
    for batch in batches:
        if not batch:
            continue
        fleet = runner.run_task(batch, task, label=phase.name, timeout_s=limit)
        for outcome in fleet.outcomes:
            if outcome.ok and outcome.value is not None:
                results.append(outcome.value)
            else:
                message = outcome.failure.describe() if outcome.failure else "no result"
                results.append(HostPhaseResult(outcome.host.name, phase.name, Status.FAILED, outcome.duration_s,
                                               message=mask_text(message)))
    _fleet_findings(phase, results)
    return results, time.monotonic() - began


def _fleet_findings(phase: Phase[Any], results: list[HostPhaseResult]) -> None:
    states = {r.host: r.state for r in results if r.state is not None}
    if not states:
        return
    by_host = {r.host: r for r in results}
    for finding in phase.fleet_findings(states):
        target = by_host.get(finding.host or "")
        if target is None:
            continue
        target.findings.append(finding)
        if finding.severity is Severity.ERROR and target.status is not Status.FAILED:
            target.status = Status.FAILED
            target.message = mask_text(finding.message)


def _one_host(phase: Phase[Any], ctx: PhaseContext, gate: Gate, settings: RunSettings) -> HostPhaseResult:
    host = ctx.host.name
    began = time.monotonic()
    result = HostPhaseResult(host, phase.name, Status.OK)

    def done(status: Status, message: str = "") -> HostPhaseResult:
        result.status = status
        result.message = mask_text(message)
        result.duration_s = time.monotonic() - began
        return result

    store = settings.progress
    if settings.apply and settings.resume and store is not None and store.is_done(host, phase.name):
        problems = phase.verify(ctx)
        if not has_errors(problems):
            return done(Status.SKIPPED, "done in an earlier run, verified again")
    state = phase.check(ctx)
    result.state = state
    result.findings = list(phase.findings(ctx, state))
    if has_errors(result.findings):
        blocking = [f for f in result.findings if f.severity is Severity.ERROR]
        return done(Status.FAILED, "; ".join(f.message for f in blocking[:3]) +
                    (f" (+{len(blocking) - 3} more)" if len(blocking) > 3 else ""))
    changes = [c for c in phase.plan(ctx, state) if not c.is_noop]
    if not settings.apply:
        gate.submit_all(ctx.transport, changes)
        result.changes = changes
        return done(Status.CHANGED if changes else Status.OK)
    before = len(gate.records_for(host))
    try:
        records = phase.apply(ctx, gate, changes)
    except (ChangeFailed, TransportError) as exc:
        mine = gate.records_for(host)[before:]
        result.changes = [r.change for r in mine if r.changed]
        result.rollback = _rollback(phase, ctx, gate, mine)
        return done(Status.FAILED, str(exc))
    result.changes = [r.change for r in records if r.changed]
    problems = phase.verify(ctx)
    result.findings.extend(problems)
    if has_errors(problems):
        result.rollback = _rollback(phase, ctx, gate, records)
        return done(Status.FAILED, "verify failed: " + "; ".join(f.message for f in problems
                                                                   if f.severity is Severity.ERROR))
    return done(Status.CHANGED if result.changes else Status.OK)


def _rollback(phase: Phase[Any], ctx: PhaseContext, gate: Gate, records: Sequence[GateRecord]) -> list[str]:
    try:
        return phase.rollback(ctx, gate, records)
    except Exception as exc:  # a failing rollback must still leave the original failure reported
        return [f"rollback failed: {type(exc).__name__}: {mask_text(str(exc))}"]
