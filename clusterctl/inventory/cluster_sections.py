"""The cluster sections of an inventory's ``bootstrap:`` (network, addons, alerts): types, defaults, checks.

Checked when the inventory is read, so an error names its file and line
(``clusterctl.inventory.bootstrap_section``), and again by the cluster phases'
``clusterctl.bootstrap.cluster.settings``, which builds the run's settings from them. Plain values in
(as YAML gives them), ``UsageError`` naming the field out; defaults from ``clusterctl.inventory.pins``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Any, Literal, TypeVar

from clusterctl.errors import BadValue, UsageError
from clusterctl.inventory import values
from clusterctl.inventory.pins import CHART_PINS, CNI_PINS, ChartSource
from clusterctl.inventory.values import did_you_mean, fields_hint, one_of_hint

#: The site's own: ``network.cni: none`` (a CNI the site installs itself: Cilium, a vendor's) and
#: ``addons.mode: none`` (GPU add-ons the site installs itself): bootstrap and upgrade leave them alone
#: (``clusterctl.bootstrap.cluster.settings.left_to_site``).
SITE_OWN = "none"
CNI_NAMES: tuple[str, ...] = ("calico", "flannel", SITE_OWN)
ADDON_MODES: tuple[str, ...] = ("device-plugin", "gpu-operator", SITE_OWN)
AddonMode = Literal["device-plugin", "gpu-operator", "none"]
T = TypeVar("T")


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
    #: Where Alertmanager reaches ``remediate serve`` (None: https on the first control plane, port 9095).
    receiver_url: str | None = None
    #: Alertmanager's copy of the receiver's bearer token (``http_config.authorization.credentials_file``).
    receiver_token_file: str = "/etc/alertmanager/clusterctl-remediate.token"
    #: The CA that signed the receiver's certificate, on Alertmanager's machine (None: the system's CAs).
    receiver_ca_file: str | None = "/etc/alertmanager/clusterctl-remediate-ca.crt"
    #: Alertmanager's client certificate and key, for a receiver started with --client-ca (mutual TLS).
    receiver_cert_file: str | None = None
    receiver_key_file: str | None = None


def settings_mapping(value: Any, where: str) -> Mapping[str, Any]:
    """A section as written: absent (None) is empty (every default), anything but a mapping is refused."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise UsageError(f"must be a mapping of settings, not {type(value).__name__}.", field=where)
    return value


def _known(data: Mapping[str, Any], known: tuple[str, ...], where: str) -> None:
    for key in data:
        if key not in known:
            raise UsageError(f"unknown field '{key}'.", field=f"{where}.{key}",
                             hint=did_you_mean(str(key), known) or fields_hint(known))


def text_setting(value: Any, where: str) -> str:
    text = by_rule(values.text, value.strip() if isinstance(value, str) else value, where)
    if not text:
        raise UsageError(f"must be a non-empty text value, not {values.describe(value)}.", field=where)
    return text


def by_rule(check: Callable[[Any, str], T], value: Any, where: str) -> T:
    """``value`` read by the inventory's one rule for its kind (``values``), whose sentence names the
    setting: the same words in every section, here an error naming the field ``where``."""
    try:
        return check(value, where.rsplit(".", 1)[-1])
    except BadValue as exc:
        raise UsageError(exc.message, field=where, hint=exc.hint) from None


def _choice(value: Any, choices: tuple[str, ...], where: str) -> str:
    text = text_setting(value, where)
    if text not in choices:
        raise UsageError(f"unknown value {text!r}.", field=where, hint=one_of_hint(text, choices))
    return text


#: A release version as projects tag it (``v3.31.7``, ``1.20.0``, ``0.17.4-rc.1``): it lands in URLs and file names.
_RELEASE = re.compile(r"^v?[0-9]+\.[0-9]+\.[0-9]+(?:[-+][0-9A-Za-z.-]+)?$")
#: A Kubernetes namespace (DNS-1123 label) and a label key (optional DNS prefix, then a name).
DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
_LABEL_KEY = re.compile(r"^([a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$")


def _release(value: Any, where: str) -> str:
    text = text_setting(value, where)
    if not _RELEASE.match(text):
        raise UsageError(f"{text!r} is not a release version such as v3.31.7.", field=where,
                         hint="It becomes part of a download URL: only digits, dots and a -suffix are allowed.")
    return text


def namespace_name(value: Any, where: str) -> str:
    text = text_setting(value, where)
    if not DNS_LABEL.match(text):
        raise UsageError(f"{text!r} is not a Kubernetes namespace name (lower-case letters, digits and '-', "
                         "at most 63 characters).", field=where)
    return text


def _label(key: Any, value: Any, where: str) -> tuple[str, str]:
    from clusterctl.templating import LABEL_VALUE

    name = str(key)
    if not _LABEL_KEY.match(name):
        raise UsageError(f"{name!r} is not a Kubernetes label key.", field=where)
    text = text_setting(value, where)
    if len(text) > 63 or not LABEL_VALUE.match(text):
        raise UsageError(f"{text!r} is not a Kubernetes label value (at most 63 letters, digits, '-', '_', '.').",
                         field=where)
    return name, text


def endpoint_setting(value: str, where: str) -> str:
    """``host`` or ``host:port`` of the API server; the port defaults to 6443."""
    host, port = by_rule(values.host_port, text_setting(value, where), where)
    return values.join_host_port(host, port or 6443)


def _optional_registry(data: Mapping[str, Any], where: str) -> str | None:
    return by_rule(values.registry, data["image_registry"], f"{where}.image_registry") \
        if data.get("image_registry") else None


def _left_to_site(data: Mapping[str, Any], key: str, what: str, where: str, instead: str) -> None:
    """``key: none`` leaves ``what`` to the site: every other field of the section has nothing to set."""
    extra = [other for other in data if other != key]
    if extra:
        raise UsageError(f"{key}: {SITE_OWN} leaves {what} to the site, so clusterctl installs none and "
                         f"'{extra[0]}' has nothing to set.", field=f"{where}.{extra[0]}",
                         hint=f"Remove {where}.{extra[0]}, or {instead}.")


def check_network(section: Any, where: str) -> NetworkSettings:
    data = settings_mapping(section, where)
    _known(data, ("cni", "version", "manifest_mirror", "image_registry"), where)
    cni = _choice(data.get("cni", "calico"), CNI_NAMES, f"{where}.cni")
    if cni == SITE_OWN:
        _left_to_site(data, "cni", "the CNI", where,
                      f"name the CNI clusterctl should install ({', '.join(CNI_NAMES[:-1])})")
        return NetworkSettings(SITE_OWN, "", "", None)
    pin = CNI_PINS[cni]
    version = _release(data["version"], f"{where}.version") if "version" in data else pin.version
    if not version.startswith("v"):
        version = "v" + version
    base = pin.manifest_base.replace(pin.version, version)
    if "manifest_mirror" in data:
        base = by_rule(values.url, data["manifest_mirror"], f"{where}.manifest_mirror")
    registry = _optional_registry(data, where)
    return NetworkSettings(cni, version, base, registry)


def _charts(data: Mapping[str, Any], where: str) -> dict[str, ChartSource]:
    charts = dict(CHART_PINS)
    for release, body in data.items():
        sub = f"{where}.{release}"
        if release not in charts:
            raise UsageError(f"clusterctl installs no chart named {release!r}.", field=sub,
                             hint=one_of_hint(str(release), tuple(charts)))
        body = settings_mapping(body, sub)
        _known(body, ("version", "repository", "archive"), sub)
        chart = charts[release]
        if "version" in body:
            chart = replace(chart, version=_release(body["version"], f"{sub}.version"))
        if "repository" in body:
            chart = replace(chart, repository=by_rule(values.url, body["repository"], f"{sub}.repository"))
        if "archive" in body:
            archive = text_setting(body["archive"], f"{sub}.archive")
            if not archive.endswith(".tgz"):
                raise UsageError(f"{archive!r} is not a chart archive (.tgz, as 'helm pull' writes it).",
                                 field=f"{sub}.archive")
            chart = replace(chart, archive=archive)
        charts[release] = chart
    return charts


def check_addons(section: Any, where: str) -> AddonSettings:
    data = settings_mapping(section, where)
    _known(data, ("mode", "charts", "image_registry", "host_driver", "host_toolkit"), where)
    mode = _choice(data.get("mode", "device-plugin"), ADDON_MODES, f"{where}.mode")
    if mode == SITE_OWN:
        _left_to_site(data, "mode", "the GPU add-ons", where,
                      f"pick what clusterctl installs ({', '.join(ADDON_MODES[:-1])})")
    charts = _charts(settings_mapping(data.get("charts"), f"{where}.charts"), f"{where}.charts")
    registry = _optional_registry(data, where)
    return AddonSettings(
        mode,  # type: ignore[arg-type]
        charts,
        registry,
        by_rule(values.boolean, data.get("host_driver", True), f"{where}.host_driver"),
        by_rule(values.boolean, data.get("host_toolkit", True), f"{where}.host_toolkit"),
    )


def check_alerts(section: Any, where: str) -> AlertSettings:
    data = settings_mapping(section, where)

    def rule_labels(value: Any, at: str) -> dict[str, str]:
        return dict(_label(k, v, f"{at}.{k}") for k, v in settings_mapping(value, at).items())

    def receiver_url(value: Any, at: str) -> str:  # where Alertmanager posts: the web, as alertmanager-config's
        return by_rule(partial(values.url, local_files=False), value, at)

    def optional_path(value: Any, at: str) -> str | None:
        return None if value is None else _absolute_path(value, at)

    #: Each field of the section and its reader (the order errors are found in).
    readers: dict[str, Callable[[Any, str], Any]] = {
        "namespace": namespace_name, "rule_labels": rule_labels, "gpu_temp_c": _celsius, "memory_temp_c": _celsius,
        "receiver_url": receiver_url, "receiver_token_file": _absolute_path, "receiver_ca_file": optional_path,
        "receiver_cert_file": _absolute_path, "receiver_key_file": _absolute_path}
    _known(data, tuple(readers), where)
    out = AlertSettings(**{key: read(data[key], f"{where}.{key}") for key, read in readers.items() if key in data})
    if (out.receiver_cert_file is None) != (out.receiver_key_file is None):
        raise UsageError("receiver_cert_file and receiver_key_file go together (Alertmanager's client certificate "
                         "and its key).", field=f"{where}.receiver_cert_file")
    return out


def _absolute_path(value: Any, where: str) -> str:
    text = text_setting(value, where)
    if not text.startswith("/"):
        raise UsageError(f"must be an absolute path on Alertmanager's machine, got {text!r}.", field=where)
    return text


def _celsius(value: Any, where: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or not 30 <= value <= 130:
        raise UsageError(f"must be a whole number of degrees Celsius between 30 and 130, not {values.describe(value)}.",
                         field=where)
    return value

