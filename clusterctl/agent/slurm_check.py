"""``clusterctl health --local --slurm``: Slurm's ``HealthCheckProgram``, prolog or epilog, on the node itself.

What LBNL NHC does, with clusterctl's level-0 checks: run on the node (no SSH, no control machine),
within a bound (Slurm kills a health check that runs past 60 s: ``--deadline`` defaults to 50),
and on an error-level finding drain the node with a reason that says it is clusterctl's
(``scontrol update nodename=N state=drain reason="clusterctl: CODE: ..."``), print NHC's line
(``ERROR: clusterctl: Health check failed: ...``) and exit 1. On a healthy run, a node that
clusterctl drained is resumed; a node drained for any other reason (a person, another checker)
is left as it is. A check that cannot finish in time is a failure (a hung ``nvidia-smi`` is the
sign of a GPU off the bus). Every drain and resume goes through the ``Gate``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from clusterctl.agent.run import check_host
from clusterctl.changes import Gate
from clusterctl.facts.slurm import SlurmNode, drain_reason
from clusterctl.health.model import SLURM_CHECK_DEADLINE_S, HealthOptions, HostHealth, Verdict
from clusterctl.inventory.model import Fabric
from clusterctl.slurm_changes import drain_change, read_node, resume_change, submit
from clusterctl.transport.base import Transport

SCONTROL_TIMEOUT_S = 10.0


@dataclass(frozen=True)
class SlurmCheckOptions:
    #: The Slurm node name; None: this host's short hostname (as slurmd names itself by default).
    node: str | None = None
    deadline_s: float = SLURM_CHECK_DEADLINE_S
    since: str = "1h"
    #: What a port's rate is held to (the node agent's config); ``None``: the inventory's, run from clusterctl.
    fabric: Fabric | None = None


@dataclass
class SlurmCheck:
    node: str
    health: HostHealth
    #: ``drained``, ``reason updated``, ``resumed``, ``left drained``, ``already drained``, ``none``, ``failed``.
    action: str
    #: One line for slurmd's log and the operator: NHC's form on failure.
    message: str
    slurm_before: SlurmNode | None = None
    problems: list[str] = field(default_factory=list)

    @property
    def failed(self) -> bool:
        return self.health.verdict in (Verdict.UNHEALTHY, Verdict.UNKNOWN)

    @property
    def exit_code(self) -> int:
        return 1 if self.failed or self.problems else 0

    def to_json(self) -> dict[str, Any]:
        return {"node": self.node, "verdict": self.health.verdict.value, "reason": self.health.reason,
                "action": self.action, "message": self.message, "exit_code": self.exit_code,
                "slurm": self.slurm_before.to_json() if self.slurm_before else None, "problems": self.problems,
                "findings": [f.to_json() for f in self.health.findings]}


def run_slurm_check(transport: Transport, options: SlurmCheckOptions) -> SlurmCheck:
    """Check this node, then drain or resume it in Slurm as NHC would; never raises for the host's answers."""
    started = time.monotonic()
    name = options.node or _short_hostname(transport)
    # What is left of the deadline after scontrol's two calls bounds the whole check, each probe a third of it.
    left = max(options.deadline_s - (time.monotonic() - started) - SCONTROL_TIMEOUT_S * 2, 5.0)
    probing = HealthOptions(since=options.since, probe_timeout_s=min(20.0, max(left / 3, 3.0)))
    health = check_host(transport, name, probing, options.fabric or transport.host.fabric,
                        source="slurm-health-check", within=left)
    node = read_node(transport, name, SCONTROL_TIMEOUT_S)
    check = SlurmCheck(name, health, "none", "", slurm_before=node)
    if check.failed:
        check.message = f"ERROR: clusterctl: Health check failed: {health.reason}"
        if node is None:
            check.action = "failed"
            check.problems.append(f"Slurm does not know node {name} (scontrol show node): not drained")
            return check
        reason = drain_reason(health.reason)
        if node.drain_set and (not node.drained_by_clusterctl or node.reason == reason):
            check.action = "already drained"  # by clusterctl for this reason, or by someone else: theirs stays
            return check
        change = drain_change(transport.host.name, name, reason, SCONTROL_TIMEOUT_S)
        check.action = "reason updated" if node.drain_set else "drained"
    else:
        if node is None or not node.drained:
            check.message = f"clusterctl: {name} healthy ({health.reason})"
            return check
        if not node.drained_by_clusterctl:
            check.action = "left drained"
            check.message = (f"clusterctl: {name} healthy; left drained: drained by someone else "
                             f"({node.reason or node.state})")
            return check
        change = resume_change(transport.host.name, node, SCONTROL_TIMEOUT_S)
        check.action = "resumed"
        check.message = f"clusterctl: {name} healthy; resumed (drained by clusterctl: {node.reason})"
    outcome = submit(Gate(apply=True), transport, change, check.action)
    if outcome.failed:
        check.problems.append(outcome.said)
        check.action = "failed"
    return check


def _short_hostname(transport: Transport) -> str:
    result = transport.run("hostname -s 2>/dev/null || hostname", timeout=SCONTROL_TIMEOUT_S)
    name = result.stdout.strip().split(".")[0]
    return name or transport.host.name.split(".")[0]
