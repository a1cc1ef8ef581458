"""Versions the cluster phases install unless the inventory pins others, and the newest published
patch of each line they come from.

``PUBLISHED`` is the one record of "the newest published patch" (with where and when it was read):
the pins below, the example inventories and the demo are checked against it
(tests/faults/test_examples_and_pins.py), and ``docs/bootstrap.md`` lists it for users. An inventory
can override any pin (``bootstrap.addons.charts.<name>.version``, ``bootstrap.network.version``,
``bootstrap.nvidia_container_toolkit``, ``stack``). They live with the inventory, beside the
settings they are the defaults of (``cluster_sections``), as kubeadm keeps its defaults with its
config API.
"""

from __future__ import annotations

from dataclasses import dataclass

#: When ``PUBLISHED`` was last read from the projects' own releases.
PUBLISHED_READ = "2026-12-01"
#: The Go module proxy's version list of a module (``go list -m -versions MODULE``): the projects' own
#: tags as Go sees them, with each version's time (``.../@v/VERSION.info``).
GO_PROXY = "proxy.golang.org/{module}/@v/list"


@dataclass(frozen=True)
class PublishedLine:
    """The newest published patch of one release line of one project, and where that was read."""

    project: str
    #: ``1.36``, ``2.3``, ``0.28``.
    line: str
    newest: str
    #: The release date of ``newest`` as its source gives it.
    released: str
    source: str
    #: Why the line matters (or not any more): "LTS to 2028-04-30", "end of life 2026-11-06".
    note: str = ""


def _proxy(module: str) -> str:
    return GO_PROXY.format(module=module) + f", read {PUBLISHED_READ}"


PUBLISHED: tuple[PublishedLine, ...] = (
    PublishedLine("kubernetes", "1.35", "1.35.4", "2026-04-15", _proxy("k8s.io/kubernetes")),
    PublishedLine("kubernetes", "1.36", "1.36.3", "2026-07-22", _proxy("k8s.io/kubernetes")),
    PublishedLine("kubernetes", "1.37", "1.37.2", "2026-10-27", _proxy("k8s.io/kubernetes"),
                  "1.38 is at v1.38.0-beta.0: not released"),
    PublishedLine("containerd", "1.7", "1.7.35", "", _proxy("github.com/containerd/containerd"),
                  "LTS; Kubernetes 1.36 and later do not list it"),
    PublishedLine("containerd", "2.2", "2.2.9", "2026-09-24", _proxy("github.com/containerd/containerd/v2"),
                  "end of life 2026-11-06 (containerd v2.4.2 RELEASES.md)"),
    PublishedLine("containerd", "2.3", "2.3.7", "2026-10-13", _proxy("github.com/containerd/containerd/v2"),
                  "LTS to 2028-04-30 (RELEASES.md)"),
    PublishedLine("containerd", "2.4", "2.4.2", "2026-10-13", _proxy("github.com/containerd/containerd/v2"),
                  "active to 2027-05-16 (RELEASES.md)"),
    PublishedLine("nvidia-container-toolkit", "1.20", "1.20.2", "2026-11-05",
                  _proxy("github.com/NVIDIA/nvidia-container-toolkit")),
    PublishedLine("flannel", "0.28", "v0.28.10", "2026-10-08", _proxy("github.com/flannel-io/flannel"),
                  "its Documentation/kube-flannel.yml names flannel v0.28.10 and flannel-cni-plugin "
                  "v1.9.1-flannel3"),
    PublishedLine("helm", "3", "3.22.0", "", _proxy("helm.sh/helm/v3"), "helm v4 is at 4.3.2 (helm.sh/helm/v4)"),
    # Not on the Go module proxy (their tags are not Go module versions, or the proxy serves none):
    # as read from their release pages, not re-read on PUBLISHED_READ.
    PublishedLine("calico", "3.31", "v3.31.7", "", "projectcalico/calico tags, read 2026-12-01 (the Go module "
                  "has no v3 tags: the proxy lists pseudo-versions only)", "the 3.32 line is at v3.32.1"),
)


@dataclass(frozen=True)
class ChartSource:
    """Where one Helm chart comes from: its repository, or a local archive for air-gapped sites. The pins
    below, as the inventory's ``bootstrap.addons.charts`` changes them (``cluster_sections``)."""

    #: Helm release name clusterctl installs it under (also the key in the inventory).
    release: str
    chart: str
    version: str
    repository: str
    namespace: str
    #: Where the pinned version was read.
    source: str = ""
    #: A ``.tgz`` on the control machine (copied to the host running Helm); wins over ``repository``.
    archive: str | None = None


CHART_PINS: dict[str, ChartSource] = {
    pin.release: pin
    for pin in (
        ChartSource(
            "nvidia-device-plugin", "nvidia-device-plugin", "0.20.0", "https://nvidia.github.io/k8s-device-plugin",
            "nvidia-device-plugin", "github.com/NVIDIA/k8s-device-plugin/releases v0.20.0 (2026-08-19)",
        ),
        ChartSource(
            "node-feature-discovery", "node-feature-discovery", "0.19.0",
            "https://kubernetes-sigs.github.io/node-feature-discovery/charts", "node-feature-discovery",
            "github.com/kubernetes-sigs/node-feature-discovery/releases v0.19.0 (the chart the device plugin "
            "0.20.0 depends on)",
        ),
        ChartSource(
            "dcgm-exporter", "dcgm-exporter", "4.8.2", "https://nvidia.github.io/dcgm-exporter/helm-charts",
            "dcgm-exporter", "github.com/NVIDIA/dcgm-exporter deployment/Chart.yaml 4.8.2 (2026-05-06, image "
            "4.5.3-4.8.2; etc/default-counters.csv unchanged since chart 4.6.0)",
        ),
        ChartSource(
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
    source: str


CNI_PINS: dict[str, CNIPin] = {
    "calico": CNIPin(
        "calico", "v3.31.7", "https://raw.githubusercontent.com/projectcalico/calico/v3.31.7/manifests",
        ("operator-crds.yaml", "tigera-operator.yaml"), (),
        "projectcalico/calico tags: v3.31.7 is the newest 3.31 patch (read 2026-12-01); manifests as in "
        "docs.tigera.io/calico/latest/getting-started/kubernetes/self-managed-onprem/onpremises (operator install)",
    ),
    "flannel": CNIPin(
        "flannel", "v0.28.10", "https://github.com/flannel-io/flannel/releases/download/v0.28.10", (),
        ("ghcr.io/flannel-io/flannel:v0.28.10", "ghcr.io/flannel-io/flannel-cni-plugin:v1.9.1-flannel3"),
        "github.com/flannel-io/flannel v0.28.10 on the Go module proxy (2026-10-08, read 2026-12-01): its "
        "Documentation/kube-flannel.yml references these two images",
    ),
}

#: The kubeadm config API clusterctl writes (kubeadm.k8s.io/v1beta4, templates/bootstrap/kubeadm) and the
#: Kubernetes minors that read it: v1beta4 arrived in 1.31 (kubernetes#125029); v1beta3 was removed in 1.37
#: (kubernetes#136016).
KUBEADM_V1BETA4_FIRST_MINOR = 31
#: The newest Kubernetes minor clusterctl knows (1.37, released 2026-08), written here and nowhere
#: else: the support window (``bootstrap.matrix``), kubeadm's config API message and the docs'
#: test read it. Newer minors still get v1beta4, with a warning.
NEWEST_KUBERNETES = (1, 37)
