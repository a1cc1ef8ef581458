"""network: the CNI (Calico by default, Flannel selectable) with the kubeadm pod subnet.

Runs once, on the first control plane. Calico: the pinned ``operator-crds.yaml`` and
``tigera-operator.yaml`` (from upstream or the site mirror, server-side apply because the CRDs
are large), then clusterctl's ``Installation`` with the pod subnet. Flannel: clusterctl's own
manifest with the pod subnet in ``net-conf.json``. The rendered manifest is kept under
``/etc/kubernetes/clusterctl/network/``; a re-run with the same manifest and the CNI's
DaemonSet present changes nothing. With ``bootstrap.network.cni: none`` the site brings its own
CNI and the phase has nothing to do (``settings.left_to_site``, the decision upgrade shares).
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass

from clusterctl.bootstrap.cluster.network import NetworkPlan, network_plan
from clusterctl.bootstrap.phase import ClusterWidePhase, PhaseContext
from clusterctl.bootstrap.phases import cluster_common as cc
from clusterctl.changes import MAKES_CNI, MAKES_IN_CLUSTER, STAYS_IN_CLUSTER, Change
from clusterctl.facts.kube import kubectl
from clusterctl.findings import Finding, Severity


@dataclass
class NetworkState:
    plan: NetworkPlan
    manifest: bytes | None
    running: bool


class Network(ClusterWidePhase[NetworkState]):
    name = "network"
    description = "the CNI (Calico operator, or Flannel) from pinned manifests, pod subnet as kubeadm's"
    timeout_s = 900.0

    def check(self, ctx: PhaseContext) -> NetworkState:
        plan = network_plan(ctx.settings())
        namespace, workload = plan.rollout
        running = cc.has_cluster(ctx) and cc.object_exists(ctx, workload, namespace)
        return NetworkState(plan, ctx.reader.get(plan.rendered_path, sudo=True), running)

    def plan(self, ctx: PhaseContext, state: NetworkState) -> list[Change]:
        plan, host = state.plan, ctx.host.name
        subnet = ctx.settings().pod_subnet
        write = Change.write_file(host, plan.rendered_path, plan.rendered, current=state.manifest,
                                  summary=f"{plan.cni} {plan.version} manifest (pod subnet {subnet})")
        if write.is_noop and state.running:
            return []
        changes = [write, *(Change.run(host, kubectl(f"apply --server-side --force-conflicts -f {shlex.quote(url)}"),
                                       summary=f"apply pinned {url.rsplit('/', 1)[-1]} ({plan.cni} {plan.version})",
                                       timeout_s=300, makes=(MAKES_IN_CLUSTER,), cannot_undo=STAYS_IN_CLUSTER)
                            for url in plan.remote_manifests)]
        # The CNI's DaemonSet writes its files on every node: reset reads from this which CNI is bootstrap's.
        changes.append(cc.apply_manifest(host, plan.rendered_path, f"apply {plan.cni} configuration", timeout_s=300,
                                         makes=(MAKES_CNI + plan.cni,)))
        return cc.with_folders(ctx, changes)

    def verify(self, ctx: PhaseContext) -> list[Finding]:
        plan = network_plan(ctx.settings())
        namespace, workload = plan.rollout
        # Calico's operator creates calico-node a little after the Installation: wait for it to appear.
        result = cc.poll(ctx, kubectl(f"-n {shlex.quote(namespace)} rollout status {shlex.quote(workload)} "
                                      "--timeout=300s"), within_s=cc.settle_s(ctx, 600.0))
        if result.ok:
            return []
        return [Finding(Severity.ERROR, "CNI_NOT_READY", f"{plan.cni}: {workload} in {namespace} is not ready: "
                        f"{result.stderr_tail(2) or result.stdout.strip()[-200:]}", host=ctx.host.name,
                        fix=f"kubectl -n {namespace} get pods -o wide; images pulled from a mirror must exist there.")]
