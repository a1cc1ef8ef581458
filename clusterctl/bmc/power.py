"""``clusterctl power status|on|off|cycle``: hosts' power through their BMCs, each change through the one gate.

A power action is a ``Change`` like any other (``redfish power on|off|cycle`` on the host's BMC):
``--dry-run`` records it (the BMC is only read), an applied one is kept in the undo journal (undo
names it and does not switch power: ``power on`` is the way back from ``power off``). The gate's
target for it is ``BmcTarget``, the host's BMC seen as a host whose only commands are these.

Each action waits, bounded by the entry's ``power_timeout_s``, until the BMC reports the state
asked for: ``off`` until ``Off``; ``on`` until ``On``; ``cycle`` is off then on (as ``ipmitool
power cycle``), so both halves are seen to happen; a host that is off is only switched on. A
BMC that does not answer, refuses the credentials or never reports the change fails that host,
named; the others go on.
"""

from __future__ import annotations

import concurrent.futures
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from enum import Enum
from typing import TYPE_CHECKING

from clusterctl.bmc.credentials import bmc_password
from clusterctl.bmc.redfish import (
    FORCE_OFF,
    GRACEFUL_SHUTDOWN,
    OFF,
    ON,
    RESET_ON,
    BmcError,
    RedfishBmc,
    address_for,
)
from clusterctl.changes import MAKES_NO_TRACE, Change, ChangeFailed, Gate
from clusterctl.engine.journaled import journaled_gate
from clusterctl.errors import UsageError
from clusterctl.inventory.bmc_section import bmc_for
from clusterctl.secret import Secret, mask_text
from clusterctl.transport.base import CommandResult, RunRequest, Transport

if TYPE_CHECKING:
    from clusterctl.inventory.model import BmcConfig, Host, Inventory

COMMAND = "redfish power"
#: What each action does to a host, as its change and its confirmation say it.
DOING = {"on": "switch on", "off": "switch off", "cycle": "power-cycle"}


class PowerAction(str, Enum):
    STATUS = "status"
    ON = "on"
    OFF = "off"
    CYCLE = "cycle"


@dataclass
class HostPower:
    host: str
    bmc: str
    #: The power state the BMC reported before (None: it could not be read).
    before: str | None = None
    after: str | None = None
    #: What was done (or would be), one line per change.
    done: list[str] = field(default_factory=list)
    error: str | None = None
    seconds: float | None = None

    @property
    def ok(self) -> bool:
        return self.error is None

    def to_json(self) -> dict[str, object]:
        return asdict(self) | {"seconds": None if self.seconds is None else round(self.seconds, 1)}  # keys' order


class BmcTarget(Transport):
    """A host's BMC as the gate's target: it runs ``redfish power on|off|cycle [graceful]`` and nothing else."""

    def __init__(self, host: Host, bmc: RedfishBmc) -> None:
        super().__init__(host)
        self.bmc = bmc

    def execute(self, request: RunRequest) -> CommandResult:
        start = time.monotonic()
        words = request.command.split()
        if words[:2] != COMMAND.split() or len(words) < 3 or words[2] not in ("on", "off", "cycle"):
            return CommandResult(request.command, "", f"not a BMC action: {request.command}\n", 2, 0.0)
        graceful = "graceful" in words[3:]
        try:
            seen = self._act(words[2], graceful)
        except BmcError as exc:
            return CommandResult(request.command, "", exc.message + "\n", 1, round(time.monotonic() - start, 3))
        return CommandResult(request.command, seen, "", 0, round(time.monotonic() - start, 3))

    def _act(self, action: str, graceful: bool) -> str:
        bmc = self.bmc
        if action in ("off", "cycle"):
            bmc.reset(GRACEFUL_SHUTDOWN if graceful else FORCE_OFF)
            waited = bmc.wait_for(OFF)
            if action == "off":
                return f"Off after {waited:.1f} s\n"
            # At least a second off, as a power cycle's off half is (capacitors drain, the BMC notices).
            time.sleep(max(0.0, 1.0 - waited))
        bmc.reset(RESET_ON)
        waited = bmc.wait_for(ON)
        return f"On after {waited:.1f} s\n"


def power_change(host: str, action: PowerAction, before: str, bmc_url: str, *, graceful: bool = False,
                 timeout_s: float | None = None) -> Change | None:
    """The change that takes ``host`` from ``before`` to what ``action`` asks; None when it is there already."""
    if action is PowerAction.STATUS or (action, before) in ((PowerAction.ON, ON), (PowerAction.OFF, OFF)):
        return None
    verb = action.value
    if action is PowerAction.CYCLE and before == OFF:
        verb = "on"  # nothing to switch off: the cycle is its on half
    how = " (graceful shutdown first)" if graceful and verb != "on" else ""
    command = f"{COMMAND} {verb}" + (" graceful" if graceful and verb != "on" else "")
    summary = f"{DOING[verb]} {host} through its BMC {bmc_url}{how}"
    if verb == "cycle":  # over once the host is on again, as it was
        return Change.run(host, command, summary=summary, sudo=False, timeout_s=timeout_s, makes=(MAKES_NO_TRACE,),
                          cannot_undo="a power cycle leaves the host on, as it was")
    back = "off" if verb == "on" else "on"
    return Change.run(host, command, summary=summary, sudo=False, timeout_s=timeout_s,
                      cannot_undo=f"undo does not switch power: 'clusterctl power {back}' does")


def bmc_config(inventory: Inventory, host: str) -> BmcConfig:
    config = bmc_for(inventory.bmc, host)
    if config is None:
        raise UsageError(f"{host} has no BMC in the inventory", file=inventory.source, field="bmc",
                         hint="Add a 'bmc:' entry for it (or a pattern that matches it): address, username and "
                              "password_file or password_env.")
    return config


def power_hosts(inventory: Inventory, hosts: Sequence[Host], action: PowerAction, gate: Gate, *,
                graceful: bool = False) -> list[HostPower]:
    """Read (``status``) or change the power of ``hosts``; the gate records (dry-run) or applies each change.

    Every host's BMC entry and password are read first, so a missing one stops the run (exit 2)
    before any BMC is touched.
    """
    if not hosts:
        raise UsageError("no host to act on")
    configs = {h.name: bmc_config(inventory, h.name) for h in hosts}
    passwords: dict[str, Secret] = {}
    for config in configs.values():
        if config.pattern not in passwords:
            passwords[config.pattern] = bmc_password(config)

    def one(host: Host) -> HostPower:
        config = configs[host.name]
        bmc = RedfishBmc(config, host.name, passwords[config.pattern])
        result = HostPower(host.name, address_for(config, host.name).url)
        start = time.monotonic()
        try:
            result.before = bmc.power_state()
            change = power_change(host.name, action, result.before, result.bmc, graceful=graceful,
                                  timeout_s=config.power_timeout_s * 2 + config.timeout_s * 4)
            if change is not None:
                record = gate.submit(BmcTarget(host, bmc), change)
                result.done.append(("" if record.applied else "would ") + change.summary)
                if record.applied:
                    result.after = bmc.power_state()
            elif action is not PowerAction.STATUS:
                result.done.append(f"{host.name} is {result.before.lower()} already: nothing to do")
        except ChangeFailed as exc:
            result.error = mask_text(f"{exc.record.change.summary} failed: {exc.result.stderr_tail(2)}")
        except BmcError as exc:
            result.error = exc.message
        result.seconds = time.monotonic() - start
        return result

    with concurrent.futures.ThreadPoolExecutor(max_workers=min(16, len(hosts)), thread_name_prefix="bmc") as pool:
        return list(pool.map(one, hosts))


def power(inventory: Inventory, hosts: Sequence[Host], action: PowerAction, *, apply: bool,
          graceful: bool = False, state_dir: str | None = None) -> tuple[list[HostPower], str | None]:
    """``clusterctl power``: ``power_hosts`` through the engine's journaled gate (each change in the undo
    journal before it reaches the BMC, the journal finished on Ctrl-C too); the results and the journal
    (``None``: ``status``, a dry run, or nothing changed)."""
    changing = apply and action is not PowerAction.STATUS
    with journaled_gate(f"power {action.value}", inventory, apply=changing, state_dir=state_dir) as step:
        results = power_hosts(inventory, hosts, action, step.gate, graceful=graceful)
    return results, step.journal
