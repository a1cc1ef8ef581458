"""SIGTERM (a service manager stopping ``remediate serve --heal``) or Ctrl-C in the middle of heal's chain is
handled by the action engine, as in every run that changes hosts: the host's lock is given back, the undo journal
is finished and named, the step cut short is said, exit 143 (128 + SIGTERM); the host stays quarantined and is
not rebooted."""

from __future__ import annotations

import os
import signal
from collections.abc import Sequence
from pathlib import Path

import pytest
from clirun import clusterctl
from kube_sim import KubeSim

from clusterctl.engine.lock import DEFAULT_LOCK_PATH
from clusterctl.findings import Finding, Severity
from clusterctl.inventory.model import Host
from clusterctl.undo_journal import read_journal


def test_sigterm_during_a_step_gives_the_lock_back_and_names_the_journal(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("CLUSTERCTL_STATE_DIR", str(tmp_path / "state"))
    sim = KubeSim(tmp_path)
    quarantined = clusterctl("-i", sim.inventory, "quarantine", "gpu-a2", "--reason", "dbe", "--code",
                             "GPUDoubleBitECCErrors", "--yes")
    assert quarantined.exit_code == 0, quarantined.output
    gates: list[str] = []

    def release_gate(_runner: object, hosts: Sequence[Host]) -> dict[str, list[Finding]]:
        """GPU 3 stays sick; the second run of the gate (the GPU reset's verify) is when SIGTERM comes."""
        gates.append(hosts[0].name)
        if len(gates) == 2:
            # The host's lock is held while a step runs.
            assert sim.state.host("gpu-a2").fs.read(DEFAULT_LOCK_PATH) is not None
            os.kill(os.getpid(), signal.SIGTERM)
        return {h.name: [Finding(Severity.ERROR, "GPU_XID", "Xid 48 on GPU 3", host=h.name, subject="GPU 3")]
                for h in hosts}

    monkeypatch.setattr("clusterctl.quarantine.release.health_and_nccl_checks", lambda *_: release_gate)
    done = clusterctl("-i", sim.inventory, "heal", "gpu-a2", "--yes")
    assert done.exit_code == 143, done.output
    assert len(gates) == 2 and "Traceback" not in done.output
    assert "interrupted (SIGTERM)" in done.stderr and "gpu-a2: interrupted in phase reset-gpu" in done.stderr
    assert sim.state.host("gpu-a2").fs.read(DEFAULT_LOCK_PATH) is None  # given back
    (journal,) = (tmp_path / "state" / "undo").glob("heal-*.json")
    assert f"to take back what heal changed before it stopped: clusterctl undo {journal}" in done.stderr
    assert "reset GPU 3 of gpu-a2" in [r.change.summary for r in read_journal(journal).records]
    node = sim.node("gpu-a2")
    assert node["spec"]["unschedulable"] is True and "clusterctl.dev/unhealthy" in str(node["spec"]["taints"])
    assert sim.state.host("gpu-a2").values().get("boots") is None  # the chain stopped before the reboot
