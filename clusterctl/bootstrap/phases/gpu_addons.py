"""gpu-addons: device plugin (GFD on), NFD and DCGM exporter, or the GPU Operator, by Helm.

Runs once, on the first control plane. Manifests (namespaces, the DCGM counters ConfigMap,
the nvidia RuntimeClass when pods ask for the runtime by class) are applied when they change;
each pinned chart is installed with ``helm upgrade --install`` when it is missing, at another
chart version, not ``deployed``, or its values file changed. Local chart archives (air-gapped
sites) are copied first. A re-run with nothing different changes nothing. With
``bootstrap.addons.mode: none``, or no host with GPUs, the phase has nothing to do
(``settings.left_to_site``, the decision upgrade shares).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from clusterctl.bootstrap.cluster.addons import AddonPlan, addon_plan
from clusterctl.bootstrap.phase import ClusterWidePhase, PhaseContext
from clusterctl.bootstrap.phases import cluster_common as cc
from clusterctl.changes import MAKES_IN_CLUSTER, STAYS_IN_CLUSTER, Change
from clusterctl.facts.kube import HELM_LIST_COMMAND, HelmRelease, parse_helm_list
from clusterctl.findings import Finding, Severity

SERVICE_MONITOR_CRD = "crd/servicemonitors.monitoring.coreos.com"


@dataclass
class AddonState:
    plan: AddonPlan
    helm: bool = True
    files: dict[str, bytes | None] = field(default_factory=dict)
    releases: dict[str, HelmRelease] = field(default_factory=dict)


def _plan(ctx: PhaseContext, *, service_monitor: bool) -> AddonPlan:
    return addon_plan(ctx.settings(), runtime_class=cc.runtime_class(ctx), service_monitor=service_monitor,
                      cdi=ctx.inventory.bootstrap.cdi, gpu_less_nodes=any(not h.gpus for h in ctx.inventory.hosts))


class GpuAddons(ClusterWidePhase[AddonState]):
    name = "gpu-addons"
    description = "device plugin with GFD, NFD, DCGM exporter (or the GPU Operator), pinned Helm charts"
    timeout_s = 1800.0

    def check(self, ctx: PhaseContext) -> AddonState:
        ready = cc.has_cluster(ctx)
        service_monitor = ready and cc.object_exists(ctx, SERVICE_MONITOR_CRD)
        plan = _plan(ctx, service_monitor=service_monitor)
        state = AddonState(plan, helm=ctx.reader.run("command -v helm", sudo=True).exit_code == 0)
        archives = [r.archive_path for r in plan.releases if r.archive_path]
        for path in [m.path for m in plan.manifests] + [r.values_path for r in plan.releases] + archives:
            state.files[path] = ctx.reader.get(path, sudo=True)
        if ready:
            result = ctx.reader.run(HELM_LIST_COMMAND, sudo=True, timeout=60)
            if result.ok:
                state.releases = {r.name: r for r in parse_helm_list(result.stdout)}
        return state

    def findings(self, ctx: PhaseContext, state: AddonState) -> list[Finding]:
        if state.helm:
            return []
        return [Finding(Severity.WARNING, "HELM_MISSING", f"helm is not installed on {ctx.host.name}; this phase "
                        "runs 'helm upgrade --install' there", host=ctx.host.name,
                        fix="Install Helm 3 on the first control-plane host (https://helm.sh/docs/intro/install/), "
                        "from your mirror on air-gapped sites.")]

    def plan(self, ctx: PhaseContext, state: AddonState) -> list[Change]:
        host = ctx.host.name
        changes: list[Change] = []
        for manifest in state.plan.manifests:
            write = Change.write_file(host, manifest.path, manifest.text, current=state.files.get(manifest.path),
                                      summary=manifest.summary)
            if not write.is_noop:
                changes += [write, cc.apply_manifest(host, manifest.path, f"apply {manifest.summary}")]
        for release in state.plan.releases:
            chart = release.chart
            write = Change.write_file(host, release.values_path, release.values,
                                      current=state.files.get(release.values_path),
                                      summary=f"Helm values of {chart.release}")
            installed = state.releases.get(chart.release)
            # Helm lists gpu-operator v26.7.0 as "gpu-operator-v26.7.0"; accept the pin with or without "v".
            current = installed is not None and installed.status == "deployed" and \
                installed.chart_version(chart.chart) in (chart.version, chart.version.lstrip("v"))
            if write.is_noop and current:
                continue
            changes.append(write)
            if release.archive_path and (data := release.archive_data()) is not None:
                changes.append(Change.write_file(host, release.archive_path, data,
                                                 current=state.files.get(release.archive_path),
                                                 summary=f"chart archive {chart.chart}-{chart.version}"))
            changes.append(Change.run(host, release.command(), summary=f"helm upgrade --install {chart.release} "
                                      f"({chart.chart} {chart.version})", timeout_s=900, makes=(MAKES_IN_CLUSTER,),
                                      cannot_undo=STAYS_IN_CLUSTER))
        return cc.with_folders(ctx, changes)

    def verify(self, ctx: PhaseContext) -> list[Finding]:
        result = ctx.reader.run(HELM_LIST_COMMAND, sudo=True, timeout=60)
        if not result.ok:
            return [Finding(Severity.ERROR, "HELM_FAILED", f"helm list failed: {result.stderr_tail(2)}",
                            host=ctx.host.name)]
        releases = {r.name: r for r in parse_helm_list(result.stdout)}
        problems = []
        for release in _plan(ctx, service_monitor=False).releases:
            found = releases.get(release.chart.release)
            if found is None or found.status != "deployed":
                problems.append(Finding(Severity.ERROR, "ADDON_NOT_DEPLOYED",
                                        f"Helm release {release.chart.release} is "
                                        f"{'missing' if found is None else found.status}", host=ctx.host.name))
        return problems
