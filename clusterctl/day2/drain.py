"""Taking a node's pods off it before work, and letting pods back after: the day-2 seam for draining.

``drain_node`` is the one call the upgrade and ``remove-node`` make; it runs on the first
control plane. Today it is ``kubectl drain --ignore-daemonsets --delete-emptydir-data
--timeout=Ns`` as one gated change (kubectl cordons first, honours PodDisruptionBudgets and
stops at the timeout); quarantine's pod-by-pod drain (one eviction per change) replaces the
body of this function once it lands, with the same contract: it returns when the node is
empty, raises ``DrainFailed`` naming what stayed.
"""

from __future__ import annotations

import shlex
from typing import TYPE_CHECKING

from clusterctl.changes import Change, ChangeFailed, Gate
from clusterctl.facts.kube import kubectl

if TYPE_CHECKING:
    from clusterctl.transport.base import Transport

DEFAULT_DRAIN_TIMEOUT_S = 300.0


class DrainFailed(Exception):
    """The node could not be emptied within the timeout (a budget, a pod that does not stop)."""


def drain_change(cp: str, node: str, timeout_s: float = DEFAULT_DRAIN_TIMEOUT_S) -> Change:
    q = shlex.quote
    return Change.run(cp, kubectl(f"drain {q(node)} --ignore-daemonsets --delete-emptydir-data "
                                  f"--timeout={int(timeout_s)}s"),
                      summary=f"drain node {node} (pods evicted, DaemonSets left)",
                      undo=kubectl(f"uncordon {q(node)}"), timeout_s=timeout_s + 30)


def uncordon_change(cp: str, node: str) -> Change:
    return Change.run(cp, kubectl(f"uncordon {shlex.quote(node)}"), summary=f"uncordon node {node}",
                      undo=kubectl(f"cordon {shlex.quote(node)}"))


def drain_node(transport: Transport, gate: Gate, node: str, timeout_s: float = DEFAULT_DRAIN_TIMEOUT_S) -> None:
    """Cordon and drain ``node`` from the control plane ``transport`` reaches; ``DrainFailed`` if it stays busy."""
    try:
        gate.submit(transport, drain_change(transport.host.name, node, timeout_s))
    except ChangeFailed as exc:
        result = exc.record.result
        detail = (result.stderr_tail(3) if result is not None else "") or str(exc)
        raise DrainFailed(f"drain of {node} did not finish within {int(timeout_s)} s: {detail}") from None


def uncordon_node(transport: Transport, gate: Gate, node: str) -> None:
    gate.submit(transport, uncordon_change(transport.host.name, node))
