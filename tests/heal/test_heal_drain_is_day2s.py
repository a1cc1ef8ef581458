"""heal drains with day 2's drain phase (``day2.drain.DrainNode``, the one drain of the action engine), by the rule
of every drain of a failing host (quarantine --drain, health --quarantine, remediate serve): a pod with emptyDir
data is evicted only with ``--delete-emptydir-data`` (its data is lost); then the chain goes on to its first step
that stops the GPUs; without it, the chain stops at the drain, naming the pod and the switch. The drain runs from
the control plane without taking its lock: hosts heal side by side (``remediate serve --heal``), each for as long
as its reboot takes, and an upgrade may run meanwhile."""

from __future__ import annotations

import io
import json
from collections.abc import Sequence
from pathlib import Path

import pytest
from clirun import clusterctl
from kube_sim import KubeSim

from clusterctl.engine.lock import DEFAULT_LOCK_PATH
from clusterctl.fanout import Runner
from clusterctl.findings import Finding, Severity
from clusterctl.heal.run import heal_after_drain
from clusterctl.inventory.loader import load_inventory
from clusterctl.inventory.model import Host
from clusterctl.quarantine.receiver import Remediator
from clusterctl.transport.factory import ConnectOptions, make_connector


def _quarantined(tmp_path: Path) -> KubeSim:
    sim = KubeSim(tmp_path)
    sim.deploy("scratch", 3, emptydir=True)
    assert [p for p in sim.pods_on("gpu-a3") if p.startswith("default/scratch-")]
    quarantined = clusterctl("-i", sim.inventory, "quarantine", "gpu-a3", "--reason", "dbe", "--code",
                             "GPUDoubleBitECCErrors", "--yes")
    assert quarantined.exit_code == 0, quarantined.output
    return sim


def test_heal_drains_a_pod_with_emptydir_data_and_goes_on(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    sim = _quarantined(tmp_path)
    assert clusterctl("-i", sim.inventory, "-l", "gpu-a3", "mock", "set", "fault=xid-79").exit_code == 0
    done = clusterctl("-i", sim.inventory, "-o", "json", "heal", "gpu-a3", "--yes", "--delete-emptydir-data")
    (host,) = json.loads(done.stdout)["hosts"]
    steps = [(s["step"], s["result"]) for s in host["steps"]]
    assert steps[0] == ("drain", "changed") and len(steps) > 1, host
    assert Path(json.loads(done.stdout)["undo_journal"]).is_file()  # the key every command's JSON uses
    assert [c for c in host["steps"][0]["changes"] if c.startswith("evict pod default/scratch-")], host
    assert not [p for p in sim.pods_on("gpu-a3") if p.startswith("default/scratch-")]


def test_heal_keeps_emptydir_data_unless_told_as_every_drain_of_a_failing_host(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    sim = _quarantined(tmp_path)
    (scratch,) = [p for p in sim.pods_on("gpu-a3") if p.startswith("default/scratch-")]
    refused = (f"the drain cannot evict {scratch}: has local storage (emptyDir) that eviction deletes "
               "(use --delete-emptydir-data to override)")
    assert clusterctl("-i", sim.inventory, "-l", "gpu-a3", "mock", "set", "fault=xid-79").exit_code == 0
    # The plan says where the chain will stop and why (it planned the drain and every step after it).
    plan = clusterctl("-i", sim.inventory, "-o", "json", "heal", "gpu-a3", "--dry-run")
    (planned,) = json.loads(plan.stdout)["hosts"]
    assert plan.exit_code == 1 and planned["outcome"] == "failed", planned
    assert [(s["step"], s["result"], s["detail"]) for s in planned["steps"]] == [("drain", "failed", refused)], planned
    done = clusterctl("-i", sim.inventory, "-o", "json", "heal", "gpu-a3", "--yes")
    (host,) = json.loads(done.stdout)["hosts"]
    assert done.exit_code == 1 and host["outcome"] == "failed" and "stays quarantined" in host["detail"], host
    assert [(s["step"], s["result"]) for s in host["steps"]] == [("drain", "failed")], host
    # A rule refused the pod at once, the same as planned: not that the drain ran out of time. The refusal is
    # said once, on the drain's step; the outcome points to it.
    assert host["steps"][0]["detail"] == refused and "did not finish" not in host["detail"], host
    assert host["detail"] == "reset-gpu could not start: see the drain step; it stays quarantined", host
    text = clusterctl("-i", sim.inventory, "heal", "gpu-a3", "--dry-run").output
    assert text.count(refused) == 1 and "FAILED: reset-gpu could not start: see the drain step" in text, text
    assert [p for p in sim.pods_on("gpu-a3") if p.startswith("default/scratch-")] == [scratch]


def test_a_receiver_and_the_heal_after_its_drain_keep_emptydir_data_alike(tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """``remediate serve --heal``: the receiver's drain and heal's take the same choice (before, the receiver left
    the pod and heal's drain deleted its data)."""
    monkeypatch.chdir(tmp_path)
    sim = KubeSim(tmp_path)
    sim.deploy("scratch", 3, emptydir=True)
    assert clusterctl("-i", sim.inventory, "-l", "gpu-a3", "mock", "set", "fault=xid-79").exit_code == 0
    scratch = [p for p in sim.pods_on("gpu-a3") if p.startswith("default/scratch-")]
    inventory = load_inventory(str(sim.inventory))
    connect = make_connector(ConnectOptions())
    log = io.StringIO()
    receiver = Remediator(inventory, lambda: Runner(connect, parallel=8, timeout_s=60), log, state_dir=str(tmp_path),
                          after_drain=heal_after_drain(inventory, state_dir=str(tmp_path)))
    body = {"version": "4", "status": "firing", "alerts": [
        {"status": "firing", "labels": {"alertname": "GPUDoubleBitECCErrors", "Hostname": "gpu-a3", "gpu": "3"},
         "annotations": {}, "startsAt": "2026-12-01T20:00:00Z"}]}
    assert receiver.handle(json.dumps(body).encode())[0] == 200 and receiver.settle(300)
    said = [json.loads(line) for line in log.getvalue().splitlines()]
    assert [p for p in sim.pods_on("gpu-a3") if p.startswith("default/scratch-")] == scratch, said
    (drained,) = [d for d in said if d.get("host") == "gpu-a3" and d["why"].startswith("drain: failed")]
    assert "--delete-emptydir-data" in drained["why"] and drained["decision"] == "heal", said
    (healed,) = [d for d in said if d.get("host") == "gpu-a3" and d["decision"] == "failed"]
    assert "see the drain step" in healed["why"], said


def test_a_heal_holds_its_hosts_lock_not_the_control_planes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    sim = _quarantined(tmp_path)
    locks: list[tuple[bool, bool]] = []

    def release_gate(_runner: object, hosts: Sequence[Host]) -> dict[str, list[Finding]]:
        """Sick before the chain; during the GPU reset's verify, whose locks are held is noted; then healthy."""
        locks.append((sim.state.host("gpu-a3").fs.read(DEFAULT_LOCK_PATH) is not None,
                      sim.state.host("gpu-a1").fs.read(DEFAULT_LOCK_PATH) is not None))
        sick = len(locks) == 1
        return {h.name: [Finding(Severity.ERROR, "GPU_XID", "Xid 48 on GPU 3", host=h.name, subject="GPU 3")]
                if sick else [] for h in hosts}

    monkeypatch.setattr("clusterctl.quarantine.release.health_and_nccl_checks", lambda *_: release_gate)
    done = clusterctl("-i", sim.inventory, "-o", "json", "heal", "gpu-a3", "--yes", "--delete-emptydir-data")
    (host,) = json.loads(done.stdout)["hosts"]
    assert [s["step"] for s in host["steps"]][:2] == ["drain", "reset-gpu"], host
    assert locks[1] == (True, False), locks  # gpu-a3 locked, the control plane gpu-a1 free for other runs


def test_a_dry_run_on_a_cordoned_node_names_the_evictions_the_run_makes(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """A quarantined node is cordoned already: its drain still evicts its pods, and the dry run says so (it said
    "drain: nothing to change"), by the drain's own rules (DaemonSet pods stay), changing nothing."""
    monkeypatch.chdir(tmp_path)
    sim = _quarantined(tmp_path)
    assert sim.node("gpu-a3")["spec"]["unschedulable"]
    assert clusterctl("-i", sim.inventory, "-l", "gpu-a3", "mock", "set", "fault=xid-79").exit_code == 0
    before = sim.snapshot()
    plan = clusterctl("-i", sim.inventory, "-o", "json", "heal", "gpu-a3", "--dry-run", "--delete-emptydir-data")
    drain = json.loads(plan.stdout)["hosts"][0]["steps"][0]
    (scratch,) = [p for p in sim.pods_on("gpu-a3") if p.startswith("default/scratch-")]
    assert drain["step"] == "drain" and drain["result"] == "changed", drain
    assert drain["changes"] == [f"evict pod {scratch} from node gpu-a3"], drain  # its DaemonSet pods stay
    assert sim.snapshot() == before
    text = clusterctl("-i", sim.inventory, "heal", "gpu-a3", "--dry-run", "--delete-emptydir-data").output
    assert "drain: nothing to change" not in text and f"drain: would evict pod {scratch}" in text, text


def test_a_drain_refusing_many_pods_names_the_first_few_and_json_every_one(tmp_path: Path,
                                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """A node full of pods no controller owns: the drain's refusal names the first three and how many more (it
    named every one, a line hundreds of pods long); -o json keeps every pod, in heal's and remove-node's steps."""
    monkeypatch.chdir(tmp_path)
    sim = _quarantined(tmp_path)
    solo = [f"default/solo-{i:02}" for i in range(12)]
    for pod in solo:
        sim.bare_pod(pod.split("/")[1], "gpu-a3")
    assert clusterctl("-i", sim.inventory, "-l", "gpu-a3", "mock", "set", "fault=xid-79").exit_code == 0
    text = clusterctl("-i", sim.inventory, "heal", "gpu-a3", "--dry-run", "--delete-emptydir-data").output
    (line,) = [line for line in text.splitlines() if line.startswith("gpu-a3: drain: failed: ")]
    assert sum(pod in text for pod in solo) == 3 and "(+9 more): declares no controller" in line, text
    plan = clusterctl("-i", sim.inventory, "-o", "json", "heal", "gpu-a3", "--dry-run", "--delete-emptydir-data")
    (refused,) = json.loads(plan.stdout)["hosts"][0]["steps"][0]["findings"]
    assert refused["code"] == "DRAIN_REFUSED" and sorted(refused["evidence"]["pods"]) == solo, refused
    removal = clusterctl("-i", sim.inventory, "-o", "json", "remove-node", "gpu-a3", "--dry-run")
    (drain,) = [s for s in json.loads(removal.stdout)["steps"] if s["step"] == "drain"]
    assert removal.exit_code == 1 and "(+9 more)" in drain["message"], drain
    assert sorted(p for f in drain["findings"] for p in f["evidence"]["pods"] if p.startswith("default/solo-")) == solo
