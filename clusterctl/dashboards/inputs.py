"""What the dashboards are rendered from: one cluster's hosts, GPUs, NVLink domains and bench results."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from clusterctl.bench.model import judged_rate
from clusterctl.inventory.model import Fabric
from clusterctl.promql_text import checked_host_name as checked
from clusterctl.saved_survey import SavedSurvey


@dataclass(frozen=True)
class DashboardHost:
    name: str
    rack: str | None
    gpu_model: str | None
    gpus: tuple[int, ...]
    #: GPU indexes joined by NVLink, one tuple per domain of two or more (a survey's ``nvlink_groups``).
    nvlink_domains: tuple[tuple[int, ...], ...]
    #: GPU index -> the NIC next to it (the survey's nearest NIC), where one is known.
    nearest_nic: Mapping[int, str] = field(default_factory=dict)

    @property
    def pool(self) -> str:
        """The node pool a host counts in for utilisation: its GPU model (hosts of one model are bought,
        scheduled and billed together)."""
        return self.gpu_model or "unknown"


@dataclass(frozen=True)
class BenchLink:
    test: str
    server: str
    server_hca: str
    client: str
    client_hca: str
    gbps: float
    expected_gbps: float | None
    slow: bool
    #: A ``-b`` run: both directions add up, so it is judged against twice the line rate.
    bidirectional: bool = False

    @property
    def judged_gbps(self) -> float | None:
        return judged_rate(self.expected_gbps, self.bidirectional)


@dataclass(frozen=True)
class BenchNccl:
    op: str
    host: str
    busbw_gbs: float
    median_busbw_gbs: float | None


@dataclass(frozen=True)
class DashboardInputs:
    cluster: str
    hosts: tuple[DashboardHost, ...]
    links: tuple[BenchLink, ...] = ()
    nccl: tuple[BenchNccl, ...] = ()
    gpu_temp_c: int = 85
    memory_temp_c: int = 95
    #: The inventory's fabric thresholds (``bench.judge.fleet_limits``): the bench matrix's colours.
    limits: Fabric = field(default_factory=Fabric)

    def layouts(self) -> list[tuple[tuple[tuple[int, ...], ...], list[str]]]:
        """Hosts grouped by NVLink layout (the same domains), largest group first; hosts without NVLink
        are left out (they have no NVLink panel)."""
        groups: dict[tuple[tuple[int, ...], ...], list[str]] = {}
        for host in self.hosts:
            if host.nvlink_domains:
                groups.setdefault(host.nvlink_domains, []).append(host.name)
        return sorted(groups.items(), key=lambda item: (-len(item[1]), item[0]))

    def pools(self) -> dict[str, list[DashboardHost]]:
        out: dict[str, list[DashboardHost]] = {}
        for host in self.hosts:
            out.setdefault(host.pool, []).append(host)
        return dict(sorted(out.items()))


def checked_host_name(name: str) -> str:
    return checked(name, "a dashboard's host matcher")


def from_survey(survey: SavedSurvey, *, limit_to: Iterable[str] | None = None) -> list[DashboardHost]:
    wanted = set(limit_to) if limit_to is not None else None
    out: list[DashboardHost] = []
    for host in survey.hosts.values():
        if wanted is not None and host.name not in wanted:
            continue
        checked_host_name(host.name)
        out.append(DashboardHost(
            name=host.name, rack=host.rack, gpu_model=host.gpu_model,
            gpus=tuple(sorted(g.index for g in host.gpus)),
            nvlink_domains=tuple(tuple(sorted(d)) for d in host.nvlink_groups),
            nearest_nic={g.index: g.nearest_nics[0] for g in host.gpus if g.nearest_nics},
        ))
    return out


def bench_from_results(results: Sequence[Mapping[str, Any]]) -> tuple[list[BenchLink], list[BenchNccl]]:
    """Links of ``bench ib`` results files and per-host figures of ``bench nccl`` ones; a later file's
    figure for the same link or host replaces an earlier one (the newest measurement counts)."""
    links: dict[tuple[str, str, str, str, str], BenchLink] = {}
    nccl: dict[tuple[str, str], BenchNccl] = {}
    for data in results:
        for link in data.get("links", []):
            if link.get("gbps") is None:
                continue  # a latency run or a failed test: no bandwidth to draw
            item = BenchLink(str(link.get("test") or data.get("test") or "ib_write_bw"),
                             checked_host_name(str(link["server"])), str(link["server_hca"]),
                             checked_host_name(str(link["client"])), str(link["client_hca"]),
                             float(link["gbps"]), link.get("expected_gbps"), bool(link.get("slow")),
                             bool(link.get("bidirectional")))
            links[(item.test, item.server, item.server_hca, item.client, item.client_hca)] = item
        run = data.get("nccl")
        if isinstance(run, Mapping):
            for host_run in run.get("runs", []):
                if host_run.get("busbw_gbs") is None:
                    continue
                op = str(run.get("op") or "all_reduce")
                nccl[(op, host_run["host"])] = BenchNccl(op, checked_host_name(str(host_run["host"])),
                                                         float(host_run["busbw_gbs"]),
                                                         run.get("median_busbw_gbs"))
    return list(links.values()), list(nccl.values())

