"""After its kubelet restarts, a control plane is Ready a few seconds before the new kubelet may recreate its
static pods, the API server among them (seen on the real-node tier: the uncordon right after "ready" met
"The connection to the server ... was refused"). The Ready wait holds a restarted control plane until it
has stayed Ready, every read answered, over the settle time; a worker, or a node not restarted, goes on."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from clusterctl.day2 import upgrade
from clusterctl.day2.upgrade import CONTROL_PLANE, FIRST_CP, WORKER, NodeReady, Rollout
from clusterctl.day2.versions import parse
from clusterctl.facts.kube_nodes import KubeNode
from clusterctl.transport.base import FailureKind, TransportError

REFUSED = TransportError(FailureKind.COMMAND_FAILED, "kubectl failed: The connection to the server 10.0.0.1:6443 "
                                                     "was refused - did you specify the right host or port?")
READY = KubeNode("cp1", ready=True, kubelet_version="v1.36.3")


def _probe(monkeypatch: pytest.MonkeyPatch, role: str, answers: list[Any], *, restarted: bool = True,
           ready_timeout_s: float = 300.0) -> list[str | None]:
    """What the Ready wait's probe says, poll after poll, for the reads ``answers`` (a node or an error)."""
    reads = iter(answers)

    def read_nodes(_reader: object) -> dict[str, KubeNode]:
        answer = next(reads)
        if isinstance(answer, Exception):
            raise answer
        return {"cp1": answer}

    monkeypatch.setattr(upgrade, "read_nodes", read_nodes)
    rollout = Rollout(target=parse("1.36.3"), first_cp="cp1", roles={"cp1": role}, nodes={},
                      cordoned_before=frozenset(), ready_timeout_s=ready_timeout_s)
    if restarted:
        rollout.kubelet_restarted.add("cp1")
    ctx: Any = SimpleNamespace(host=SimpleNamespace(name="cp1"), reader=None)
    wait = NodeReady(rollout).wait(ctx)
    assert wait is not None and wait.poll_s == upgrade.READY_POLL_S
    return [wait.probe(ctx) for _ in answers]


@pytest.mark.parametrize("role", [FIRST_CP, CONTROL_PLANE])
def test_a_restarted_control_plane_goes_on_only_after_it_stayed_ready(monkeypatch: pytest.MonkeyPatch,
                                                                      role: str) -> None:
    said = _probe(monkeypatch, role, [READY, READY, REFUSED, *[READY] * 6])
    # 10 s of reads 2 s apart: six Ready reads in a row. The API server gone at the third read (its pod
    # recreated) starts the count again.
    assert said[:2] == [f"Ready at the target ({n} of 6 reads in a row: its control plane settles)" for n in (1, 2)]
    assert "was refused" in str(said[2])
    assert said[3:8] == [f"Ready at the target ({n} of 6 reads in a row: its control plane settles)"
                         for n in range(1, 6)]
    assert said[8] is None


def test_the_settle_takes_at_most_half_the_ready_timeout(monkeypatch: pytest.MonkeyPatch) -> None:
    assert _probe(monkeypatch, FIRST_CP, [READY, READY], ready_timeout_s=5)[-1] is None  # 2.5 s: one poll apart
    assert _probe(monkeypatch, FIRST_CP, [READY], ready_timeout_s=2) == [None]


def test_a_worker_or_a_control_plane_not_restarted_goes_on_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    assert _probe(monkeypatch, WORKER, [READY]) == [None]
    assert _probe(monkeypatch, FIRST_CP, [READY], restarted=False) == [None]
