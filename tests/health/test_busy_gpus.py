"""Level 2+ takes the GPUs: not beside a compute process or a GPU pod, unless the host is quarantined
(cordoned) or --force is given."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from clirun import DEMO, REPO_ROOT, clusterctl

KUBE_SIM = REPO_ROOT / "tests" / "quarantine"


def _findings(run: Any) -> dict[str, dict[str, dict[str, Any]]]:
    return {h["host"]: {f["code"]: f for f in h["findings"]} for h in run.json()["hosts"]}


def test_a_compute_process_keeps_the_invasive_checks_off_that_host() -> None:
    assert clusterctl("-i", DEMO, "-l", "gpu-a2", "mock", "set", "busy=gpu3").exit_code == 0
    run = clusterctl("-i", DEMO, "-l", "gpu-a1,gpu-a2", "-o", "json", "health", "--level", "2")
    assert run.exit_code == 1, run.output
    found = _findings(run)
    refused = found["gpu-a2"]["INVASIVE_CHECK_REFUSED"]
    assert refused["severity"] == "warning"
    assert "GPU 3: pid 40170 /opt/rh/rh-python38/root/usr/bin/python3, 185 MiB" in refused["message"]
    assert "--force" in refused["fix"] and "clusterctl quarantine gpu-a2" in refused["fix"]
    assert "NCCL_BUSBW" not in found["gpu-a2"] and "NCCL_BUSBW" in found["gpu-a1"]
    # dcgmi ran on gpu-a1 only (the demo has no DCGM: only the host it ran on says so)
    messages = {h["host"]: [f["message"] for f in h["findings"] if f["code"] != "INVASIVE_CHECK_REFUSED"]
                for h in run.json()["hosts"]}
    assert any("dcgmi" in m for m in messages["gpu-a1"])
    assert not any("dcgmi" in m for m in messages["gpu-a2"])

    forced = clusterctl("-i", DEMO, "-l", "gpu-a1,gpu-a2", "-o", "json", "health", "--level", "2", "--force")
    assert "INVASIVE_CHECK_REFUSED" not in _findings(forced)["gpu-a2"]
    assert "NCCL_BUSBW" in _findings(forced)["gpu-a2"]


def test_level_1_is_not_held_back_by_busy_gpus() -> None:
    assert clusterctl("-i", DEMO, "-l", "gpu-a2", "mock", "set", "busy=gpu3").exit_code == 0
    run = clusterctl("-i", DEMO, "-l", "gpu-a2", "-o", "json", "health", "--level", "1")
    assert "INVASIVE_CHECK_REFUSED" not in _findings(run)["gpu-a2"]


@pytest.fixture
def sim(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    import sys

    monkeypatch.syspath_prepend(str(KUBE_SIM))
    monkeypatch.chdir(tmp_path)
    from kube_sim import KubeSim

    sim = KubeSim(tmp_path, names=("gpu-a1", "gpu-a2"))
    yield sim
    sys.modules.pop("kube_sim", None)


def _gpu_deployment(sim: Any, name: str, gpus: int) -> None:
    manifest = (f"apiVersion: apps/v1\nkind: Deployment\nmetadata: {{name: {name}, namespace: default}}\n"
                f"spec:\n  replicas: 2\n  selector: {{matchLabels: {{app: {name}}}}}\n"
                f"  template:\n    metadata: {{labels: {{app: {name}}}}}\n    spec:\n"
                f"      containers: [{{name: main, image: trainer, resources: {{limits: "
                f"{{nvidia.com/gpu: {gpus}}}}}}}]\n")
    code, _, err = sim.kubectl("apply -f -", manifest)
    assert code == 0, err


def test_a_gpu_pod_keeps_them_off_until_the_host_is_quarantined(sim: Any) -> None:
    _gpu_deployment(sim, "trainer", 8)  # one replica on each node
    run = clusterctl("-i", sim.inventory, "-o", "json", "health", "--level", "2")
    found = _findings(run)
    for host in ("gpu-a1", "gpu-a2"):
        message = found[host]["INVASIVE_CHECK_REFUSED"]["message"]
        assert "pod default/trainer-" in message and "8 GPUs, ReplicaSet trainer-" in message
    # The DaemonSet pods every node runs (kube-proxy, the CNI) are the node's own: not counted.
    assert "kube-proxy" not in json.dumps(found)

    assert clusterctl("-i", sim.inventory, "quarantine", "gpu-a2", "--reason", "test", "--yes").exit_code == 0
    run = clusterctl("-i", sim.inventory, "-o", "json", "health", "--level", "2")
    found = _findings(run)
    assert "INVASIVE_CHECK_REFUSED" in found["gpu-a1"]
    assert "INVASIVE_CHECK_REFUSED" not in found["gpu-a2"] and "NCCL_BUSBW" in found["gpu-a2"]


def test_pods_without_gpus_do_not_count(sim: Any) -> None:
    sim.deploy("web", 2)
    run = clusterctl("-i", sim.inventory, "-o", "json", "health", "--level", "2")
    assert not any("INVASIVE_CHECK_REFUSED" in codes for codes in _findings(run).values())
