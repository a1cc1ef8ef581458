"""The survey as one call: collect facts on the hosts, derive topologies, judge, advise."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from functools import partial

from clusterctl.errors import ParseError, UsageError
from clusterctl.facts.topo import parse_topo
from clusterctl.fanout import FleetResult, Runner
from clusterctl.findings import Finding, Severity
from clusterctl.inventory.model import Host
from clusterctl.survey.advice import AdviceHost, LayoutAdvice, advise
from clusterctl.survey.checks.host import MadeOnce, SurveyedHost
from clusterctl.survey.collect import GPUReader, HostFacts, collect_fleet
from clusterctl.survey.findings import fleet_findings
from clusterctl.survey.report import HostReport, SurveyReport
from clusterctl.survey.topology import build_topology
from clusterctl.utc import utc_stamp


def host_state(host: Host, facts: HostFacts | None, failure: str | None = None, *,
               analysed: MadeOnce | None = None) -> SurveyedHost:
    """One host's facts with its topology analysed. ``analysed`` lets hosts whose matrices are one
    parsed object share one analysis: alike hosts print the same ``nvidia-smi topo -m`` and get the
    same matrix object (``facts.shared``), and the analysis is a pure function of it."""
    matrix = facts.topology if facts else None
    topology = None
    if matrix is not None:
        topology = (analysed or MadeOnce()).get(id(matrix), partial(build_topology, matrix), holding=matrix)
    return SurveyedHost(host=host, facts=facts, topology=topology, failure=failure)


def states_from_fleet(fleet: FleetResult[HostFacts]) -> list[SurveyedHost]:
    analysed = MadeOnce()
    return [host_state(outcome.host, outcome.value if outcome.ok else None,
                       outcome.failure.describe() if outcome.failure else None, analysed=analysed)
            for outcome in fleet.outcomes]


def _usable_nics(state: SurveyedHost, slow: set[str]) -> set[str] | None:
    devices = state.facts.rdma if state.facts else None
    if devices is None:
        return None
    return {d.hca for d in devices if any(p.state == "PORT_ACTIVE" for p in d.ports) and d.hca not in slow}


def _slow_nics(findings: Sequence[Finding]) -> dict[str, set[str]]:
    """Host -> HCAs with an error-level NIC_SLOW finding: a rank bound to one drags every ring it is in."""
    slow: dict[str, set[str]] = {}
    for f in findings:
        if f.code == "NIC_SLOW" and f.severity is Severity.ERROR and f.evidence.get("hca"):
            slow.setdefault(f.host or "", set()).add(str(f.evidence["hca"]))
    return slow


def advise_states(states: Sequence[SurveyedHost], tp: int, pp: int = 1, world_size: int | None = None,
                  findings: Sequence[Finding] = ()) -> LayoutAdvice:
    slow = _slow_nics(findings)
    hosts = [
        AdviceHost(s.name, s.host.rack, s.topology, _usable_nics(s, slow.get(s.name, set())))
        for s in states
        if s.topology is not None and s.topology.gpus
    ]
    advice = advise(hosts, tp, pp, world_size)
    notes = tuple(f"{host}: {', '.join(sorted(hcas))} left out of the rank-to-NIC choice (NIC_SLOW); its ranks "
                  "use the next nearest NIC until the link is fixed." for host, hcas in sorted(slow.items()))
    return replace(advice, explanation=advice.explanation + notes) if notes else advice


def build_report(states: Sequence[SurveyedHost], *, inventory: str | None = None, tp: int | None = None, pp: int = 1,
                 world_size: int | None = None, source: str = "survey") -> SurveyReport:
    findings = fleet_findings(states)
    if source == "topo-show":
        # A pasted file's partial read is shown as the input's own warnings, line by line, not as a host finding.
        findings = [f for f in findings if f.code != "FACT_PARTIAL"]
    # Grouped once (order kept): filtering all findings for each host is quadratic on big fleets.
    by_host: dict[str, list[Finding]] = {}
    for f in findings:
        by_host.setdefault(f.host or "", []).append(f)
    reports = tuple(HostReport(s, tuple(by_host.get(s.name, ()))) for s in states)
    advice = advise_states(states, tp, pp, world_size, findings) if tp is not None else None
    return SurveyReport(reports, tuple(findings), utc_stamp(), inventory, advice, source)


def run_survey(runner: Runner, hosts: Sequence[Host], *, inventory: str | None = None, tp: int | None = None,
               pp: int = 1, world_size: int | None = None, gpu_reader: GPUReader | None = None) -> SurveyReport:
    """Survey ``hosts`` (one fan-out task each) and judge them against each other."""
    fleet = collect_fleet(runner, hosts, gpu_reader=gpu_reader)
    return build_report(states_from_fleet(fleet), inventory=inventory, tp=tp, pp=pp, world_size=world_size)


def topo_show_report(text: str, *, name: str = "input", tp: int | None = None, pp: int = 1) -> SurveyReport:
    """A one-host report from a saved or pasted ``nvidia-smi topo -m``.

    An unparsable input is the user's to fix: ``UsageError`` (exit 2), naming the line.
    """
    try:
        matrix = parse_topo(text)
    except ParseError as exc:
        raise UsageError(f"not an nvidia-smi topo -m output: {exc.reason}", file=name, line=exc.line) from exc
    facts = HostFacts(values={"topology": matrix}, missing=())
    state = host_state(Host(name=name, transport="local"), facts)
    return build_report([state], tp=tp, pp=pp, source="topo-show")
