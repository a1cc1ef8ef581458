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

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from clusterctl.bootstrap.apt_sources import chosen_repos, packages_index_url, wanted_packages
from clusterctl.bootstrap.cluster.addons import TEST_POD_IMAGE, addon_plan
from clusterctl.bootstrap.cluster.kubeadm_images import kubeadm_images
from clusterctl.bootstrap.cluster.network import cni_images
from clusterctl.bootstrap.cluster.settings import site_image
from clusterctl.errors import ParseError
from clusterctl.facts.node import apt_base, parse_os_release
from clusterctl.host_reader import HostReader
from clusterctl.hostlist import compress
from clusterctl.inventory.model import AptRepo
from clusterctl.inventory.pins import CNI_PINS

if TYPE_CHECKING:
    from clusterctl.bootstrap.cluster.settings import ClusterSettings
    from clusterctl.fanout import Runner
    from clusterctl.inventory.model import Host, Inventory
    from clusterctl.transport.base import Transport

#: Which default apt source carries which package (``apt_sources.default_repos``' names).
PACKAGE_SOURCE = {
    "kubelet": "kubernetes", "kubeadm": "kubernetes", "kubectl": "kubernetes",
    "containerd.io": "docker",
    "nvidia-container-toolkit": "nvidia-container-toolkit", "nvidia-container-toolkit-base": "nvidia-container-toolkit",
    "libnvidia-container-tools": "nvidia-container-toolkit", "libnvidia-container1": "nvidia-container-toolkit",
}

#: Tigera operator release paired with each Calico release (the operator pulls Calico's images
#: itself), where a published image list confirms the pair: v3.31.3 -> v1.40.3 (kubekey's offline
#: image list). A Calico release not listed gets no guessed tag: the list leaves the operator image
#: out and says where its tag is (``tigera-operator.yaml`` names it).
TIGERA_OPERATOR = {"v3.31.3": "v1.40.3"}
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
    #: apt items: the ``Packages`` index of their source for each suite the hosts use (what a probe reads).
    indexes: tuple[str, ...] = ()
    #: charts: the ``helm pull`` archive on the control machine the inventory names (what a probe looks for).
    archive: str | None = None

    @property
    def reference(self) -> str:
        """One line a mirroring script can use: ``name=version``, ``image:tag``, ``repo chart version``."""
        if self.kind == "apt-package":
            return f"{self.name}={self.version}"
        if self.kind == "image":  # a version pinned by digest alone is 'sha256:...', after '@'
            return f"{self.name}{'@' if self.version.startswith('sha256:') else ':'}{self.version}"
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


def image_parts(reference: str) -> tuple[str, str, str]:
    """``mirror:5000/pause:3.10.1@sha256:...`` -> (``mirror:5000/pause``, ``3.10.1``, ``sha256:...``): the one
    reading of an image reference (a port is not a tag); "" for a tag or a digest it does not give."""
    rest, _, digest = reference.partition("@")
    name, sep, tag = rest.rpartition(":")
    if not sep or "/" in tag:
        return rest, "", digest
    return name, tag, digest


def split_image(reference: str) -> tuple[str, str]:
    """``registry.k8s.io/pause:3.10.1`` -> (``registry.k8s.io/pause``, ``3.10.1``); no tag is ``latest``. A digest
    stays in the version, after its tag (``3.10.1@sha256:...``) or alone (``sha256:...``)."""
    name, tag, digest = image_parts(reference)
    return name, "@".join(filter(None, (tag or ("" if digest else "latest"), digest)))


def _image(reference: str, phase: str, note: str = "") -> Artifact:
    name, tag = split_image(reference)
    registry = name.split("/", 1)[0]
    return Artifact("image", name, tag, registry, phase, note=note)


@dataclass(frozen=True)
class HostRelease:
    """What a host's ``/etc/os-release`` says that apt sources depend on (Docker's repository and
    suite): ``ID``, and ``facts.node.apt_base``'s reading; ``unread`` says why they are not known."""

    os_id: str | None = None
    base: str | None = None
    codename: str | None = None
    unread: str = ""


def _apt(inventory: Inventory, hosts: Sequence[Host], releases: Mapping[str, HostRelease]
         ) -> tuple[list[Artifact], list[str]]:
    settings = inventory.bootstrap
    wanted: dict[tuple[str, str, str], list[str]] = {}
    indexes: dict[tuple[str, str, str], dict[str, None]] = {}
    keys: dict[tuple[str, str], list[str]] = {}
    suites: dict[tuple[str, str], list[str]] = {}
    unread: dict[str, list[str]] = {}
    for host in hosts:
        release = releases.get(host.name, HostRelease(unread="not read"))
        # The same choice the packages phase makes from the same facts (apt_sources.chosen_repos).
        chosen = chosen_repos(host.stack, settings, release.base, release.codename, gpus=host.gpus)
        repos: dict[str, AptRepo] = {r.name: r for r in chosen}
        docker = repos.get("docker")
        if docker is not None and release.os_id is None:
            # Which of Docker's repositories (linux/ubuntu or linux/debian) depends on the host's OS.
            unread.setdefault(release.unread or "not read", []).append(host.name)
            repos["docker"] = AptRepo(docker.name, docker.url.rsplit("/", 1)[0] + "/<ubuntu|debian>", docker.suites,
                                      docker.components, docker.key_file, None)
        elif docker is not None:
            suites.setdefault((docker.url, " ".join(docker.suites)), []).append(host.name)
        for pin in wanted_packages(host.stack, settings, gpus=host.gpus):
            repo = repos.get(PACKAGE_SOURCE.get(pin.package, ""))
            index: dict[str, None] = {}
            if repo is not None:
                source = repo.url
                if repo in chosen:  # not a Docker repository of an OS not known
                    index = {packages_index_url(repo): None}
            elif pin.package == settings.containerd_package and pin.package != "containerd.io":
                source = "the distribution's archive"
            else:
                source = ", ".join(r.url for r in repos.values()) or "the configured apt sources"
            wanted.setdefault((pin.package, pin.version, source), []).append(host.name)
            indexes.setdefault((pin.package, pin.version, source), {}).update(index)
        for repo in repos.values():
            if not repo.key_file and repo.key_url:
                keys.setdefault((repo.name, repo.key_url), []).append(host.name)
    notes = [f"containerd.io comes from {url}, suite {suite} (dists/{suite}/stable), for {compress(names)}: "
             "mirror that suite." for (url, suite), names in suites.items()]
    notes += [f"the OS of {compress(names)} is not known ({why}): Docker's repository for them is linux/ubuntu "
              "or linux/debian by their /etc/os-release; run again when they answer." for why, names in unread.items()]
    out = [Artifact("apt-package", name, version, source, "packages", tuple(names),
                    indexes=tuple(indexes[name, version, source]))
           for (name, version, source), names in wanted.items()]
    out += [Artifact("apt-key", f"signing key of '{name}'", "-", url, "packages", tuple(names),
                     note="or give apt_repos[].key_file so the hosts fetch nothing")
            for (name, url), names in keys.items()]
    return out, notes


def _kubeadm(settings: ClusterSettings, inventory: Inventory) -> list[Artifact]:
    images = kubeadm_images(settings.kubernetes.tag, settings.image_repository)
    out = [_image(ref, "control-plane") for ref in images]
    sandbox = inventory.bootstrap.sandbox_image
    if sandbox and sandbox not in images:
        out.append(_image(sandbox, "containerd", "bootstrap.sandbox_image"))
    return out


def _network(settings: ClusterSettings) -> list[Artifact]:
    net = settings.network
    pin = CNI_PINS[net.cni]
    out = [Artifact("manifest", manifest, net.version, f"{net.manifest_base}/{manifest}", "network")
           for manifest in pin.manifests]
    if net.cni == "calico":
        operator = TIGERA_OPERATOR.get(net.version)
        if operator:
            out.append(_image(site_image(f"quay.io/tigera/operator:{operator}", net.image_registry), "network",
                              "named in tigera-operator.yaml"))
        out += [_image(site_image(f"quay.io/calico/{component}:{net.version}", net.image_registry), "network",
                       "deployed by the Tigera operator") for component in CALICO_COMPONENTS]
    else:
        out += [_image(reference, "network") for reference in cni_images(net)]
    return out


def _addons(settings: ClusterSettings) -> list[Artifact]:
    out: list[Artifact] = []
    # The charts the gpu-addons phase installs in this mode, in its order.
    for chart in (r.chart for r in addon_plan(settings, runtime_class=False, service_monitor=False).releases):
        archive = f"from the archive {chart.archive} (helm pull it from this repository)" if chart.archive else ""
        out.append(Artifact("chart", chart.chart, chart.version, chart.repository, "gpu-addons", note=archive,
                            archive=chart.archive))
        operator = chart.release == "gpu-operator"
        for template in GPU_OPERATOR_IMAGES if operator else CHART_IMAGES[chart.release]:
            reference = template.format(version=chart.version if operator else chart.version.lstrip("v"))
            out.append(_image(site_image(reference, settings.addons.image_registry), "gpu-addons",
                              f"chart {chart.chart}"))
    return out


def artifact_list(inventory: Inventory, hosts: Sequence[Host],
                  releases: Mapping[str, HostRelease] | None = None) -> ArtifactList:
    """Every package, key, image, chart and manifest a bootstrap of ``hosts`` fetches, mirrors applied.

    ``releases``: each host's OS as its ``/etc/os-release`` says (what the packages phase reads):
    apt sources are chosen from it as the plan chooses them; a host not in it is said to be unknown.
    """
    from clusterctl.bootstrap.cluster.settings import GPU_ADDONS_PHASE, NETWORK_PHASE, cluster_settings, left_to_site

    settings = cluster_settings(inventory)
    found = ArtifactList(inventory.name, settings.kubernetes.tag)
    found.artifacts, found.notes = _apt(inventory, hosts, releases or {})
    found.artifacts += _kubeadm(settings, inventory)
    # What the site installs itself (its own CNI, its own GPU add-ons, no GPUs at all) is not fetched.
    left = {p: why for p in (NETWORK_PHASE, GPU_ADDONS_PHASE) if (why := left_to_site(p, settings, inventory.hosts))}
    found.notes += [f"{phase}: nothing to fetch: {why}" for phase, why in left.items()]
    found.artifacts += _network(settings) if NETWORK_PHASE not in left else []
    net = settings.network
    if NETWORK_PHASE not in left and net.cni == "calico" and net.version not in TIGERA_OPERATOR:
        found.notes.append(f"quay.io/tigera/operator is left out: its tag for Calico {net.version} is the one on "
                           "the image: line of tigera-operator.yaml (in manifests.txt) that names it, and clusterctl "
                           "does not guess it: add that image to images.txt.")
    found.artifacts += _addons(settings) if GPU_ADDONS_PHASE not in left else []
    found.artifacts.append(_image(site_image(TEST_POD_IMAGE, settings.addons.image_registry), VERIFY_IMAGE_PHASE,
                                  "the one-GPU test pod"))
    for registry, endpoints in inventory.bootstrap.registry_mirrors:
        found.notes.append(f"containerd pulls {registry} images through {', '.join(endpoints)} "
                           "(registry_mirrors): push them there under the same path")
    # One entry per image (the GPU Operator and the device plugin can name the same one): the first.
    images: dict[tuple[str, str], Artifact] = {}
    found.artifacts = [a for a in found.artifacts
                       if a.kind != "image" or images.setdefault((a.name, a.version), a) is a]
    return found


def read_releases(runner: Runner, hosts: Sequence[Host]) -> dict[str, HostRelease]:
    """Each host's ``/etc/os-release`` (read only), as the packages phase reads it; a host that
    cannot be read gets a ``HostRelease`` saying why, and the list says its OS is unknown."""
    def task(transport: Transport) -> HostRelease:
        result = HostReader(transport).run("cat /etc/os-release", timeout=30)
        if not result.ok:
            return HostRelease(unread=f"cat /etc/os-release: exit {result.exit_code}")
        try:
            values = parse_os_release(result.stdout)
        except ParseError as exc:
            return HostRelease(unread=str(exc))
        return HostRelease(values.get("ID") or None, *apt_base(values))

    fleet = runner.run_task(hosts, task, label="os-release")
    return {o.host.name: o.value if o.ok and o.value is not None else
            HostRelease(unread=o.failure.describe() if o.failure else "no answer") for o in fleet.outcomes}
