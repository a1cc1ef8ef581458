"""``clusterctl heal``: the escalation chain on quarantined hosts, down to the BMC, and their validated return.

For each host, quarantined by clusterctl:

1. **Flapping?** Quarantined ``flap_count`` times within ``flap_window_s``: it stays out for a
   person (``heal-state: flapping``); nothing else is done.
2. **The release gate** (health at ``level`` and a one-host NCCL test, ``release``'s checks):
   when it passes ``passes`` times in a row the host returns at once. The actions of its findings that
   count against the host pick the chain (``chain.chain_for``), with the codes it was quarantined for.
3. **The chain**: the action engine runs its steps as remedies (``Phase.remedy``), with its lock, journal,
   interrupt handling and ``Status``. The node is drained (``HealDrain``: day 2's ``DrainNode``) before the
   first step that stops the GPUs; a reboot or power cycle waits (``Wait``), bounded, for a new boot id
   over SSH and the node Ready; each step's ``verify`` is the release gate, ``passes`` times in a row.
   A step that fails hands on to the next; the first that passes ends the chain and the host is released
   by ``release_hosts`` (``clusterctl release``'s code). No lock or drain: it stays quarantined, named.
4. **Needs hardware**: nothing cured it. The host stays quarantined (``heal-state: needs
   hardware``) and gets a report to paste into a ticket: the host, why it was quarantined, the
   findings, the GPUs' serial numbers, every step tried, and where ``nvidia-bug-report.sh`` left
   its log on the host.

Every step's result goes to the node (``history``): ``status HOST`` shows it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

from clusterctl.bmc.credentials import bmc_password
from clusterctl.bmc.power import BmcTarget, PowerAction, bmc_config, power_change
from clusterctl.bmc.redfish import BmcError, RedfishBmc, address_for
from clusterctl.changes import MAKES_NO_TRACE, Change, Gate, GateRecord, HostGate
from clusterctl.cluster_access import ControlPlaneUnreachable, NoCluster, on_control_plane, read_node
from clusterctl.day2.drain import DrainNode
from clusterctl.engine.journaled import journaled_gate
from clusterctl.engine.phase import Phase, PhaseContext, ReadsNothing, Wait
from clusterctl.engine.run import HostPhaseResult, RunSettings, Status, cured, run_phases
from clusterctl.errors import ClusterctlError, ParseError, UsageError
from clusterctl.facts.gpus import GPUS, PERSISTENCE_MODES
from clusterctl.facts.lspci import pci_address
from clusterctl.facts.model import GPUInfo
from clusterctl.findings import Finding, Severity
from clusterctl.heal import history
from clusterctl.heal.chain import DEFAULT_TIMEOUTS, chain_for
from clusterctl.health.checks import gpu_index
from clusterctl.quarantine import node_ops
from clusterctl.quarantine.drain import DrainOptions
from clusterctl.quarantine.policy import counts_against
from clusterctl.quarantine.release import refusals, release_hosts
from clusterctl.quarantine.run import control_plane
from clusterctl.secret import mask_text
from clusterctl.transport.base import FailureKind, Transport, TransportError
from clusterctl.undo_journal import undo_line
from clusterctl.utc import file_stamp, utc_stamp
from clusterctl.writable import host_file_name, make_folder, replace_file

if TYPE_CHECKING:

    from clusterctl.facts.kube_nodes import KubeNode
    from clusterctl.fanout import Runner
    from clusterctl.host_reader import HostReader
    from clusterctl.inventory.model import Host, Inventory

T = TypeVar("T")
#: Told each step of the chain as it happens: ``(host, what, detail)``.
Say = Callable[[str, str, str], None]
#: How often the wait after a reboot or power cycle looks for the host.
POLL_S = 1.0
BOOT_ID = "cat /proc/sys/kernel/random/boot_id"
GPU_QUERY = "nvidia-smi --query-gpu=index,name,serial,uuid,pci.bus_id --format=csv,noheader"


@dataclass
class StepRun:
    """One step of the chain (the drain before the first disruptive one included) as the engine ran it."""

    step: str
    result: Status
    detail: str = ""
    seconds: float = 0.0
    #: What the step changed (or would), one line per change.
    changes: list[str] = field(default_factory=list)
    #: What it found, in full (``detail`` names the first few of a long list).
    findings: list[Finding] = field(default_factory=list)

    @classmethod
    def of(cls, done: HostPhaseResult) -> StepRun:
        return cls(done.phase, done.status, done.message or "; ".join(done.waits), done.duration_s,
                   [c.summary for c in done.changes], done.findings)

    def to_json(self) -> dict[str, object]:
        return {"step": self.step, "result": self.result.value, "detail": self.detail,
                "seconds": round(self.seconds, 1), "changes": self.changes,
                "findings": [f.to_json() for f in self.findings]}


@dataclass
class HostHeal:
    host: str
    chain: tuple[str, ...] = ()
    chain_reason: str = ""
    steps: list[StepRun] = field(default_factory=list)
    #: ``released``, ``needs hardware``, ``flapping``, ``not quarantined``, ``planned`` (dry run), ``failed``.
    outcome: str = ""
    detail: str = ""
    report: str | None = None
    #: A dry run's annotations of the node, as the run writes them: after how many ``steps``, and in words
    #: (``step: would annotate node ...``).
    notes: list[tuple[int, str]] = field(default_factory=list)
    #: Seconds from the start to each milestone (``checked``, each step, ``healthy``, ``released``).
    timeline: dict[str, float] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.outcome in ("released", "planned", "not quarantined")

    def to_json(self) -> dict[str, object]:
        return {"host": self.host, "outcome": self.outcome, "detail": self.detail, "chain": list(self.chain),
                "chain_reason": self.chain_reason, "steps": [s.to_json() for s in self.steps],
                "notes": [line for _, line in self.notes],
                "report": self.report, "timeline": {k: round(v, 2) for k, v in self.timeline.items()}}


class _Healer:
    """One host's chain around its steps (``HealStep``, on the engine): the cluster side, the release gate."""

    def __init__(self, runner: Runner, inventory: Inventory, host: Host, gate: Gate, say: Say | None,
                 drain: DrainOptions) -> None:
        self.runner = runner
        self.drain = drain
        self.inventory = inventory
        self.host = host
        self.gate = gate
        self.say = say
        self.config = inventory.quarantine.heal
        self.cp = control_plane(inventory)
        self.result = HostHeal(host.name)
        self.start = time.monotonic()
        #: The release gate's last findings: the GPUs a reset takes, the report's.
        self.findings: list[Finding] = []
        #: A dry run's node, read once, with the annotations planned so far (the run reads it before each note).
        self.planned: KubeNode | None = None

    # -- the cluster side ----------------------------------------------------------------

    def node(self) -> KubeNode | None:
        return on_control_plane(self.runner, self.cp, lambda t: read_node(t, self.host.name), label="heal: read node",
                                what=f"read the node of {self.host.name}", timeout_s=120.0)

    def note(self, step: str, result: str, detail: str = "", *, state: str | None = None) -> None:
        """Keep the step on the node (and tell ``say``); in a dry run the annotation is only planned (``notes``)."""
        if self.say is not None:
            self.say(self.host.name, f"{step}: {result}", detail)

        def task(transport: Transport) -> None:
            node = self.planned or read_node(transport, self.host.name)
            if node is None:
                return
            entry = history.StepEntry(utc_stamp(), step, result, mask_text(detail))
            wanted = {history.STEPS: history.with_step(history.steps_of(node), entry)}
            if state is not None:
                wanted[history.STATE] = state
            for record in self.gate.submit_all(transport, node_ops.annotate(transport.host.name, node, wanted)):
                if not record.applied:
                    self.result.notes.append((len(self.result.steps), f"{step}: would {record.change.summary}"))
                    self.planned = replace(node, annotations={**node.annotations, **wanted})

        try:
            on_control_plane(self.runner, self.cp, task, label="heal: note", what=f"note {step} on the node",
                             timeout_s=120.0)
        except ClusterctlError as exc:  # a ChangeFailed too
            self.result.detail = str(exc)

    def mark(self, milestone: str) -> None:
        self.result.timeline.setdefault(milestone, time.monotonic() - self.start)

    def on_host(self, task: Callable[[Transport], T], label: str, timeout_s: float) -> tuple[T | None, str | None]:
        (outcome,) = self.runner.run_task([self.host], task, label=label, timeout_s=timeout_s).outcomes
        return outcome.value, (outcome.failure.describe() if outcome.failure is not None else None)

    def gate_passes(self, times: int) -> bool:
        """The release gate (``release``'s checks at the heal level) ``times`` times in a row; its last findings
        are kept (``findings``)."""
        from clusterctl.quarantine.release import health_and_nccl_checks  # looked up here: a test swaps it

        checks = health_and_nccl_checks(self.config.level, self.inventory.hosts, self.inventory.quarantine)
        for attempt in range(times):
            if attempt:
                time.sleep(self.config.pass_interval_s)
            self.findings = checks(self.runner, [self.host]).get(self.host.name, [])
            if refusals(self.findings, self.inventory.quarantine):
                return False
        return True

    def gate_rule(self) -> str:
        """How often the run checks the release gate before it releases a host, in words."""
        passes, apart = self.config.passes, self.config.pass_interval_s
        return "passes once" if passes == 1 else f"passes {passes} times in a row ({apart:g} s apart)"

    def errors(self) -> str:
        """What keeps the host out, by release's own rule (``refusals``), in words."""
        return "; ".join(refusals(self.findings, self.inventory.quarantine)) or "no error finding"

    # -- the chain -----------------------------------------------------------------------

    def run(self) -> HostHeal:
        result = self.result
        node = self.node()
        self.planned = None if self.gate.apply else node
        if node is None or not node_ops.is_quarantined(node):
            result.outcome, result.detail = ("failed", f"{self.host.name} is not a node of the cluster") \
                if node is None else ("not quarantined", "not quarantined by clusterctl: nothing to heal")
            return result
        reason, codes = node_ops.reason_and_codes(node)
        recent = history.quarantines_within(node, self.config.flap_window_s, time.time())
        if len(recent) >= self.config.flap_count:
            result.outcome = "flapping"
            result.detail = (f"quarantined {len(recent)} times within {self.config.flap_window_s / 3600:g} h "
                             f"({', '.join(recent)}): it stays out for a person")
            self.note("flapping", "stays out", result.detail, state="flapping")
            return result
        # A dry run runs the checks once, only reading (as 'release --dry-run' does): the actions of the findings
        # that keep the host out (release's rule) pick the chain.
        passed = self.gate_passes(self.config.passes if self.gate.apply else 1)
        self.mark("checked")
        against = [f for f in self.findings if counts_against(f, self.inventory.quarantine)]
        result.chain, result.chain_reason = chain_for(codes, against, self.config.chains)
        if passed:  # released before any step; a dry run's one pass says what the run's first would do, no more
            self.note("check", "passed", f"healthy {self.config.passes} times in a row before any step")
            return self.release()
        self.note("check", "failed", self.errors(), state=f"healing: {', '.join(result.chain) or 'none'}")
        healed, blocked = self.steps()
        if blocked is not None:  # not the hardware's fault (a lock, a drain refused): a person decides
            result.outcome, result.detail = "failed", f"{blocked}; it stays quarantined"
            return result
        if not self.gate.apply:  # what a run that exhausts the chain does is planned too: its bug report, its note
            # A step that already fails in the plan (no BMC to power-cycle through) fails it, as the run would.
            failing = next((s.step for s in result.steps if s.result is Status.FAILED), None)
            result.outcome = "failed" if failing else "planned"
            result.detail = (f"{failing} would fail: see its step; " if failing else "") + \
                f"released after the first step the release gate then {self.gate_rule()}; else 'needs hardware'"
            self.bug_report()
        elif healed:
            return self.release()
        else:
            result.outcome = "needs hardware"
            result.detail = "no step cured it: it stays quarantined for a hardware repair"
            result.report = self.report(reason, codes)
        self.note("needs hardware", "stays out", self.errors(), state="needs hardware")
        return result

    def steps(self) -> tuple[bool, str | None]:
        """The chain on the engine: whether a step cured the host, and why it stops short (a lock, a drain)."""
        phases = chain_phases(self, self.result.chain)
        if not phases:
            return False, None

        def noted(phase: Phase[Any, Any], done: list[HostPhaseResult]) -> None:
            for r in (r for r in done if r.status is not Status.SKIPPED):
                self.mark(r.phase)
                self.result.steps.append(StepRun.of(r))
                self.note(r.phase, r.status.value, f"healthy {self.config.passes} times in a row after it"
                          if cured(phase, r) else r.message)

        report = run_phases(self.inventory, [self.host], self.runner, phases,
                            RunSettings(apply=self.gate.apply, gate=self.gate, on_phase=noted))
        later = next((r.phase for r in report.results if r.status is Status.SKIPPED and r.phase != HealDrain.name),
                     None)
        if later is None or report.cured:
            return bool(report.cured), None
        # A failed drain is said once, on its own step line (which every output shows): here only pointed to.
        drain = any(r.phase == HealDrain.name and r.status is Status.FAILED for r in report.results)
        return False, f"{later} could not start: " + ("see the drain step" if drain else
                                                      f"the host's {report.failed_hosts.get(self.host.name, '')}")

    def release(self) -> HostHeal:
        (released,) = release_hosts(self.runner, self.inventory, [self.host], self.gate, checks=None)
        result = self.result
        if released.released:
            self.mark("released")
            result.outcome = "released" if self.gate.apply else "planned"
            result.detail = ("" if self.gate.apply else f"the release gate passes now, once; if it {self.gate_rule()}"
                             " as the run checks, it would be released at once (else the chain is tried): ") \
                + "; ".join(released.done)
            self.note("release", "released", result.detail, state="released")
        else:
            result.outcome = "failed"
            result.detail = "release refused: " + "; ".join(released.refused)
            self.note("release", "refused", result.detail)
        return result

    def report(self, reason: str, codes: tuple[str, ...]) -> str:
        host = self.host
        value, failure = self.on_host(lambda t: t.run(GPU_QUERY, sudo=True, timeout=60), "heal: serials", 90)
        if value is not None and value.ok:
            gpus = ["  " + line.strip() for line in value.stdout.splitlines() if line.strip()]
        else:
            why = failure or f"exit {value.exit_code if value else '?'}: {value.stderr.strip()[:120] if value else ''}"
            gpus = [f"  (could not be read: {why})"]
        tried = [f"  {s.step}: {s.result.value}{' - ' + s.detail if s.detail else ''}" for s in self.result.steps]
        lines = [f"Hardware repair needed: {host.name} ({host.connect_address}"
                 f"{', rack ' + host.rack if host.rack else ''})",
                 f"Quarantined for: {reason} [{', '.join(codes) or '-'}]",
                 "Findings now:", *(f"  {f.severity.value} {f.code}: {f.message}" for f in self.findings
                                    if f.severity is not Severity.INFO),
                 "GPUs (index, name, serial, uuid, PCI bus id):", *gpus,
                 f"Remediation tried (chain {', '.join(self.result.chain) or 'none'}; {self.result.chain_reason}):",
                 *(tried or ["  nothing"]),
                 f"nvidia-bug-report: {self.bug_report()}"]
        return mask_text("\n".join(lines))

    def bug_report(self) -> str:
        """nvidia-bug-report.sh on the host, through the gate (a dry run plans it, under 'needs hardware' as the
        annotation after it): where its log is, or why it was not made."""
        host = self.host.name
        log = f"/var/tmp/nvidia-bug-report-{host}-{file_stamp()}.log"
        bug = Change.run(host, f"nvidia-bug-report.sh --output-file {log}", summary=f"collect nvidia-bug-report on "
                         f"{host}", timeout_s=900, cannot_undo=f"the report stays in {log}.gz, for the hardware ticket")
        record, failure = self.on_host(lambda t: self.gate.submit(t, bug), "heal: nvidia-bug-report", 960)
        if record is not None and not record.applied:
            self.result.notes.append((len(self.result.steps), f"needs hardware: would {bug.summary}"))
        return f"{host}:{log}.gz" if failure is None else f"not made ({failure})"


class HealStep(ReadsNothing, Phase[Any, PhaseContext]):
    """A step of the chain: a remedy whose ``verify`` is the release gate. Its bound is its ``Wait``
    (``quarantine.heal.timeouts``); ``timeout_s`` only catches a step that hangs."""

    remedy = True
    timeout_s = 3 * 3600.0
    #: It stops the GPUs' work: the node is drained before the first such step.
    stops_gpus: ClassVar[bool] = True

    def __init__(self, healer: _Healer) -> None:
        self.healer = healer

    @property
    def limit_s(self) -> float:
        return self.healer.config.timeouts.get(self.name, DEFAULT_TIMEOUTS[self.name])

    def verify(self, ctx: PhaseContext) -> list[Finding]:
        if self.healer.gate_passes(self.healer.config.passes):
            self.healer.mark("healthy")
            return []
        return [Finding(Severity.ERROR, "HEAL_NOT_HEALTHY", "the release gate still fails: " +
                        self.healer.errors(), host=ctx.host.name)]


class HealDrain(DrainNode):
    """The drain (day 2's phase) before the first step that stops the GPUs; one that cannot finish stops the
    chain: not the hardware's fault, a person decides. Hosts heal side by side (``remediate serve --heal``),
    each for as long as a reboot takes: none of them holds the control plane's lock."""

    locks_via = False


class RestartApp(HealStep):
    name = "restart-app"
    description = "the drain restarted the application's pods elsewhere: the GPUs are checked again"
    stops_gpus = False


class ResetGpus(HealStep):
    name = "reset-gpu"
    description = "nvidia-smi -r on the GPUs the findings name (all when none), each only when no process uses it"

    def check(self, ctx: PhaseContext) -> tuple[list[GpuReset], list[str]]:
        """The resets of the GPUs the findings name (none: all), and the GPUs a process uses (left as they are)."""
        subjects = [f.subject for f in self.healer.findings
                    if f.severity is Severity.ERROR and (f.subject or "").startswith("GPU ")]
        # A GPU named by its bus id gets its index from the survey's GPU list; one it cannot place is not reset
        # alone by index: then every GPU is.
        listed: tuple[GPUInfo, ...] = _read_gpus(ctx.reader, GPUS.command, GPUS.parse, ()) \
            if None in map(gpu_index, subjects) else ()
        by_address = {address: gpu.index for gpu in listed if (address := pci_address(gpu.pci_bus_id))}
        named = [gpu_index(subject, by_address) for subject in subjects]
        resets, busy, gpus = [], [], [None] if not named or None in named else list[int | None](dict.fromkeys(named))
        for gpu in gpus:
            users = None if gpu is None else ctx.reader.run(
                f"nvidia-smi --query-compute-apps=pid --format=csv,noheader -i {gpu}", sudo=True, timeout=30)
            if users is not None and users.ok and users.stdout.strip():
                busy.append(f"GPU {gpu} is in use (pids {', '.join(users.stdout.split())}): not reset")
            else:
                resets.append(gpu_reset(ctx.host.name, gpu, read_persistence(ctx.reader, gpu), self.limit_s))
        return resets, busy

    def findings(self, ctx: PhaseContext, state: tuple[list[GpuReset], list[str]]) -> list[Finding]:
        return [Finding(Severity.ERROR, "GPU_IN_USE", busy, host=ctx.host.name) for busy in state[1]]

    def plan(self, ctx: PhaseContext, state: tuple[list[GpuReset], list[str]]) -> list[Change]:
        self.resets = state[0]
        return [c for reset in self.resets for c in reset.changes]

    def apply(self, ctx: PhaseContext, gate: HostGate, changes: Sequence[Change]) -> list[GateRecord]:
        before = len(gate.records())
        for reset in self.resets:  # a failed clean-up stays in the journal: 'clusterctl undo' turns it back on
            apply_gpu_reset(gate.transport, gate.gate, reset)
        return gate.records()[before:]


class _ComesBack(HealStep):
    """A step after which the host boots again: it waits, bounded, for a new boot id and the node Ready."""

    def check(self, ctx: PhaseContext) -> Any:
        self.before = boot_id(ctx.reader)

    def wait(self, ctx: PhaseContext) -> Wait | None:
        """A new boot id over SSH, then the node Ready."""
        healer = self.healer

        def probe(ctx: PhaseContext) -> str | None:
            now = boot_id(ctx.reader)
            if now is None or now == self.before:
                return "it did not come back (no new boot id over SSH)"
            healer.mark("back")
            try:
                node = healer.node()
            except ClusterctlError:
                node = None
            return None if node is not None and node.ready else "its node is not Ready"

        return Wait(f"{ctx.host.name} back (a new boot id) and its node Ready, up to {self.limit_s:g} s", probe,
                    timeout_s=self.limit_s, poll_s=POLL_S)


class Reboot(_ComesBack):
    name = "reboot"
    description = "reboot over SSH, then wait for a new boot id and the node Ready"

    def plan(self, ctx: PhaseContext, state: None) -> list[Change]:
        return [Change.run(ctx.host.name, "systemctl reboot", summary=f"reboot {ctx.host.name}", timeout_s=30,
                           makes=(MAKES_NO_TRACE,), cannot_undo="a reboot is over once the host is back")]

    def apply(self, ctx: PhaseContext, gate: HostGate, changes: Sequence[Change]) -> list[GateRecord]:
        try:
            return gate.submit_all(changes)
        except TransportError as exc:  # the connection went down with the host: it is rebooting
            if exc.kind not in (FailureKind.UNREACHABLE, FailureKind.TIMED_OUT):
                raise
            return [GateRecord(c, applied=True, changed=True) for c in changes]


class PowerCycle(_ComesBack):
    name = "power-cycle"
    description = "power-cycle through the BMC (Redfish), then wait for a new boot id and the node Ready"

    def check(self, ctx: PhaseContext) -> tuple[str, str, Transport] | str:
        """The BMC's address, power state (read in a dry run too, as 'power cycle --dry-run' does: a BMC that does
        not answer or refuses the credentials fails the plan as it would the run) and the gate's target; or why
        there is none."""
        super().check(ctx)
        name = ctx.host.name
        try:
            config = bmc_config(self.healer.inventory, name)
            url, password = address_for(config, name).url, bmc_password(config)
            bmc = RedfishBmc(config, name, password)
            return url, bmc.power_state(), BmcTarget(ctx.host, bmc)
        except BmcError as exc:
            return exc.message
        except UsageError as exc:  # no BMC entry, no password: said without the file's whole hint
            return exc.message + (f" ({exc.field})" if exc.field else "")

    def findings(self, ctx: PhaseContext, state: Any) -> list[Finding]:
        return [Finding(Severity.ERROR, "BMC", state, host=ctx.host.name)] if isinstance(state, str) else []

    def plan(self, ctx: PhaseContext, state: Any) -> list[Change]:
        url, power, self.target = state
        change = power_change(ctx.host.name, PowerAction.CYCLE, power, url, timeout_s=self.limit_s)
        return [change] if change is not None else []

    def apply(self, ctx: PhaseContext, gate: HostGate, changes: Sequence[Change]) -> list[GateRecord]:
        records = gate.gate.submit_all(self.target, changes)
        self.healer.mark("power-cycled")
        return records


#: The chain's steps by the names ``quarantine.heal.chains`` uses.
STEPS: dict[str, type[HealStep]] = {step.name: step for step in (RestartApp, ResetGpus, Reboot, PowerCycle)}


def chain_phases(healer: _Healer, chain: Sequence[str]) -> list[Phase[Any, Any]]:
    """The chain as the engine's phases, the drain before the first step that stops the GPUs."""
    phases: list[Phase[Any, Any]] = []
    for name in chain:
        step = STEPS[name](healer)
        if step.stops_gpus and not any(isinstance(p, HealDrain) for p in phases):
            phases.append(HealDrain(healer.cp.name, healer.drain.timeout_s,
                                    delete_emptydir_data=healer.drain.delete_emptydir_data))
        phases.append(step)
    return phases


def boot_id(reader: HostReader) -> str | None:
    """The host's boot id; None while it does not answer."""
    try:
        result = reader.run(BOOT_ID, timeout=10)
    except TransportError:
        return None
    return result.stdout.strip() or None if result.ok else None


@dataclass(frozen=True)
class GpuReset:
    """One ``nvidia-smi -r`` (one GPU, or all: ``gpu`` None) with what turns persistence mode off before it
    and back on after it, on the GPUs where it was on: nvidia-smi refuses to reset a GPU that persistence
    mode holds open ("In use by another client")."""

    gpu: int | None
    reset: Change
    persistence_off: tuple[Change, ...] = ()
    persistence_on: tuple[Change, ...] = ()

    @property
    def changes(self) -> list[Change]:
        """In the order they are made, as a dry run shows them."""
        return [*self.persistence_off, self.reset, *self.persistence_on]


def _read_gpus(reader: Transport | HostReader, command: str, parse: Callable[[str], T], empty: T) -> T:
    """What nvidia-smi's ``command`` says, or ``empty`` when it cannot say (a GPU that fell off the bus)."""
    result = reader.run(command, timeout=30)
    try:
        return parse(result.stdout) if result.ok else empty
    except ParseError:
        return empty


def read_persistence(transport: Transport | HostReader, gpu: int | None) -> dict[int, bool | None]:
    """The persistence mode of ``gpu`` (None: of every GPU); ``{}`` when nvidia-smi cannot say: then it is left
    as it is."""
    return _read_gpus(transport, PERSISTENCE_MODES.command + (f" -i {gpu}" if gpu is not None else ""),
                      PERSISTENCE_MODES.parse, {})


def gpu_reset(host: str, gpu: int | None, modes: Mapping[int, bool | None], timeout_s: float) -> GpuReset:
    """The reset of ``gpu`` (None: all), persistence mode off first where ``modes`` says it is on."""
    reset = Change.run(host, "nvidia-smi -r" + (f" -i {gpu}" if gpu is not None else ""), timeout_s=timeout_s,
                       summary=f"reset GPU {gpu} of {host}" if gpu is not None else f"reset the GPUs of {host}",
                       makes=(MAKES_NO_TRACE,), cannot_undo="a GPU reset is over once done")
    held = sorted(i for i, on in modes.items() if on) if gpu is None else [gpu] if modes.get(gpu) else []
    off = tuple(Change.run(host, f"nvidia-smi -pm 0 -i {i}", undo=f"nvidia-smi -pm 1 -i {i}", timeout_s=60,
                           summary=f"turn persistence mode off on GPU {i} of {host} for its reset") for i in held)
    on = tuple(Change.run(host, f"nvidia-smi -pm 1 -i {i}", timeout_s=60, makes=(MAKES_NO_TRACE,),
                          cannot_undo="persistence mode is on again, as it was before the reset",
                          summary=f"turn persistence mode back on on GPU {i} of {host}") for i in held)
    return GpuReset(gpu, reset, off, on)


def apply_gpu_reset(transport: Transport, gate: Gate, reset: GpuReset) -> GateRecord:
    """Through the gate: persistence mode off as a temporary change (journaled before it is made, its
    undo turning it back on), the reset, and persistence mode back on however the reset ends."""
    if not reset.persistence_off:
        return gate.submit(transport, reset.reset)
    with gate.temporary(transport, reset.persistence_off, reset.persistence_on):
        return gate.submit(transport, reset.reset)


def heal(runner: Runner, inventory: Inventory, hosts: Sequence[Host], *, apply: bool, say: Say | None = None,
         state_dir: str | None = None, drain: DrainOptions | None = None) -> tuple[list[HostHeal], str | None]:
    """``clusterctl heal``: the chain on each of ``hosts``, one after the other, through the engine's journaled
    gate (each change in the undo journal before it is made, the journal finished on Ctrl-C too); the results
    and the journal (in ``<state dir>/undo``). ``say`` is told each step as it happens (``remediate serve`` logs
    it); the drain before the first step that stops the GPUs is made as ``drain`` says (a failing host's)."""
    results: list[HostHeal] = []
    with journaled_gate("heal", inventory, apply=apply, state_dir=state_dir,
                        interrupted=runner.interrupted) as step:
        if not hosts:
            raise UsageError("no host to heal")
        for host in hosts:
            healer = _Healer(runner, inventory, host, step.gate, say, drain or DrainOptions())
            try:
                results.append(healer.run())
            except ClusterctlError as exc:
                if isinstance(exc, (NoCluster, ControlPlaneUnreachable)) and not results and not healer.result.timeline:
                    raise  # no cluster to read before anything was done: the one error of every day-2 command
                healer.result.outcome, healer.result.detail = "failed", str(exc)
                results.append(healer.result)
    return results, step.journal


#: Where the "needs hardware" reports go when no folder is given (the receiver gives its state folder's).
REPORTS = Path("clusterctl-results") / "heal"


def heal_after_drain(inventory: Inventory, *, on_start: Callable[[], None] | None = None,
                     on_result: Callable[[HostHeal], None] | None = None, state_dir: str | None = None,
                     reports_folder: Path = REPORTS, drain: DrainOptions | None = None,
                     ) -> Callable[[Any, Host, Callable[..., None]], None]:
    """``remediate serve --heal``: a drained host's escalation chain, each step logged as the receiver's decisions
    (``on_start`` and ``on_result``: benchmarks/mttr's stopwatch). Its undo journals go to ``state_dir``'s,
    its "needs hardware" reports to ``reports_folder`` (the CLI passes the state folder's); its drain is the
    receiver's (``drain``)."""

    def after_drain(runner: Any, host: Host, say: Callable[..., None]) -> None:
        if on_start is not None:
            on_start()

        def step(name: str, what: str, detail: str) -> None:
            say(host=name, decision="heal", why=f"{what}{': ' + detail if detail else ''}")

        try:
            (result,), path = heal(runner, inventory, [host], apply=True, say=step, state_dir=state_dir, drain=drain)
        except ClusterctlError as exc:  # no cluster to heal in any more (heal's one error): this host's failed heal
            result, path = HostHeal(host.name, outcome="failed", detail=str(exc)), None
        if on_result is not None:
            on_result(result)
        why = result.detail
        if result.report:
            why += f"; the report to paste into a ticket: {save_report(host.name, result.report, reports_folder)}"
        say(host=host.name, decision=result.outcome, why=why)
        if path is not None:
            say(host=host.name, decision="journal", why=undo_line(path))

    return after_drain


def save_report(host: str, report: str, folder: Path = REPORTS) -> Path:
    make_folder(folder, "the heal reports folder")
    path = folder / host_file_name(host, f"-needs-hardware-{file_stamp()}.txt")
    replace_file(path, report + "\n", mode=0o600)
    return path
