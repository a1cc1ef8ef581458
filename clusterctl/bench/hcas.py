"""Which HCAs to test on each host, and their RoCE v2 GID index.

From a saved survey (``--survey FILE``, JSON or YAML) when given, else from ``ibv_devinfo -v``
on each host; a host where neither works falls back to the inventory's ``fabric.hcas``
(without GID index, so RoCE tests there use perftest's default GID).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from clusterctl.bench.model import HcaInfo
from clusterctl.errors import UsageError
from clusterctl.facts.model import RDMADevice
from clusterctl.fanout import Runner
from clusterctl.inventory.model import Host
from clusterctl.transport.base import Transport


def active_hcas(devices: Sequence[RDMADevice]) -> list[HcaInfo]:
    """One entry per device with an active port (its first active port)."""
    out: list[HcaInfo] = []
    for device in devices:
        port = next((p for p in device.ports if p.state == "PORT_ACTIVE"), None)
        if port is None:
            continue
        out.append(HcaInfo(name=device.hca, link_layer=port.link_layer, rate_gbps=port.rate_gbps,
                           gid_index=port.roce_v2_gid_index if port.link_layer == "Ethernet" else None))
    return out


def from_inventory(host: Host) -> list[HcaInfo]:
    layer = "Ethernet" if host.fabric.type == "roce" else "InfiniBand"
    return [HcaInfo(name=n, link_layer=layer, rate_gbps=host.fabric.rate_gbps) for n in host.fabric.hcas]


def _expected_only(host: Host, found: list[HcaInfo]) -> list[HcaInfo]:
    """Keep the inventory's compute HCAs when it names them (storage cards stay out of the matrix)."""
    if not host.fabric.hcas:
        return found
    return [h for h in found if h.name in host.fabric.hcas]


def discover_hcas(runner: Runner, hosts: Sequence[Host]) -> tuple[dict[str, list[HcaInfo]], dict[str, str]]:
    """(host -> active HCAs, host -> warning) read with ``ibv_devinfo -v``."""
    from clusterctl.facts.rdma import parse_ibv_devinfo

    def task(transport: Transport) -> list[HcaInfo]:
        result = transport.run("ibv_devinfo -v", timeout=30)
        if not result.ok:
            raise UsageError(f"ibv_devinfo -v exited {result.exit_code}: {result.stderr_tail(1)}")
        return active_hcas(parse_ibv_devinfo(result.stdout))

    fleet = runner.run_task(hosts, task, label="bench: ibv_devinfo -v", timeout_s=60)
    found: dict[str, list[HcaInfo]] = {}
    warnings: dict[str, str] = {}
    for outcome in fleet.outcomes:
        if outcome.ok and outcome.value:
            found[outcome.host.name] = _expected_only(outcome.host, outcome.value)
        else:
            found[outcome.host.name] = from_inventory(outcome.host)
            why = outcome.failure.describe() if outcome.failure else "no active HCA"
            warnings[outcome.host.name] = f"HCAs from the inventory ({why})"
    return found, warnings


def _devices_in(node: Any) -> list[dict[str, Any]]:
    """Every mapping that looks like an RDMA device (``hca`` + ``ports``) under ``node``."""
    if isinstance(node, Mapping):
        if "hca" in node and isinstance(node.get("ports"), list):
            return [dict(node)]
        return [d for v in node.values() for d in _devices_in(v)]
    if isinstance(node, list):
        return [d for v in node for d in _devices_in(v)]
    return []


def _host_records(data: Any) -> dict[str, Any]:
    hosts = data.get("hosts") if isinstance(data, Mapping) else data
    if isinstance(hosts, Mapping):
        return {str(k): v for k, v in hosts.items()}
    if isinstance(hosts, list):
        out = {}
        for record in hosts:
            if isinstance(record, Mapping):
                name = record.get("host") or record.get("name")
                if name:
                    out[str(name)] = record
        return out
    return {}


def hcas_from_survey(path: str, hosts: Sequence[Host]) -> dict[str, list[HcaInfo]]:
    """Active HCAs per host from a saved survey report (``clusterctl survey -o json > FILE``)."""
    text = _read(path)
    try:
        if path.endswith((".yaml", ".yml")):
            import yaml

            data = yaml.safe_load(text)
        else:
            data = json.loads(text)
    except Exception as exc:
        raise UsageError(f"cannot read the survey: {exc}", file=path) from None
    records = _host_records(data)
    out: dict[str, list[HcaInfo]] = {}
    for host in hosts:
        devices = _devices_in(records.get(host.name, {}))
        hcas: list[HcaInfo] = []
        for device in devices:
            ports = [p for p in device["ports"] if isinstance(p, Mapping) and p.get("state") == "PORT_ACTIVE"]
            if not ports:
                continue
            port = ports[0]
            layer = str(port.get("link_layer") or "InfiniBand")
            gid = port.get("roce_v2_gid_index")
            hcas.append(HcaInfo(name=str(device["hca"]), link_layer=layer,
                                rate_gbps=float(port["rate_gbps"]) if port.get("rate_gbps") else None,
                                gid_index=int(gid) if gid is not None and layer == "Ethernet" else None))
        out[host.name] = _expected_only(host, hcas) if hcas else from_inventory(host)
    return out


def _read(path: str) -> str:
    try:
        return Path(path).read_text()
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc.strerror}", file=path) from None

