"""What the cluster phases are told: Kubernetes version, endpoint, subnets, CNI, add-ons, alerts.

Read from the inventory's stack pin and its ``bootstrap:`` section (``network``, ``addons``,
``alerts``, plus the subnets and endpoint part 1 reads too), with the pins of
``clusterctl.inventory.pins`` as defaults. ``settings_from_mapping`` takes plain values (as YAML
gives them) and raises ``UsageError`` naming the field; the three sections are checked by
``clusterctl.inventory.cluster_sections``, which the inventory reader uses too, so both share
one set of checks.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from clusterctl.errors import UsageError
from clusterctl.inventory import values
from clusterctl.inventory.cluster_sections import (
    SITE_OWN,
    AddonSettings,
    AlertSettings,
    NetworkSettings,
    by_rule,
    check_addons,
    check_alerts,
    check_network,
    endpoint_setting,
    text_setting,
)
from clusterctl.inventory.model import BootstrapConfig
from clusterctl.inventory.pins import KUBEADM_V1BETA4_FIRST_MINOR, NEWEST_KUBERNETES
from clusterctl.templating import TemplateError, label_value

if TYPE_CHECKING:
    from clusterctl.inventory.model import Host, Inventory

DEFAULT_CRI_SOCKET = "unix:///run/containerd/containerd.sock"
_VERSION = re.compile(r"^v?(\d+)\.(\d+)\.(\d+)$")


@dataclass(frozen=True, order=True)
class KubernetesVersion:
    """A Kubernetes release, ``1.36.2``: bootstrap's pin and ``upgrade --to``'s target alike."""

    major: int
    minor: int
    patch: int

    @property
    def text(self) -> str:
        return f"{self.major}.{self.minor}.{self.patch}"

    @property
    def tag(self) -> str:
        """``v1.36.2``: kubeadm's ``kubernetesVersion`` and the kubelet's spelling."""
        return "v" + self.text

    @property
    def apt(self) -> str:
        """``1.36.2-*``: the apt pin the Kubernetes upgrade documentation writes."""
        return self.text + "-*"

    @classmethod
    def parse(cls, text: str) -> KubernetesVersion | None:
        """``1.36.2`` or ``v1.36.2``; None for anything else."""
        match = _VERSION.match(text.strip())
        return cls(*(int(g) for g in match.groups())) if match else None

def kubernetes_version(pin: str, *, where: str = "stack.kubernetes") -> KubernetesVersion:
    """Parse and check a Kubernetes pin: clusterctl writes kubeadm ``v1beta4``, read from 1.31 on.

    v1beta3 is removed in 1.37 and v1beta4 does not exist before 1.31, so one config API
    serves every version clusterctl supports; a pin before 1.31 is refused with the range.
    """
    version = KubernetesVersion.parse(pin)
    if version is None:
        raise UsageError(f"Kubernetes version {pin!r} is not MAJOR.MINOR.PATCH (for example 1.36.2).", field=where)
    if version.major != 1 or version.minor < KUBEADM_V1BETA4_FIRST_MINOR:
        raise UsageError(
            f"Kubernetes {pin} would need the kubeadm config API v1beta3, which clusterctl does not write "
            f"(v1beta3 is removed in Kubernetes 1.37). clusterctl supports Kubernetes 1.{KUBEADM_V1BETA4_FIRST_MINOR} "
            f"and later (kubeadm.k8s.io/v1beta4; checked up to {NEWEST_KUBERNETES[0]}.{NEWEST_KUBERNETES[1]}).",
            field=where, hint=f"Pin 1.{KUBEADM_V1BETA4_FIRST_MINOR}.0 or later.",
        )
    return version


@dataclass(frozen=True)
class ClusterSettings:
    kubernetes: KubernetesVersion
    control_plane_endpoint: str
    pod_subnet: str
    service_subnet: str
    cri_socket: str = DEFAULT_CRI_SOCKET
    #: Registry that serves the control-plane images (kubeadm ``imageRepository``), air-gapped sites.
    image_repository: str | None = None
    cluster_name: str = "kubernetes"
    network: NetworkSettings = field(default_factory=NetworkSettings)
    addons: AddonSettings = field(default_factory=AddonSettings)
    alerts: AlertSettings = field(default_factory=AlertSettings)
    #: ``bootstrap.allow_cgroup_v1``: kubelet's ``failCgroupV1: false`` and kubeadm's
    #: SystemVerification preflight skipped, which kubelet 1.35+ needs on a cgroup v1 host.
    allow_cgroup_v1: bool = False


# --- reading ---------------------------------------------------------------------------------------------


#: Fields of the inventory's ``bootstrap:`` section that the cluster phases read.
CLUSTER_FIELDS: tuple[str, ...] = (
    "kubernetes_version", "control_plane_endpoint", "pod_subnet", "service_subnet", "cri_socket",
    "image_repository", "cluster_name", "network", "addons", "alerts", "allow_cgroup_v1",
)


def settings_from_mapping(
    data: Mapping[str, Any], *, kubernetes_pin: str | None, first_control_plane: str | None,
    where: str = "bootstrap",
) -> ClusterSettings:
    """``ClusterSettings`` from plain values; unknown keys are left to the caller (part 1 reads them)."""
    pin = data.get("kubernetes_version") or kubernetes_pin
    if not pin:
        raise UsageError("no Kubernetes version: pin stack.kubernetes (or bootstrap.kubernetes_version).",
                         field="stack.kubernetes")
    version = kubernetes_version(str(pin), where="bootstrap.kubernetes_version" if data.get("kubernetes_version")
                                 else "stack.kubernetes")
    network = check_network(data.get("network"), f"{where}.network")
    # ``host`` or ``host:port`` (the port defaults to 6443), checked as the inventory loader checks it.
    if data.get("control_plane_endpoint"):
        cp = endpoint_setting(data["control_plane_endpoint"], f"{where}.control_plane_endpoint")
    elif first_control_plane:
        cp = endpoint_setting(first_control_plane, "hosts (the first control-plane host's address)")
    else:
        raise UsageError("no control-plane host: give one host the control-plane role.", field="hosts")
    # The inventory's defaults, whatever the CNI: Calico's Installation takes kubeadm's pod subnet as its pool.
    # Subnets that overlap are refused where the inventory is read (``inventory.bootstrap_section``).
    pod = by_rule(values.subnet, data.get("pod_subnet") or BootstrapConfig.pod_subnet, f"{where}.pod_subnet")
    service = by_rule(values.subnet, data.get("service_subnet") or BootstrapConfig.service_subnet,
                      f"{where}.service_subnet")
    return ClusterSettings(
        kubernetes=version,
        control_plane_endpoint=cp,
        pod_subnet=pod,
        service_subnet=service,
        cri_socket=text_setting(data["cri_socket"], f"{where}.cri_socket") if data.get("cri_socket")
        else DEFAULT_CRI_SOCKET,
        image_repository=by_rule(values.registry, data["image_repository"], f"{where}.image_repository")
        if data.get("image_repository") else None,
        cluster_name=text_setting(data.get("cluster_name", "kubernetes"), f"{where}.cluster_name"),
        network=network,
        addons=check_addons(data.get("addons"), f"{where}.addons"),
        alerts=check_alerts(data.get("alerts"), f"{where}.alerts"),
        allow_cgroup_v1=data.get("allow_cgroup_v1") is True,
    )


# --- per host ----------------------------------------------------------------------------------------------


def host_zone(host: Host) -> str | None:
    """The host's zone: its ``zone`` variable (``clusterctl_zone`` in Ansible) or zone label."""
    variables = dict(host.vars)
    for key in ("zone", "clusterctl_zone"):
        if variables.get(key):
            return str(variables[key])
    return dict(host.labels).get("topology.kubernetes.io/zone")


#: Prefix of the labels and features clusterctl owns (documented in docs/bootstrap.md).
LABEL_PREFIX = "clusterctl.dev"


def site_image(upstream: str, registry: str | None) -> str:
    """An upstream image under the site registry of air-gapped sites, ``<registry>/<path without the
    upstream host>`` (``ghcr.io/flannel-io/flannel:v1`` -> ``<registry>/flannel-io/flannel:v1``)."""
    if not registry:
        return upstream
    return f"{registry.rstrip('/')}/{upstream.split('/', 1)[1]}"


def kubelet_node_labels(host: Host) -> dict[str, str]:
    """Labels the kubelet sets on its own Node at registration (``--node-labels``).

    ``topology.kubernetes.io/zone`` is one of the few ``kubernetes.io`` labels a kubelet may set
    on itself (NFD may not set it at all); the rack goes under clusterctl's own prefix. A zone or rack
    that cannot be a label value (the survey takes ``rack 1`` as it is) is refused naming the host.
    """
    labels: dict[str, str] = {}
    for key, value in (("topology.kubernetes.io/zone", host_zone(host)), (f"{LABEL_PREFIX}/rack", host.rack)):
        try:
            if value:
                labels[key] = label_value(value)
        except TemplateError as exc:
            raise UsageError(f"{key}: {exc.message}", file=host.source, field=f"hosts.{host.name}") from None
    return labels


def cluster_settings(inventory: Inventory) -> ClusterSettings:
    """Settings for ``inventory``: its ``bootstrap:`` section, its hosts' Kubernetes pin and first control plane."""
    data = {key: value for key in CLUSTER_FIELDS if (value := getattr(inventory.bootstrap, key, None)) is not None}
    pins = {h.stack.kubernetes for h in inventory.hosts if h.stack.kubernetes}
    if len(pins) > 1:
        raise UsageError(f"hosts pin different Kubernetes versions ({', '.join(sorted(pins))}); one cluster runs one.",
                         field="stack.kubernetes")
    first = inventory.first_control_plane
    return settings_from_mapping(
        data, kubernetes_pin=next(iter(pins), None),
        first_control_plane=first.connect_address if first is not None else None,
    )


# --- what clusterctl installs on the cluster -----------------------------------------------------------------


#: The cluster phases whose install the inventory may leave to the site (``left_to_site``).
NETWORK_PHASE, GPU_ADDONS_PHASE = "network", "gpu-addons"


def left_to_site(phase: str, settings: ClusterSettings, hosts: Sequence[Host]) -> str | None:
    """Why the cluster phase ``phase`` installs nothing on this cluster, as a report says it after
    "nothing to do: " (pyinfra's no-op reasons); ``None``: clusterctl installs it and keeps it at its pins.

    The one decision for the CNI and the GPU add-ons: bootstrap's ``network`` and ``gpu-addons``
    phases give it as their ``not_needed``, so every command that runs them (bootstrap, and
    upgrade after its last node) skips them alike, and the artifact list leaves out what they would
    fetch. ``hosts``: the cluster's hosts (the whole inventory, not a ``--limit``). Decided from the
    inventory alone, before any host is read.
    """
    if phase == NETWORK_PHASE and settings.network.cni == SITE_OWN:
        return f"the site brings its own CNI (bootstrap.network.cni: {SITE_OWN})"
    if phase == GPU_ADDONS_PHASE:
        if settings.addons.mode == SITE_OWN:
            return f"the site installs its own GPU add-ons (bootstrap.addons.mode: {SITE_OWN})"
        if hosts and not any(h.gpus for h in hosts):
            return "no host of the cluster has GPUs (inventory: gpus: false on every host)"
    return None
