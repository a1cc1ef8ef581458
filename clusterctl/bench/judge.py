"""Thresholds from the inventory's fabric, and the findings for each link result.

Defaults (``clusterctl.inventory.model.Fabric``): a link within one rack must reach 90% of
the line rate, one across racks 60% (uplinks are usually oversubscribed); latency above
15 us is a warning, above 50 us an error. An inventory overrides them per host or group.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from clusterctl.bench.model import HcaInfo, LinkResult, bench_finding
from clusterctl.bench.plausible import bandwidth_check, consistency_checks, link_type_check
from clusterctl.facts.perftest import PerftestResult
from clusterctl.findings import Finding, Severity
from clusterctl.inventory.fabric import INFINIBAND
from clusterctl.inventory.model import Fabric, Host
from clusterctl.survey.checks.host import CardPort, rate_basis


def line_rate(ends: Iterable[tuple[Host, HcaInfo]], usual: Mapping[CardPort, float]) -> float | None:
    """What the slower end of a link should reach: each end's HCA at the one port-rate rule's rate (``rate_basis``:
    the inventory's, else its peers' ``usual`` rate by ``(name, None)``, else, too few for a majority, its own)."""
    rates = [judged[1] for host, hca in ends if (judged := rate_basis(
        host.fabric, hca.name, hca.link_layer, usual.get((hca.name, None)) or hca.rate_gbps))]
    return min(rates, default=None)


def placement(server: Host, client: Host) -> tuple[bool | None, float]:
    """(same rack?, required fraction of line rate). Unknown racks count as one rack."""
    same = None if server.rack is None or client.rack is None else server.rack == client.rack
    if same is False:
        return same, min(server.fabric.across_racks_min, client.fabric.across_racks_min)
    return same, max(server.fabric.within_rack_min, client.fabric.within_rack_min)


def fleet_limits(hosts: Sequence[Host]) -> Fabric:
    """The thresholds one figure is judged by where it stands for any link of these hosts (a saved log that
    does not say which hosts or racks it joined, a dashboard's colours): what ``placement`` takes for two of
    them (the highest within-rack share, the lowest across racks), the lowest line rate and latency limits;
    else the defaults."""
    if not hosts:
        return Fabric()
    return Fabric(rate_gbps=min((h.fabric.rate_gbps for h in hosts if h.fabric.rate_gbps), default=None),
                  within_rack_min=max(h.fabric.within_rack_min for h in hosts),
                  across_racks_min=min(h.fabric.across_racks_min for h in hosts),
                  latency_warn_us=min(h.fabric.latency_warn_us for h in hosts),
                  latency_error_us=min(h.fabric.latency_error_us for h in hosts))


def saved_link(result: PerftestResult, *, rate_gbps: float | None, limits: Fabric) -> LinkResult:
    """A saved log as the link ``judge_link`` judges: the log's figure, banner and failure; the line rate
    ``rate_gbps``, else the one ``rate_basis`` holds the banner's device and link type to (``limits``' fabric:
    a log does not name its port's rate; without either, the checks against it are skipped); its racks
    unknown, so held to ``limits.within_rack_min`` as ``placement`` holds unknown racks."""
    # The banner's link type is the link layer ibv_devinfo names (``Ethernet``), but for ``IB``.
    link_layer = INFINIBAND if result.link_type == "IB" else result.link_type or ""
    basis = rate_basis(limits, result.device or "", link_layer, None)
    rate = rate_gbps or (basis[1] if basis else None)
    failure = result.errors[0] if result.errors else None if result.ok or result.side == "server" else (
        "no result table")
    return LinkResult(round=0, server="", client="", server_hca="", client_hca="", port=0,
                      test=result.test or "perftest", gbps=result.peak_gbps, latency_us=result.typical_latency_us,
                      error=failure, bidirectional=result.bidirectional, link_type=result.link_type,
                      expected_gbps=rate, min_fraction=limits.within_rack_min, client_result=result)


def judge_link(result: LinkResult, limits: Fabric, *, about: str = "", about_kind: str = "subject") -> list[Finding]:
    """The findings for one perftest link against ``limits`` (its fabric type and latency limits), the one judge of
    ``bench ib``'s live links (``limits``: the server's fabric) and ``bench report``'s saved logs (``saved_link``;
    ``about``: the file): failed, slow, high latency, figures that cannot be true (``clusterctl.bench.plausible``)."""
    subject = about or f"{result.server}/{result.server_hca} <-> {result.client}/{result.client_hca}"
    if result.error is not None:
        return [bench_finding(Severity.ERROR, "LINK_FAILED", subject, f"{result.test} failed: {result.error}",
                              about_kind=about_kind)]
    client = result.client_result
    findings: list[Finding] = [
        *bandwidth_check(result.gbps, line_rate_gbps=result.expected_gbps, bidirectional=result.bidirectional,
                         test=result.test, about=subject, about_kind=about_kind,
                         printed_unit=client.printed_unit if client else None),
        *link_type_check(result.link_type, fabric_type=limits.type, about=subject, about_kind=about_kind),
        *(consistency_checks(client, about=subject, about_kind=about_kind) if client else ()),
    ]
    if result.slow and result.fraction is not None and result.judged_gbps and result.min_fraction is not None:
        rate, need = result.judged_gbps, result.judged_gbps * result.min_fraction
        where = {True: "within a rack", False: "across racks", None: "(racks unknown)"}[result.same_rack]
        both = " (both directions)" if result.bidirectional else ""
        findings.append(bench_finding(Severity.ERROR, "LINK_SLOW", subject, f"{result.gbps:.1f} Gb/s is "
                                      f"{result.fraction:.0%} of the {rate:g} Gb/s line rate{both}; a link {where} "
                                      f"must reach {result.min_fraction:.0%} ({need:.1f} Gb/s)", about_kind=about_kind))
    high = latency_high(result.latency_us, limits)
    if high is not None:
        severity, limit = high
        findings.append(bench_finding(severity, "LATENCY_HIGH", subject,
                                      f"typical latency {result.latency_us:.2f} us is above {limit:g} us",
                                      about_kind=about_kind))
    return findings


def latency_high(latency_us: float | None, limits: Fabric) -> tuple[Severity, float] | None:
    """A typical latency above the fabric's limits: (ERROR, the error limit), (WARNING, the warning limit); None
    within them. ``LATENCY_HIGH`` says it, and a link over the warning counts against its hosts (stragglers)."""
    if latency_us is None or latency_us <= limits.latency_warn_us:
        return None
    return (Severity.ERROR, limits.latency_error_us) if latency_us > limits.latency_error_us else \
        (Severity.WARNING, limits.latency_warn_us)
