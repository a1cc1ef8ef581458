"""GPU add-ons as Helm releases: device plugin (GFD on), NFD, DCGM exporter, or the GPU Operator.

Each release is pinned (``pins.CHART_PINS``, overridable per chart in the inventory) and comes
from its repository, or from a local chart archive for air-gapped sites. Values are rendered
from ``templates/bootstrap/helm/``; ``helm upgrade --install`` makes a first run and a re-run
the same command, and the phase skips a release whose chart version and values already match.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from pathlib import Path

from clusterctl.bootstrap.cluster.alerts import COUNTERS_CONFIGMAP, render_counters_configmap
from clusterctl.bootstrap.cluster.settings import ClusterSettings, site_image
from clusterctl.errors import UsageError
from clusterctl.facts.kube import ADMIN_KUBECONFIG, GPU_RESOURCE
from clusterctl.inventory.cluster_sections import ChartSource
from clusterctl.templating import render

VALUES_DIR = "/etc/kubernetes/clusterctl/helm"
CHARTS_DIR = "/etc/kubernetes/clusterctl/charts"
MANIFESTS_DIR = "/etc/kubernetes/clusterctl/manifests"
RUNTIME_CLASS = "nvidia"


@dataclass(frozen=True)
class HelmRelease:
    chart: ChartSource
    values: str

    @property
    def values_path(self) -> str:
        return f"{VALUES_DIR}/{self.chart.release}.values.yaml"

    @property
    def archive_path(self) -> str | None:
        """Where a local chart archive is copied on the host that runs Helm."""
        return None if self.chart.archive is None else f"{CHARTS_DIR}/{self.chart.chart}-{self.chart.version}.tgz"

    def archive_data(self) -> bytes | None:
        """The local chart archive the inventory names (air-gapped sites), read on the control machine."""
        if self.chart.archive is None:
            return None
        try:
            return Path(self.chart.archive).expanduser().read_bytes()
        except OSError as exc:
            raise UsageError(f"cannot read the chart archive of {self.chart.release}: {exc.strerror}",
                             file=self.chart.archive, field=f"bootstrap.addons.charts.{self.chart.release}.archive",
                             hint="'clusterctl bootstrap artifacts' lists the chart to 'helm pull'.") from None

    def command(self) -> str:
        c = self.chart
        q = shlex.quote
        source = f"{q(self.archive_path)}" if self.archive_path else \
            f"{q(c.chart)} --repo {q(c.repository)} --version {q(c.version)}"
        return (
            f"helm upgrade --install {q(c.release)} {source} --namespace {q(c.namespace)} --create-namespace "
            f"--values {q(self.values_path)} --wait --timeout 10m --kubeconfig {ADMIN_KUBECONFIG}"
        )


@dataclass(frozen=True)
class Manifest:
    path: str
    text: str
    summary: str


@dataclass(frozen=True)
class AddonPlan:
    #: Applied with kubectl before the releases (namespaces, counters ConfigMap, RuntimeClass).
    manifests: tuple[Manifest, ...]
    releases: tuple[HelmRelease, ...]


def counters_key(settings: ClusterSettings) -> str:
    # The GPU Operator mounts its dcgmExporter.config ConfigMap expecting this key name.
    return "dcgm-metrics.csv" if settings.addons.mode == "gpu-operator" else "counters.csv"


#: The label NFD puts on a node with an NVIDIA PCI device (vendor 10de): the device plugin's chart
#: keeps its pods to such nodes by default; the DCGM exporter gets it as its node selector where the
#: cluster has nodes without GPUs (its chart has no such default, and its pods ask for the nvidia
#: runtime, which those nodes lack).
NVIDIA_PCI_LABEL = "feature.node.kubernetes.io/pci-10de.present"


def addon_plan(
    settings: ClusterSettings, *, runtime_class: bool, service_monitor: bool, cdi: bool = False,
    gpu_less_nodes: bool = False,
) -> AddonPlan:
    """What phase gpu-addons installs. ``runtime_class``: containerd's default runtime is not nvidia;
    ``gpu_less_nodes``: some hosts have no GPUs (inventory ``gpus: false``)."""
    addons = settings.addons
    registry = addons.image_registry
    rc = RUNTIME_CLASS if runtime_class else None
    key = counters_key(settings)
    # The Prometheus stack that loads clusterctl's rules selects ServiceMonitors by the same labels.
    monitor_labels = sorted(settings.alerts.rule_labels.items())
    manifests: list[Manifest] = []
    if runtime_class:
        manifests.append(Manifest(f"{MANIFESTS_DIR}/runtimeclass-nvidia.yaml", render(
            "bootstrap/manifests/runtimeclass.yaml.j2", name=RUNTIME_CLASS, handler="nvidia"), "RuntimeClass nvidia"))
    if addons.mode == "gpu-operator":
        op = addons.chart("gpu-operator")
        manifests += [_namespace(op.namespace), _counters(op.namespace, key)]
        values = render("bootstrap/helm/gpu-operator.values.yaml.j2", chart_version=op.version,
                        host_driver=addons.host_driver, host_toolkit=addons.host_toolkit,
                        counters_configmap=COUNTERS_CONFIGMAP, counters_key=key, service_monitor=service_monitor,
                        monitor_labels=monitor_labels, cdi=cdi, image_registry=registry)
        return AddonPlan(tuple(manifests), (HelmRelease(op, values),))
    dp, nfd, dcgm = (addons.chart(n) for n in ("nvidia-device-plugin", "node-feature-discovery", "dcgm-exporter"))
    manifests += [_namespace(namespace) for namespace in dict.fromkeys((nfd.namespace, dp.namespace, dcgm.namespace))]
    manifests.append(_counters(dcgm.namespace, key))
    releases = (
        HelmRelease(nfd, render("bootstrap/helm/node-feature-discovery.values.yaml.j2", chart_version=nfd.version,
                                image_registry=registry)),
        HelmRelease(dp, render("bootstrap/helm/nvidia-device-plugin.values.yaml.j2", chart_version=dp.version,
                               runtime_class=rc, image_registry=registry)),
        HelmRelease(dcgm, render("bootstrap/helm/dcgm-exporter.values.yaml.j2", chart_version=dcgm.version,
                                 counters_configmap=COUNTERS_CONFIGMAP, counters_key=key,
                                 service_monitor=service_monitor, monitor_labels=monitor_labels, runtime_class=rc,
                                 image_registry=registry,
                                 gpu_node_label=NVIDIA_PCI_LABEL if gpu_less_nodes else None)),
    )
    return AddonPlan(tuple(manifests), releases)


def _namespace(name: str) -> Manifest:
    return Manifest(f"{MANIFESTS_DIR}/namespace-{name}.yaml",
                    render("bootstrap/manifests/namespace.yaml.j2", name=name, privileged=True), f"namespace {name}")


def _counters(namespace: str, key: str) -> Manifest:
    return Manifest(f"{MANIFESTS_DIR}/dcgm-counters.yaml",
                    render_counters_configmap(COUNTERS_CONFIGMAP, namespace, key), "DCGM exporter counters ConfigMap")


TEST_POD_IMAGE = "nvcr.io/nvidia/cuda:12.9.1-base-ubuntu24.04"
TEST_NAMESPACE = "default"


def test_pod_name(node: str) -> str:
    # Pod names are DNS labels (63 characters); node names may be longer FQDNs.
    base = "clusterctl-gpu-verify-" + node.replace(".", "-").lower()
    return base[:63].rstrip("-")


def render_test_pod(node: str, resource: str = GPU_RESOURCE, *, runtime_class: bool,
                    image_registry: str | None = None) -> str:
    return render("bootstrap/manifests/gpu-test-pod.yaml.j2", name=test_pod_name(node), namespace=TEST_NAMESPACE,
                  node=node, resource=resource, runtime_class=RUNTIME_CLASS if runtime_class else None,
                  image=site_image(TEST_POD_IMAGE, image_registry))
