"""The one action engine: runs an ordered list of phases across hosts, with a lock, progress, a recap.

For each phase the engine asks every host still in the run (in parallel through the fan-out
``Runner``): ``check`` -> ``findings`` (an error-level finding stops the host) -> ``plan``. In
plan mode (``bootstrap plan``, ``--dry-run``) the changes are recorded by the gate and nothing
else happens. In apply mode they pass through the gate, ``verify`` reads the host again, and a
failed change or verify triggers the rollback: the gate undoes the phase's records, then the
phase's own ``rollback`` changes pass the gate. A host that fails a phase is left out of the
later phases; the other hosts go on. Why a host skips a phase is decided in one place,
``skip_reason``. See ``clusterctl.engine.phase`` for how to write a phase.

Every command that changes hosts runs here (bootstrap, reset, ``certs renew``...), so each gets
the same: hosts all at once per phase, or in batches (``RunSettings.batches``: a rolling
change, ``--max-unavailable``), a phase ``serial`` (one host at a time) or ``once_per_cluster``;
the host lock (``engine.lock``); progress and ``--resume`` (``engine.progress``); an undo journal
written before each change reaches its host (``undo_journal.WriteAheadJournal``); and Ctrl-C or
SIGTERM handled here once: the phase in flight is undone where it moved something out of place
(``Phase.undo_on_interrupt``) and the temporary changes left (verify's GPU test pod) are cleaned up,
on a fresh connection once every host has stopped; the journal and progress are saved, the locks
given back. A step the interrupt cuts short is never rolled back on
its own connection (the fan-out is closing it: the outcome would be chance); what it applied stays
in the journal, so ``undo`` or ``--resume`` completes it every time.
"""

from __future__ import annotations

import shlex
import threading
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import TYPE_CHECKING, Any, NamedTuple, TypeVar

from clusterctl.changes import Change, ChangeFailed, Gate, GateRecord, HostGate, UndoLine
from clusterctl.engine import lock as host_lock
from clusterctl.engine.confirm import HostConfirmations, Read, confirm_hosts, record_hosts
from clusterctl.engine.phase import Phase, PhaseContext, Wait
from clusterctl.engine.progress import DONE, INTERRUPTED
from clusterctl.engine.read_ahead import Batch, ReadAhead, batches
from clusterctl.errors import Interrupted, UsageError
from clusterctl.fanout import FleetInterrupted, Runner
from clusterctl.findings import Finding, Severity, fails, sorted_findings
from clusterctl.host_reader import HostReader, ReadOnlyHost
from clusterctl.hostlist import compress
from clusterctl.inventory.values import did_you_mean
from clusterctl.secret import mask_text
from clusterctl.transport.base import CommandResult, FailureKind, RunRequest, Transport, TransportError
from clusterctl.undo_journal import undo_line, undoable
from clusterctl.wording import first_few

if TYPE_CHECKING:
    from clusterctl.engine.progress import ProgressStore
    from clusterctl.inventory.model import Host, Inventory
    from clusterctl.undo_journal import WriteAheadJournal


class Status(str, Enum):
    """How one phase went on one host: the report's one vocabulary (no free-form status strings)."""

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
    #: Why it was skipped (``Status.SKIPPED``), what the code asks; ``None``: it ran.
    skipped: SkipReason | None = None
    #: What rollback did, one line each.
    rollback: list[str] = field(default_factory=list)
    #: What the phase waits for (a plan shows it; an applying run waited for it).
    waits: list[str] = field(default_factory=list)
    #: What ``check`` returned, for the phase's ``fleet_findings`` (not reported).
    state: Any = field(default=None, repr=False)
    #: What the gate applied for this phase here and kept (for the undo journal; not reported).
    records: list[GateRecord] = field(default_factory=list, repr=False)
    #: The reads that show this phase has nothing left to do here (``clusterctl.engine.confirm``);
    #: ``None``: none that could be replayed (not reported).
    reads: list[Read] | None = field(default=None, repr=False)

    def step(self, description: str, runs_on: str) -> dict[str, Any]:
        """This result as one step of a day-2 report (upgrade's nodes, remove-node), for ``step_json``."""
        return {"step": self.phase, "runs_on": runs_on, "summary": description, "status": self.status.value,
                "changes": self.changes, "waits": self.waits, "message": mask_text(self.message),
                "findings": self.findings}

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"host": self.host, "phase": self.phase, "status": self.status.value,
                                "duration_s": round(self.duration_s, 3),
                                "changes": [c.to_json() for c in self.changes],
                                "findings": [f.to_json() for f in self.findings]}
        if self.message:
            data["message"] = mask_text(self.message)
        data.update({key: [mask_text(line) for line in lines]
                     for key, lines in (("rollback", self.rollback), ("waits", self.waits)) if lines})
        return data


def cured(phase: Phase[Any, Any], result: HostPhaseResult) -> bool:
    """Whether ``result`` (of an applying run) is a remedy that cured its host: ``RunReport.cured``'s rule."""
    return phase.remedy and result.status in (Status.OK, Status.CHANGED)


def step_json(step: dict[str, Any]) -> dict[str, Any]:
    return {**step, "changes": [c.to_json() for c in step["changes"]],
            "findings": [f.to_json() for f in step["findings"]]}


@dataclass
class PhaseRecap:
    phase: str
    duration_s: float
    counts: dict[Status, int]

    def to_json(self) -> dict[str, Any]:
        return {"phase": self.phase, "duration_s": round(self.duration_s, 3),
                **{s.value: self.counts.get(s, 0) for s in Status}}


@dataclass
class RunReport:
    cluster: str
    applied: bool
    phases: list[str]
    hosts: list[str]
    results: list[HostPhaseResult] = field(default_factory=list)
    recap: list[PhaseRecap] = field(default_factory=list)
    #: Host -> why it dropped out of the run (lock refused, a failed phase).
    failed_hosts: dict[str, str] = field(default_factory=dict)
    #: Host -> the remedy (``Phase.remedy``) that cured it.
    cured: dict[str, str] = field(default_factory=dict)
    #: Notes about the run itself (a cleared stale lock, a resumed progress file).
    notes: list[str] = field(default_factory=list)
    duration_s: float = 0.0
    #: The journal ``clusterctl undo`` reverts this run with (applying runs that changed something).
    undo_journal: str | None = None
    #: Why an applying run that included ``verify`` could not verify the cluster (it ran on no
    #: host); such a run is not ok, even when no host failed.
    not_verified: str | None = None
    #: Ctrl-C or SIGTERM stopped the run (the signal's name); what was in flight is in ``notes``.
    interrupted: str | None = None

    @property
    def ok(self) -> bool:
        return not self.failed_hosts and self.not_verified is None and self.interrupted is None

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
            "interrupted": self.interrupted,
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
    #: Options of the run given to every phase as ``ctx.options`` (the command's own type).
    options: Any = None
    #: The context each phase gets for a host (a command's own ``PhaseContext`` with its typed
    #: ``shared`` and ``options``); ``None``: the engine's, with ``options`` and no shared data.
    context: Callable[[Host, HostReader], PhaseContext] | None = None
    #: Called before each phase with the hosts that dropped out so far (bootstrap's verify reads them).
    before_phase: Callable[[frozenset[str]], None] | None = None
    #: The batches by host name, in order: every phase runs on one batch before the next batch starts
    #: (a rolling change: ``certs renew`` one control plane at a time, an upgrade's control planes one by
    #: one, then workers ``--max-unavailable`` at a time; a batch with a failed host stops the run).
    #: ``None``: all hosts per phase. In a batched run the once-per-cluster phases at the end of the
    #: list run once, after the last batch (the add-ons).
    batches: Sequence[Sequence[str]] | None = None
    #: A host whose lock is refused stops the whole run before any phase (a rolling change must hold
    #: every host it will touch): the locks taken are given back and no host is started.
    every_lock_or_none: bool = False
    #: The undo journal, kept as the run goes (applying runs): each change is in it before it is made.
    journal: WriteAheadJournal | None = None
    #: The gate of a command whose own steps before and after the phases pass it too (heal's notes and
    #: release: ``engine.journaled.journaled_gate``, which then keeps and finishes the journal).
    gate: Gate | None = None
    #: What the host's answers to ``Phase.reads`` are compared with besides the reads themselves
    #: (the inventory entry, the run's options): ``confirmations`` needs it.
    inputs_digest: Callable[[Host], str] | None = None
    #: The command line that goes on after an interrupt (``clusterctl certs renew --resume --yes``).
    resume_hint: str | None = None
    #: Called with each phase's results as it finishes (the CLI prints them as they come).
    on_phase: Callable[[Phase[Any, Any], list[HostPhaseResult]], None] | None = None
    #: What confirms each host unchanged since its phases last had nothing to do (one batched read
    #: per host instead of each phase's own; ``clusterctl.engine.confirm``); ``None``: not used.
    confirmations: HostConfirmations | None = None
    #: Hosts where no change is expected before the phases read them (every host of a plan; in
    #: an applying run, hosts whose previous run finished every phase): their phases' reads are
    #: done in one round trip, with the lock (``clusterctl.engine.read_ahead``).
    read_ahead: frozenset[str] = frozenset()
    #: Answers read before the run, by host and ``(command, sudo)`` (bootstrap's and upgrade's downgrade
    #: checks read each host's packages): given to the first ``check`` that asks, as if read ahead (not read
    #: again, not in a batch, forgotten once the host changes).
    answered: Mapping[str, Mapping[tuple[str, bool], CommandResult]] = field(default_factory=dict)


class SkipReason(str, Enum):
    """Why a host does not run a phase; the value is what the report says."""

    EARLIER_FAILURE = "left out: an earlier step failed"
    NOT_THIS_HOST = "does not apply to this host"
    OTHER_HOST = "runs once per cluster, on another host"
    #: Only after ``verify`` confirms it on the host (``--resume``); otherwise the phase runs.
    DONE_BEFORE = "done in an earlier run, and the host confirms: nothing to do"
    #: The host answered the reads of its phases' last "nothing to do" exactly as then.
    CONFIRMED = "unchanged since the last run: the host answers its phases' reads as then (one batched read)"
    #: ``Phase.not_needed`` gave a reason; the report says ``nothing to do: <reason>``.
    NOT_NEEDED = "nothing to do"
    CURED = "left out: an earlier remedy cured the host"


def finished(store: ProgressStore, host: str, phase: str) -> bool:
    """Whether the host's last run finished ``phase``: ok, changed, or skipped where the host is as a run of it
    leaves it. What ``--resume``, read-ahead and a rollout's left cordons count as done."""
    entry = store.last(host, phase)
    skipped = SkipReason.__members__.get(str(entry.get("skipped")))
    return entry.get("status") in DONE or skipped in (SkipReason.NOT_THIS_HOST, SkipReason.CONFIRMED,
                                                      SkipReason.NOT_NEEDED, SkipReason.DONE_BEFORE)


def skip_reason(phase: Phase[Any, Any], ctx: PhaseContext, *, failed_earlier: bool, first_target: str | None,
                done_before: bool, confirmed: bool = False, cured: bool = False) -> SkipReason | None:
    """The one answer to "why does this host skip this phase"; ``None``: it runs it.

    ``first_target``: for a once-per-cluster phase, the host that runs it (the first the phase
    applies to, in inventory order). ``done_before``: the progress file of a resumed run says this
    host finished the phase. ``confirmed``: the host's one batched read at the start of the run
    answered as recorded (``clusterctl.engine.confirm``). ``cured``: an earlier remedy cured the host.
    Asked before connecting: ``ctx.reader`` is not usable here.
    """
    if failed_earlier:
        return SkipReason.EARLIER_FAILURE
    if cured:
        return SkipReason.CURED
    if not phase.applies_to(ctx):
        return SkipReason.NOT_THIS_HOST
    if phase.not_needed(ctx) is not None:
        return SkipReason.NOT_NEEDED
    if phase.once_per_cluster and ctx.host.name != first_target:
        return SkipReason.OTHER_HOST
    if confirmed:
        return SkipReason.CONFIRMED
    if done_before:
        return SkipReason.DONE_BEFORE
    return None


AnyPhase = TypeVar("AnyPhase", bound="Phase[Any, Any]")


def select_phases(phases: Sequence[AnyPhase], only: str | None, skip: str | None, *, command: str,
                  on_demand: Sequence[AnyPhase] = ()) -> list[AnyPhase]:
    """The phases of a run (``phase NAME``, ``--skip-phases a,b``): ``phases`` in order, or the one named.
    ``on_demand`` phases (bootstrap's reset) run only when named. A name that is no phase is exit 2,
    naming it and the phases there are, and so is a ``--skip-phases`` that leaves nothing to run."""
    names = [p.name for p in [*phases, *on_demand]]
    skipped = [s.strip() for s in (skip or "").split(",") if s.strip()]
    for name, given in [*([(only, "phase")] if only else []), *((name, "--skip-phases") for name in skipped)]:
        if name not in names:
            raise UsageError(f"{command} has no phase named {name!r}.", field=given,
                             hint=did_you_mean(name, names) or "Phases: " + ", ".join(names) + ".")
    chosen = [p for p in [*phases, *on_demand] if p.name == only] if only else list(phases)
    chosen = [p for p in chosen if p.name not in skipped]
    if not chosen:
        raise UsageError("--skip-phases leaves no phase to run", field="--skip-phases")
    return chosen


class GivenOptions(NamedTuple):
    """The options a run was given, as the user typed them: the global ones (its inventory, its hosts...) and the
    command's own (its state folder, --force...)."""

    global_words: tuple[str, ...] = ()
    own_words: tuple[str, ...] = ()


def command_line(*words: str, given: GivenOptions, resume: bool, yes: bool = True) -> str:
    """``clusterctl WORDS`` (the command) with the options its run was given: what goes on after an interrupt
    (``RunSettings.resume_hint``; ``resume``: the command has ``--resume``) or carries out a plan."""
    return shlex.join(["clusterctl", *given.global_words, *words, *given.own_words,
                       *(("--resume",) if resume else ()), *(("--yes",) if yes else ())])


class _Unconnected(Transport):
    """What ``applies_to`` and ``skip_reason`` get as a host: using it is a bug in the phase."""

    def execute(self, request: RunRequest) -> CommandResult:
        raise TransportError(FailureKind.ERROR, "applies_to() must decide without running commands")


def run_phases(
    inventory: Inventory,
    hosts: Sequence[Host],
    runner: Runner,
    phases: Sequence[Phase[Any, Any]],
    settings: RunSettings,
) -> RunReport:
    """Run ``phases`` on ``hosts``; never raises for a host's failure (it is in the report).

    Ctrl-C or SIGTERM (``Interrupted``) is handled here and raised again once the run is in order:
    what the phase in flight moved out of place is put back (``Phase.undo_on_interrupt``), the
    progress and the undo journal are saved, the locks given back, and the interrupt's
    ``retry_hint`` names the journal and ``--resume``.
    """
    began = time.monotonic()
    report = RunReport(inventory.name, settings.apply, [p.name for p in phases], [h.name for h in hosts])
    run = _Run(inventory, hosts, runner, phases, settings, report,
               settings.gate or Gate(apply=settings.apply, log=settings.journal if settings.apply else None,
                                     interrupted=runner.interrupted))
    store = settings.progress
    if store is not None and settings.apply and not settings.resume:
        store.forget([h.name for h in hosts])
    if settings.confirmations is not None and not settings.resume:
        run.confirmed = _confirm_unchanged(run)
    unconfirmed = [h for h in hosts if h.name not in run.confirmed]
    run.ahead = _reads_ahead(run, unconfirmed)
    try:
        # Read-only runs (preflight alone) change nothing, so they need no lock and may run
        # beside another run. Nor does a host confirmed unchanged: nothing will change there.
        if settings.apply and any(not p.read_only for p in phases):
            run.locked = _lock_hosts(run, _lock_targets(run, unconfirmed))
        else:
            _fill_ahead(runner, hosts, run.ahead)
        stopped = settings.every_lock_or_none and bool(report.failed_hosts)
        if stopped and run.locked:
            _unlock_hosts(run, run.locked)
            run.locked = []
        rolling, closing = _closing_phases(phases, settings)
        for batch in [] if stopped else _batches(hosts, settings):
            for phase in rolling:
                _one_phase(run, phase, batch)
            if settings.batches is not None and any(h.name in report.failed_hosts for h in batch):
                later = [h.name for h in hosts[hosts.index(batch[-1]) + 1:]]
                if later:
                    report.notes.append(f"stopped after a failed host: not started on {', '.join(later)}")
                stopped = True
                break
        for phase in [] if stopped else closing:
            _one_phase(run, phase, hosts)
        if settings.confirmations is not None and settings.apply and not settings.resume:
            _record_unchanged(run)
        if settings.apply and any(p.remedy for p in phases):
            for uncured in [h.name for h in hosts if h.name not in report.cured]:
                report.failed_hosts.setdefault(uncured, "no remedy cured it")
        elif any(p.remedy for p in phases):  # a plan cures nothing: a remedy that already fails fails, as any phase
            for failed in [r for r in report.results if r.status is Status.FAILED]:
                report.failed_hosts.setdefault(failed.host, f"phase {failed.phase}: {failed.message}")
    except Interrupted as exc:
        report.interrupted = exc.signal_name
        cut_short = run.inflight.snapshot()
        _put_back(run)
        if store is not None and settings.apply:
            # The phases the interrupt cut short are on record as such (never done): a later run sees
            # where this one stopped (an upgrade's plain rerun: which cordons were its own).
            for host, (phase, _, _) in cut_short.items():
                store.record(host, phase.name, INTERRUPTED, 0.0, f"interrupted ({exc.signal_name})")
            store.save()
        exc.retry_hint = _after_interrupt(run)
        raise
    finally:
        if not report.interrupted:
            _finish(run)
    report.duration_s = time.monotonic() - began
    return report


@dataclass
class _Run:
    """One run of ``run_phases``: what each of its steps (a phase, the locks, the put-back) works with."""

    inventory: Inventory
    hosts: Sequence[Host]
    runner: Runner
    phases: Sequence[Phase[Any, Any]]
    settings: RunSettings
    report: RunReport
    gate: Gate
    lock_info: host_lock.LockInfo = field(default_factory=lambda: host_lock.LockInfo.mine(uuid.uuid4().hex))
    #: The hosts whose lock this run holds, and those where taking it made its folder.
    locked: list[Host] = field(default_factory=list)
    made_lock_folder: set[str] = field(default_factory=set)
    #: The hosts confirmed unchanged by their one batched read (``_confirm_unchanged``).
    confirmed: frozenset[str] = frozenset()
    ahead: Reads = field(default_factory=dict)
    inflight: _InFlight = field(default_factory=lambda: _InFlight())

    def context(self, host: Host, reader: HostReader) -> PhaseContext:
        if self.settings.context is not None:
            return self.settings.context(host, reader)
        return PhaseContext(host, reader, self.inventory, options=self.settings.options)

    def unconnected(self, host: Host, what: str = "this step") -> PhaseContext:
        """The context of a decision made before connecting (``applies_to``, ``skip_reason``, ``reads``)."""
        return self.context(host, HostReader(_Unconnected(host), what=what))


def _finish(run: _Run) -> None:
    """Give the locks back and turn the journal's log into the journal (``undo_journal``)."""
    report, journal = run.report, run.settings.journal
    if run.locked:
        _unlock_hosts(run, run.locked, timeout_s=UNLOCK_AFTER_INTERRUPT_S if report.interrupted else None)
    if journal is not None and run.settings.apply:
        path = journal.finish(report.kept_records() + run.inflight.kept(run.gate), interrupted=report.interrupted)
        if path is not None:
            report.undo_journal = str(path)
            report.notes.append(undo_line(path))


def _after_interrupt(run: _Run) -> str:
    """Put the run in order after Ctrl-C; what the user reads: what was in flight, the journal, how to go on."""
    _finish(run)
    report, settings = run.report, run.settings
    # The journal is named once, in the line that says what undoing it does, not also as a note.
    lines = [note for note in report.notes if not report.undo_journal or note != undo_line(report.undo_journal)]
    if report.undo_journal:
        lines.append(f"to take back what this run changed: clusterctl undo {report.undo_journal}")
    if settings.resume_hint and settings.apply:  # a plan has nothing to go on with (and the line would apply it)
        lines.append(f"to go on where it stopped: {settings.resume_hint}")
    return "\n".join(lines)


def _one_phase(run: _Run, phase: Phase[Any, Any], batch: Sequence[Host]) -> None:
    """``phase`` on ``batch``, its results kept: in the report, in the progress file, told to ``on_phase``."""
    settings, report = run.settings, run.report
    if settings.before_phase is not None:
        settings.before_phase(frozenset(report.failed_hosts))
    phase_results, duration = _run_phase(run, phase, batch)
    store = settings.progress
    report.results.extend(phase_results)
    counts = {s: sum(1 for r in phase_results if r.status is s) for s in Status}
    report.recap.append(PhaseRecap(phase.name, duration, counts))
    for r in phase_results:
        if r.status is Status.FAILED and not phase.remedy:
            report.failed_hosts.setdefault(r.host, f"phase {phase.name}: {r.message}")
        if settings.apply and cured(phase, r):
            report.cured.setdefault(r.host, phase.name)
        if store is not None and settings.apply and r.skipped is not SkipReason.EARLIER_FAILURE:
            store.record(r.host, phase.name, r.status.value, r.duration_s, r.message, r.skipped and r.skipped.name)
    if store is not None and settings.apply:
        store.save()
    if settings.on_phase is not None:
        settings.on_phase(phase, phase_results)


def _batches(hosts: Sequence[Host], settings: RunSettings) -> list[list[Host]]:
    if settings.batches is None:
        return [list(hosts)]
    by_name = {h.name: h for h in hosts}
    return [[by_name[n] for n in names if n in by_name] for names in settings.batches
            if any(n in by_name for n in names)]


def _closing_phases(phases: Sequence[Phase[Any, Any]], settings: RunSettings
                    ) -> tuple[list[Phase[Any, Any]], list[Phase[Any, Any]]]:
    """A batched run's phases per batch, and the once-per-cluster ones that end the list (run after the
    last batch: the cluster's add-ons once every node is done)."""
    cut = len(phases)
    while settings.batches is not None and cut > 0 and phases[cut - 1].once_per_cluster:
        cut -= 1
    return (list(phases[:cut]), list(phases[cut:])) if cut else (list(phases), [])


class _InFlight:
    """Host -> the phase it is in and where that phase's records start in the gate (thread-safe)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.hosts: dict[str, tuple[Phase[Any, Any], Transport, int]] = {}

    def enter(self, host: str, phase: Phase[Any, Any], transport: Transport, start: int) -> None:
        with self._lock:
            self.hosts[host] = (phase, transport, start)

    def leave(self, host: str) -> None:
        with self._lock:
            self.hosts.pop(host, None)

    def snapshot(self) -> dict[str, tuple[Phase[Any, Any], Transport, int]]:
        with self._lock:
            return dict(self.hosts)

    def kept(self, gate: Gate) -> list[GateRecord]:
        """What the phases cut off by an interrupt applied and left in place: the journal keeps it."""
        kept: list[GateRecord] = []
        for _, transport, start in self.snapshot().values():
            kept += [r for r in undoable(gate.records_for(transport.host.name)[start:])
                     if not any(r is k for k in kept)]
        return kept


#: How long putting back what an interrupted phase moved may take (a host that stopped answering is
#: left to the journal).
PUT_BACK_AFTER_INTERRUPT_S = 60.0


def _put_back(run: _Run) -> None:
    """After Ctrl-C: undo what each phase in flight with ``undo_on_interrupt`` applied on its host, and
    clean up the temporary changes left (verify's GPU test pod: ``Gate.temporary``)."""
    gate, report, inflight = run.gate, run.report, run.inflight
    cut = inflight.snapshot()
    for host, (phase, _, _) in cut.items():
        report.notes.append(f"{host}: interrupted in phase {phase.name}")
    # (A phase run for a host from another one is put back through the journal, not here.)
    todo = {h: v for h, v in cut.items() if v[0].undo_on_interrupt and v[1].host.name == h}
    left = {t.host for t in gate.left_over()}
    if not (todo or left) or not gate.apply:
        return
    by_name = {h: t.host for h, (_, t, _) in todo.items()}
    by_name.update({name: run.inventory.host(name) for name in sorted(left) if name not in by_name})

    def put_back(transport: Transport) -> list[UndoLine]:
        name = transport.host.name
        undone = gate.undo(transport, gate.records_for(name)[todo[name][2]:]) if name in todo else []
        return undone + gate.clean_up_left(transport)

    try:
        fleet = run.runner.run_task(list(by_name.values()), put_back, label="put back",
                                    timeout_s=PUT_BACK_AFTER_INTERRUPT_S)
    except FleetInterrupted:
        report.notes.append("interrupted again while putting back: the undo journal has what is left")
        return
    for outcome in fleet.outcomes:
        if outcome.ok:
            if outcome.host.name in todo and not any(line.left for line in outcome.value or []):
                inflight.leave(outcome.host.name)  # undone: nothing of that phase is left for the journal
            lines = "; ".join(line.text for line in outcome.value or []) or "nothing was moved yet"
            report.notes.append(f"{outcome.host.name}: put back after the interrupt: {lines}")
        else:
            why = outcome.failure.describe() if outcome.failure else "no result"
            report.notes.append(f"{outcome.host.name}: could not put back after the interrupt ({why}): "
                                "the undo journal has it")


def _applicable(run: _Run) -> dict[str, list[Phase[Any, Any]]]:
    """Host -> the phases of the run it would run (not those for other hosts or run once elsewhere)."""
    out: dict[str, list[Phase[Any, Any]]] = {h.name: [] for h in run.hosts}
    for phase in run.phases:
        takers = [h for h in run.hosts if phase.applies_to(run.unconnected(h))]
        if phase.once_per_cluster:
            takers = takers[:1]
        for h in takers:
            out[h.name].append(phase)
    return out


def _confirm_unchanged(run: _Run) -> frozenset[str]:
    """The hosts whose every phase of this run is confirmed by their one batched read."""
    store, inputs_digest, inventory = run.settings.confirmations, run.settings.inputs_digest, run.inventory
    assert store is not None and inputs_digest is not None
    candidates = []
    for host, own in _applicable(run).items():
        record, entry = store.get(host), inventory.host(host)
        changing = [p for p in own if not p.read_only]
        if record is not None and changing and all(p.confirmable and p.name in record.phases for p in changing) \
                and record.inputs == inputs_digest(entry):
            candidates.append((entry, record))
    confirmed = confirm_hosts(run.runner, candidates)
    if confirmed:
        run.report.notes.append(f"unchanged since the last run (one batched read each, no phase read or lock): "
                                f"{compress(h.name for h in run.hosts if h.name in confirmed)}")
    return frozenset(confirmed)


def _record_unchanged(run: _Run) -> None:
    """Keep, for each host whose phases all ended with nothing left to do, the reads that show it."""
    store, inputs_digest, report = run.settings.confirmations, run.settings.inputs_digest, run.report
    assert store is not None and inputs_digest is not None
    results = {(r.host, r.phase): r for r in report.results}
    entries = []
    for host, own in _applicable(run).items():
        if host in run.confirmed:
            continue
        reads: list[Read] = []
        for phase in (p for p in own if not p.read_only):
            result = results.get((host, phase.name))
            if not phase.confirmable or result is None or result.status not in (Status.OK, Status.CHANGED) \
                    or result.reads is None:
                reads = []
                break
            reads += [r for r in result.reads if r not in reads]
        if host in report.failed_hosts or not reads:
            store.put(host, None)
            continue
        entry = run.inventory.host(host)
        entries.append((entry, inputs_digest(entry),
                        tuple(p.name for p in own), tuple(reads)))
    record_hosts(run.runner, store, entries)
    store.save()


#: The batches of what each host's phases read first, for the hosts that read ahead, and its answers.
Reads = dict[str, tuple[list[Batch], ReadAhead]]


def _reads_ahead(run: _Run, hosts: Sequence[Host]) -> Reads:
    """What each read-ahead host's phases will read first (phases that run on every host alone), but what was
    read before the run (``RunSettings.answered``): each host's answers start with that."""
    out: Reads = {}
    for host in hosts:
        answered = run.settings.answered.get(host.name, {})
        reads: list[tuple[str, bool]] = []
        if host.name in run.settings.read_ahead:
            ctx = run.unconnected(host, "read ahead")
            reads = [read for phase in run.phases if not (phase.serial or phase.once_per_cluster)
                     and phase.applies_to(ctx) for read in phase.reads(ctx) if read not in answered]
        if len(reads) > 1 or answered or not run.settings.apply:  # a plan's phases hand their answers on
            out[host.name] = (batches(reads), ReadAhead(answered))
    return out


def _fill_ahead(runner: Runner, hosts: Sequence[Host], ahead: Reads) -> None:
    """The read-ahead on its own (a plan takes no lock): one round trip per host that has a batch to read
    (a host that only has answers read before the run is not connected to for nothing)."""
    def read(transport: Transport) -> int:
        to_read, answers = ahead[transport.host.name]
        try:
            return answers.fill(transport, to_read)
        except TransportError:
            return 0  # the phases read one by one and report what is wrong

    reading = [h for h in hosts if h.name in ahead and ahead[h.name][0]]
    if reading:
        runner.run_task(reading, read, label="read")


def _lock_targets(run: _Run, hosts: Sequence[Host]) -> list[Host]:
    """The hosts whose lock a run takes: those it changes. Each host of the run, unless every phase that
    concerns it runs from another host (a node that is gone: its drain and Node deletion run from a
    control plane), and each host a phase runs on for another (``Phase.via``)."""
    names: list[str] = []
    for host in hosts:
        ctx = run.unconnected(host, "lock")
        changing = [p for p in run.phases if not p.read_only and p.applies_to(ctx)]
        ran_on = [p.via if p.via and p.locks_via else host.name for p in changing]
        for name in ([host.name] if host.name in ran_on or not changing else []) + ran_on:
            if name not in names:
                names.append(name)
    return [run.inventory.host(n) for n in names]


def _lock_hosts(run: _Run, hosts: Sequence[Host]) -> list[Host]:
    # The lock is the one write that does not pass the gate: it guards the run itself (taken
    # before the first change, released after the last, never planned, never undone).
    def take(transport: Transport) -> str:
        # Once the lock is ours no other run changes the host: the reads run right after it, in
        # the same round trip (the lock is taken with sudo, so the sudo batch goes with it). A
        # failed read-ahead costs nothing but itself: the phases then read the host one by one
        # and say what is wrong.
        to_read, answers = run.ahead.get(transport.host.name) or ([], None)
        with_lock = next((b for b in to_read if b.sudo), None)
        note, result, made_folder = host_lock.acquire_then(
            transport, run.lock_info, with_lock.line if with_lock else None, path=run.settings.lock_path,
            force=run.settings.force_unlock)
        if made_folder:
            run.made_lock_folder.add(transport.host.name)
        if answers is None:
            return note
        try:
            if with_lock is not None:
                answers.accept(with_lock, result)
            answers.fill(transport, [b for b in to_read if result is None or b is not with_lock])
        except TransportError:
            answers.forget()
        return note

    try:
        fleet = run.runner.run_task(hosts, take, label="lock")
    except FleetInterrupted as exc:
        # Ctrl-C while the locks are taken: give back what this run took before saying what
        # happened (release checks the run id: nobody else's lock is touched). Hosts still
        # taking theirs were cut off; one that hangs must not hold the interrupt up.
        took = [o.host for o in exc.finished.outcomes if o.ok] + list(exc.running)
        if took:
            _unlock_hosts(run, took, timeout_s=UNLOCK_AFTER_INTERRUPT_S, noted=False)
        raise
    locked: list[Host] = []
    for outcome in fleet.outcomes:
        if outcome.ok:
            locked.append(outcome.host)
            if outcome.value:
                run.report.notes.append(f"{outcome.host.name}: {outcome.value}")
        else:
            assert outcome.failure is not None
            run.report.failed_hosts[outcome.host.name] = f"lock: {outcome.failure.message}"
    return locked


#: How long releasing the locks may take after Ctrl-C (a host that stopped answering is given up on).
UNLOCK_AFTER_INTERRUPT_S = 30.0


def _unlock_hosts(run: _Run, hosts: Sequence[Host], *, timeout_s: float | None = None, noted: bool = True) -> None:
    """Give back this run's locks on ``hosts``; a lock still held is a note of the report (``noted``)."""
    path, made = run.settings.lock_path, run.made_lock_folder
    fleet = run.runner.run_task(hosts, lambda t: host_lock.release(t, run.lock_info, path=path,
                                                                   made_folder=t.host.name in made),
                                label="unlock", timeout_s=timeout_s)
    for outcome in fleet.outcomes:
        if noted and not outcome.ok and outcome.failure is not None:
            run.report.notes.append(f"{outcome.host.name}: its lock {path} is still held by this run "
                                    f"({outcome.failure.message}): the next run needs --force-unlock")


def _run_phase(run: _Run, phase: Phase[Any, Any], batch: Sequence[Host]) -> tuple[list[HostPhaseResult], float]:
    """``phase`` on every host of ``batch`` (all the run's hosts, or one batch of a rolling run): a result
    per host (skipped ones included), in inventory order."""
    began = time.monotonic()
    hosts, settings, report, gate, inflight = run.hosts, run.settings, run.report, run.gate, run.inflight

    def unconnected(host: Host) -> PhaseContext:
        return run.unconnected(host, f"phase {phase.name}")

    first_target = next((h.name for h in hosts if h.name not in report.failed_hosts
                         and phase.applies_to(unconnected(h))), None) if phase.once_per_cluster else None
    resumed = settings.progress if settings.apply and settings.resume else None
    results: list[HostPhaseResult] = []
    targets: list[Host] = []
    done_before: set[str] = set()
    for host in batch:
        why = skip_reason(phase, unconnected(host), failed_earlier=host.name in report.failed_hosts,
                          first_target=first_target, confirmed=host.name in run.confirmed,
                          cured=host.name in report.cured,
                          done_before=resumed is not None and finished(resumed, host.name, phase.name))
        if why is None or why is SkipReason.DONE_BEFORE:
            targets.append(host)
            if why is SkipReason.DONE_BEFORE:
                done_before.add(host.name)
        else:  # the reason, with the phase's own for NOT_NEEDED
            said = f"{why.value}: {phase.not_needed(unconnected(host))}" if why is SkipReason.NOT_NEEDED else why.value
            results.append(HostPhaseResult(host.name, phase.name, Status.SKIPPED, message=said, skipped=why))

    # A phase that runs for a host from another one (a drain from the control plane): each such host
    # in turn on that host's connection, in inventory order.
    via = run.inventory.host(phase.via) if phase.via is not None else None

    def task(transport: Transport) -> list[HostPhaseResult]:
        out = []
        for host in targets if via is not None else [transport.host]:
            planned = run.ahead.get(host.name) if via is None else None
            # Left in flight until the phase's results are kept: a host that finished while Ctrl-C stopped
            # the step has no result, and what it applied must still reach the journal.
            inflight.enter(host.name, phase, transport, len(gate.records_for(transport.host.name)))
            out.append(_one_host(run, phase, transport, done_before=host.name in done_before,
                                 known=planned[1] if planned is not None else None,
                                 acting_for=host if via is not None else None))
        return out

    limit = max(run.runner.timeout_s, phase.timeout_s)
    groups = [[h] for h in targets] if phase.serial else [list(targets)]
    if via is not None:
        groups, limit = [[via]] if targets else [], limit * len(targets)
    for group in groups:
        if not group:
            continue
        label = phase.name if via is None else f"{phase.name} (on {via.name})"
        for outcome in run.runner.run_task(group, task, label=label, timeout_s=limit).outcomes:
            concerned = targets if via is not None else [outcome.host]
            if outcome.ok and outcome.value is not None:
                results += outcome.value
            else:
                failure = outcome.failure.describe() if outcome.failure else "no result"
                message = mask_text((f"on {via.name}: " if via is not None else "") + failure)
                results += [HostPhaseResult(h.name, phase.name, Status.FAILED, outcome.duration_s, message=message)
                            for h in concerned]
            for host in concerned:
                inflight.leave(host.name)
    _fleet_findings(phase, results)
    order = {h.name: i for i, h in enumerate(hosts)}
    results.sort(key=lambda r: order.get(r.host, len(order)))
    return results, time.monotonic() - began


def _fleet_findings(phase: Phase[Any, Any], results: list[HostPhaseResult]) -> None:
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


def _one_host(run: _Run, phase: Phase[Any, Any], transport: Transport, *, done_before: bool,
              known: ReadAhead | None = None, acting_for: Host | None = None) -> HostPhaseResult:
    """``phase`` for one host: on its own connection, or (``acting_for``) for that host through
    ``transport``, the host the phase runs on (``Phase.via``: a drain from the control plane). Once
    Ctrl-C or SIGTERM stops the run (the runner's ``interrupted``), nothing is rolled back (``_roll_back``)."""
    target = acting_for or transport.host
    began = time.monotonic()
    result = HostPhaseResult(target.name, phase.name, Status.OK)
    reader = HostReader(transport, what=f"phase {phase.name}", known=known)
    ctx = run.context(target, reader)
    host_gate = HostGate(run.gate, transport)
    settings = run.settings

    def done(status: Status, message: str = "", *, roll_back: Sequence[GateRecord] | None = None) -> HostPhaseResult:
        if roll_back is not None:
            result.rollback = _roll_back(phase, ctx, host_gate, roll_back, run.runner.interrupted)
        result.status = status
        result.message = mask_text(message)
        result.duration_s = time.monotonic() - began
        return result

    transcribe = settings.confirmations is not None and phase.confirmable
    if transcribe:
        reader.start_transcript()
    reader.remember()
    try:
        state = phase.check(ctx)
        result.state = state
        result.findings = list(phase.findings(ctx, state))
        if fails(result.findings):
            blocking = [f for f in result.findings if f.severity is Severity.ERROR]
            return done(Status.FAILED, first_few([f.message for f in blocking], 3))
        changes = [c for c in phase.plan(ctx, state) if not c.is_noop]
    except ReadOnlyHost as exc:
        return done(Status.FAILED, f"bug in phase {phase.name}: {exc}")
    if done_before and (not changes or phase.done_when_recorded):
        # The progress file is a hint: the phase is skipped only when the host itself says there
        # is nothing to do (its check plans no change) and verify passes there now.
        reader.replay_once(keep=True)  # nothing applied: verify's first reads are check's answers
        problems = _verify(phase, ctx, host_gate) if settings.apply else []
        if not fails(problems):
            result.skipped = SkipReason.DONE_BEFORE
            return done(Status.SKIPPED, SkipReason.DONE_BEFORE.value)
    if not settings.apply:
        if known is not None:
            known.hand_on(reader.kept())
        host_gate.submit_all(changes)
        result.changes = changes
        wait = phase.wait(ctx)
        result.waits = [wait.summary] if wait is not None else []
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
        return done(Status.FAILED, str(exc), roll_back=mine)
    result.changes = [r.change for r in records if r.changed]
    result.records = undoable(host_gate.records()[before:])
    wait = phase.wait(ctx)
    if wait is not None:
        result.waits = [wait.summary]
        late = _wait(wait, ctx)
        if late is not None:
            return done(Status.FAILED, late, roll_back=records)
    seen = len(reader.transcript or ())
    problems = _verify(phase, ctx, host_gate)
    result.findings.extend(problems)
    if fails(problems):
        return done(Status.FAILED, "verify failed: " + "; ".join(f.message for f in problems
                                                                   if f.severity is Severity.ERROR))
    if transcribe:
        result.reads = _reads_after_change(run, phase, transport, reader, seen) if result.changes else reader.transcript
    return done(Status.CHANGED if result.changes else Status.OK)


def _reads_after_change(run: _Run, phase: Phase[Any, Any], transport: Transport, reader: HostReader,
                        seen: int) -> list[Read] | None:
    """What confirms a phase that changed the host: its check read again now, which must plan nothing
    (check's first reads were made before the change), and what verify read after it."""
    again = HostReader(transport, what=f"phase {phase.name}")
    again.start_transcript()
    ctx = run.context(transport.host, again)
    try:
        if [c for c in phase.plan(ctx, phase.check(ctx)) if not c.is_noop]:
            return None
    except Exception:  # a check that cannot run again here confirms nothing; the phase's result stands
        return None
    if again.transcript is None or reader.transcript is None:
        return None
    return again.transcript + [r for r in reader.transcript[seen:] if r not in again.transcript]


def _wait(wait: Wait, ctx: PhaseContext) -> str | None:
    """Poll ``wait`` until it is there (``None``) or its time is up (what was seen last)."""
    deadline = time.monotonic() + wait.timeout_s
    while True:
        seen = wait.probe(ctx)
        if seen is None:
            return None
        if time.monotonic() >= deadline:
            return f"{wait.summary}: not there after {int(wait.timeout_s)} s ({seen})"
        time.sleep(wait.poll_s)


def _verify(phase: Phase[Any, Any], ctx: PhaseContext, gate: HostGate) -> list[Finding]:
    """``phase.verify`` with the read-only view, and the gate bound for its temporary changes only."""
    ctx._gate = gate
    try:
        return phase.verify(ctx)
    except ReadOnlyHost as exc:
        return [Finding(Severity.ERROR, "PHASE_CHANGED_HOST", f"bug in phase {phase.name}: {exc}",
                        host=ctx.host.name)]
    finally:
        ctx._gate = None


#: What a step cut short by Ctrl-C or SIGTERM says instead of its rollback.
LEFT_TO_THE_JOURNAL = "not rolled back: the run was interrupted; the undo journal keeps what this step applied"


def _roll_back(phase: Phase[Any, Any], ctx: PhaseContext, gate: HostGate, records: Sequence[GateRecord],
               interrupted: threading.Event | None) -> list[str]:
    """Undo ``records`` of a failed step through the gate, then pass the phase's own rollback changes;
    one line per step.

    Not while the run is being interrupted: the failure is then the interrupt's doing, and the host's
    connection is being stopped and closed under the step, so an undo now would race the close (made
    or not by chance). What the step applied is left as it is, in the undo journal, for ``undo`` or
    ``--resume``; what a ``Phase.undo_on_interrupt`` phase moved out of place is put back by
    ``_put_back`` on a fresh connection once every host stopped."""
    if interrupted is not None and interrupted.is_set():
        return [LEFT_TO_THE_JOURNAL]
    try:
        extra = phase.rollback(ctx, records) if any(r.applied and r.changed for r in records) else []
        # A command the rollback runs again (containerd's restart) is not reported as one undo cannot revert.
        again = {c.command for c in extra if c.command}
        kept = [r for r in records if r.change.command is None or r.change.command not in again]
        lines = [line.text for line in gate.gate.undo(gate.transport, kept)]
        for change in extra:
            try:
                gate.submit(change)
                lines.append(mask_text(f"{change.summary}: done"))
            except ChangeFailed as exc:
                tail = exc.result.stderr_tail(2)
                lines.append(mask_text(f"{change.summary}: failed" + (f": {tail}" if tail else "")))
        if phase.verify_after_rollback:
            problems = [f for f in _verify(phase, ctx, gate) if f.severity is Severity.ERROR]
            lines.append("after the rollback, verify passes again" if not problems else
                         mask_text("after the rollback, verify still fails: " + "; ".join(f.message for f in problems)))
        return lines
    except Exception as exc:  # a failing rollback must still leave the original failure reported
        return [f"rollback failed: {type(exc).__name__}: {mask_text(str(exc))}"]
