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


def _expected_only(host: Host, found: list[HcaInfo]) -> list[HcaInfo]:
    """Keep the inventory's compute HCAs when it names them (storage cards stay out of the matrix)."""
    return [h for h in found if h.name in host.fabric.hcas] if host.fabric.hcas else found


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
        if outcome.ok and outcome.value:
            found[outcome.host.name] = _expected_only(outcome.host, outcome.value)
        else:
            found[outcome.host.name] = from_inventory(outcome.host)
            why = outcome.failure.describe() if outcome.failure else "no active HCA"
            warnings[outcome.host.name] = f"HCAs from the inventory ({why})"
    return found, warnings


def hcas_from_survey(path: str, hosts: Sequence[Host]) -> dict[str, list[HcaInfo]]:
    """Active HCAs per host from a saved survey report (``clusterctl survey --save FILE``).

    Read with the survey's own loader, so the report is checked against its schema and a
    host the survey could not read falls back to the inventory's HCAs.
    """
    saved = load_saved_survey(path)
    out: dict[str, list[HcaInfo]] = {}
    for host in hosts:
        record = saved.hosts.get(host.name)
        nics = record.nics if record is not None else ()
        hcas = active_hcas((n.name, n.ports) for n in nics)
        out[host.name] = _expected_only(host, hcas) if hcas else from_inventory(host)
    return out


def choose_hcas(runner: Runner, hosts: Sequence[Host], *, survey: str | None, given: Sequence[str] = (),
                discover: bool = True) -> tuple[dict[str, list[HcaInfo]], dict[str, str]]:
    """Where each host's HCAs come from: a saved survey, else the inventory when ``--hca`` names
    them or nothing may be read from hosts (a dry run), else ``ibv_devinfo -v`` on the hosts.

    Returns (host -> HCAs, host -> warning).
    """
    if survey:
        return hcas_from_survey(survey, hosts), {}
    if given or not discover:
        return {h.name: from_inventory(h) for h in hosts}, {}
    return discover_hcas(runner, hosts)
