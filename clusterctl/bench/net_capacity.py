"""A multi-node nccl-tests bus bandwidth judged against what the inter-node links can carry.

nccl-tests' bus bandwidth is defined so that it compares with the hardware: on several nodes, a run that
has every rail of a node busy reaches about the sum of that node's NIC bandwidths (eight 400 Gb/s NICs: about
400 GB/s less protocol overhead). The NICs come from the log itself (those NCCL's channels went through,
``via NET/IB/<n>``, else those it listed), else from the hosts' ports; each NIC's rate from the hosts' ports
(a live run's at the rate the one port-rate rule, ``rate_basis``, holds them to; ``bench report``'s from a
saved survey), else from the log (``speed=`` or the topology dump: what the port trained at, which a degraded
port lowers), else from ``--rate-gbps``. The saturated figure (the largest size) below ``LINK_FRACTION`` of
that is a warning that says which links, where they came from, and, when the figure is about one NIC's worth
on a node with several, that the traffic went through one rail. Only a shortfall is judged: NCCL's tree
algorithm on two nodes reports bus bandwidths above the network's (https://github.com/NVIDIA/nccl-tests/issues/196).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from clusterctl.bench.model import bench_finding
from clusterctl.facts.nccl_info import NcclNic
from clusterctl.facts.nccltests import NcclTestResult
from clusterctl.findings import Finding, Severity

NCCL_BELOW_LINKS = "NCCL_BELOW_LINKS"
#: A multi-node run with every rail busy reaches 85-95% of the NICs' sum; below 75% is a shortfall.
LINK_FRACTION = 0.75
#: A figure within this factor of one NIC's bandwidth is "about one rail".
ONE_RAIL_FACTOR = 1.25
_FROM_LOG = "the log's NCCL INFO lines"
#: Where ``survey_ports`` came from, in words: the speed of NICs the log names; the NICs of a log that names none.
FROM_SURVEY = ("the saved survey", "the saved survey's active RDMA ports")


@dataclass(frozen=True)
class LinkCapacity:
    """What one node's inter-node links carry per direction, and how that was found out."""

    gbs: float
    #: NICs per node counted.
    nics: int
    #: The NICs' names where known (``mlx5_2``), with their GB/s.
    per_nic: tuple[tuple[str, float], ...]
    #: Where the figures came from, in words ("the log's NCCL INFO lines", "--rate-gbps 400").
    basis: str
    #: NICs NCCL listed per node, when more than it used.
    listed: int | None = None
    nodes: int = 2


def link_capacity(result: NcclTestResult, *, nic_rate_gbps: float | None = None,
                  survey_ports: Mapping[str, Sequence[tuple[str, float]]] | None = None,
                  ports_from: tuple[str, str] = FROM_SURVEY) -> LinkCapacity | None:
    """The inter-node link capacity per node for a multi-node log, or ``None`` (one node, or nothing
    says how many NICs or how fast). ``survey_ports``: host -> (NIC name, Gb/s) of its active ports."""
    nodes = max(len(result.hosts), result.net.nnodes or 0, len(result.net.hosts))
    if nodes < 2:
        return None
    used, listed = result.net.used_nics(), result.net.listed()
    nics: tuple[NcclNic, ...] = used or listed
    extra_listed = len(listed) if used and len(listed) > len(used) else None
    # The survey's ports of a host the log names, else of any (the hosts of one job are alike).
    ports = survey_ports or {}
    named = [h for h in (*result.hosts, *result.net.hosts) if h in ports] or sorted(ports)
    survey_rates = dict(ports[named[0]]) if named else {}
    per_nic: list[tuple[str, float]] = []
    bases: set[str] = set()
    for nic in nics:  # each NIC's rate from the hosts' ports, else the log's speed, else --rate-gbps
        gbs, basis = ((survey_rates[nic.name] / 8, ports_from[0]) if nic.name in survey_rates
                      else (nic.gbs, _FROM_LOG) if nic.gbs is not None
                      else (nic_rate_gbps / 8, f"--rate-gbps {nic_rate_gbps:g}") if nic_rate_gbps else (None, ""))
        if gbs is None:
            return None
        per_nic.append((nic.name, gbs))
        bases.add(basis)
    if not nics:
        count = result.net.ofi_nics
        if count and nic_rate_gbps:
            per_nic = [(f"NIC {i}", nic_rate_gbps / 8) for i in range(count)]
            bases = {f"the log's NET/OFI line ({count} NIC(s)) and --rate-gbps {nic_rate_gbps:g}"}
        elif survey_rates:
            per_nic = [(name, rate / 8) for name, rate in sorted(survey_rates.items())]
            bases = {ports_from[1]}
        else:
            return None
    basis = " and ".join(sorted(bases))
    if nics and _FROM_LOG not in bases:
        basis = f"the NICs from the log's NCCL INFO lines, their speed from {basis}"
    return LinkCapacity(sum(gbs for _, gbs in per_nic), len(per_nic), tuple(per_nic), basis,
                        listed=extra_listed, nodes=nodes)


def link_capacity_checks(result: NcclTestResult, *, about: str, about_kind: str = "file",
                         nic_rate_gbps: float | None = None,
                         survey_ports: Mapping[str, Sequence[tuple[str, float]]] | None = None,
                         ports_from: tuple[str, str] = FROM_SURVEY) -> list[Finding]:
    """A multi-node run whose saturated bus bandwidth is well below what its links carry."""
    figure = result.largest_busbw_gbs
    capacity = link_capacity(result, nic_rate_gbps=nic_rate_gbps, survey_ports=survey_ports, ports_from=ports_from)
    if figure is None or capacity is None or capacity.gbs <= 0 or figure >= LINK_FRACTION * capacity.gbs:
        return []
    nics = ", ".join(f"{name} {gbs:g} GB/s" for name, gbs in capacity.per_nic)
    why = [f"{capacity.nics} NIC(s) per node ({nics}), from {capacity.basis}; {capacity.nodes} nodes"]
    if capacity.listed:
        why.append(f"NCCL listed {capacity.listed} NICs but its channels went through {capacity.nics}")
    one_nic = max(gbs for _, gbs in capacity.per_nic)
    rails = max(capacity.nics, capacity.listed or 0)
    if rails > 1 and figure <= one_nic * ONE_RAIL_FACTOR:
        why.append(f"{figure:.1f} GB/s is about one NIC's bandwidth: the traffic went through one rail")
    test = result.test or "nccl-tests"
    return [bench_finding(
        Severity.WARNING, NCCL_BELOW_LINKS, about,
        f"{test} bus bandwidth {figure:.1f} GB/s at the largest size is {figure / capacity.gbs:.0%} of the "
        f"{capacity.gbs:.1f} GB/s its inter-node links carry per direction ({'; '.join(why)})",
        about_kind=about_kind,
        fix="Check that every rail is up and used (NCCL_IB_HCA, `clusterctl bench ib`), GPUDirect RDMA "
            "(`via NET/IB/<n>/GDRDMA` in the log), ACS and the IOMMU on the PCIe path, and that NCCL's options "
            "reached every rank (mpirun -x).",
        measured_gbs=figure, links_gbs=round(capacity.gbs, 3), nics_per_node=capacity.nics, nodes=capacity.nodes,
        basis=capacity.basis)]
