"""Slurm beside Kubernetes: ``status`` shows each node's Slurm state, and a host Slurm alone knows (no
Kubernetes node) is quarantined (drained with clusterctl's reason) and released (resumed) like any other."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from clirun import clusterctl
from kube_sim import KubeSim


@pytest.fixture
def sim(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> KubeSim:
    monkeypatch.chdir(tmp_path)
    sim = KubeSim(tmp_path, slurmd=("gpu-a2",))
    # gpu-s1: a Slurm compute node that never joined Kubernetes.
    with sim.inventory.open("a") as inventory:
        inventory.write("  gpu-s1: {address: 10.0.0.9, rack: a, roles: [worker], profile: profiles/slurm}\n")
    return sim


def cli(sim: KubeSim, *args: str) -> tuple[int, str]:
    done = clusterctl("-i", sim.inventory, *args)
    return done.exit_code, done.stdout + done.stderr


def _status(sim: KubeSim) -> dict[str, dict[str, object]]:
    code, out = cli(sim, "-o", "json", "status")
    assert code == 0, out
    return {r["host"]: r for r in json.loads(out)["quarantined"]}


def test_a_slurm_only_host_is_quarantined_and_released_through_slurm(sim: KubeSim) -> None:
    code, out = cli(sim, "quarantine", "gpu-s1", "--reason", "xid 79", "--yes")
    assert code == 0, out
    assert "drained in Slurm node gpu-s1" in out and "nothing to change" not in out, out
    state = sim.sh("scontrol -o show node gpu-s1", host="gpu-s1")[1]
    assert "State=IDLE+DRAIN" in state and "Reason=clusterctl: xid 79" in state
    row = _status(sim)["gpu-s1"]
    assert row["kubernetes_node"] is False and row["by_clusterctl"] is True and row["reason"] == "xid 79"
    assert row["slurm"] == {"state": "IDLE+DRAIN", "reason": "clusterctl: xid 79"}

    code, out = cli(sim, "release", "gpu-s1", "--skip-checks", "--yes")
    assert code == 0 and "resumed in Slurm node gpu-s1" in out, out
    assert "State=IDLE " in sim.sh("scontrol -o show node gpu-s1", host="gpu-s1")[1]
    assert "gpu-s1" not in _status(sim)


def test_a_reason_on_several_lines_is_drained_as_one_and_a_down_clusterctl_drain_is_resumed(sim: KubeSim) -> None:
    code, out = cli(sim, "quarantine", "gpu-s1", "--reason", "xid 79\nticket 4711", "--yes")
    assert code == 0, out
    assert "Reason=clusterctl: xid 79 ticket 4711 [" in sim.sh("scontrol -o show node gpu-s1", host="gpu-s1")[1]
    # Slurm lost the node after clusterctl drained it: still clusterctl's drain, resumed on release
    sim.sh("scontrol update nodename=gpu-s1 state=down reason='clusterctl: xid 79'", host="gpu-s1")
    code, out = cli(sim, "release", "gpu-s1", "--skip-checks", "--yes")
    assert code == 0 and "resumed in Slurm node gpu-s1" in out, out
    assert "State=IDLE " in sim.sh("scontrol -o show node gpu-s1", host="gpu-s1")[1]


def test_status_shows_slurm_beside_kubernetes_and_drains_made_outside(sim: KubeSim) -> None:
    assert cli(sim, "quarantine", "gpu-a2", "--reason", "nvlink", "--yes")[0] == 0
    sim.sh("scontrol update nodename=gpu-s1 state=drain reason='bad DIMM'", host="gpu-s1")
    rows = _status(sim)
    assert rows["gpu-a2"]["cordoned"] is True and rows["gpu-a2"]["slurm"] == {"state": "IDLE+DRAIN",
                                                                             "reason": "clusterctl: nvlink"}
    assert rows["gpu-s1"]["by_clusterctl"] is False and "state=resume when its owner agrees" in \
        str(rows["gpu-s1"]["release_needs"])
    code, out = cli(sim, "status")
    assert code == 0 and "SLURM" in out and "IDLE+DRAIN" in out and "no node" in out
    # A Kubernetes node left schedulable, drained in Slurm alone, is still a node (not "no node").
    sim.sh("scontrol update nodename=gpu-a2 state=resume", host="gpu-a2")
    assert cli(sim, "release", "gpu-a2", "--skip-checks", "--yes")[0] == 0
    sim.sh("scontrol update nodename=gpu-a2 state=drain reason='bad DIMM'", host="gpu-a2")
    assert _status(sim)["gpu-a2"]["kubernetes_node"] is True
    # release leaves a drain somebody else made
    code, out = cli(sim, "release", "gpu-s1", "--skip-checks", "--yes")
    assert "IDLE+DRAIN" in sim.sh("scontrol -o show node gpu-s1", host="gpu-s1")[1]


def test_status_of_a_host_slurm_alone_knows_shows_its_drain_as_the_list_does(sim: KubeSim) -> None:
    assert cli(sim, "quarantine", "gpu-s1", "--reason", "xid 79", "--yes")[0] == 0
    code, out = cli(sim, "-o", "json", "status", "gpu-s1")
    assert code == 0, out
    (host,) = json.loads(out)["hosts"]
    assert host["error"] is None and host["quarantined"] and host["quarantine"]["reason"] == "xid 79", out
    # A Slurm-only cluster (no control plane): the same, not a refusal for want of one.
    sim.inventory.write_text(sim.inventory.read_text().replace("control-plane, ", ""))
    code, out = cli(sim, "status", "gpu-s1")
    assert code == 0 and "gpu-s1: quarantined since" in out and "xid 79" in out, out


def test_a_host_neither_kubernetes_nor_slurm_knows_is_an_error(sim: KubeSim, tmp_path: Path) -> None:
    with sim.inventory.open("a") as inventory:
        inventory.write("  gpu-x9: {address: 10.0.0.10, rack: a, roles: [worker], profile: profiles/plain}\n")
    code, out = cli(sim, "quarantine", "gpu-x9", "--reason", "x", "--yes")
    assert code == 1 and "not a node of the cluster" in out and "runs no slurmd" in out


def test_a_failed_slurm_resume_is_reported_failed_and_the_next_release_resumes(sim: KubeSim) -> None:
    assert cli(sim, "quarantine", "gpu-a2", "--reason", "xid 79", "--yes")[0] == 0
    # slurmctld refuses this host's resume once: Kubernetes is released, Slurm keeps the node drained
    (sim.root / "profiles" / "refuses").mkdir()
    (sim.root / "profiles" / "refuses" / "profile.yaml").write_text(
        "extends: ../slurm\ncommands:\n  - regex: 'state=resume'\n    exit: 1\n"
        "    stderr_text: \"slurm_update error: Access/permission denied\\n\"\n")
    slurm_profile = sim.inventory.read_text()
    sim.inventory.write_text(slurm_profile.replace("profiles/slurm}", "profiles/refuses}", 1))
    code, out = cli(sim, "release", "gpu-a2", "--skip-checks", "--yes")
    assert code == 1, out
    assert "gpu-a2: uncordon node gpu-a2" in out  # what was done is said, then what failed
    assert "REFUSED gpu-a2: stays quarantined: resume Slurm node gpu-a2: exit 1: slurm_update error: " \
           "Access/permission denied" in out
    code, out = cli(sim, "-o", "json", "release", "gpu-a2", "--skip-checks", "--yes")
    (row,) = json.loads(out)["hosts"]
    assert code == 1 and row["released"] is False and row["quarantined"] is True, out
    assert row["refused"] == [row["slurm"]] and row["slurm"].startswith("resume Slurm node")
    # slurmctld agrees again: the host status lists is released by the release it names
    sim.inventory.write_text(slurm_profile)
    assert "clusterctl release gpu-a2" in str(_status(sim)["gpu-a2"]["release_needs"])
    code, out = cli(sim, "release", "gpu-a2", "--skip-checks", "--yes")
    assert code == 0 and "resumed in Slurm node gpu-a2" in out and "gpu-a2: released" in out, out
    assert "State=IDLE " in sim.sh("scontrol -o show node gpu-a2", host="gpu-a2")[1]
