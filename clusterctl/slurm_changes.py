"""A Slurm node read on the host itself and the one drain and the one resume of it, each a ``Change``
with its undo: quarantine and release, and the node agent's ``health --slurm``, all go through these."""

from __future__ import annotations

from dataclasses import dataclass

from clusterctl.changes import Change, ChangeFailed, Gate
from clusterctl.facts.slurm import SlurmNode, node_from, show_command, update_command
from clusterctl.transport.base import Transport


@dataclass(frozen=True)
class SlurmOutcome:
    """What one host's drain or resume came to, in words; ``failed``: it was due and did not happen; ``changed``:
    it was made (or, in a dry run, would be); ``runs_slurmd``: False on a host without Slurm (nothing to say)."""
    said: str
    failed: bool = False
    changed: bool = False
    runs_slurmd: bool = True


def read_node(transport: Transport, name: str, timeout_s: float) -> SlurmNode | None:
    """The node as ``scontrol -o show node NAME`` shows it; None when Slurm does not know it."""
    return node_from(transport.run(show_command(name), timeout=timeout_s), name)


def drain_change(host: str, name: str, reason: str, timeout_s: float) -> Change:
    """Drain Slurm node ``name`` for ``reason`` (``drain_reason``'s text); its undo resumes the node."""
    return Change.run(host, update_command(name, "drain", reason), summary=f"drain Slurm node {name}",
                      undo=update_command(name, "resume"), timeout_s=timeout_s, node=name)


def resume_change(host: str, node: SlurmNode, timeout_s: float) -> Change:
    """Resume Slurm node ``node``; its undo drains it again for the reason it had."""
    return Change.run(host, update_command(node.name, "resume"), summary=f"resume Slurm node {node.name}",
                      undo=update_command(node.name, "drain", node.reason), timeout_s=timeout_s, node=node.name)


def submit(gate: Gate, transport: Transport, change: Change, done: str) -> SlurmOutcome:
    """``change`` (a drain or resume) through ``gate``: ``done`` in words, or the failure."""
    try:
        gate.submit(transport, change)
    except ChangeFailed as exc:
        return SlurmOutcome(str(exc), failed=True)
    return SlurmOutcome(f"{done} in Slurm node {change.node}" if gate.apply else f"would {change.summary}",
                        changed=True)
