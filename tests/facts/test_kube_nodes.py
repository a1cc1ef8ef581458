"""``kubectl get nodes -o json`` and ``kubectl get node NAME -o json`` read into ``KubeNode``, on a
recorded kubeadm control plane (tests/fixtures/kubectl/README.md) and on copies of it broken the way
a proxy's error page or a hand-made List breaks it: the error names the node and the field, never a
crash, a dropped value or a guess."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from fixture_files import read_fixture
from refusals import refusal

from clusterctl.errors import ParseError
from clusterctl.facts.kube_nodes import KubeNode, Taint, parse_node, parse_nodes, parse_pods

RECORDED = "nodelist-kubeadm-v1.28-notready.json"


def _recorded() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(read_fixture("kubectl", RECORDED))
    return data


def test_every_fact_of_a_recorded_not_ready_control_plane() -> None:
    (node,) = parse_nodes(read_fixture("kubectl", RECORDED))
    assert (node.name, node.ready, node.unschedulable, node.allocatable_gpus, node.kubelet_version) == \
        ("k8s-controller-01", False, False, 0, "v1.28.14")
    assert node.not_ready_reason.startswith("KubeletNotReady: container runtime network not ready")
    assert node.taints == (Taint("node-role.kubernetes.io/control-plane", "NoSchedule"),
                           Taint("node.kubernetes.io/not-ready", "NoSchedule"))
    assert node.labels["node-role.kubernetes.io/control-plane"] == ""
    assert node.annotations["kubeadm.alpha.kubernetes.io/cri-socket"] == "unix:///var/run/containerd/containerd.sock"


def test_one_node_as_kubectl_get_node_writes_it_reads_the_same() -> None:
    item = _recorded()["items"][0]
    item.update(apiVersion="v1", kind="Node")
    item["spec"]["unschedulable"] = True
    item["status"]["allocatable"]["nvidia.com/gpu"] = "8"
    node = parse_node(json.dumps(item))
    assert node.unschedulable and node.allocatable_gpus == 8 and node.taint("node.kubernetes.io/not-ready")
    (listed,) = parse_nodes(json.dumps({"apiVersion": "v1", "kind": "List", "items": [item]}))
    assert listed == node



def _gpu_node(allocatable: dict[str, str], labels_fixture: str | None = None) -> KubeNode:
    """The recorded node offering ``allocatable``, with GFD's labels of NVIDIA's MIG-in-Kubernetes walkthrough."""
    item = _recorded()["items"][0]
    item["status"]["allocatable"].update(allocatable)
    if labels_fixture:
        item["metadata"]["labels"].update(json.loads(read_fixture("kubectl", labels_fixture)))
    (node,) = parse_nodes(json.dumps({"kind": "List", "items": [item]}))
    return node


def test_the_gpus_a_node_offers_under_each_mig_strategy_of_the_device_plugin() -> None:
    # none: whole GPUs, one nvidia.com/gpu each.
    whole = _gpu_node({"nvidia.com/gpu": "8"})
    assert whole.allocatable_gpus == 8 and whole.offers_gpus(8) and not whole.offers_gpus(7)
    assert whole.offered() == {"GPU(s)": 8}
    # mixed (NVIDIA's walkthrough: one A100 cut 3g.20gb + 2g.10gb + 1g.5gb): no nvidia.com/gpu at all.
    mixed = _gpu_node({"nvidia.com/mig-1g.5gb": "1", "nvidia.com/mig-2g.10gb": "1", "nvidia.com/mig-3g.20gb": "1"},
                      "nvidia-mig-k8s-mixed-labels.json")
    assert mixed.gpu_resources == {"nvidia.com/mig-1g.5gb": 1, "nvidia.com/mig-2g.10gb": 1,
                                   "nvidia.com/mig-3g.20gb": 1}
    assert mixed.allocatable_gpus == 3 and mixed.offers_gpus(1) and not mixed.offers_gpus(4)
    assert mixed.offered() == {"MIG instance(s) (mixed)": 3}
    # single: the seven 1g.5gb instances of one A100 are nvidia.com/gpu; GFD's product label says MIG.
    single = _gpu_node({"nvidia.com/gpu": "7"}, "nvidia-mig-k8s-single-labels.json")
    assert single.allocatable_gpus == 7 and single.offers_gpus(1)
    assert single.offered() == {"MIG instance(s) (single)": 7}
    # mixed with some GPUs left whole, and a profile the plugin offers none of
    both = _gpu_node({"nvidia.com/gpu": "4", "nvidia.com/mig-1g.5gb": "14", "nvidia.com/mig-2g.10gb": "0"},
                     "nvidia-mig-k8s-mixed-labels.json")
    assert both.offered() == {"GPU(s)": 4, "MIG instance(s) (mixed)": 14} and both.offers_gpus(6)
    assert not _gpu_node({"nvidia.com/gpu": "7"}).offers_gpus(1)  # without the label: 7 whole GPUs, not 1


def test_a_pod_asking_for_a_mig_instance_holds_a_gpu() -> None:
    (pod,) = parse_pods(_pods_asking("containers", "limits", "1").replace("nvidia.com/gpu", "nvidia.com/mig-1g.5gb"))
    assert pod.gpus == 1
    with pytest.raises(ParseError, match=r"limits nvidia\.com/mig-1g\.5gb is '1g', not a whole number"):
        parse_pods(_pods_asking("containers", "limits", "1g").replace("nvidia.com/gpu", "nvidia.com/mig-1g.5gb"))

def test_a_node_without_status_reads_as_readiness_unknown() -> None:
    (node,) = parse_nodes(json.dumps({"kind": "List", "items": [{"metadata": {"name": "gpu-a1"}}]}))
    assert (node.name, node.ready, node.allocatable_gpus, node.kubelet_version) == ("gpu-a1", None, 0, "")
    assert node.not_ready_reason == "no Ready condition"


def _broken(path: tuple[str, ...], value: object) -> str:
    data = copy.deepcopy(_recorded())
    parent = data["items"][0]
    for key in path[:-1]:
        parent = parent[key]
    parent[path[-1]] = value
    return json.dumps(data)


@pytest.mark.parametrize(("path", "value", "named"), [
    (("status",), "Ready", "node k8s-controller-01: status is text, not an object"),
    (("status", "allocatable"), ["8"], "node k8s-controller-01: allocatable is a list, not an object"),
    (("status", "allocatable", "nvidia.com/gpu"), "eight", "node k8s-controller-01: allocatable nvidia.com/gpu"),
    (("status", "nodeInfo"), 1, "node k8s-controller-01: nodeInfo is a number, not an object"),
    (("spec",), "unschedulable", "node k8s-controller-01: spec is text, not an object"),
    (("spec", "taints"), {"key": "x"}, "node k8s-controller-01: spec.taints is an object, not a list"),
    (("spec", "taints"), [{"value": "x"}], "node k8s-controller-01: spec.taints[0] has no key or effect"),
    (("metadata", "labels"), "gpu=yes", "node k8s-controller-01: labels is text, not an object"),
    (("metadata", "name"), None, "items[0] has no metadata.name"),
    (("kind",), "Pod", "items[0] is not a Node object"),
])
def test_a_field_that_is_not_what_the_api_writes_is_named(path: tuple[str, ...], value: object, named: str) -> None:
    assert named in str(refusal(parse_nodes, _broken(path, value)))


def test_a_cut_off_list_names_the_line() -> None:
    text = read_fixture("kubectl", RECORDED)
    with pytest.raises(ParseError, match="line 40"):
        parse_nodes("\n".join(text.splitlines()[:40]))


def test_one_node_that_is_not_a_node_is_refused() -> None:
    with pytest.raises(ParseError, match="not a Node object"):
        parse_node("[]")
    with pytest.raises(ParseError, match=r"the Node has no metadata\.name"):
        parse_node(json.dumps({"kind": "Node", "metadata": {}}))


PODS = "pods-minikube-replicaset.json"


def _pods_asking(field: str, kind: str, value: object) -> str:
    """The recorded pod list with the recorded pod's first container asking ``value`` GPUs."""
    data = json.loads(read_fixture("kubectl", PODS))
    spec = data["items"][0]["spec"]
    if field == "initContainers":
        spec["initContainers"] = [copy.deepcopy(spec["containers"][0])]
    spec[field][0]["resources"] = {kind: {"nvidia.com/gpu": value}}
    return json.dumps(data)


@pytest.mark.parametrize("value", ["8Gi", "", "-1", ["8"], "0.5", "500m", True, -2, None, {"n": 8}])
@pytest.mark.parametrize(("field", "kind"), [("containers", "limits"), ("containers", "requests"),
                                             ("initContainers", "limits")])
def test_a_gpu_count_that_is_no_whole_number_is_named_not_read_as_none(field: str, kind: str, value: object) -> None:
    if value is None:  # null is "not asked": the API server leaves the key out, a hand-made object may not
        (pod,) = parse_pods(_pods_asking(field, kind, value))
        assert pod.gpus == 0
        return
    with pytest.raises(ParseError) as caught:
        parse_pods(_pods_asking(field, kind, value))
    assert f"pod default/queue-l4dv8 on node minikube: spec.{field}[0].resources.{kind} nvidia.com/gpu is " \
           f"{value!r}, not a whole number" in str(caught.value)


@pytest.mark.parametrize("value", ["8", 8])
def test_a_whole_gpu_count_reads_as_written(value: object) -> None:
    (pod,) = parse_pods(_pods_asking("containers", "limits", value))
    assert pod.gpus == 8


@pytest.mark.parametrize("value", ["-1", "8Gi", "", True])
def test_a_node_offering_no_whole_number_of_gpus_is_named(value: object) -> None:
    with pytest.raises(ParseError, match=r"node k8s-controller-01: allocatable nvidia\.com/gpu is .*not a whole"):
        parse_nodes(_broken(("status", "allocatable", "nvidia.com/gpu"), value))
