"""``kubectl get nodes -o json`` read into KubeNode: a Node whose fields are not the objects the API
server writes (a proxy's error page folded in, a hand-made List) is an error naming the node and
the field, never a crash."""

from __future__ import annotations

import json

import pytest

from clusterctl.errors import ParseError
from clusterctl.facts.kube import parse_nodes


def _listed(node: dict[str, object]) -> str:
    return json.dumps({"apiVersion": "v1", "kind": "List", "items": [node]})


def test_a_node_without_status_reads_as_not_ready() -> None:
    (node,) = parse_nodes(_listed({"metadata": {"name": "gpu-a1"}}))
    assert (node.name, node.ready, node.allocatable_gpus, node.kubelet_version) == ("gpu-a1", False, 0, "")
    assert node.not_ready_reason == "no Ready condition"


@pytest.mark.parametrize(("node", "named"), [
    ({"metadata": {"name": "gpu-a1"}, "status": "Ready"}, "status is str"),
    ({"metadata": {"name": "gpu-a1"}, "status": {"allocatable": ["8"]}}, "allocatable is list"),
    ({"metadata": {"name": "gpu-a1"}, "status": {"nodeInfo": 1}}, "nodeInfo is int"),
    ({"metadata": {"name": "gpu-a1"}, "spec": "unschedulable"}, "spec is str"),
])
def test_a_field_that_is_not_an_object_is_named(node: dict[str, object], named: str) -> None:
    with pytest.raises(ParseError) as caught:
        parse_nodes(_listed(node))
    assert f"node gpu-a1: {named}, not an object" in str(caught.value)
