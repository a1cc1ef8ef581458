"""The node health agent against the real control plane: its identities, its RBAC, its NodeConditions.

Bootstrap's ``node-agent-access`` manifest (a ServiceAccount, a token Secret, a ClusterRole and its
binding per node) goes through the real API server; the real kube-controller-manager's token
controller fills the Secrets, which the phase's own reader takes back. Then, with gpu-a2's token
in the kubeconfig bootstrap writes, the agent's own kubectl lines (``agent.run``: read its node's
status, strategic-merge-patch its conditions) run through the real kubectl 1.37: the condition is
set and cleared, the kubelet's ``Ready`` stays, and everything else is refused: another node's
status, its own node's spec (a cordon), listing nodes, reading Secrets.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
from real_cluster import Cluster, kubectl_json

from clusterctl.agent import conditions as cond
from clusterctl.agent.run import AgentOptions, patch_conditions, read_conditions
from clusterctl.bootstrap.phases.node_agent import KUBECONFIG_PATH, NAMESPACE, read_tokens
from clusterctl.findings import Finding, Severity
from clusterctl.templating import render

NODE = "gpu-a2"
OTHER = "gpu-a3"


def _conditions(cluster: Cluster, node: str) -> dict[str, dict[str, Any]]:
    status: dict[str, Any] = kubectl_json(cluster, f"get node {node}")["status"]  # type: ignore[assignment]
    return {c["type"]: c for c in status["conditions"]}


@pytest.fixture(scope="module")
def agent(control_plane: Cluster) -> AgentOptions:
    nodes = [h.name for h in control_plane.inventory.hosts]
    manifest = render("bootstrap/node-agent/rbac.yaml.j2", nodes=nodes, namespace=NAMESPACE)
    applied = control_plane.plane.kubectl("apply -f -", stdin=manifest.encode())
    assert applied.returncode == 0, applied.stderr
    ctx = control_plane.context()
    deadline = time.monotonic() + 90  # the token controller fills the Secrets within seconds; a loaded machine
    tokens = read_tokens(ctx)
    while set(tokens) != set(nodes) and time.monotonic() < deadline:
        time.sleep(1)
        tokens = read_tokens(ctx)
    assert set(tokens) == set(nodes), control_plane.plane.log_tail("kube-controller-manager")
    kubeconfig = render("bootstrap/node-agent/kubeconfig.yaml.j2", node=NODE,
                        endpoint=control_plane.settings.control_plane_endpoint, token=tokens[NODE].reveal())
    path: Path = control_plane.plane.host_path(KUBECONFIG_PATH)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(kubeconfig)
    path.chmod(0o600)
    return AgentOptions(node=NODE, kubeconfig=KUBECONFIG_PATH, textfile_dir=None)


def _as_agent(cluster: Cluster, args: str) -> Any:
    return cluster.plane.sh(f"kubectl --kubeconfig {KUBECONFIG_PATH} {args}")


def test_the_agent_sets_and_clears_its_condition_and_the_kubelets_stay(control_plane: Cluster,
                                                                       agent: AgentOptions) -> None:
    transport = control_plane.plane.transport(control_plane.inventory.hosts[0])
    xid = Finding(Severity.ERROR, "GPU_XID", "Xid 79 (GPU has fallen off the bus)", host=NODE, subject="GPU 3")
    current = read_conditions(transport, agent)
    assert any(c["type"] == "Ready" for c in current)
    patch_conditions(transport, agent, cond.conditions([xid], "2026-12-06T02:00:00Z", current))
    after = _conditions(control_plane, NODE)
    assert after["GPUProblem"]["status"] == "True" and after["GPUProblem"]["reason"] == "GPUXid"
    assert after["GPUProblem"]["message"] == "clusterctl: GPU_XID: GPU 3: Xid 79 (GPU has fallen off the bus)"
    assert after["NVLinkProblem"]["status"] == "False" and after["Ready"]["status"] == "True"

    patch_conditions(transport, agent, cond.conditions([], "2026-12-06T02:01:00Z", read_conditions(transport, agent)))
    cleared = _conditions(control_plane, NODE)
    assert cleared["GPUProblem"]["status"] == "False" and cleared["GPUProblem"]["reason"] == "GPUsHealthy"
    assert cleared["GPUProblem"]["lastTransitionTime"] == "2026-12-06T02:01:00Z"
    assert cleared["NVLinkProblem"]["lastTransitionTime"] == "2026-12-06T02:00:00Z"  # unchanged status
    assert "GPUProblem" not in _conditions(control_plane, OTHER)


@pytest.mark.parametrize("args", [
    # another node's status
    f"patch node {OTHER} --subresource=status --type=strategic "
    "-p '{\"status\":{\"conditions\":[{\"type\":\"GPUProblem\",\"status\":\"True\"}]}}'",
    f"get node {OTHER} --subresource=status -o json",
    # its own node's spec: no cordon, no taint
    f"patch node {NODE} --type=strategic -p '{{\"spec\":{{\"unschedulable\":true}}}}'",
    f"cordon {NODE}",
    # reading anything else
    "get nodes",
    f"-n {NAMESPACE} get secrets",
    "get pods -A",
])
def test_everything_but_its_own_nodes_status_is_refused(control_plane: Cluster, agent: AgentOptions,
                                                        args: str) -> None:
    done = _as_agent(control_plane, args)
    assert done.returncode != 0 and "forbidden" in done.stderr.lower(), (done.stdout, done.stderr)


def test_its_own_nodes_status_is_all_it_may_read(control_plane: Cluster, agent: AgentOptions) -> None:
    done = _as_agent(control_plane, f"get node {NODE} --subresource=status -o json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["metadata"]["name"] == NODE
    assert _conditions(control_plane, NODE)["Ready"]["status"] == "True"


def test_a_node_gone_from_the_inventory_loses_its_identity(control_plane: Cluster, agent: AgentOptions) -> None:
    """Last in this module: gpu-b3 leaves the inventory; the phase's plan deletes its four objects and its
    token stops working (it could otherwise patch a new node given the same name)."""
    import dataclasses

    from clusterctl.bootstrap.phases.node_agent import NodeAgentAccess, read_tokens

    gone = control_plane.inventory.hosts[-1].name
    ctx = control_plane.context()
    old_token = read_tokens(ctx)[gone]
    smaller = dataclasses.replace(control_plane.inventory, hosts=control_plane.inventory.hosts[:-1])
    ctx = dataclasses.replace(ctx, inventory=smaller)
    phase = NodeAgentAccess()
    changes = [c for c in phase.plan(ctx, phase.check(ctx)) if f"identity of {gone}" in c.summary]
    assert len(changes) == 1 and changes[0].command
    done = control_plane.plane.transport(control_plane.inventory.hosts[0]).run(changes[0].command, timeout=60)
    assert done.ok, done.stderr
    for what in (f"-n {NAMESPACE} get serviceaccount clusterctl-node-agent-{gone}",
                 f"-n {NAMESPACE} get secret clusterctl-node-agent-{gone}",
                 f"get clusterrole clusterctl:node-agent:{gone}",
                 f"get clusterrolebinding clusterctl:node-agent:{gone}"):
        found = control_plane.plane.kubectl(what)
        assert found.returncode != 0 and "NotFound" in found.stderr, what
    # The deleted ServiceAccount's token is refused by the API server's authenticator.
    kubeconfig = render("bootstrap/node-agent/kubeconfig.yaml.j2", node=gone,
                        endpoint=control_plane.settings.control_plane_endpoint, token=old_token.reveal())
    control_plane.plane.host_path("/etc/clusterctl/gone.kubeconfig").write_text(kubeconfig)
    refused = control_plane.plane.sh(f"kubectl --kubeconfig /etc/clusterctl/gone.kubeconfig get node {gone} "
                                     "--subresource=status -o json")
    assert refused.returncode != 0 and "Unauthorized" in refused.stderr, refused.stderr
    assert read_tokens(control_plane.context()).keys() == {h.name for h in smaller.hosts}
