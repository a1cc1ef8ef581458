"""heal on a node whose pod list kubectl answers unreadably: that host's chain stops before anything
disruptive, named as the drain's (quarantine's per-host rule, ``quarantine.drain.PodsUnreadable``), and the
run goes on with the next host."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from clirun import clusterctl
from kube_sim import KubeSim


def test_an_unreadable_pod_list_blocks_that_hosts_chain_only(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    sim = KubeSim(tmp_path)
    sim.deploy("web", 3)
    quarantined = clusterctl("-i", sim.inventory, "quarantine", "gpu-a2", "gpu-a3", "--reason", "dbe", "--code",
                             "GPUDoubleBitECCErrors", "--yes")
    assert quarantined.exit_code == 0, quarantined.output
    assert clusterctl("-i", sim.inventory, "-l", "gpu-a3", "mock", "set", "fault=xid-79").exit_code == 0
    from clusterctl.mock.profile import forget_profiles

    profile = tmp_path / "profiles" / "plain" / "profile.yaml"
    profile.write_text(profile.read_text() + 'commands:\n  - regex: "spec.nodeName=gpu-a3"\n'
                       '    stdout_text: "<html><body>502 Bad Gateway</body></html>"\n    exit: 0\n')
    forget_profiles()
    done = clusterctl("-i", sim.inventory, "-o", "json", "heal", "gpu-a3", "gpu-a2", "--yes")
    assert done.exit_code == 1, done.output
    assert "could not be used" not in done.output and "Traceback" not in done.output
    hosts = {h["host"]: h for h in json.loads(done.stdout)["hosts"]}
    failed = hosts["gpu-a3"]
    assert failed["outcome"] == "failed" and "it stays quarantined" in failed["detail"]
    # The chain stops before its first disruptive step, at the drain (the engine's phase failed): no GPU reset,
    # reboot or power cycle is tried.
    assert [(s["step"], s["result"]) for s in failed["steps"]] == [("drain", "failed")]
    assert failed["detail"] == "reset-gpu could not start: see the drain step; it stays quarantined"
    said = failed["steps"][0]["detail"]
    assert "drain of gpu-a3 stopped: the pods of node gpu-a3 could not be read" in said
    assert "cannot parse kubectl get pods" in said
    assert sim.node("gpu-a3")["spec"]["unschedulable"] is True
    assert hosts["gpu-a2"]["outcome"] == "released"  # the next host is healed all the same
