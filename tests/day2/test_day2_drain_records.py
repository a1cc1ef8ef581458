"""The drain phase's records are its own node's: its cordon and its evictions, taken from what it passed
through the control plane's gate, never recognised by a change's summary (a node named ``gpu-a1`` is in
``evict pod ... from node gpu-a10``: an upgrade's report and journal gave gpu-a1 the evictions of gpu-a10)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from kube_sim import KubeSim


def test_a_drain_keeps_the_evictions_of_its_node_only(tmp_path: Path) -> None:
    from clusterctl.changes import Gate, HostGate
    from clusterctl.day2.drain import DrainNode
    from clusterctl.engine.phase import PhaseContext
    from clusterctl.host_reader import HostReader
    from clusterctl.inventory.loader import load_inventory

    sim = KubeSim(tmp_path, names=("gpu-a1", "gpu-a2", "gpu-a10"))
    sim.deploy("web", 3)
    assert sim.pods_on("gpu-a1") and sim.pods_on("gpu-a10")
    inventory, cp = load_inventory(str(sim.inventory)), sim.transport()
    gate, drain = Gate(apply=True), DrainNode("gpu-a1", 30.0)

    def drained(name: str) -> list[str]:
        ctx = PhaseContext(inventory.host(name), HostReader(cp, what="drain"), inventory)
        records = drain.apply(ctx, HostGate(gate, cp), drain.plan(ctx, drain.check(ctx)))
        return [r.change.summary for r in records]

    assert any(s.startswith("evict pod default/web-") for s in drained("gpu-a10"))
    mine = drained("gpu-a1")
    assert mine[0] == "cordon node gpu-a1" and len(mine) > 1, mine
    assert all(s.endswith("from node gpu-a1") for s in mine[1:]), mine


def test_a_drain_beside_another_through_the_same_gate_keeps_its_own(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """heal drains several nodes at once through one control plane's gate: what another drain passes through
    it meanwhile is not this node's (its report and undo journal would name the other node's evictions)."""
    import clusterctl.day2.drain as day2_drain
    from clusterctl.changes import Change, Gate, HostGate
    from clusterctl.day2.drain import DrainNode
    from clusterctl.engine.phase import PhaseContext
    from clusterctl.host_reader import HostReader
    from clusterctl.inventory.loader import load_inventory

    sim = KubeSim(tmp_path, names=("gpu-a1", "gpu-a2"))
    sim.deploy("web", 2)
    inventory, cp = load_inventory(str(sim.inventory)), sim.transport()
    gate, drain = Gate(apply=True), DrainNode("gpu-a1", 30.0)
    real = day2_drain.drain_node

    def beside_another(transport: Any, gate_: Any, node: str, options: Any) -> Any:
        gate_.submit(transport, Change.run("gpu-a1", "true", summary="cordon node gpu-a2", node="gpu-a2"))
        return real(transport, gate_, node, options)

    monkeypatch.setattr(day2_drain, "drain_node", beside_another)
    ctx = PhaseContext(inventory.host("gpu-a1"), HostReader(cp, what="drain"), inventory)
    records = drain.apply(ctx, HostGate(gate, cp), drain.plan(ctx, drain.check(ctx)))
    assert records and all(r.change.node == "gpu-a1" for r in records), [r.change.summary for r in records]
