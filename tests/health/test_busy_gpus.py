"""Level 2+ takes the GPUs: not beside a compute process or a GPU pod, unless the host is quarantined
(cordoned) or --force is given."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from clirun import DEMO, REPO_ROOT, clusterctl

from clusterctl.mock.profile import forget_profiles

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


def _answer_for_gpu_a2(sim: Any, pattern: str, text: str) -> None:
    """The control plane's kubectl answers ``pattern`` (a command about gpu-a2) with ``text``."""
    profile = Path(sim.root) / "profiles" / "plain" / "profile.yaml"
    profile.write_text(profile.read_text() + f"commands:\n  - regex: {json.dumps(pattern)}\n"
                       f"    stdout_text: {json.dumps(text)}\n")
    forget_profiles()


def _bad_node(sim: Any) -> tuple[str, str]:
    node = sim.node("gpu-a2")
    node["status"]["allocatable"]["nvidia.com/gpu"] = "-1"
    return "get node gpu-a2 -o json", json.dumps(node)


def _bad_pods(sim: Any) -> tuple[str, str]:
    _gpu_deployment(sim, "trainer", 8)  # one replica on each node
    code, out, err = sim.kubectl("get pods -A --field-selector spec.nodeName=gpu-a2 -o json")
    assert code == 0, err
    pods = json.loads(out)
    for pod in pods["items"]:
        for container in pod["spec"]["containers"]:
            if container.get("resources"):
                container["resources"]["limits"]["nvidia.com/gpu"] = "8Gi"
    return "spec.nodeName=gpu-a2", json.dumps(pods)


@pytest.mark.parametrize(("answer", "named"), [
    (_bad_node, "its node could not be read through gpu-a1 (cannot parse kubectl get node -o json: "
                "node gpu-a2: allocatable nvidia.com/gpu is '-1', not a whole number)"),
    (_bad_pods, "the pods of node gpu-a2 could not be read through gpu-a1 (cannot parse kubectl get pods -o json: "
                "pod default/trainer-"),
])
def test_an_answer_that_cannot_be_read_counts_that_host_busy_named_and_no_other(sim: Any, answer: Any,
                                                                               named: str) -> None:
    """A node or pod list the control plane answers but clusterctl cannot read is a failed read of that
    host (busy: only a host known idle is tested), named in the finding; the other hosts go on."""
    _answer_for_gpu_a2(sim, *answer(sim))
    run = clusterctl("-i", sim.inventory, "-o", "json", "health", "--level", "2")
    found = _findings(run)
    refused = found["gpu-a2"]["INVASIVE_CHECK_REFUSED"]
    assert "whether the GPUs are in use is not known" in refused["message"]
    assert named in refused["message"]
    (unknown,) = refused["evidence"]["unknown"]
    assert named in unknown and "Traceback" not in run.output
    assert "NCCL_BUSBW" not in found["gpu-a2"]
    if answer is _bad_node:  # gpu-a2's pods are not what keeps gpu-a1 from its checks
        assert "INVASIVE_CHECK_REFUSED" not in found["gpu-a1"] and "NCCL_BUSBW" in found["gpu-a1"]
    else:
        assert "pod default/trainer-" in found["gpu-a1"]["INVASIVE_CHECK_REFUSED"]["message"]
        assert "is not known" not in found["gpu-a1"]["INVASIVE_CHECK_REFUSED"]["message"]

    table = clusterctl("-i", sim.inventory, "health", "--level", "2")
    assert table.exit_code == run.exit_code
    flat = " ".join(table.output.split())
    assert "gpu-a2" in flat and "whether the GPUs are in use is not known" in flat
    assert "node gpu-a2" in flat or "pod default/trainer-" in flat


def _failing_for_gpu_a2(sim: Any, pattern: str) -> None:
    """The control plane's kubectl fails outright (exit 1, a server error) for ``pattern``, about gpu-a2 only."""
    profile = Path(sim.root) / "profiles" / "plain" / "profile.yaml"
    stderr = ("Error from server (InternalError): an error on the server (\"etcdserver: request timed out\") "
              "has prevented the request from succeeding\n")
    profile.write_text(profile.read_text() + f"commands:\n  - regex: {json.dumps(pattern)}\n"
                       f"    stderr_text: {json.dumps(stderr)}\n    exit: 1\n")
    forget_profiles()


@pytest.mark.parametrize("pattern", ["get node gpu-a2 -o json", "spec.nodeName=gpu-a2"])
def test_kubectl_failing_for_one_node_counts_that_host_busy_and_keeps_the_others_pod_checks(
        sim: Any, pattern: str) -> None:
    """A kubectl that fails for one node is no "no cluster": that host is a failed read (busy, named),
    the other hosts' pods are still read."""
    _gpu_deployment(sim, "trainer", 8)  # one replica on each node
    _failing_for_gpu_a2(sim, pattern)
    run = clusterctl("-i", sim.inventory, "-o", "json", "health", "--level", "2")
    found = _findings(run)
    refused = found["gpu-a2"]["INVASIVE_CHECK_REFUSED"]["message"]
    assert "whether the GPUs are in use is not known" in refused
    assert "could not be read through gpu-a1" in refused and "Error from server (InternalError)" in refused
    assert "NCCL_BUSBW" not in found["gpu-a2"]
    other = found["gpu-a1"]["INVASIVE_CHECK_REFUSED"]["message"]
    assert "pod default/trainer-" in other and "is not known" not in other
    assert "Traceback" not in run.output


def test_no_cluster_at_all_leaves_the_processes_to_decide(sim: Any) -> None:
    """An API server that refuses connections is "no cluster here": no pod can hold a GPU, no host is busy."""
    _gpu_deployment(sim, "trainer", 8)
    profile = Path(sim.root) / "profiles" / "plain" / "profile.yaml"
    stderr = "The connection to the server 10.0.0.1:6443 was refused - did you specify the right host or port?\n"
    profile.write_text(profile.read_text() + f"commands:\n  - regex: \"kubectl\"\n"
                       f"    stderr_text: {json.dumps(stderr)}\n    exit: 1\n")
    forget_profiles()
    run = clusterctl("-i", sim.inventory, "-o", "json", "health", "--level", "2")
    assert not any("INVASIVE_CHECK_REFUSED" in codes for codes in _findings(run).values()), run.output
