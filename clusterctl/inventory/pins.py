"""Versions the cluster phases install unless the inventory pins others.

Each pin names where it was read (the projects' own release pages, as collected in the
project's checked facts); ``docs/bootstrap.md`` lists them for users, and an inventory can
override any of them (``bootstrap.addons.charts.<name>.version``, ``bootstrap.network.version``).
They live with the inventory, beside the settings they are the defaults of
(``cluster_sections``), as kubeadm keeps its defaults with its config API.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ChartPin:
    #: Helm release name clusterctl installs it under (also the key in the inventory).
    release: str
    chart: str
    version: str
    repository: str
    namespace: str
    #: Where the version was read.
    source: str


CHART_PINS: dict[str, ChartPin] = {
    pin.release: pin
    for pin in (
        ChartPin(
            "nvidia-device-plugin", "nvidia-device-plugin", "0.20.0", "https://nvidia.github.io/k8s-device-plugin",
            "nvidia-device-plugin", "github.com/NVIDIA/k8s-device-plugin/releases v0.20.0 (2026-08-19)",
        ),
        ChartPin(
            "node-feature-discovery", "node-feature-discovery", "0.19.0",
            "https://kubernetes-sigs.github.io/node-feature-discovery/charts", "node-feature-discovery",
            "github.com/kubernetes-sigs/node-feature-discovery/releases v0.19.0 (the chart the device plugin "
            "0.20.0 depends on)",
        ),
        ChartPin(
            "dcgm-exporter", "dcgm-exporter", "4.8.2", "https://nvidia.github.io/dcgm-exporter/helm-charts",
            "dcgm-exporter", "github.com/NVIDIA/dcgm-exporter deployment/Chart.yaml 4.8.2 (2026-05-06, image "
            "4.5.3-4.8.2; etc/default-counters.csv unchanged since chart 4.6.0)",
        ),
        ChartPin(
            "gpu-operator", "gpu-operator", "v26.7.0", "https://helm.ngc.nvidia.com/nvidia", "gpu-operator",
            "docs.nvidia.com/datacenter/cloud-native/gpu-operator release notes v26.7.0 (2026-08-20)",
        ),
    )
}


@dataclass(frozen=True)
class CNIPin:
    name: str
    version: str
    #: Upstream base URL of the pinned manifests (a site mirror replaces it for air-gapped sites).
    manifest_base: str
    #: Manifests applied from that base, in order (Calico's operator); none when clusterctl renders
    #: the whole manifest itself (Flannel).
    manifests: tuple[str, ...]
    #: Images clusterctl writes into its own manifest, upstream registry first.
    images: tuple[str, ...]
    default_pod_subnet: str
    source: str


CNI_PINS: dict[str, CNIPin] = {
    "calico": CNIPin(
        "calico", "v3.31.7", "https://raw.githubusercontent.com/projectcalico/calico/v3.31.7/manifests",
        ("operator-crds.yaml", "tigera-operator.yaml"), (), "192.168.0.0/16",
        "projectcalico/calico tags: v3.31.7 is the newest 3.31 patch (read 2026-12-01); manifests as in "
        "docs.tigera.io/calico/latest/getting-started/kubernetes/self-managed-onprem/onpremises (operator install)",
    ),
    "flannel": CNIPin(
        "flannel", "v0.28.9", "https://github.com/flannel-io/flannel/releases/download/v0.28.9", (),
        ("ghcr.io/flannel-io/flannel:v0.28.9", "ghcr.io/flannel-io/flannel-cni-plugin:v1.9.1-flannel3"),
        "10.244.0.0/16",
        "github.com/flannel-io/flannel/releases v0.28.9 (kube-flannel.yml references these two images)",
    ),
}

#: kubeadm config API clusterctl writes, and the Kubernetes minors that read it.
KUBEADM_API = "kubeadm.k8s.io/v1beta4"
#: v1beta4 arrived in 1.31 (kubernetes#125029); v1beta3 was removed in 1.37 (kubernetes#136016).
KUBEADM_V1BETA4_FIRST_MINOR = 31
#: The newest Kubernetes minor clusterctl knows (1.37, released 2026-08), written here and nowhere
#: else: the support window (``bootstrap.matrix``), kubeadm's config API message and the docs'
#: test read it. Newer minors still get v1beta4, with a warning.
NEWEST_KUBERNETES = (1, 37)
