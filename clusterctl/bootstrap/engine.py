"""Runs bootstrap phases in order across hosts, in parallel, with a lock, progress and a recap.

For each phase the engine asks every host still in the run (in parallel through the fan-out
``Runner``): ``check`` -> ``findings`` (an error-level finding stops the host) -> ``plan``. In
plan mode (``bootstrap plan``, ``--dry-run``) the changes are recorded by the gate and nothing
else happens. In apply mode they pass through the gate, ``verify`` reads the host again, and a
failed change or verify triggers the rollback: the gate undoes the phase's records, then the
phase's own ``rollback`` changes pass the gate. A host that fails a phase is left out of the
later phases; the other hosts go on. Why a host skips a phase is decided in one place,
``skip_reason``. See ``clusterctl.bootstrap`` for how to write a phase.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import TYPE_CHECKING, Any

from clusterctl.bootstrap import lock as host_lock
from clusterctl.bootstrap.phase import Phase, PhaseContext
from clusterctl.bootstrap.read_ahead import ReadAhead
from clusterctl.bootstrap.run_data import RunData, RunOptions
from clusterctl.changes import Change, ChangeFailed, Gate, GateRecord, HostGate
from clusterctl.findings import Finding, Severity, has_errors, sorted_findings
from clusterctl.host_reader import HostReader, ReadOnlyHost
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
    #: What the gate applied for this phase here and kept (for the undo journal; not reported).
    records: list[GateRecord] = field(default_factory=list, repr=False)

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
    #: The journal ``clusterctl undo`` reverts this run with (applying runs that changed something).
    undo_journal: str | None = None
    #: Why an applying run that included ``verify`` could not verify the cluster (it ran on no
    #: host); such a run is not ok, even when no host failed.
    not_verified: str | None = None

    @property
    def ok(self) -> bool:
        return not self.failed_hosts and self.not_verified is None

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

    def kept_records(self) -> list[GateRecord]:
        """What the run changed and left in place (rolled-back phases left out), in order: the undo journal."""
        return [rec for r in self.results if r.status is not Status.FAILED for rec in r.records]

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
            "undo_journal": self.undo_journal,
            "verified": self.not_verified is None,
            "not_verified": self.not_verified,
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
    options: RunOptions = field(default_factory=RunOptions)
    #: Called with each phase's results as it finishes (the CLI prints them as they come).
    on_phase: Callable[[Phase[Any], list[HostPhaseResult]], None] | None = None
    #: Hosts where no change is expected before the phases read them (every host of a plan; in
    #: an applying run, hosts whose previous run finished every phase): their phases' reads are
    #: done in one round trip, with the lock (``clusterctl.bootstrap.read_ahead``).
    read_ahead: frozenset[str] = frozenset()


class SkipReason(str, Enum):
    """Why a host does not run a phase; the value is what the report says."""

    EARLIER_FAILURE = "left out: an earlier step failed"
    NOT_THIS_HOST = "does not apply to this host"
    OTHER_HOST = "runs once per cluster, on another host"
    #: Only after ``verify`` confirms it on the host (``--resume``); otherwise the phase runs.
    DONE_BEFORE = "done in an earlier run, and the host confirms: nothing to do"


def skip_reason(phase: Phase[Any], ctx: PhaseContext, *, failed_earlier: bool, first_target: str | None,
                done_before: bool) -> SkipReason | None:
    """The one answer to "why does this host skip this phase"; ``None``: it runs it.

    ``first_target``: for a once-per-cluster phase, the host that runs it (the first the phase
    applies to, in inventory order). ``done_before``: the progress file of a resumed run says this
    host finished the phase. Asked before connecting: ``ctx.reader`` is not usable here.
    """
    if failed_earlier:
        return SkipReason.EARLIER_FAILURE
    if not phase.applies_to(ctx):
        return SkipReason.NOT_THIS_HOST
    if phase.once_per_cluster and ctx.host.name != first_target:
        return SkipReason.OTHER_HOST
    if done_before:
        return SkipReason.DONE_BEFORE
    return None


class _Unconnected(Transport):
    """What ``applies_to`` and ``skip_reason`` get as a host: using it is a bug in the phase."""

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
    shared = RunData()
    gate = Gate(apply=settings.apply)
    lock_info = host_lock.LockInfo.mine(uuid.uuid4().hex)
    locked: list[Host] = []
    store = settings.progress
    if store is not None and settings.apply and not settings.resume:
        store.forget([h.name for h in hosts])
    ahead = _reads_ahead(inventory, hosts, phases, shared, settings)
    try:
        # Read-only runs (preflight alone) change nothing, so they need no lock and may run
        # beside another run.
        if settings.apply and any(not p.read_only for p in phases):
            locked = _lock_hosts(runner, hosts, lock_info, settings, report, ahead)
        elif ahead:
            _fill_ahead(runner, [h for h in hosts if h.name in ahead], ahead)
        for phase in phases:
            shared.failed_hosts = frozenset(report.failed_hosts)
            phase_results, duration = _run_phase(phase, inventory, hosts, runner, gate, shared, settings, report,
                                                 ahead)
            report.results.extend(phase_results)
            counts = {s: sum(1 for r in phase_results if r.status is s) for s in Status}
            report.recap.append(PhaseRecap(phase.name, duration, counts))
            for r in phase_results:
                if r.status is Status.FAILED:
                    report.failed_hosts.setdefault(r.host, f"phase {phase.name}: {r.message}")
                if store is not None and settings.apply and r.message != SkipReason.EARLIER_FAILURE.value:
                    store.record(r.host, phase.name, r.status.value, r.duration_s, r.message)
            if store is not None and settings.apply:
                store.save()
            if settings.on_phase is not None:
                settings.on_phase(phase, phase_results)
    finally:
        if locked:
            _unlock_hosts(runner, locked, lock_info, settings)
    report.not_verified = _not_verified(report) if settings.apply else None
    report.duration_s = time.monotonic() - began
    return report


#: A verify result that counts as the cluster checked on that host.
_VERIFIED = {Status.OK, Status.CHANGED}


def _not_verified(report: BootstrapReport) -> str | None:
    """Why the run's ``verify`` phase checked nothing, or ``None`` (it ran, or was not asked for)."""
    if "verify" not in report.phases:
        return None
    results = [r for r in report.results if r.phase == "verify"]
    if any(r.status in _VERIFIED or r.message == SkipReason.DONE_BEFORE.value for r in results):
        return None
    if any(r.status is Status.FAILED for r in results):
        return None  # a failed verify is already a failed host, with its reason
    reasons = sorted({r.message for r in results if r.message}) or ["no host of this run could run it"]
    return ("verify did not run: " + "; ".join(reasons) + " (it runs on the first control-plane host: include "
            "that host in the run, or run 'clusterctl bootstrap phase verify' afterwards)")


#: (command, sudo) pairs each host's phases read first, for the hosts that read ahead.
Reads = dict[str, tuple[list[tuple[str, bool]], ReadAhead]]


def _reads_ahead(inventory: Inventory, hosts: Sequence[Host], phases: Sequence[Phase[Any]], shared: RunData,
                 settings: RunSettings) -> Reads:
    """What each read-ahead host's phases will read first (phases that run on every host alone)."""
    out: Reads = {}
    for host in hosts:
        if host.name not in settings.read_ahead:
            continue
        ctx = PhaseContext(host, HostReader(_Unconnected(host), what="read ahead"), inventory, shared,
                           settings.options)
        reads = [read for phase in phases if not (phase.serial or phase.once_per_cluster) and phase.applies_to(ctx)
                 for read in phase.reads(ctx)]
        if len(reads) > 1:
            out[host.name] = (reads, ReadAhead())
    return out


def _fill_ahead(runner: Runner, hosts: Sequence[Host], ahead: Reads) -> None:
    """The read-ahead on its own (a plan takes no lock): one round trip per host."""
    def read(transport: Transport) -> int:
        reads, answers = ahead[transport.host.name]
        try:
            return answers.fill(transport, reads)
        except TransportError:
            return 0  # the phases read one by one and report what is wrong

    runner.run_task(hosts, read, label="read")


def _lock_hosts(runner: Runner, hosts: Sequence[Host], info: host_lock.LockInfo, settings: RunSettings,
                report: BootstrapReport, ahead: Reads | None = None) -> list[Host]:
    # The lock is the one write that does not pass the gate: it guards the run itself (taken
    # before the first change, released after the last, never planned, never undone).
    def take(transport: Transport) -> str:
        planned = (ahead or {}).get(transport.host.name)
        if planned is None:
            return host_lock.acquire(transport, info, path=settings.lock_path, force=settings.force_unlock)
        # Once the lock is ours no other run changes the host: the reads run right after it, in
        # the same round trip (the lock is taken with sudo, so the sudo batch goes with it). A
        # failed read-ahead costs nothing but itself: the phases then read the host one by one
        # and say what is wrong.
        reads, answers = planned
        with_lock = next((b for b in answers.batches(reads) if b.sudo), None)
        note, result = host_lock.acquire_then(transport, info, with_lock.line if with_lock else None,
                                              path=settings.lock_path, force=settings.force_unlock)
        try:
            if with_lock is not None:
                answers.accept(with_lock, result)
            answers.fill(transport, reads, skip=with_lock if result is not None else None)
        except TransportError:
            answers.forget()
        return note

    from clusterctl.fanout import FleetInterrupted

    try:
        fleet = runner.run_task(hosts, take, label="lock")
    except FleetInterrupted as exc:
        # Ctrl-C while the locks are taken: give back what this run took before saying what
        # happened (release checks the run id: nobody else's lock is touched). Hosts still
        # taking theirs were cut off; one that hangs must not hold the interrupt up.
        took = [o.host for o in exc.finished.outcomes if o.ok] + list(exc.running)
        if took:
            _unlock_hosts(runner, took, info, settings, timeout_s=UNLOCK_AFTER_INTERRUPT_S)
        raise
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


#: How long releasing the locks may take after Ctrl-C (a host that stopped answering is given up on).
UNLOCK_AFTER_INTERRUPT_S = 30.0


def _unlock_hosts(runner: Runner, hosts: Sequence[Host], info: host_lock.LockInfo, settings: RunSettings,
                  *, timeout_s: float | None = None) -> None:
    def drop(transport: Transport) -> None:
        host_lock.release(transport, info, path=settings.lock_path)

    runner.run_task(hosts, drop, label="unlock", timeout_s=timeout_s)


def _run_phase(
    phase: Phase[Any],
    inventory: Inventory,
    hosts: Sequence[Host],
    runner: Runner,
    gate: Gate,
    shared: RunData,
    settings: RunSettings,
    report: BootstrapReport,
    ahead: Reads | None = None,
) -> tuple[list[HostPhaseResult], float]:
    """``phase`` on every host of the run: a result per host (skipped ones included), in inventory order."""
    began = time.monotonic()

    def unconnected(host: Host) -> PhaseContext:
        return PhaseContext(host, HostReader(_Unconnected(host), what=f"phase {phase.name}"), inventory, shared,
                            settings.options)

    live = [h for h in hosts if h.name not in report.failed_hosts]
    first_target = None
    if phase.once_per_cluster:
        first_target = next((h.name for h in live if phase.applies_to(unconnected(h))), None)
    store = settings.progress
    resuming = settings.apply and settings.resume and store is not None
    results: list[HostPhaseResult] = []
    targets: list[Host] = []
    done_before: set[str] = set()
    for host in hosts:
        why = skip_reason(phase, unconnected(host), failed_earlier=host.name in report.failed_hosts,
                          first_target=first_target,
                          done_before=resuming and store is not None and store.is_done(host.name, phase.name))
        if why is None or why is SkipReason.DONE_BEFORE:
            targets.append(host)
            if why is SkipReason.DONE_BEFORE:
                done_before.add(host.name)
        else:
            results.append(HostPhaseResult(host.name, phase.name, Status.SKIPPED, message=why.value))

    def task(transport: Transport) -> HostPhaseResult:
        planned = (ahead or {}).get(transport.host.name)
        return _one_host(phase, transport, inventory, shared, gate, settings,
                         done_before=transport.host.name in done_before,
                         known=planned[1] if planned is not None else None)

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
    order = {h.name: i for i, h in enumerate(hosts)}
    results.sort(key=lambda r: order.get(r.host, len(order)))
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


def _one_host(phase: Phase[Any], transport: Transport, inventory: Inventory, shared: RunData, gate: Gate,
              settings: RunSettings, *, done_before: bool, known: ReadAhead | None = None) -> HostPhaseResult:
    host = transport.host.name
    began = time.monotonic()
    result = HostPhaseResult(host, phase.name, Status.OK)
    reader = HostReader(transport, what=f"phase {phase.name}", known=known)
    ctx = PhaseContext(transport.host, reader, inventory, shared, settings.options)
    host_gate = gate.for_host(transport)

    def done(status: Status, message: str = "") -> HostPhaseResult:
        result.status = status
        result.message = mask_text(message)
        result.duration_s = time.monotonic() - began
        return result

    reader.remember()
    try:
        state = phase.check(ctx)
        result.state = state
        result.findings = list(phase.findings(ctx, state))
        if has_errors(result.findings):
            blocking = [f for f in result.findings if f.severity is Severity.ERROR]
            return done(Status.FAILED, "; ".join(f.message for f in blocking[:3]) +
                        (f" (+{len(blocking) - 3} more)" if len(blocking) > 3 else ""))
        changes = [c for c in phase.plan(ctx, state) if not c.is_noop]
    except ReadOnlyHost as exc:
        return done(Status.FAILED, f"bug in phase {phase.name}: {exc}")
    if done_before and not changes:
        # The progress file is a hint: the phase is skipped only when the host itself says there
        # is nothing to do (its check plans no change) and verify passes there now.
        reader.replay_once(keep=True)  # nothing applied: verify's first reads are check's answers
        problems = _verify(phase, ctx, host_gate) if settings.apply else []
        if not has_errors(problems):
            return done(Status.SKIPPED, SkipReason.DONE_BEFORE.value)
    if not settings.apply:
        host_gate.submit_all(changes)
        result.changes = changes
        return done(Status.CHANGED if changes else Status.OK)
    before = len(host_gate.records())
    # Verify reads the host again; where nothing is applied, its first reads are check's answers.
    reader.replay_once(keep=not changes)
    if changes and known is not None:
        known.forget()  # the host is about to change: what was read ahead is no longer sure
    try:
        records = phase.apply(ctx, host_gate, changes)
    except (ChangeFailed, TransportError) as exc:
        mine = host_gate.records()[before:]
        result.changes = [r.change for r in mine if r.changed]
        result.rollback = _rollback(phase, ctx, host_gate, mine)
        return done(Status.FAILED, str(exc))
    result.changes = [r.change for r in records if r.changed]
    result.records = [r for r in host_gate.records()[before:] if r.applied and r.changed and not r.temporary]
    problems = _verify(phase, ctx, host_gate)
    result.findings.extend(problems)
    if has_errors(problems):
        result.rollback = _rollback(phase, ctx, host_gate, records)
        return done(Status.FAILED, "verify failed: " + "; ".join(f.message for f in problems
                                                                   if f.severity is Severity.ERROR))
    return done(Status.CHANGED if result.changes else Status.OK)


def _verify(phase: Phase[Any], ctx: PhaseContext, gate: HostGate) -> list[Finding]:
    """``phase.verify`` with the read-only view, and the gate bound for its temporary changes only."""
    ctx._gate = gate
    try:
        return phase.verify(ctx)
    except ReadOnlyHost as exc:
        return [Finding(Severity.ERROR, "PHASE_CHANGED_HOST", f"bug in phase {phase.name}: {exc}",
                        host=ctx.host.name)]
    finally:
        ctx._gate = None


def _rollback(phase: Phase[Any], ctx: PhaseContext, gate: HostGate, records: Sequence[GateRecord]) -> list[str]:
    """Undo ``records`` through the gate, then pass the phase's own rollback changes; one line per step."""
    try:
        extra = phase.rollback(ctx, records) if any(r.applied and r.changed for r in records) else []
        # A command the rollback runs again (containerd's restart) is not reported as one undo cannot revert.
        again = {c.command for c in extra if c.command}
        lines = gate.undo([r for r in records if r.change.command is None or r.change.command not in again])
        for change in extra:
            try:
                gate.submit(change)
                lines.append(mask_text(f"{change.summary}: done"))
            except ChangeFailed as exc:
                tail = exc.record.result.stderr_tail(2) if exc.record.result is not None else ""
                lines.append(mask_text(f"{change.summary}: failed" + (f": {tail}" if tail else "")))
        if phase.verify_after_rollback:
            problems = [f for f in _verify(phase, ctx, gate) if f.severity is Severity.ERROR]
            lines.append("after the rollback, verify passes again" if not problems else
                         mask_text("after the rollback, verify still fails: " + "; ".join(f.message for f in problems)))
        return lines
    except Exception as exc:  # a failing rollback must still leave the original failure reported
        return [f"rollback failed: {type(exc).__name__}: {mask_text(str(exc))}"]
