"""Slurm's side of quarantine and release: ``scontrol update nodename=... state=drain|resume``.

Only on hosts that run ``slurmd`` (``systemctl is-active slurmd``); the command runs on the host
itself (its ``scontrol`` reaches slurmctld with the host's own configuration). The Slurm node
name is the host's ``slurm_node`` variable, else its inventory name. Quarantine marks its reason
``clusterctl: REASON`` so that release resumes only nodes clusterctl drained, never a node an
administrator drained for another reason. Each drain carries ``state=resume`` as its undo.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from clusterctl.facts.slurm import SlurmNode, drain_reason
from clusterctl.slurm_changes import SlurmOutcome, drain_change, read_node, resume_change, submit

if TYPE_CHECKING:
    from clusterctl.changes import Gate
    from clusterctl.fanout import Runner
    from clusterctl.inventory.model import Host
    from clusterctl.transport.base import Transport


def node_name(host: Host) -> str:
    return str(dict(host.vars).get("slurm_node") or host.name)


def runs_slurmd(transport: Transport) -> bool:
    return transport.run("systemctl is-active --quiet slurmd", timeout=30).exit_code == 0


def drain_or_resume(runner: Runner, hosts: Sequence[Host], gate: Gate, reason: str | None) -> dict[str, SlurmOutcome]:
    """For every host that runs slurmd: read its node, then drain it for ``reason`` (quarantine) or (``None``:
    release) resume it where clusterctl drained it, a node drained for another reason left as it is, through
    the gate; host -> what happened."""
    if not hosts:
        return {}
    by_name = {h.name: h for h in hosts}

    def task(transport: Transport) -> SlurmOutcome:
        if not runs_slurmd(transport):
            return SlurmOutcome("no slurmd", runs_slurmd=False)
        name = node_name(by_name[transport.host.name])
        node = read_node(transport, name, 30)
        if node is None:
            return SlurmOutcome(f"Slurm does not know node {name} (scontrol show node)", failed=True)
        if reason is not None:
            if node.drain_set:
                return SlurmOutcome(f"already drained in Slurm ({node.reason or node.state})")
            return submit(gate, transport, drain_change(transport.host.name, name, drain_reason(reason), 60),
                          "drained")
        if not node.drained_by_clusterctl:
            return SlurmOutcome(f"left drained in Slurm: drained by someone else ({node.reason or 'no reason'})"
                                if node.drained else f"not drained in Slurm ({node.state})")
        return submit(gate, transport, resume_change(transport.host.name, node, 60), "resumed")

    fleet = runner.run_task(list(hosts), task, label="slurm drain" if reason is not None else "slurm resume")
    return {o.host.name: o.value or SlurmOutcome(f"Slurm: {o.failure.describe() if o.failure else 'no result'}",
                                                 failed=True) for o in fleet.outcomes}


def slurm_nodes(runner: Runner, hosts: Sequence[Host]) -> dict[str, SlurmNode | None]:
    """Each host's Slurm node as it shows itself (``None``: no slurmd there, or Slurm does not know it)."""
    if not hosts:
        return {}
    by_name = {h.name: h for h in hosts}

    def task(transport: Transport) -> SlurmNode | None:
        if not runs_slurmd(transport):
            return None
        return read_node(transport, node_name(by_name[transport.host.name]), 30)

    fleet = runner.run_task(list(hosts), task, label="slurm: node states")
    return {o.host.name: (o.value if o.ok else None) for o in fleet.outcomes}
