"""bootstrap verify judges the GPUs a node offers the way the device plugin offers them: whole GPUs
(``nvidia.com/gpu``), or MIG instances (``migStrategy=mixed``: ``nvidia.com/mig-<profile>`` and no
``nvidia.com/gpu``; ``single``: the instances as ``nvidia.com/gpu``), against the GPUs the survey saw."""

from __future__ import annotations

import json
from dataclasses import replace
from types import SimpleNamespace
from typing import Any

import pytest
from fixture_files import read_fixture

from clusterctl.bootstrap.phases import verify
from clusterctl.facts.kube_nodes import KubeNode, parse_node


def _node(allocatable: dict[str, str], labels_fixture: str | None = None) -> KubeNode:
    """The recorded kubeadm node (tests/fixtures/kubectl) as gpu-a1, Ready, offering ``allocatable``, with GFD's
    labels of NVIDIA's MIG-in-Kubernetes walkthrough."""
    item: dict[str, Any] = json.loads(read_fixture("kubectl", "nodelist-kubeadm-v1.28-notready.json"))["items"][0]
    item.update(kind="Node")
    item["metadata"]["name"] = "gpu-a1"
    next(c for c in item["status"]["conditions"] if c["type"] == "Ready")["status"] = "True"
    item["status"]["allocatable"].update(allocatable)
    if labels_fixture:
        item["metadata"]["labels"].update(json.loads(read_fixture("kubectl", labels_fixture)))
    return parse_node(json.dumps(item))


def _judged(node: KubeNode, surveyed_gpus: int, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """verify's node findings for one worker the saved survey saw ``surveyed_gpus`` GPUs on (labels left aside)."""
    monkeypatch.setattr(verify.cc, "survey", lambda ctx: SimpleNamespace(
        hosts={"gpu-a1": SimpleNamespace(gpu_count=surveyed_gpus)}))
    monkeypatch.setattr(verify.cc, "run_hosts", lambda ctx: ["gpu-a1"])
    monkeypatch.setattr(verify, "topology_labels", lambda saved, fabric: SimpleNamespace(as_dict=dict))
    host = SimpleNamespace(roles=("worker",), gpus=True, fabric=SimpleNamespace(type="infiniband"))
    ctx: Any = SimpleNamespace(shared=SimpleNamespace(failed_hosts=set()), inventory=SimpleNamespace(
        host=lambda name: host))
    return [f"{f.code}: {f.message}" for f in verify._node_findings(ctx, {"gpu-a1": node})]


def test_a_mig_mixed_node_offering_only_mig_instances_is_no_mismatch(monkeypatch: pytest.MonkeyPatch) -> None:
    mixed = _node({"nvidia.com/mig-1g.5gb": "1", "nvidia.com/mig-2g.10gb": "1", "nvidia.com/mig-3g.20gb": "1"},
                  "nvidia-mig-k8s-mixed-labels.json")
    assert _judged(mixed, 1, monkeypatch) == []
    single = _node({"nvidia.com/gpu": "7"}, "nvidia-mig-k8s-single-labels.json")
    assert _judged(single, 1, monkeypatch) == []


def test_too_few_gpus_are_still_a_mismatch_naming_what_is_offered(monkeypatch: pytest.MonkeyPatch) -> None:
    assert _judged(_node({"nvidia.com/gpu": "7"}), 8, monkeypatch) == [
        "GPU_ALLOCATABLE_MISMATCH: gpu-a1 offers 7 nvidia.com/gpu; the survey saw 8 GPUs"]
    assert _judged(_node({}), 8, monkeypatch) == [
        "GPU_ALLOCATABLE_MISMATCH: gpu-a1 offers 0 nvidia.com/gpu; the survey saw 8 GPUs"]
    # Two A100s in MIG mode, one of them offering nothing: fewer instances than GPUs.
    assert _judged(_node({"nvidia.com/mig-1g.5gb": "1"}, "nvidia-mig-k8s-mixed-labels.json"), 2, monkeypatch) == [
        "GPU_ALLOCATABLE_MISMATCH: gpu-a1 offers 1 nvidia.com/mig-1g.5gb; the survey saw 2 GPUs"]


def test_the_closing_line_says_what_is_offered_as_it_is(monkeypatch: pytest.MonkeyPatch) -> None:
    """8 whole GPUs and 8 A100s cut into 7 instances each under ``mixed``: 56 instances are not 56 GPUs."""
    mixed = _node({"nvidia.com/mig-1g.5gb": "56"}, "nvidia-mig-k8s-mixed-labels.json")
    nodes = {"gpu-a1": _node({"nvidia.com/gpu": "8"}), "gpu-m1": replace(mixed, name="gpu-m1")}
    answers = {"api_ready": True, "settle_s": 0.0, "run_hosts": list(nodes)}
    for name, value in answers.items():
        monkeypatch.setattr(verify.cc, name, lambda *args, value=value: value)
    monkeypatch.setattr(verify, "read_nodes", lambda reader: nodes)
    monkeypatch.setattr(verify, "_node_findings", lambda ctx, nodes: [])
    monkeypatch.setattr(verify, "_gpu_pod", lambda ctx, node, offered: None)
    ctx: Any = SimpleNamespace(host=SimpleNamespace(name="cp1"), reader=None, inventory=SimpleNamespace(
        host=lambda name: SimpleNamespace(gpus=True)))
    (works,) = verify.Verify().verify(ctx)
    assert works.message.startswith("works: 2 node(s) Ready, 8 GPU(s), 56 MIG instance(s) (mixed) allocatable, "
                                    "and a pod asking for one GPU ran nvidia-smi -L on each of 2 GPU node(s)")
