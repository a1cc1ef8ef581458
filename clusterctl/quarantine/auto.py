"""``health --quarantine``: the policy's decisions on a health run, then the quarantine path for those that act.

Hosts already out of service are read from the cluster first (they count against the cap);
hosts to drain and hosts only to quarantine go through ``quarantine_hosts`` in two batches, each
with its finding codes (the first is the taint's value) and the health reason as the reason.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from clusterctl.engine.journaled import journaled_gate
from clusterctl.quarantine.drain import DrainOptions
from clusterctl.quarantine.policy import Action, Decision, HostVerdict, cap, decide, health_wanted
from clusterctl.quarantine.run import HostQuarantine, QuarantineRequest, quarantine_hosts
from clusterctl.quarantine.status import quarantined_nodes

if TYPE_CHECKING:
    from clusterctl.fanout import Runner
    from clusterctl.inventory.model import Inventory


@dataclass
class PolicyRun:
    decisions: list[Decision]
    results: list[HostQuarantine] = field(default_factory=list)
    #: False: a plan (no --yes); nothing was changed.
    applied: bool = False

    def to_json(self) -> dict[str, object]:
        return {"decisions": [d.to_json() for d in self.decisions], "results": [r.to_json() for r in self.results]}


def run_policy(runner: Runner, inventory: Inventory, verdicts: Sequence[HostVerdict], *, apply: bool,
               max_unavailable: str | None = None, state_dir: str | None = None,
               drain: DrainOptions | None = None) -> tuple[PolicyRun, str | None]:
    """``health --quarantine``: decide for every host of ``verdicts`` and quarantine those that act, through the
    engine's journaled gate (a plan without ``apply``: nothing is changed); the run and its undo journal."""
    with journaled_gate("health-quarantine", inventory, apply=apply, state_dir=state_dir) as step:
        already = [n.host for n in quarantined_nodes(runner, inventory)]
        decisions = decide(health_wanted(verdicts, inventory.quarantine), out_of_service=already,
                           limit=cap(max_unavailable or inventory.quarantine.max_unavailable, len(inventory.hosts)))
        run = PolicyRun(decisions, applied=apply)
        by_name = {h.name: h for h in inventory.hosts}
        for action in (Action.DRAIN, Action.QUARANTINE):
            chosen = [d for d in decisions if d.action is action and d.host in by_name]
            for decision in chosen:  # one request per host: each carries its own codes and reason
                request = QuarantineRequest(reason=decision.reason, codes=decision.codes,
                                            drain=action is Action.DRAIN, drain_options=drain or DrainOptions())
                run.results += quarantine_hosts(runner, inventory, [by_name[decision.host]], request, step.gate)
    return run, step.journal
