"""``clusterctl bootstrap artifacts``: everything an air-gapped site must mirror for this inventory.

The list comes from the same functions the phases plan with, so it cannot drift from what a
run would fetch: the packages phase's pins and apt sources (``apt_sources``), kubeadm's own
images for the pinned version (``cluster.kubeadm_images``), the CNI's pinned manifests and
images (``inventory.pins``/``cluster.network``), the add-on charts and the images their pinned
versions pull, and the image the verify phase runs. Mirrors the inventory configures are
applied (``bootstrap.mirror``, ``image_repository``, ``network.image_registry``/``manifest_mirror``,
``addons.image_registry``, chart archives), so each item names where a run will look for it.

Kubespray's users asked for this list for years (kubespray#6254, #4876, #9476); its
``contrib/offline/generate_list.sh`` needs the playbooks' variables resolved by hand.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from clusterctl.bootstrap.apt_sources import chosen_repos, wanted_packages
from clusterctl.bootstrap.cluster.kubeadm_images import kubeadm_images
from clusterctl.inventory.pins import CNI_PINS

if TYPE_CHECKING:
    from clusterctl.bootstrap.cluster.settings import ClusterSettings
    from clusterctl.inventory.model import AptRepo, Host, Inventory

#: Which default apt source carries which package (``apt_sources.default_repos``' names).
PACKAGE_SOURCE = {
    "kubelet": "kubernetes", "kubeadm": "kubernetes", "kubectl": "kubernetes",
    "containerd.io": "docker",
    "nvidia-container-toolkit": "nvidia-container-toolkit", "nvidia-container-toolkit-base": "nvidia-container-toolkit",
    "libnvidia-container-tools": "nvidia-container-toolkit", "libnvidia-container1": "nvidia-container-toolkit",
}

#: Tigera operator release paired with each Calico release (the operator pulls Calico's images
#: itself). v3.31.3 -> v1.40.3 as published image lists give it (kubekey's offline image list);
#: v3.31.4 -> v1.40.4 follows the same patch pairing and is not checked yet: confirm a pair with
#: ``docker run quay.io/tigera/operator:TAG --print-images=list`` before mirroring.
TIGERA_OPERATOR = {"v3.31.3": "v1.40.3", "v3.31.4": "v1.40.4"}
#: Calico images the operator deploys for clusterctl's ``Installation`` + ``APIServer``.
CALICO_COMPONENTS = ("node", "cni", "typha", "kube-controllers", "pod2daemon-flexvol", "csi",
                     "node-driver-registrar", "apiserver")

#: Images each add-on chart's default values pull at the pinned chart version (tag = the chart's
#: appVersion: device plugin and NFD charts use ``v<version>``; dcgm-exporter's chart 4.8.2 ships
#: image 4.5.3-4.8.2). GFD runs from the device plugin's image.
CHART_IMAGES: dict[str, tuple[str, ...]] = {
    "nvidia-device-plugin": ("nvcr.io/nvidia/k8s-device-plugin:v{version}",),
    "node-feature-discovery": ("registry.k8s.io/nfd/node-feature-discovery:v{version}",),
    "dcgm-exporter": ("nvcr.io/nvidia/k8s/dcgm-exporter:4.5.3-{version}-ubuntu22.04",),
}
#: GPU Operator v26.7.0 components clusterctl leaves on (driver and toolkit are the hosts': off),
#: from the operator's release notes (it pins device plugin 0.20.0, NFD 0.19.0).
GPU_OPERATOR_IMAGES = (
    "nvcr.io/nvidia/gpu-operator:{version}",
    "nvcr.io/nvidia/cloud-native/gpu-operator-validator:{version}",
    "nvcr.io/nvidia/k8s-device-plugin:v0.20.0",
    "nvcr.io/nvidia/k8s/dcgm-exporter:4.5.3-4.8.2-ubuntu22.04",
    "registry.k8s.io/nfd/node-feature-discovery:v0.19.0",
)
#: The image the verify phase runs one GPU pod with (``cluster.addons.TEST_POD_IMAGE``).
VERIFY_IMAGE_PHASE = "verify"


@dataclass(frozen=True)
class Artifact:
    #: ``apt-package``, ``apt-key``, ``image``, ``chart``, ``manifest``.
    kind: str
    name: str
    version: str
    #: Where a run looks for it: an apt source URL, a registry, a chart repository, a URL.
    source: str
    #: The phase that needs it.
    phase: str
    #: Hosts that need it (apt items); empty: the cluster (pulled by the nodes that run the pod).
    hosts: tuple[str, ...] = ()
    note: str = ""

    @property
    def reference(self) -> str:
        """One line a mirroring script can use: ``name=version``, ``image:tag``, ``repo chart version``."""
        if self.kind == "apt-package":
            return f"{self.name}={self.version}"
        if self.kind == "image":
            return f"{self.name}:{self.version}"
        if self.kind == "chart":
            return f"{self.source} {self.name} {self.version}"
        return self.source

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"kind": self.kind, "name": self.name, "version": self.version,
                                "source": self.source, "phase": self.phase, "reference": self.reference}
        if self.hosts:
            data["hosts"] = list(self.hosts)
        if self.note:
            data["note"] = self.note
        return data


@dataclass
class ArtifactList:
    cluster: str
    kubernetes: str
    artifacts: list[Artifact] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def of_kind(self, kind: str) -> list[Artifact]:
        return [a for a in self.artifacts if a.kind == kind]

    def to_json(self) -> dict[str, Any]:
        return {"cluster": self.cluster, "kubernetes": self.kubernetes,
                "artifacts": [a.to_json() for a in self.artifacts], "notes": list(self.notes)}


def split_image(reference: str) -> tuple[str, str]:
    """``registry.k8s.io/pause:3.10.1`` -> (``registry.k8s.io/pause``, ``3.10.1``); a port is not a tag."""
    name, sep, tag = reference.rpartition(":")
    if not sep or "/" in tag:
        return reference, "latest"
    return name, tag


def _image(reference: str, phase: str, note: str = "") -> Artifact:
    name, tag = split_image(reference)
    registry = name.split("/", 1)[0]
    return Artifact("image", name, tag, registry, phase, note=note)


def _rehome(reference: str, registry: str | None) -> str:
    """An upstream image under a site registry: ``<registry>/<path without the upstream host>``."""
    if not registry:
        return reference
    return f"{registry.rstrip('/')}/{reference.split('/', 1)[1]}"


def _apt(inventory: Inventory, hosts: Sequence[Host]) -> tuple[list[Artifact], list[str]]:
    settings = inventory.bootstrap
    wanted: dict[tuple[str, str, str], list[str]] = {}
    keys: dict[tuple[str, str], list[str]] = {}
    notes: list[str] = []
    for host in hosts:
        repos: dict[str, AptRepo] = {r.name: r for r in chosen_repos(host.stack, settings, None, None)}
        for pin in wanted_packages(host.stack, settings):
            repo = repos.get(PACKAGE_SOURCE.get(pin.package, ""))
            if repo is not None:
                source = repo.url
            elif pin.package == settings.containerd_package and pin.package != "containerd.io":
                source = "the distribution's archive"
            else:
                source = ", ".join(r.url for r in repos.values()) or "the configured apt sources"
            wanted.setdefault((pin.package, pin.version, source), []).append(host.name)
        for repo in repos.values():
            if not repo.key_file and repo.key_url:
                keys.setdefault((repo.name, repo.key_url), []).append(host.name)
    if any(r.name == "docker" for h in hosts[:1] for r in chosen_repos(h.stack, settings, None, None)):
        notes.append("containerd.io comes from Docker's repository under the hosts' own release codename "
                     "(dists/<codename>/stable): mirror that suite for each OS release in the fleet.")
    out = [Artifact("apt-package", name, version, source, "packages", tuple(names))
           for (name, version, source), names in wanted.items()]
    out += [Artifact("apt-key", f"signing key of '{name}'", "-", url, "packages", tuple(names),
                     note="or give apt_repos[].key_file so the hosts fetch nothing")
            for (name, url), names in keys.items()]
    return out, notes


def _kubeadm(settings: ClusterSettings, inventory: Inventory) -> list[Artifact]:
    images = kubeadm_images(settings.kubernetes.text, settings.image_repository)
    out = [_image(ref, "control-plane") for ref in images]
    sandbox = inventory.bootstrap.sandbox_image
    if sandbox and sandbox not in images:
        out.append(_image(sandbox, "containerd", "bootstrap.sandbox_image"))
    return out


def _network(settings: ClusterSettings) -> list[Artifact]:
    net = settings.network
    pin = CNI_PINS[net.cni]
    out: list[Artifact] = []
    for manifest in pin.manifests:
        out.append(Artifact("manifest", manifest, net.version, f"{net.manifest_base}/{manifest}", "network"))
    if net.cni == "calico":
        operator = TIGERA_OPERATOR.get(net.version)
        if operator:
            out.append(_image(_rehome(f"quay.io/tigera/operator:{operator}", net.image_registry), "network",
                              "named in tigera-operator.yaml"))
        else:
            out.append(Artifact("image", _rehome("quay.io/tigera/operator", net.image_registry), "?", "quay.io",
                                "network", note=f"the tag tigera-operator.yaml {net.version} names"))
        registry = net.image_registry or "quay.io"
        for component in CALICO_COMPONENTS:
            out.append(_image(f"{registry.rstrip('/')}/calico/{component}:{net.version}", "network",
                              "deployed by the Tigera operator"))
    else:
        for i, image in enumerate(pin.images):
            upstream = image.replace(pin.version, net.version, 1) if i == 0 else image
            out.append(_image(_rehome(upstream, net.image_registry), "network"))
    return out


def _addons(settings: ClusterSettings) -> list[Artifact]:
    addons = settings.addons
    releases = ("gpu-operator",) if addons.mode == "gpu-operator" else (
        "node-feature-discovery", "nvidia-device-plugin", "dcgm-exporter")
    out: list[Artifact] = []
    for release in releases:
        chart = addons.chart(release)
        if chart.archive:
            out.append(Artifact("chart", chart.chart, chart.version, chart.repository, "gpu-addons",
                                note=f"from the archive {chart.archive} (helm pull it from this repository)"))
        else:
            out.append(Artifact("chart", chart.chart, chart.version, chart.repository, "gpu-addons"))
        templates = GPU_OPERATOR_IMAGES if release == "gpu-operator" else CHART_IMAGES[release]
        for template in templates:
            reference = template.format(version=chart.version.lstrip("v") if release != "gpu-operator"
                                        else chart.version)
            out.append(_image(_rehome(reference, addons.image_registry), "gpu-addons", f"chart {chart.chart}"))
    return out


def artifact_list(inventory: Inventory, hosts: Sequence[Host]) -> ArtifactList:
    """Every package, key, image, chart and manifest a bootstrap of ``hosts`` fetches, mirrors applied."""
    from clusterctl.bootstrap.cluster.addons import TEST_POD_IMAGE
    from clusterctl.bootstrap.cluster.settings import cluster_settings

    settings = cluster_settings(inventory)
    found = ArtifactList(inventory.name, settings.kubernetes.text)
    apt, notes = _apt(inventory, hosts)
    found.artifacts += apt
    found.notes += notes
    found.artifacts += _kubeadm(settings, inventory)
    found.artifacts += _network(settings)
    found.artifacts += _addons(settings)
    found.artifacts.append(_image(_rehome(TEST_POD_IMAGE, settings.addons.image_registry), VERIFY_IMAGE_PHASE,
                                  "the one-GPU test pod"))
    mirrors = dict(inventory.bootstrap.registry_mirrors)
    for registry, endpoints in mirrors.items():
        found.notes.append(f"containerd pulls {registry} images through {', '.join(endpoints)} "
                           "(registry_mirrors): push them there under the same path")
    # One entry per image (the GPU Operator and the device plugin can name the same one).
    seen: set[tuple[str, str, str]] = set()
    unique: list[Artifact] = []
    for artifact in found.artifacts:
        key = (artifact.kind, artifact.name, artifact.version)
        if artifact.kind == "image" and key in seen:
            continue
        seen.add(key)
        unique.append(artifact)
    found.artifacts = unique
    return found
