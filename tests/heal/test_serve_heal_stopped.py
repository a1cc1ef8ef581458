"""``remediate serve --heal`` stopped (Ctrl-C, SIGTERM: ``Remediator.stop``) in the middle of a host's chain: the
chain runs in the receiver's thread for that host, which no signal reaches, so the stop interrupts its runs as
Ctrl-C interrupts ``clusterctl heal``: the engine gives the host's lock back and finishes the undo journal, the
log names it, and the host stays quarantined for the next run. Before, the chain went on unseen until the
process ended under it, leaving the host locked (the next heal refused it: "rerun with --force-unlock")."""

from __future__ import annotations

import io
import json
import threading
from collections.abc import Sequence
from pathlib import Path

import pytest
from kube_sim import KubeSim

from clusterctl.engine.lock import DEFAULT_LOCK_PATH
from clusterctl.fanout import Runner
from clusterctl.findings import Finding, Severity
from clusterctl.heal.run import heal_after_drain
from clusterctl.inventory.loader import load_inventory
from clusterctl.inventory.model import Host
from clusterctl.quarantine.receiver import Remediator
from clusterctl.transport.factory import ConnectOptions, make_connector
from clusterctl.undo_journal import read_journal


def test_a_stop_mid_chain_gives_the_hosts_lock_back_and_names_the_journal(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    sim = KubeSim(tmp_path)
    in_step, stopped = threading.Event(), threading.Event()
    calls: list[str] = []

    def release_gate(_runner: object, hosts: Sequence[Host]) -> dict[str, list[Finding]]:
        """GPU 3 stays sick; the second run of the gate (the GPU reset's verify) waits for the stop."""
        calls.append(hosts[0].name)
        if len(calls) == 2:
            in_step.set()
            stopped.wait(60)
        return {h.name: [Finding(Severity.ERROR, "GPU_XID", "Xid 48 on GPU 3", host=h.name, subject="GPU 3")]
                for h in hosts}

    monkeypatch.setattr("clusterctl.quarantine.release.health_and_nccl_checks", lambda *_: release_gate)
    inventory = load_inventory(str(sim.inventory))
    connect = make_connector(ConnectOptions())
    log = io.StringIO()
    state = tmp_path / "state"
    receiver = Remediator(inventory, lambda: Runner(connect, parallel=8, timeout_s=60), log, state_dir=str(state),
                          after_drain=heal_after_drain(inventory, state_dir=str(state)))
    body = {"version": "4", "status": "firing", "alerts": [
        {"status": "firing", "labels": {"alertname": "GPUDoubleBitECCErrors", "Hostname": "gpu-a3", "gpu": "3"},
         "annotations": {}, "startsAt": "2026-12-01T20:00:00Z"}]}
    assert receiver.handle(json.dumps(body).encode())[0] == 200
    try:
        assert in_step.wait(120), log.getvalue()
        assert sim.state.host("gpu-a3").fs.read(DEFAULT_LOCK_PATH) is not None  # the chain holds the host
        receiver.stop()
        assert sim.state.host("gpu-a3").fs.read(DEFAULT_LOCK_PATH) is None, log.getvalue()  # given back
    finally:
        stopped.set()
    said = [json.loads(line) for line in log.getvalue().splitlines()]
    (last,) = [d for d in said if d.get("host") == "gpu-a3" and "receiver stopped in the middle" in d["why"]]
    assert last["decision"] == "failed" and "clusterctl undo " in last["why"]
    journal = last["why"].split("clusterctl undo ")[-1].strip()
    assert "reset GPU 3 of gpu-a3" in [r.change.summary for r in read_journal(journal).records]
    node = sim.node("gpu-a3")
    assert node["spec"]["unschedulable"] is True and "clusterctl.dev/unhealthy" in str(node["spec"]["taints"])
