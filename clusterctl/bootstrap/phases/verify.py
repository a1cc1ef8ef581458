"""verify: the cluster works, not just "ran": nodes Ready, GPUs allocatable, labels, a GPU pod per node.

Runs once, on the first control plane, after everything else. Every host of the run must be a
Ready node; the GPUs it offers (``nvidia.com/gpu``, or MIG instances: ``KubeNode.offers_gpus``) must
account for the GPU count the saved survey saw (any GPU at all without a survey); the topology labels
written from the survey must be on it; and a pod asking for one of them must run ``nvidia-smi -L`` there
and succeed. Any failure is an error naming the node (exit 1); success ends with one line that says so.
"""

from __future__ import annotations

import shlex
import time
from collections import Counter

from clusterctl.bootstrap.cluster.addons import TEST_NAMESPACE, render_test_pod, test_pod_name
from clusterctl.bootstrap.cluster.topology_labels import topology_labels
from clusterctl.bootstrap.phase import ClusterWidePhase, PhaseContext
from clusterctl.bootstrap.phases import cluster_common as cc
from clusterctl.changes import Change, ChangeFailed
from clusterctl.cluster_access import read_nodes
from clusterctl.facts.kube import kubectl
from clusterctl.facts.kube_nodes import KubeNode
from clusterctl.findings import Finding, Severity, fails

POD_TIMEOUT_S = 300


def _node_findings(ctx: PhaseContext, nodes: dict[str, KubeNode]) -> list[Finding]:
    survey = cc.survey(ctx)
    problems: list[Finding] = []
    for name in cc.run_hosts(ctx):
        node = nodes.get(name)
        if node is None:
            dropped = name in ctx.shared.failed_hosts
            why = " (it dropped out of this run before joining)" if dropped else ""
            problems.append(Finding(Severity.ERROR, "NODE_MISSING", f"{name} is not a node of the cluster{why}",
                                    host=name, fix="Run 'clusterctl bootstrap' again; phase join joins it.",
                                    evidence={"dropped_out": dropped}))
            continue
        if not node.ready:
            problems.append(Finding(Severity.ERROR, "NODE_NOT_READY", f"{name} is not Ready ({node.not_ready_reason})",
                                    host=name, fix="kubectl describe node; check the CNI pods on it."))
        saved = survey.hosts.get(name) if survey else None
        host = ctx.inventory.host(name)
        if saved is None and node.ready and node.allocatable_gpus == 0 and "worker" in host.roles and host.gpus:
            problems.append(Finding(Severity.WARNING, "NO_GPU_ALLOCATABLE",
                                    f"{name} offers no nvidia.com/gpu and no saved survey says whether it has GPUs",
                                    host=name, fix="Pass --survey FILE so verify knows how many GPUs each node has."))
        if saved is not None and saved.gpu_count is not None:
            if not node.offers_gpus(saved.gpu_count):
                offered = ", ".join(f"{n} {resource}" for resource, n in node.gpu_resources.items() if n)
                problems.append(Finding(
                    Severity.ERROR, "GPU_ALLOCATABLE_MISMATCH",
                    f"{name} offers {offered or '0 nvidia.com/gpu'}; the survey saw {saved.gpu_count} GPUs",
                    host=name, fix="Look at the device plugin pod on the node (kubectl -n nvidia-device-plugin logs).",
                    evidence={"allocatable": node.allocatable_gpus, "survey": saved.gpu_count}))
            wanted = topology_labels(saved, host.fabric.type).as_dict()
            missing = sorted(k for k, v in wanted.items() if node.labels.get(k) != v)
            if missing:
                problems.append(Finding(
                    Severity.ERROR, "TOPOLOGY_LABELS_MISSING", f"{name} lacks topology labels: {', '.join(missing)}",
                    host=name, fix="NFD's worker reads features.d every minute; look at its pod on the node, then "
                    "run 'clusterctl bootstrap phase verify' again."))
    return problems


def _gpu_pod(ctx: PhaseContext, node: str, offered: dict[str, int]) -> Finding | None:
    """Run the test pod asking for one of the GPUs ``node`` offers; a finding when it does not succeed.

    The pod is a temporary change through the gate: created for the test, deleted however it ends.
    """
    name, ns = test_pod_name(node), TEST_NAMESPACE
    pod = f"-n {shlex.quote(ns)} {shlex.quote(name)}"
    host = ctx.host.name
    # A whole GPU (nvidia.com/gpu) first, else a MIG instance of the device plugin's mixed strategy.
    manifest = render_test_pod(node, min(r for r, n in offered.items() if n), runtime_class=cc.runtime_class(ctx),
                               image_registry=ctx.settings().addons.image_registry)
    setup = [Change.run(host, kubectl(f"delete pod {pod} --ignore-not-found --wait=true"), timeout_s=120,
                        summary=f"remove a GPU test pod left on {node}"),
             Change.run(host, kubectl("apply -f -"), stdin=manifest.encode(), timeout_s=60,
                        summary=f"GPU test pod on {node}")]
    cleanup = [Change.run(host, kubectl(f"delete pod {pod} --ignore-not-found --wait=false"), timeout_s=60,
                          summary=f"delete the GPU test pod on {node}")]
    run = ctx.reader.run
    try:
        with ctx.temporary(setup, cleanup):
            waited = run(kubectl(f"wait --for=jsonpath={{.status.phase}}=Succeeded pod/{shlex.quote(name)} "
                                 f"-n {shlex.quote(ns)} --timeout={POD_TIMEOUT_S}s"), sudo=True,
                         timeout=POD_TIMEOUT_S + 30)
            logs = run(kubectl(f"logs {pod}"), sudo=True, timeout=60)
            if waited.ok and logs.ok and logs.stdout.lstrip().startswith("GPU 0:"):
                return None
            phase = run(kubectl(f"get pod {pod} -o jsonpath={{.status.phase}}"), sudo=True,
                        timeout=60).stdout.strip()
    except ChangeFailed as exc:
        what = "the GPU test pod was refused" if exc.record.change in setup else "the GPU test pod was not deleted"
        return Finding(Severity.ERROR, "GPU_POD_FAILED", f"{node}: {what}: {exc.result.stderr_tail(2)}", host=node)
    detail = (logs.stdout.strip() or logs.stderr.strip() or waited.stderr.strip())[-300:]
    return Finding(Severity.ERROR, "GPU_POD_FAILED",
                   f"{node}: the pod asking for one GPU did not run nvidia-smi -L (phase {phase or 'unknown'}"
                   f"{': ' + detail if detail else ''})", host=node,
                   fix=f"kubectl describe pod {name} -n {ns}; on the node: nvidia-smi, and the nvidia runtime "
                   "in containerd's config.")


class Verify(ClusterWidePhase[bool]):
    """State: whether the API server answers."""

    name = "verify"
    description = "nodes Ready, allocatable GPUs = survey, labels on, a GPU pod runs nvidia-smi -L"
    timeout_s = 1800.0

    def check(self, ctx: PhaseContext) -> bool:
        return cc.has_cluster(ctx) and cc.api_ready(ctx)

    def verify(self, ctx: PhaseContext) -> list[Finding]:
        if not cc.api_ready(ctx):
            return [Finding(Severity.ERROR, "CONTROL_PLANE_DOWN", "the API server does not answer", host=ctx.host.name)]
        # NFD's worker republishes features every minute and the device plugin registers a little after
        # its pod starts: give the cluster time to converge before calling a node broken.
        deadline = time.monotonic() + cc.settle_s(ctx, 180.0)
        while True:
            nodes = read_nodes(ctx.reader)
            problems = _node_findings(ctx, nodes)
            # Waiting helps a node that is converging, never one that dropped out of the run before
            # joining: such a node is reported at once, and only the others are waited for.
            pending = [f for f in problems if f.severity is Severity.ERROR
                       and not (f.code == "NODE_MISSING" and (f.evidence or {}).get("dropped_out"))]
            if not pending or time.monotonic() + 15 > deadline:
                break
            time.sleep(15)
        gpu_nodes = [n for n in cc.run_hosts(ctx) if n in nodes and nodes[n].ready and nodes[n].allocatable_gpus > 0]
        problems += [f for f in (_gpu_pod(ctx, n, nodes[n].gpu_resources) for n in gpu_nodes) if f is not None]
        if not fails(problems):
            offered = sum((nodes[n].offered() for n in cc.run_hosts(ctx) if n in nodes), Counter[str]())
            gpus = ", ".join(f"{count} {unit}" for unit, count in sorted(offered.items())) or "0 GPU(s)"
            gpu_less = [n for n in cc.run_hosts(ctx) if not ctx.inventory.host(n).gpus]
            if gpu_nodes or not gpu_less:
                message = (f"works: {len(nodes)} node(s) Ready, {gpus} allocatable, and a pod asking for one "
                           f"GPU ran nvidia-smi -L on each of {len(gpu_nodes)} GPU node(s)")
            else:
                message = (f"works: {len(nodes)} node(s) Ready; no GPU pod was run: the hosts have no GPUs "
                           "(inventory: gpus: false)")
            problems.append(Finding(Severity.INFO, "CLUSTER_WORKS", message, host=ctx.host.name))
        return problems
