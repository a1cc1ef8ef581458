"""After its kubelet restarts, a control plane is Ready a few seconds before the new kubelet may recreate its
static pods, the API server among them (seen on the real-node tier: the uncordon right after "ready" met
"The connection to the server ... was refused"). The Ready wait holds a restarted control plane until it
has stayed Ready, every read answered, for the settle time; a worker, or a node not restarted, goes on."""

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


def _probe(monkeypatch: pytest.MonkeyPatch, role: str, answers: list[Any], *,
           restarted: bool = True) -> list[str | None]:
    """What the Ready wait's probe says at t = 0, 2, 4 ... s for the reads ``answers`` (a node or an error)."""
    clock = iter(range(0, 200, 1))
    now = [0.0]
    monkeypatch.setattr(upgrade.time, "monotonic", lambda: now[0])
    reads = iter(answers)

    def read_nodes(_reader: object) -> dict[str, KubeNode]:
        answer = next(reads)
        if isinstance(answer, Exception):
            raise answer
        return {"cp1": answer}

    monkeypatch.setattr(upgrade, "read_nodes", read_nodes)
    rollout = Rollout(target=parse("1.36.3"), first_cp="cp1", roles={"cp1": role}, nodes={},
                      cordoned_before=frozenset(), ready_timeout_s=300.0)
    if restarted:
        rollout.kubelet_restarted.add("cp1")
    ctx: Any = SimpleNamespace(host=SimpleNamespace(name="cp1"), reader=None)
    wait = NodeReady(rollout).wait(ctx)
    assert wait is not None
    said = []
    for _ in answers:
        now[0] = 2.0 * next(clock)
        said.append(wait.probe(ctx))
    return said


READY = KubeNode("cp1", ready=True, kubelet_version="v1.36.3")


@pytest.mark.parametrize("role", [FIRST_CP, CONTROL_PLANE])
def test_a_restarted_control_plane_goes_on_only_after_it_stayed_ready(monkeypatch: pytest.MonkeyPatch,
                                                                      role: str) -> None:
    said = _probe(monkeypatch, role, [READY, READY, REFUSED, READY, READY, READY, READY, READY, READY, READY])
    # Ready at 0 and 2 s, the API server gone at 4 s (its pod recreated): the settle starts again at 6 s.
    assert said[:2] == ["Ready at the target for 0 s; its control plane settles for 10 s",
                        "Ready at the target for 2 s; its control plane settles for 10 s"]
    assert "was refused" in str(said[2])
    assert said[3:8] == [f"Ready at the target for {s} s; its control plane settles for 10 s" for s in (0, 2, 4, 6, 8)]
    assert said[8] is None


def test_a_worker_or_a_control_plane_not_restarted_goes_on_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    assert _probe(monkeypatch, WORKER, [READY]) == [None]
    assert _probe(monkeypatch, FIRST_CP, [READY], restarted=False) == [None]
