"""What the cluster phases are told: Kubernetes version, endpoint, subnets, CNI, add-ons, alerts.

Read from the inventory's stack pin and its ``bootstrap:`` section (``network``, ``addons``,
``alerts``, plus the subnets and endpoint part 1 reads too), with the pins of
``clusterctl.bootstrap.cluster.pins`` as defaults. ``settings_from_mapping`` takes plain
values (as YAML gives them) and raises ``UsageError`` naming the field, so the inventory
reader and tests share one set of checks.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Literal

from clusterctl.bootstrap.cluster.pins import (
    CHART_PINS,
    CNI_PINS,
    KUBEADM_V1BETA4_FIRST_MINOR,
    ChartPin,
)
from clusterctl.bootstrap.matrix import NEWEST_KUBERNETES, show
from clusterctl.errors import UsageError

if TYPE_CHECKING:
    from clusterctl.inventory.model import Host, Inventory

CNI_NAMES: tuple[str, ...] = ("calico", "flannel")
ADDON_MODES: tuple[str, ...] = ("device-plugin", "gpu-operator")
AddonMode = Literal["device-plugin", "gpu-operator"]
DEFAULT_CRI_SOCKET = "unix:///run/containerd/containerd.sock"
_VERSION = re.compile(r"^v?(\d+)\.(\d+)\.(\d+)$")
_HOST_PORT = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9.-]*[A-Za-z0-9])?(:\d{1,5})?$|^\[[0-9A-Fa-f:]+\](:\d{1,5})?$")
_REGISTRY = re.compile(r"^[A-Za-z0-9][A-Za-z0-9.-]*(:\d{1,5})?(/[a-z0-9][a-z0-9._/-]*)?$")


@dataclass(frozen=True)
class KubernetesVersion:
    major: int
    minor: int
    patch: int

    @property
    def text(self) -> str:
        """``v1.36.2``, as kubeadm writes ``kubernetesVersion``."""
        return f"v{self.major}.{self.minor}.{self.patch}"

    @property
    def apt_minor(self) -> str:
        return f"v{self.major}.{self.minor}"


def kubernetes_version(pin: str, *, where: str = "stack.kubernetes") -> KubernetesVersion:
    """Parse and check a Kubernetes pin: clusterctl writes kubeadm ``v1beta4``, read from 1.31 on.

    v1beta3 is removed in 1.37 and v1beta4 does not exist before 1.31, so one config API
    serves every version clusterctl supports; a pin before 1.31 is refused with the range.
    """
    match = _VERSION.match(pin.strip())
    if not match:
        raise UsageError(f"Kubernetes version {pin!r} is not MAJOR.MINOR.PATCH (for example 1.36.2).", field=where)
    version = KubernetesVersion(*(int(g) for g in match.groups()))
    if version.major != 1 or version.minor < KUBEADM_V1BETA4_FIRST_MINOR:
        raise UsageError(
            f"Kubernetes {pin} would need the kubeadm config API v1beta3, which clusterctl does not write "
            f"(v1beta3 is removed in Kubernetes 1.37). clusterctl supports Kubernetes 1.{KUBEADM_V1BETA4_FIRST_MINOR} "
            f"and later (kubeadm.k8s.io/v1beta4; checked up to {show(NEWEST_KUBERNETES)}).",
            field=where, hint=f"Pin 1.{KUBEADM_V1BETA4_FIRST_MINOR}.0 or later.",
        )
    return version


@dataclass(frozen=True)
class ChartSource:
    """Where one Helm chart comes from: its repository, or a local archive for air-gapped sites."""

    release: str
    chart: str
    version: str
    repository: str
    namespace: str
    #: A ``.tgz`` on the control machine (copied to the host running Helm); wins over ``repository``.
    archive: str | None = None

    @classmethod
    def from_pin(cls, pin: ChartPin) -> ChartSource:
        return cls(pin.release, pin.chart, pin.version, pin.repository, pin.namespace)


@dataclass(frozen=True)
class NetworkSettings:
    cni: str = "calico"
    version: str = CNI_PINS["calico"].version
    #: Base URL the pinned upstream manifests are fetched from (a site mirror for air-gapped sites).
    manifest_base: str = CNI_PINS["calico"].manifest_base
    #: Registry (``host[:port][/path]``) that serves the CNI's images instead of their upstream ones.
    image_registry: str | None = None


@dataclass(frozen=True)
class AddonSettings:
    mode: AddonMode = "device-plugin"
    charts: Mapping[str, ChartSource] = field(default_factory=dict)
    #: Registry that serves the add-ons' images (air-gapped sites).
    image_registry: str | None = None
    #: The hosts already have the NVIDIA driver and container toolkit (part 1 installs the toolkit):
    #: the GPU Operator must then leave both alone.
    host_driver: bool = True
    host_toolkit: bool = True

    def chart(self, release: str) -> ChartSource:
        return self.charts[release]


@dataclass(frozen=True)
class AlertSettings:
    #: Namespace of the PrometheusRule (kube-prometheus-stack's, usually ``monitoring``).
    namespace: str = "monitoring"
    #: Labels kube-prometheus-stack's ruleSelector matches (its default is ``release: <its release>``).
    rule_labels: Mapping[str, str] = field(default_factory=lambda: {"release": "kube-prometheus-stack"})
    gpu_temp_c: int = 85
    memory_temp_c: int = 95


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


# --- reading ---------------------------------------------------------------------------------------------


def _mapping(value: Any, where: str) -> Mapping[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise UsageError(f"must be a mapping of settings, not {type(value).__name__}.", field=where)
    return value


def _known(data: Mapping[str, Any], known: tuple[str, ...], where: str) -> None:
    from clusterctl.inventory.values import did_you_mean

    for key in data:
        if key not in known:
            raise UsageError(f"unknown field '{key}'.", field=f"{where}.{key}",
                             hint=did_you_mean(str(key), known) or "Valid fields: " + ", ".join(known) + ".")


def _text(value: Any, where: str) -> str:
    if not isinstance(value, (str, int, float)) or isinstance(value, bool) or str(value).strip() == "":
        raise UsageError(f"must be a non-empty text value, not {value!r}.", field=where)
    text = str(value).strip()
    if any(ord(c) < 32 for c in text):
        raise UsageError("must not contain control characters.", field=where)
    return text


#: A release version as projects tag it (``v3.31.4``, ``1.20.0``, ``0.17.4-rc.1``): it lands in URLs and file names.
_RELEASE = re.compile(r"^v?[0-9]+\.[0-9]+\.[0-9]+(?:[-+][0-9A-Za-z.-]+)?$")
#: A Kubernetes namespace (DNS-1123 label) and a label key's name part.
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
_LABEL_KEY = re.compile(r"^([a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$")


def _release(value: Any, where: str) -> str:
    text = _text(value, where)
    if not _RELEASE.match(text):
        raise UsageError(f"{text!r} is not a release version such as v3.31.4.", field=where,
                         hint="It becomes part of a download URL: only digits, dots and a -suffix are allowed.")
    return text


def _namespace(value: Any, where: str) -> str:
    text = _text(value, where)
    if not _DNS_LABEL.match(text):
        raise UsageError(f"{text!r} is not a Kubernetes namespace name (lower-case letters, digits and '-', "
                         "at most 63 characters).", field=where)
    return text


def _label(key: Any, value: Any, where: str) -> tuple[str, str]:
    from clusterctl.templating import LABEL_VALUE

    name = str(key)
    if not _LABEL_KEY.match(name):
        raise UsageError(f"{name!r} is not a Kubernetes label key.", field=where)
    text = _text(value, where)
    if len(text) > 63 or not LABEL_VALUE.match(text):
        raise UsageError(f"{text!r} is not a Kubernetes label value (at most 63 letters, digits, '-', '_', '.').",
                         field=where)
    return name, text


def _url(value: Any, where: str) -> str:
    text = _text(value, where)
    if not text.startswith(("http://", "https://", "file:/")):
        raise UsageError(f"must be an http(s):// or file:/ URL, got {text!r}.", field=where)
    return text.rstrip("/")


def _registry(value: Any, where: str) -> str:
    text = _text(value, where).rstrip("/")
    if not _REGISTRY.match(text):
        raise UsageError(f"{text!r} is not a registry such as registry.example.internal:5000/mirror.", field=where)
    return text


def _subnet(value: Any, where: str) -> str:
    text = _text(value, where)
    try:
        return str(ipaddress.ip_network(text, strict=True))
    except ValueError as exc:
        raise UsageError(f"is not a network in CIDR form: {exc}.", field=where, hint="Write it like 10.244.0.0/16.") \
            from None


def _choice(value: Any, choices: tuple[str, ...], where: str) -> str:
    from clusterctl.inventory.values import one_of_hint

    text = _text(value, where)
    if text not in choices:
        raise UsageError(f"unknown value {text!r}.", field=where, hint=one_of_hint(text, choices))
    return text


def _flag(value: Any, where: str) -> bool:
    if not isinstance(value, bool):
        raise UsageError(f"must be true or false, not {value!r}.", field=where)
    return value


def endpoint(value: str, where: str) -> str:
    """``host`` or ``host:port`` of the API server; the port defaults to 6443."""
    text = _text(value, where)
    if not _HOST_PORT.match(text):
        raise UsageError(f"{text!r} is not host[:port].", field=where)
    has_port = text.rsplit("]", 1)[-1].count(":") == 1 if text.startswith("[") else ":" in text
    return text if has_port else f"{text}:6443"


def _network(data: Mapping[str, Any], where: str) -> NetworkSettings:
    _known(data, ("cni", "version", "manifest_mirror", "image_registry"), where)
    cni = _choice(data.get("cni", "calico"), CNI_NAMES, f"{where}.cni")
    pin = CNI_PINS[cni]
    version = _release(data["version"], f"{where}.version") if "version" in data else pin.version
    if not version.startswith("v"):
        version = "v" + version
    base = pin.manifest_base.replace(pin.version, version)
    if "manifest_mirror" in data:
        base = _url(data["manifest_mirror"], f"{where}.manifest_mirror")
    registry = _registry(data["image_registry"], f"{where}.image_registry") if data.get("image_registry") else None
    return NetworkSettings(cni, version, base, registry)


def _charts(data: Mapping[str, Any], where: str) -> dict[str, ChartSource]:
    charts = {name: ChartSource.from_pin(pin) for name, pin in CHART_PINS.items()}
    for release, body in data.items():
        sub = f"{where}.{release}"
        if release not in charts:
            from clusterctl.inventory.values import one_of_hint

            raise UsageError(f"clusterctl installs no chart named {release!r}.", field=sub,
                             hint=one_of_hint(str(release), tuple(charts)))
        body = _mapping(body, sub)
        _known(body, ("version", "repository", "archive"), sub)
        chart = charts[release]
        if "version" in body:
            chart = replace(chart, version=_release(body["version"], f"{sub}.version"))
        if "repository" in body:
            chart = replace(chart, repository=_url(body["repository"], f"{sub}.repository"))
        if "archive" in body:
            archive = _text(body["archive"], f"{sub}.archive")
            if not archive.endswith(".tgz"):
                raise UsageError(f"{archive!r} is not a chart archive (.tgz, as 'helm pull' writes it).",
                                 field=f"{sub}.archive")
            chart = replace(chart, archive=archive)
        charts[release] = chart
    return charts


def _addons(data: Mapping[str, Any], where: str) -> AddonSettings:
    _known(data, ("mode", "charts", "image_registry", "host_driver", "host_toolkit"), where)
    mode = _choice(data.get("mode", "device-plugin"), ADDON_MODES, f"{where}.mode")
    charts = _charts(_mapping(data.get("charts"), f"{where}.charts"), f"{where}.charts")
    registry = _registry(data["image_registry"], f"{where}.image_registry") if data.get("image_registry") else None
    return AddonSettings(
        mode,  # type: ignore[arg-type]
        charts,
        registry,
        _flag(data.get("host_driver", True), f"{where}.host_driver"),
        _flag(data.get("host_toolkit", True), f"{where}.host_toolkit"),
    )


def _alerts(data: Mapping[str, Any], where: str) -> AlertSettings:
    _known(data, ("namespace", "rule_labels", "gpu_temp_c", "memory_temp_c"), where)
    out = AlertSettings()
    if "namespace" in data:
        out = replace(out, namespace=_namespace(data["namespace"], f"{where}.namespace"))
    if "rule_labels" in data:
        labels = _mapping(data["rule_labels"], f"{where}.rule_labels")
        out = replace(out, rule_labels=dict(_label(k, v, f"{where}.rule_labels.{k}") for k, v in labels.items()))
    if "gpu_temp_c" in data:
        out = replace(out, gpu_temp_c=_celsius(data["gpu_temp_c"], f"{where}.gpu_temp_c"))
    if "memory_temp_c" in data:
        out = replace(out, memory_temp_c=_celsius(data["memory_temp_c"], f"{where}.memory_temp_c"))
    return out


def _celsius(value: Any, where: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or not 30 <= value <= 130:
        raise UsageError(f"must be a whole number of degrees Celsius between 30 and 130, not {value!r}.", field=where)
    return value


def check_network(data: Mapping[str, Any], where: str) -> NetworkSettings:
    return _network(_mapping(data, where), where)


def check_addons(data: Mapping[str, Any], where: str) -> AddonSettings:
    return _addons(_mapping(data, where), where)


def check_alerts(data: Mapping[str, Any], where: str) -> AlertSettings:
    return _alerts(_mapping(data, where), where)


#: Fields of the inventory's ``bootstrap:`` section that the cluster phases read.
CLUSTER_FIELDS: tuple[str, ...] = (
    "kubernetes_version", "control_plane_endpoint", "pod_subnet", "service_subnet", "cri_socket",
    "image_repository", "cluster_name", "network", "addons", "alerts",
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
    network = _network(_mapping(data.get("network"), f"{where}.network"), f"{where}.network")
    if data.get("control_plane_endpoint"):
        cp = endpoint(data["control_plane_endpoint"], f"{where}.control_plane_endpoint")
    elif first_control_plane:
        cp = endpoint(first_control_plane, "hosts (the first control-plane host's address)")
    else:
        raise UsageError("no control-plane host: give one host the control-plane role.", field="hosts")
    pod = _subnet(data["pod_subnet"], f"{where}.pod_subnet") if data.get("pod_subnet") else \
        CNI_PINS[network.cni].default_pod_subnet
    service = _subnet(data["service_subnet"], f"{where}.service_subnet") if data.get("service_subnet") \
        else "10.96.0.0/12"
    pod_net, svc_net = ipaddress.ip_network(pod), ipaddress.ip_network(service)
    if pod_net.version == svc_net.version and pod_net.overlaps(svc_net):
        raise UsageError(f"pod subnet {pod} overlaps service subnet {service}.", field=f"{where}.pod_subnet",
                         hint="Pick two separate ranges.")
    return ClusterSettings(
        kubernetes=version,
        control_plane_endpoint=cp,
        pod_subnet=pod,
        service_subnet=service,
        cri_socket=_text(data["cri_socket"], f"{where}.cri_socket") if data.get("cri_socket") else DEFAULT_CRI_SOCKET,
        image_repository=_registry(data["image_repository"], f"{where}.image_repository")
        if data.get("image_repository") else None,
        cluster_name=_text(data.get("cluster_name", "kubernetes"), f"{where}.cluster_name"),
        network=network,
        addons=_addons(_mapping(data.get("addons"), f"{where}.addons"), f"{where}.addons"),
        alerts=_alerts(_mapping(data.get("alerts"), f"{where}.alerts"), f"{where}.alerts"),
    )


# --- per host ----------------------------------------------------------------------------------------------


def control_plane_hosts(inventory: Inventory) -> list[Host]:
    return [h for h in inventory.hosts if "control-plane" in h.roles]


def first_control_plane(inventory: Inventory) -> Host | None:
    hosts = control_plane_hosts(inventory)
    return hosts[0] if hosts else None


def host_zone(host: Host) -> str | None:
    """The host's zone: its ``zone`` variable (``clusterctl_zone`` in Ansible) or zone label."""
    variables = dict(host.vars)
    for key in ("zone", "clusterctl_zone"):
        if variables.get(key):
            return str(variables[key])
    return host.label_dict.get("topology.kubernetes.io/zone")


#: Prefix of the labels and features clusterctl owns (documented in docs/bootstrap.md).
LABEL_PREFIX = "clusterctl.dev"


def kubelet_node_labels(host: Host) -> dict[str, str]:
    """Labels the kubelet sets on its own Node at registration (``--node-labels``).

    ``topology.kubernetes.io/zone`` is one of the few ``kubernetes.io`` labels a kubelet may set
    on itself (NFD may not set it at all); the rack goes under clusterctl's own prefix.
    """
    from clusterctl.bootstrap.cluster.templating import label_value

    labels: dict[str, str] = {}
    zone = host_zone(host)
    if zone:
        labels["topology.kubernetes.io/zone"] = label_value(zone)
    if host.rack:
        labels[f"{LABEL_PREFIX}/rack"] = label_value(host.rack)
    return labels


def cluster_settings(inventory: Inventory, options: Mapping[str, Any] | None = None) -> ClusterSettings:
    """Settings for ``inventory``: its ``bootstrap:`` section (when part 1's reader keeps one), then ``options``."""
    data: dict[str, Any] = {}
    bootstrap = getattr(inventory, "bootstrap", None)
    if bootstrap is not None:
        for key in CLUSTER_FIELDS:
            value = getattr(bootstrap, key, None)
            if value is not None:
                data[key] = value
    data.update({k: v for k, v in (options or {}).items() if k in CLUSTER_FIELDS})
    pins = {h.stack.kubernetes for h in inventory.hosts if h.stack.kubernetes}
    if len(pins) > 1:
        raise UsageError(f"hosts pin different Kubernetes versions ({', '.join(sorted(pins))}); one cluster runs one.",
                         field="stack.kubernetes")
    first = first_control_plane(inventory)
    return settings_from_mapping(
        data, kubernetes_pin=next(iter(pins), None),
        first_control_plane=first.connect_address if first is not None else None,
    )
