"""Which HCAs to test on each host, and their RoCE v2 GID index.

From a saved survey (``--survey FILE``, written by ``clusterctl survey --save``) when given, else
from ``ibv_devinfo -v``
on each host; a host where neither works falls back to the inventory's ``fabric.hcas``
(without GID index, so RoCE tests there use perftest's default GID).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from clusterctl.bench.model import HcaInfo
from clusterctl.errors import UsageError
from clusterctl.facts.model import RDMAPort
from clusterctl.facts.rdma import RDMA
from clusterctl.fanout import Runner
from clusterctl.inventory.fabric import rdma_link_layer
from clusterctl.inventory.model import Host
from clusterctl.saved_survey import load_saved_survey
from clusterctl.survey.collect import read_fact
from clusterctl.transport.base import Transport


def active_hcas(cards: Iterable[tuple[str, Sequence[RDMAPort]]]) -> list[HcaInfo]:
    """One entry per card (name, ports) with an active port: its first active port."""
    found: list[HcaInfo] = []
    for name, ports in cards:
        port = next((p for p in ports if p.state == "PORT_ACTIVE"), None)
        if port is not None:
            found.append(HcaInfo(name=name, link_layer=port.link_layer, rate_gbps=port.rate_gbps,
                                 gid_index=port.roce_v2_gid_index if port.link_layer == "Ethernet" else None))
    return found


def from_inventory(host: Host) -> list[HcaInfo]:
    layer = rdma_link_layer(host.fabric.type)
    return [HcaInfo(name=n, link_layer=layer, rate_gbps=host.fabric.rate_gbps) for n in host.fabric.hcas]


def _chosen(host: Host, found: list[HcaInfo] | None, why: str, warnings: dict[str, str]) -> list[HcaInfo]:
    """The active HCAs ``found``, the inventory's compute ones where it names them (storage cards stay out of the
    matrix); else the inventory's, with ``why`` in ``warnings``: the one rule for a live read and a saved survey."""
    if found:
        return [h for h in found if h.name in host.fabric.hcas] if host.fabric.hcas else found
    warnings[host.name] = f"HCAs from the inventory ({why})"
    return from_inventory(host)


def discover_hcas(runner: Runner, hosts: Sequence[Host]) -> tuple[dict[str, list[HcaInfo]], dict[str, str]]:
    """(host -> active HCAs, host -> warning) read as survey reads them: ``ibv_devinfo -v``, else ``ibstat``."""
    def task(transport: Transport) -> list[HcaInfo]:
        devices, missing = read_fact(transport, RDMA)
        if missing is not None:
            raise UsageError(f"{RDMA.command}: {missing.reason}")
        return active_hcas((d.hca, d.ports) for d in devices)

    fleet = runner.run_task(hosts, task, label="bench: ibv_devinfo -v", timeout_s=60)
    found: dict[str, list[HcaInfo]] = {}
    warnings: dict[str, str] = {}
    for outcome in fleet.outcomes:
        why = outcome.failure.describe() if outcome.failure else "no active HCA"
        found[outcome.host.name] = _chosen(outcome.host, outcome.value if outcome.ok else None, why, warnings)
    return found, warnings


def hcas_from_survey(path: str, hosts: Sequence[Host]) -> tuple[dict[str, list[HcaInfo]], dict[str, str]]:
    """Active HCAs per host from a saved survey report (``clusterctl survey --save FILE``), and warnings.

    Read with the survey's own loader, so the report is checked against its schema and a
    host the survey could not read falls back to the inventory's HCAs.
    """
    saved = load_saved_survey(path)
    found: dict[str, list[HcaInfo]] = {}
    warnings: dict[str, str] = {}
    for host in hosts:
        record = saved.hosts.get(host.name)
        hcas = active_hcas((n.name, n.ports) for n in record.nics) if record else None
        why = "no active HCA in" if record else "not in"
        found[host.name] = _chosen(host, hcas, f"{why} the saved survey {path}", warnings)
    return found, warnings


def choose_hcas(runner: Runner, hosts: Sequence[Host], *, survey: str | None, given: Sequence[str] = (),
                discover: bool = True) -> tuple[dict[str, list[HcaInfo]], dict[str, str]]:
    """Where each host's HCAs come from: a saved survey, else the inventory when ``--hca`` names
    them or nothing may be read from hosts (a dry run), else ``ibv_devinfo -v`` on the hosts.

    Returns (host -> HCAs, host -> warning).
    """
    if survey:
        return hcas_from_survey(survey, hosts)
    if given or not discover:
        return {h.name: from_inventory(h) for h in hosts}, {}
    return discover_hcas(runner, hosts)
