"""The survey as one call: collect facts on the hosts, derive topologies, judge, advise."""

from __future__ import annotations

import datetime
from collections.abc import Sequence
from typing import TYPE_CHECKING

from clusterctl.errors import ParseError, UsageError
from clusterctl.inventory.model import Host
from clusterctl.survey.advice import AdviceHost, LayoutAdvice, advise
from clusterctl.survey.collect import GPUReader, HostFacts, collect_fleet
from clusterctl.survey.findings import Finding, HostState, fleet_findings
from clusterctl.survey.report import HostReport, SurveyReport
from clusterctl.survey.topology import build_topology

if TYPE_CHECKING:
    from clusterctl.fanout import FleetResult, Runner


def host_state(host: Host, facts: HostFacts | None, failure: str | None = None) -> HostState:
    matrix = facts.topology if facts else None
    return HostState(host=host, facts=facts, topology=build_topology(matrix) if matrix else None, failure=failure)


def states_from_fleet(fleet: FleetResult[HostFacts]) -> list[HostState]:
    states = []
    for outcome in fleet.outcomes:
        failure = outcome.failure.describe() if outcome.failure else None
        states.append(host_state(outcome.host, outcome.value if outcome.ok else None, failure))
    return states


def _usable_nics(state: HostState) -> set[str] | None:
    devices = state.facts.rdma if state.facts else None
    if devices is None:
        return None
    return {d.hca for d in devices if any(p.state == "PORT_ACTIVE" for p in d.ports)}


def advise_states(states: Sequence[HostState], tp: int, pp: int = 1, world_size: int | None = None) -> LayoutAdvice:
    hosts = [
        AdviceHost(s.name, s.host.rack, s.topology, _usable_nics(s))
        for s in states
        if s.topology is not None and s.topology.gpus
    ]
    return advise(hosts, tp, pp, world_size)


def build_report(
    states: Sequence[HostState],
    *,
    inventory: str | None = None,
    tp: int | None = None,
    pp: int = 1,
    world_size: int | None = None,
    source: str = "survey",
    generated_at: str | None = None,
) -> SurveyReport:
    findings = fleet_findings(states)
    # Grouped once (order kept): filtering all findings for each host is quadratic on big fleets.
    by_host: dict[str, list[Finding]] = {}
    for f in findings:
        by_host.setdefault(f.host, []).append(f)
    reports = tuple(HostReport(s, tuple(by_host.get(s.name, ()))) for s in states)
    advice = advise_states(states, tp, pp, world_size) if tp is not None else None
    stamp = generated_at or datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    return SurveyReport(reports, tuple(findings), stamp, inventory, advice, source)


def run_survey(
    runner: Runner,
    hosts: Sequence[Host],
    *,
    inventory: str | None = None,
    tp: int | None = None,
    pp: int = 1,
    world_size: int | None = None,
    gpu_reader: GPUReader | None = None,
) -> SurveyReport:
    """Survey ``hosts`` (one fan-out task each) and judge them against each other."""
    if tp is not None and tp < 1:
        raise UsageError(f"--tp must be at least 1, got {tp}")
    fleet = collect_fleet(runner, hosts, gpu_reader=gpu_reader)
    return build_report(states_from_fleet(fleet), inventory=inventory, tp=tp, pp=pp, world_size=world_size)


def topo_show_report(
    text: str,
    *,
    name: str = "input",
    tp: int | None = None,
    pp: int = 1,
    world_size: int | None = None,
) -> SurveyReport:
    """A one-host report from a saved or pasted ``nvidia-smi topo -m``.

    An unparsable input is the user's to fix: ``UsageError`` (exit 2), naming the line.
    """
    from clusterctl.facts.topo import parse_topo

    try:
        matrix = parse_topo(text)
    except ParseError as exc:
        raise UsageError(f"not an nvidia-smi topo -m output: {exc.reason}", file=name, line=exc.line) from exc
    facts = HostFacts(values={"topology": matrix}, missing=())
    state = host_state(Host(name=name, transport="local"), facts)
    return build_report([state], tp=tp, pp=pp, world_size=world_size, source="topo-show")

