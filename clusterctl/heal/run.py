"""``clusterctl heal``: the escalation chain on quarantined hosts, down to the BMC, and their validated return.

For each host, quarantined by clusterctl:

1. **Flapping?** Quarantined ``flap_count`` times within ``flap_window_s``: it stays out for a
   person (``heal-state: flapping``); nothing else is done.
2. **The release gate** (health at ``level`` and a one-host NCCL test, ``release``'s checks):
   when it passes ``passes`` times in a row the host returns at once. Its findings pick the
   chain (``chain.chain_for``: the codes, the Xids and their catalogue actions).
3. **Each step** of the chain, in order: the node is drained first (``drain_node``, the one
   drain) before anything that stops the GPUs; the step's changes pass the gate (``--dry-run``:
   recorded, shown, nothing done, no waits); a reboot or power cycle is followed by a bounded wait
   for the host to come back (a new boot id over SSH, then its node Ready); then the release gate
   again, ``passes`` times in a row. Passing: the host is released by ``release_hosts`` (the same
   code as ``clusterctl release``, its checks just run). Failing or timing out: the next step.
4. **Needs hardware**: nothing cured it. The host stays quarantined (``heal-state: needs
   hardware``) and gets a report to paste into a ticket: the host, why it was quarantined, the
   findings, the GPUs' serial numbers, every step tried, and where ``nvidia-bug-report.sh`` left
   its log on the host.

Every step's result goes to the node (``history``): ``status HOST`` shows it.
"""

from __future__ import annotations

import functools
import re
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, cast

from clusterctl.changes import Change, ChangeFailed, Gate, GateRecord
from clusterctl.cluster_access import read_node
from clusterctl.engine.lock import LockInfo
from clusterctl.engine.run import give_back_locks, take_locks
from clusterctl.errors import ClusterctlError, Interrupted, ParseError, UsageError
from clusterctl.facts.gpus import PERSISTENCE_MODES
from clusterctl.findings import Finding, Severity, has_errors
from clusterctl.heal import history
from clusterctl.heal.chain import DEFAULT_TIMEOUTS, chain_for
from clusterctl.quarantine import node_ops
from clusterctl.quarantine.run import control_plane, utc_now
from clusterctl.secret import mask_text
from clusterctl.transport.base import TransportError

if TYPE_CHECKING:
    from pathlib import Path

    from clusterctl.facts.kube_nodes import KubeNode
    from clusterctl.fanout import Runner
    from clusterctl.inventory.model import HealConfig, Host, Inventory
    from clusterctl.quarantine.release import ReleaseChecks
    from clusterctl.transport.base import Transport

BOOT_ID = "cat /proc/sys/kernel/random/boot_id"
#: Steps that stop the GPUs' work: the node is drained before the first of them.
DISRUPTIVE = ("reset-gpu", "reboot", "power-cycle")
GPU_QUERY = "nvidia-smi --query-gpu=index,name,serial,uuid,pci.bus_id --format=csv,noheader"


@dataclass
class StepRun:
    step: str
    #: ``passed``, ``failed``, ``skipped``, ``blocked`` (the host's lock or drain: the chain stops), ``planned``.
    result: str
    detail: str = ""
    seconds: float = 0.0
    #: What the step changed (or would), one line per change.
    changes: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, object]:
        return {"step": self.step, "result": self.result, "detail": self.detail, "seconds": round(self.seconds, 1),
                "changes": self.changes}


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
    #: Seconds from the start to each milestone (``checked``, each step, ``healthy``, ``released``).
    timeline: dict[str, float] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.outcome in ("released", "planned", "not quarantined")

    def to_json(self) -> dict[str, object]:
        return {"host": self.host, "outcome": self.outcome, "detail": self.detail, "chain": list(self.chain),
                "chain_reason": self.chain_reason, "steps": [s.to_json() for s in self.steps],
                "report": self.report, "timeline": {k: round(v, 2) for k, v in self.timeline.items()}}


@dataclass
class HealOptions:
    config: HealConfig
    #: The release gate; None: ``health_and_nccl_checks(config.level, the inventory's hosts)``.
    checks: ReleaseChecks | None = None
    poll_s: float = 1.0
    now: Callable[[], float] = time.time
    sleep: Callable[[float], None] = time.sleep
    monotonic: Callable[[], float] = time.monotonic
    #: Told each step as it happens (``remediate serve`` logs it), ``(host, what, detail)``.
    say: Callable[[str, str, str], None] | None = None


class _Healer:
    def __init__(self, runner: Runner, inventory: Inventory, host: Host, gate: Gate, options: HealOptions) -> None:
        self.runner = runner
        self.inventory = inventory
        self.host = host
        self.gate = gate
        self.options = options
        self.config = options.config
        self.cp = control_plane(inventory)
        self.result = HostHeal(host.name)
        self.start = options.monotonic()
        self.drained = False
        #: The engine's host lock, taken before the first step that stops the GPUs (no bootstrap or upgrade
        #: interleaves with a reboot), given back when the chain ends.
        self.lock: LockInfo | None = None

    # -- the cluster side ----------------------------------------------------------------

    def _on_cp(self, task: Callable[[Transport], object], label: str, timeout_s: float = 120.0) -> object:
        fleet = self.runner.run_task([self.cp], task, label=label, timeout_s=timeout_s)
        (outcome,) = fleet.outcomes
        if outcome.failure is not None:
            raise ClusterctlError(f"the control plane {self.cp.name} could not be used: {outcome.failure.describe()}")
        return outcome.value

    def node(self) -> KubeNode | None:
        value = self._on_cp(lambda t: read_node(t, self.host.name), "heal: read node")
        return value  # type: ignore[return-value]

    def note(self, step: str, result: str, detail: str = "", *, state: str | None = None) -> None:
        """Keep the step on the node (and tell ``say``); in a dry run the annotation is only planned."""
        if self.options.say is not None:
            self.options.say(self.host.name, f"{step}: {result}", detail)

        def task(transport: Transport) -> None:
            node = read_node(transport, self.host.name)
            if node is None:
                return
            entry = history.StepEntry(utc_now(self.options.now()), step, result, mask_text(detail))
            wanted: dict[str, str | None] = {history.STEPS: history.with_step(history.steps_of(node), entry)}
            if state is not None:
                wanted[history.STATE] = state
            self.gate.submit_all(transport, node_ops.annotate(transport.host.name, node, wanted))

        try:
            self._on_cp(task, "heal: note")
        except (ClusterctlError, ChangeFailed) as exc:
            self.result.detail = f"could not note {step} on the node: {exc}"

    def mark(self, milestone: str) -> None:
        self.result.timeline.setdefault(milestone, self.options.monotonic() - self.start)

    # -- the host side -------------------------------------------------------------------

    def on_host(self, task: Callable[[Transport], object], label: str, timeout_s: float) -> tuple[object, str | None]:
        fleet = self.runner.run_task([self.host], task, label=label, timeout_s=timeout_s)
        (outcome,) = fleet.outcomes
        return outcome.value, (outcome.failure.describe() if outcome.failure is not None else None)

    def boot_id(self) -> str | None:
        value, failure = self.on_host(lambda t: t.run(BOOT_ID, timeout=10), "heal: boot id", 20)
        if failure is not None or value is None or not value.ok:  # type: ignore[attr-defined]
            return None
        return str(value.stdout).strip() or None  # type: ignore[attr-defined]

    def checks(self) -> ReleaseChecks:
        if self.options.checks is not None:
            return self.options.checks
        from clusterctl.quarantine.release import health_and_nccl_checks

        return health_and_nccl_checks(self.config.level, self.inventory.hosts)

    def gate_passes(self, times: int) -> tuple[bool, list[Finding]]:
        """The release gate ``times`` times in a row; (passed, the findings of the last run)."""
        findings: list[Finding] = []
        for attempt in range(times):
            if attempt:
                self.options.sleep(self.config.pass_interval_s)
            found = self.checks()(self.runner, [self.host])
            findings = found.get(self.host.name, [])
            if has_errors(findings):
                return False, findings
        return True, findings

    def wait_back(self, before: str | None, deadline: float) -> str | None:
        """Until the host answers with a new boot id and its node is Ready; None, or why not by ``deadline``."""
        seen_new = False
        while self.options.monotonic() < deadline:
            if not seen_new:
                now_id = self.boot_id()
                seen_new = now_id is not None and now_id != before
            if seen_new:
                self.mark("back")
                try:
                    node = self.node()
                except ClusterctlError:
                    node = None
                if node is not None and node.ready:
                    return None
            self.options.sleep(self.options.poll_s)
        return ("its node is not Ready" if seen_new else "it did not come back (no new boot id over SSH)") + \
            " within the step's timeout"

    # -- the chain -----------------------------------------------------------------------

    def run(self, reason: str, codes: tuple[str, ...]) -> HostHeal:
        result = self.result
        node = self.node()
        if node is None or not node_ops.is_quarantined(node):
            result.outcome = "not quarantined" if node is not None else "failed"
            result.detail = "not quarantined by clusterctl: nothing to heal" if node is not None else \
                f"{self.host.name} is not a node of the cluster"
            return result
        recent = history.quarantines_within(node, self.config.flap_window_s, self.options.now())
        if len(recent) >= self.config.flap_count:
            result.outcome = "flapping"
            result.detail = (f"quarantined {len(recent)} times within {self.config.flap_window_s / 3600:g} h "
                             f"({', '.join(recent)}): it stays out for a person")
            self.note("flapping", "stays out", result.detail, state="flapping")
            return result
        if not self.gate.apply:
            # The checks only read (as 'release --dry-run' runs them): their Xids pick the chain shown.
            _passed, findings = self.gate_passes(1)
            return self.plan(codes, findings)
        passed, findings = self.gate_passes(self.config.passes)
        self.mark("checked")
        result.chain, result.chain_reason = chain_for(codes, xids=_xids(findings), overrides=self.config.chains)
        if passed:
            self.note("check", "passed", f"healthy {self.config.passes} times in a row before any step")
            return self.release(findings)
        self.note("check", "failed", _errors(findings), state=f"healing: {', '.join(result.chain) or 'none'}")
        for step in result.chain:
            run = self.step(step, findings)
            result.steps.append(run)
            self.mark(step)
            if run.result == "blocked":  # not the hardware's fault: a person decides (another run, a drain)
                result.outcome, result.detail = "failed", f"{step} could not start: {run.detail}; it stays quarantined"
                self.note(step, "blocked", run.detail)
                return result
            if run.result != "passed":
                self.note(step, run.result, run.detail)
                continue
            passed, findings = self.gate_passes(self.config.passes)
            if passed:
                self.mark("healthy")
                self.note(step, "passed", f"healthy {self.config.passes} times in a row after it")
                return self.release(findings)
            run.result, run.detail = "failed", "the release gate still fails: " + _errors(findings)
            self.note(step, "failed", run.detail)
        return self.needs_hardware(reason, codes, findings)

    def plan(self, codes: tuple[str, ...], findings: list[Finding]) -> HostHeal:
        """The dry run: the whole chain as it would run, each step's changes recorded by the gate."""
        result = self.result
        result.chain, result.chain_reason = chain_for(codes, xids=_xids(findings), overrides=self.config.chains)
        for step in result.chain:
            before = len(self.gate.records)
            try:
                changes = self.step_changes(step, findings)
            except UsageError as exc:  # no BMC for a power cycle: the step would fail, and the chain go on
                result.steps.append(StepRun(step, "planned", f"would fail: {exc.message}"))
                continue
            for change in changes:
                self.gate.record(change)
            lines = [r.change.summary for r in self.gate.records[before:]]
            result.steps.append(StepRun(step, "planned", f"then the release gate {self.config.passes} times; "
                                        f"at most {self.timeout(step):g} s", changes=lines))
        result.outcome = "planned"
        result.detail = "released after the first step the release gate passes; else 'needs hardware'"
        return result

    def take_lock(self) -> str | None:
        """The host's lock through the engine (``take_locks``), once per chain; None, or why it was refused."""
        if self.lock is not None:
            return None
        info = LockInfo.mine(f"heal-{uuid.uuid4().hex[:12]}")
        locked, refused = take_locks(self.runner, [self.host], info)
        if not locked:
            return "the host's " + refused.get(self.host.name, "lock: not taken")  # "lock: locked by ..."
        self.lock = info
        return None

    def unlock(self, *, interrupted: bool = False) -> None:
        if self.lock is not None:
            info, self.lock = self.lock, None
            for line in give_back_locks(self.runner, [self.host], info, interrupted=interrupted):
                self.result.detail += f" ({line})"

    def ensure_drained(self) -> str | None:
        locked = self.take_lock()
        if locked is not None:
            return locked
        if self.drained:
            return None
        from clusterctl.quarantine.drain import DrainOptions, DrainReport, drain_or_why

        done = self._on_cp(lambda t: drain_or_why(t, self.gate, self.host.name, DrainOptions()), "heal: drain",
                           timeout_s=420)
        report, why = cast("tuple[DrainReport | None, str | None]", done)
        if report is None:  # this node's pods could not be read: its chain stops, named; the other hosts go on
            return why or f"drain of {self.host.name} stopped"
        if not report.complete:
            left = ", ".join(p.pod for p in report.not_evicted)
            return f"the node's drain is not complete (not evicted: {left})"
        self.drained = True
        self.mark("drained")
        return None

    def timeout(self, step: str) -> float:
        return self.config.timeouts.get(step, DEFAULT_TIMEOUTS[step])

    def step_changes(self, step: str, findings: Sequence[Finding]) -> list[Change]:
        name = self.host.name
        if step == "reset-gpu":
            return [c for reset in self.gpu_resets(findings) for c in reset.changes]
        if step == "reboot":
            return [Change.run(name, "systemctl reboot", summary=f"reboot {name}", timeout_s=30)]
        if step == "power-cycle":
            from clusterctl.bmc.power import PowerAction, bmc_config, power_change
            from clusterctl.bmc.redfish import ON, address_for

            config = bmc_config(self.inventory, name)
            change = power_change(name, PowerAction.CYCLE, ON, address_for(config, name).url,
                                  timeout_s=self.timeout(step))
            return [change] if change is not None else []
        return []

    def step(self, step: str, findings: Sequence[Finding]) -> StepRun:
        started = self.options.monotonic()
        deadline = started + self.timeout(step)
        run = StepRun(step, "passed")
        if self.options.say is not None:
            self.options.say(self.host.name, f"{step}: started", "")
        try:
            if step in DISRUPTIVE:
                why = self.ensure_drained()
                if why is not None:
                    return StepRun(step, "blocked", why)
            if step == "restart-app":
                run.detail = "the drain restarted the application's pods elsewhere; the GPUs are checked again"
            elif step == "reset-gpu":
                self.reset_gpus(run, findings)
            elif step == "reboot":
                before = self.boot_id()
                (change,) = self.step_changes(step, findings)
                _value, failure = self.on_host(lambda t: self.gate.submit(t, change), "heal: reboot", 60)
                run.changes.append(change.summary)
                if failure is not None and "unreachable" not in failure and "closed" not in failure:
                    run.result, run.detail = "failed", f"reboot: {failure}"
                else:
                    why = self.wait_back(before, deadline)
                    if why is not None:
                        run.result, run.detail = "failed", f"rebooted, but {why}"
            elif step == "power-cycle":
                self.power_cycle(run, deadline)
        except (ClusterctlError, TransportError) as exc:
            run.result, run.detail = "failed", str(exc)
        run.seconds = self.options.monotonic() - started
        return run

    def gpu_resets(self, findings: Sequence[Finding]) -> list[GpuReset]:
        """The resets of the GPUs the findings name (none named: all of them), each with persistence mode
        turned off around it where it is on (read from the host: a read, also in a dry run)."""
        gpus: list[int | None] = list(_gpus(findings)) or [None]
        timeout = self.timeout("reset-gpu")
        resets = []
        for gpu in gpus:
            value, failure = self.on_host(functools.partial(read_persistence, gpu=gpu), "heal: persistence mode", 60)
            modes = value if failure is None and isinstance(value, dict) else {}
            resets.append(gpu_reset(self.host.name, gpu, modes, timeout))
        return resets

    def reset_gpus(self, run: StepRun, findings: Sequence[Finding]) -> None:
        def users_of(gpu: int) -> Callable[[Transport], object]:
            query = f"nvidia-smi --query-compute-apps=pid --format=csv,noheader -i {gpu}"
            return lambda t: t.run(query, sudo=True, timeout=30)

        for reset in self.gpu_resets(findings):
            if reset.gpu is not None:
                value, failure = self.on_host(users_of(reset.gpu), "heal: gpu use", 60)
                users = str(getattr(value, "stdout", "")).strip() if value is not None else ""
                if failure is None and value is not None and getattr(value, "ok", False) and users:
                    run.result = "skipped"
                    run.detail = f"GPU {reset.gpu} is in use (pids {', '.join(users.split())}): not reset"
                    continue
            timeout = sum((c.timeout_s or 180) for c in reset.changes) + 30
            _value, failure = self.on_host(functools.partial(apply_gpu_reset, gate=self.gate, reset=reset),
                                           "heal: reset gpu", timeout)
            run.changes.extend(c.summary for c in reset.changes)
            left = self.gate.left_over(self.host.name)
            if left:  # the clean-up failed: the journal keeps it, 'clusterctl undo' turns it back on
                run.detail = (f"persistence mode is still off (after: {left[-1].summary}): "
                              "'clusterctl undo' of this run's journal turns it back on; ")
            if failure is not None:
                run.result, run.detail = "failed", f"{run.detail}{reset.reset.summary}: {failure}"
                return

    def power_cycle(self, run: StepRun, deadline: float) -> None:
        from clusterctl.bmc.credentials import bmc_password
        from clusterctl.bmc.power import BmcTarget, PowerAction, bmc_config, power_change
        from clusterctl.bmc.redfish import BmcError, RedfishBmc, address_for

        before = self.boot_id()
        try:
            config = bmc_config(self.inventory, self.host.name)
            bmc = RedfishBmc(config, self.host.name, bmc_password(config))
            state = bmc.power_state()
            change = power_change(self.host.name, PowerAction.CYCLE, state, address_for(config, self.host.name).url,
                                  timeout_s=max(1.0, deadline - self.options.monotonic()))
            if change is not None:
                run.changes.append(change.summary)
                self.gate.submit(BmcTarget(self.host, bmc), change)
        except BmcError as exc:
            run.result, run.detail = "failed", exc.message
            return
        except UsageError as exc:  # no BMC entry, no password: said without the file's whole hint
            run.result, run.detail = "failed", exc.message + (f" ({exc.field})" if exc.field else "")
            return
        except ChangeFailed as exc:
            tail = exc.record.result.stderr_tail(2) if exc.record.result is not None else ""
            run.result, run.detail = "failed", f"the power cycle failed: {tail}"
            return
        self.mark("power-cycled")
        why = self.wait_back(before, deadline)
        if why is not None:
            run.result, run.detail = "failed", f"power-cycled, but {why}"

    def release(self, findings: list[Finding]) -> HostHeal:
        from clusterctl.quarantine.release import release_hosts

        (released,) = release_hosts(self.runner, self.inventory, [self.host], self.gate, checks=None)
        result = self.result
        if released.released:
            self.mark("released")
            result.outcome = "released"
            result.detail = "; ".join(released.done)
            self.note("release", "released", result.detail, state="released")
        else:
            result.outcome = "failed"
            result.detail = "release refused: " + "; ".join(released.refused)
            self.note("release", "refused", result.detail)
        return result

    def needs_hardware(self, reason: str, codes: tuple[str, ...], findings: list[Finding]) -> HostHeal:
        result = self.result
        result.outcome = "needs hardware"
        result.detail = "no step cured it: it stays quarantined for a hardware repair"
        result.report = self.report(reason, codes, findings)
        self.note("needs hardware", "stays out", _errors(findings), state="needs hardware")
        return result

    def report(self, reason: str, codes: tuple[str, ...], findings: list[Finding]) -> str:
        host = self.host
        value, failure = self.on_host(lambda t: t.run(GPU_QUERY, sudo=True, timeout=60), "heal: serials", 90)
        if failure is None and value is not None and getattr(value, "ok", False):
            gpus = ["  " + line.strip() for line in str(getattr(value, "stdout", "")).splitlines() if line.strip()]
        else:
            why = failure or f"exit {getattr(value, 'exit_code', '?')}: {getattr(value, 'stderr', '').strip()[:120]}"
            gpus = [f"  (could not be read: {why})"]
        stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime(self.options.now()))
        log = f"/var/tmp/nvidia-bug-report-{host.name}-{stamp}.log"
        bug = Change.run(host.name, f"nvidia-bug-report.sh --output-file {log}",
                         summary=f"collect nvidia-bug-report on {host.name}", timeout_s=900)
        _value, failure = self.on_host(lambda t: self.gate.submit(t, bug), "heal: nvidia-bug-report", 960)
        where = f"{host.name}:{log}.gz" if failure is None else f"not made ({failure})"
        tried = [f"  {s.step}: {s.result}{' - ' + s.detail if s.detail else ''}" for s in self.result.steps]
        lines = [f"Hardware repair needed: {host.name} ({host.connect_address}"
                 f"{', rack ' + host.rack if host.rack else ''})",
                 f"Quarantined for: {reason} [{', '.join(codes) or '-'}]",
                 "Findings now:", *(f"  {f.severity.value} {f.code}: {f.message}" for f in findings
                                    if f.severity is not Severity.INFO),
                 "GPUs (index, name, serial, uuid, PCI bus id):", *gpus,
                 f"Remediation tried (chain {', '.join(self.result.chain) or 'none'}; {self.result.chain_reason}):",
                 *(tried or ["  nothing"]),
                 f"nvidia-bug-report: {where}"]
        return mask_text("\n".join(lines))


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


def read_persistence(transport: Transport, gpu: int | None) -> dict[int, bool | None]:
    """The persistence mode of ``gpu`` (None: of every GPU); ``{}`` when nvidia-smi cannot say (a GPU
    that fell off the bus): then it is left as it is."""
    command = PERSISTENCE_MODES.command + (f" -i {gpu}" if gpu is not None else "")
    result = transport.run(command, timeout=30)
    if not result.ok:
        return {}
    try:
        return PERSISTENCE_MODES.parse(result.stdout)
    except ParseError:
        return {}


def gpu_reset(host: str, gpu: int | None, modes: Mapping[int, bool | None], timeout_s: float) -> GpuReset:
    """The reset of ``gpu`` (None: all), persistence mode off first where ``modes`` says it is on."""
    if gpu is None:
        reset = Change.run(host, "nvidia-smi -r", summary=f"reset the GPUs of {host}", timeout_s=timeout_s)
        held = sorted(i for i, on in modes.items() if on)
    else:
        reset = Change.run(host, f"nvidia-smi -r -i {gpu}", summary=f"reset GPU {gpu} of {host}", timeout_s=timeout_s)
        held = [gpu] if modes.get(gpu) else []
    off = tuple(Change.run(host, f"nvidia-smi -pm 0 -i {i}", undo=f"nvidia-smi -pm 1 -i {i}", timeout_s=60,
                           summary=f"turn persistence mode off on GPU {i} of {host} for its reset") for i in held)
    on = tuple(Change.run(host, f"nvidia-smi -pm 1 -i {i}", timeout_s=60,
                          summary=f"turn persistence mode back on on GPU {i} of {host}") for i in held)
    return GpuReset(gpu, reset, off, on)


def apply_gpu_reset(transport: Transport, gate: Gate, reset: GpuReset) -> GateRecord:
    """Through the gate: persistence mode off as a temporary change (journaled before it is made, its
    undo turning it back on), the reset, and persistence mode back on however the reset ends."""
    if not reset.persistence_off:
        return gate.submit(transport, reset.reset)
    with gate.temporary(transport, reset.persistence_off, reset.persistence_on):
        return gate.submit(transport, reset.reset)


def _errors(findings: Sequence[Finding]) -> str:
    from clusterctl.quarantine.release import refusals

    return "; ".join(refusals(findings)) or "no error finding"


def _xids(findings: Sequence[Finding]) -> list[tuple[int, str]]:
    return [(int(str(f.evidence["xid"])), str(f.evidence.get("action", ""))) for f in findings
            if f.code == "GPU_XID" and f.severity is Severity.ERROR and str(f.evidence.get("xid", "")).isdigit()]


_GPU = re.compile(r"^GPU (\d+)\b")


def _gpus(findings: Sequence[Finding]) -> list[int]:
    found: list[int] = []
    for finding in findings:
        match = _GPU.match(finding.subject or "")
        if finding.severity is Severity.ERROR and match and int(match.group(1)) not in found:
            found.append(int(match.group(1)))
    return found


def heal_hosts(runner: Runner, inventory: Inventory, hosts: Sequence[Host], gate: Gate,
               options: HealOptions | None = None) -> list[HostHeal]:
    """Run the chain on each of ``hosts`` (one after the other); the gate records (dry run) or applies."""
    if not hosts:
        raise UsageError("no host to heal")
    options = options or HealOptions(inventory.quarantine.heal)
    results: list[HostHeal] = []
    for host in hosts:
        healer = _Healer(runner, inventory, host, gate, options)
        try:
            node = healer.node()
        except ClusterctlError as exc:
            results.append(HostHeal(host.name, outcome="failed", detail=str(exc)))
            continue
        reason, codes = node_ops.reason_and_codes(node) if node is not None else ("", ())
        interrupted = False
        try:
            results.append(healer.run(reason, codes))
        except ClusterctlError as exc:
            healer.result.outcome, healer.result.detail = "failed", str(exc)
            results.append(healer.result)
        except Interrupted:
            interrupted = True  # the lock is given back in bounded time: a silent host must not hold Ctrl-C up
            raise
        finally:
            healer.unlock(interrupted=interrupted)
    return results


def heal(runner: Runner, inventory: Inventory, hosts: Sequence[Host], *, apply: bool,
         options: HealOptions | None = None, journal_folder: Path | None = None
         ) -> tuple[list[HostHeal], str | None]:
    """``clusterctl heal``: ``heal_hosts`` through the engine's journaled gate (each change in the undo
    journal before it is made, the journal finished on Ctrl-C too); the results and the journal.
    ``journal_folder``: default ``clusterctl-results/undo`` of the current folder (``remediate serve
    --heal`` passes its state folder's)."""
    from clusterctl.engine.journaled import journaled_gate

    with journaled_gate("heal", inventory, apply=apply, folder=journal_folder) as step:
        results = heal_hosts(runner, inventory, hosts, step.gate, options)
    return results, step.journal
