"""DCGM exporter counters and the Prometheus alerting rules built on them.

dcgm-exporter collects only the fields listed in its counters CSV. Its default list
(``etc/default-counters.csv``) has the Xid, temperature, power, PCIe replay, NVLink bandwidth
and row-remap fields, but leaves off ECC error counts, NVLink CRC errors and the enforced power
limit, which the rules below need; clusterctl ships its own list (defaults + those) in a
ConfigMap and points the exporter at it.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass

from clusterctl.inventory.cluster_sections import AlertSettings
from clusterctl.inventory.values import join_host_port
from clusterctl.promql_text import host_alternation
from clusterctl.templating import render

RULES_PATH = "/etc/kubernetes/clusterctl/prometheus/dcgm-alerts.rules.yml"
PROMETHEUS_RULE_PATH = "/etc/kubernetes/clusterctl/prometheus/dcgm-alerts.prometheusrule.yaml"
#: The Alertmanager receiver that sends these alerts to ``remediate serve`` (merge into alertmanager.yml).
RECEIVER_PATH = "/etc/kubernetes/clusterctl/prometheus/alertmanager-receiver.yml"
RECEIVER_PORT = 9095
COUNTERS_CONFIGMAP = "dcgm-exporter-clusterctl-counters"


@dataclass(frozen=True)
class Counter:
    field: str
    type: str
    help: str
    #: In dcgm-exporter's etc/default-counters.csv (enabled without clusterctl).
    default: bool
    #: Alert rules that read it (empty: kept because the default list has it).
    needed_by: tuple[str, ...] = ()


COUNTERS: tuple[Counter, ...] = (
    Counter("DCGM_FI_DEV_SM_CLOCK", "gauge", "SM clock frequency (in MHz).", True),
    Counter("DCGM_FI_DEV_MEM_CLOCK", "gauge", "Memory clock frequency (in MHz).", True),
    Counter("DCGM_FI_DEV_MEMORY_TEMP", "gauge", "Memory temperature (in C).", True, ("GPUMemoryTemperatureHigh",)),
    Counter("DCGM_FI_DEV_GPU_TEMP", "gauge", "GPU temperature (in C).", True, ("GPUTemperatureHigh",)),
    Counter("DCGM_FI_DEV_POWER_USAGE", "gauge", "Power draw (in W).", True, ("GPUPowerAtLimit",)),
    Counter("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "counter", "Total energy consumption since boot (in mJ).", True),
    Counter("DCGM_FI_DEV_PCIE_REPLAY_COUNTER", "counter", "Total number of PCIe retries.", True,
            ("GPUPCIeReplaysRising",)),
    Counter("DCGM_FI_DEV_GPU_UTIL", "gauge", "GPU utilization (in %).", True),
    Counter("DCGM_FI_DEV_MEM_COPY_UTIL", "gauge", "Memory utilization (in %).", True),
    Counter("DCGM_FI_DEV_ENC_UTIL", "gauge", "Encoder utilization (in %).", True),
    Counter("DCGM_FI_DEV_DEC_UTIL", "gauge", "Decoder utilization (in %).", True),
    Counter("DCGM_FI_DEV_XID_ERRORS", "gauge", "Value of the last XID error encountered.", True,
            ("GPUFellOffTheBus", "GPUXidError")),
    Counter("DCGM_FI_DEV_FB_FREE", "gauge", "Frame buffer memory free (in MB).", True),
    Counter("DCGM_FI_DEV_FB_USED", "gauge", "Frame buffer memory used (in MB).", True),
    Counter("DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL", "counter",
            "Total number of NVLink bandwidth counters for all lanes.", True, ("NVLinkBandwidthZero",)),
    Counter("DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS", "counter",
            "Number of remapped rows for uncorrectable errors", True, ("GPUUncorrectableRemappedRows",)),
    Counter("DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS", "counter", "Number of remapped rows for correctable errors",
            True),
    Counter("DCGM_FI_DEV_ROW_REMAP_FAILURE", "gauge", "Whether remapping of rows has failed", True,
            ("GPURowRemapFailure",)),
    # Off in dcgm-exporter's default list; the rules need them.
    Counter("DCGM_FI_DEV_ECC_SBE_VOL_TOTAL", "counter", "Total number of single-bit volatile ECC errors.", False),
    Counter("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", "counter", "Total number of double-bit volatile ECC errors.", False,
            ("GPUDoubleBitECCErrors",)),
    Counter("DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL", "counter",
            "Total number of NVLink flow-control CRC errors.", False, ("NVLinkCRCErrors",)),
    Counter("DCGM_FI_DEV_NVLINK_CRC_DATA_ERROR_COUNT_TOTAL", "counter",
            "Total number of NVLink data CRC errors.", False),
    Counter("DCGM_FI_DEV_ENFORCED_POWER_LIMIT", "gauge", "Effective power limit the driver enforces (in W).", False,
            ("GPUPowerAtLimit",)),
)


def render_rules(settings: AlertSettings, nvlink_hosts: Iterable[str] = ()) -> str:
    """The plain rules file (``rule_files:``), for promtool and a Prometheus outside the cluster."""
    return render("bootstrap/alerts/dcgm-rules.yml.j2", **_values(settings, nvlink_hosts))


def render_prometheus_rule(settings: AlertSettings, nvlink_hosts: Iterable[str] = ()) -> str:
    return render("bootstrap/alerts/prometheusrule.yaml.j2", namespace=settings.namespace,
                  rule_labels=sorted(settings.rule_labels.items()), **_values(settings, nvlink_hosts))


def _values(settings: AlertSettings, nvlink_hosts: Iterable[str]) -> dict[str, object]:
    hosts = sorted(set(nvlink_hosts))
    return {"gpu_temp_c": settings.gpu_temp_c, "memory_temp_c": settings.memory_temp_c, "nvlink_hosts": hosts,
            "nvlink_regex": host_alternation(hosts, "an alert rule's Hostname matcher")}


@dataclass(frozen=True)
class ReceiverAuth:
    """How Alertmanager authenticates to ``remediate serve`` (paths as Alertmanager's machine has them)."""

    #: The bearer token (``--token-file`` of the receiver holds the same).
    credentials_file: str | None = None
    #: The CA that signed the receiver's certificate (``https://`` URLs).
    ca_file: str | None = None
    #: Alertmanager's client certificate and key, for a receiver started with ``--client-ca``.
    cert_file: str | None = None
    key_file: str | None = None


def render_alertmanager_receiver(url: str, auth: ReceiverAuth | None = None, *, group_wait: str = "10s") -> str:
    """The route and ``webhook_configs`` receiver that send every alert to ``remediate serve`` (for
    ``alertmanager.yml``), with ``http_config``'s bearer token file and ``tls_config`` as Alertmanager
    reads them."""
    auth = auth or ReceiverAuth()
    lines = [
        "route:",
        "  receiver: clusterctl-remediate",
        "  group_by: [alertname, Hostname]",
        f"  group_wait: {group_wait}",
        "  group_interval: 1m",
        "  repeat_interval: 4h",
        "receivers:",
        "  - name: clusterctl-remediate",
        "    webhook_configs:",
        f"      - url: {json.dumps(url)}",
        "        send_resolved: false",
        "        max_alerts: 0",
    ]
    tls = [(key, value) for key, value in (("ca_file", auth.ca_file), ("cert_file", auth.cert_file),
                                           ("key_file", auth.key_file)) if value]
    if auth.credentials_file or tls:
        lines.append("        http_config:")
    if auth.credentials_file:
        lines += ["          authorization:", "            type: Bearer",
                  f"            credentials_file: {json.dumps(auth.credentials_file)}"]
    if tls:
        lines.append("          tls_config:")
        lines += [f"            {key}: {json.dumps(value)}" for key, value in tls]
    return "\n".join(lines) + "\n"


def receiver_url(settings: AlertSettings, control_plane_address: str) -> str:
    """Where Alertmanager reaches ``remediate serve``: the inventory's, else https on the first control plane."""
    if settings.receiver_url:
        return settings.receiver_url
    return f"https://{join_host_port(control_plane_address, RECEIVER_PORT)}/webhook"


def render_receiver_for(settings: AlertSettings, control_plane_address: str) -> str:
    """The receiver snippet bootstrap writes beside its rules: the bearer token's file and the CA (https)."""
    url = receiver_url(settings, control_plane_address)
    https = url.startswith("https://")
    auth = ReceiverAuth(credentials_file=settings.receiver_token_file,
                        ca_file=settings.receiver_ca_file if https else None,
                        cert_file=settings.receiver_cert_file if https else None,
                        key_file=settings.receiver_key_file if https else None)
    head = ("# clusterctl: the Alertmanager receiver for 'clusterctl remediate serve' (docs/quarantine.md).\n"
            "# Merge into alertmanager.yml; the token file holds the same token as the receiver's --token-file.\n")
    return head + render_alertmanager_receiver(url, auth)


def render_counters_configmap(name: str, namespace: str, key: str) -> str:
    return render("bootstrap/manifests/dcgm-counters-configmap.yaml.j2", name=name, namespace=namespace, key=key,
                  counters=COUNTERS)
