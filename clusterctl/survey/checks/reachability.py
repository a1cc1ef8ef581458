"""Checks that a host was reached and that each of its facts could be read."""

from __future__ import annotations

from clusterctl.survey.checks.baseline import FleetBaseline
from clusterctl.survey.checks.codes import Finding, Severity, finding
from clusterctl.survey.checks.host import SurveyedHost
from clusterctl.wording import first_few


def check_reachability(state: SurveyedHost) -> list[Finding]:
    if state.facts is not None:
        return []
    return [finding(Severity.ERROR, "HOST_UNREACHABLE", state.name, f"not surveyed: {state.failure or 'unknown'}",
                    failure=state.failure)]


#: (severity when peers read it / no peers, severity when no peer could read it either).
_FACT_SEVERITY: dict[str, tuple[Severity, Severity]] = {
    "topology": (Severity.ERROR, Severity.WARNING),
    "gpus": (Severity.ERROR, Severity.WARNING),
    "nvlink": (Severity.WARNING, Severity.INFO),
    "rdma": (Severity.WARNING, Severity.INFO),
    "stack": (Severity.WARNING, Severity.INFO),
}
_GPU_FACTS = frozenset({"topology", "gpus", "nvlink"})


def check_missing_facts(state: SurveyedHost, baseline: FleetBaseline) -> list[Finding]:
    if state.facts is None:
        return []
    out: list[Finding] = []
    reachable = baseline.others_reachable(state)
    for lost in state.facts.missing:
        with_peers, alone = _FACT_SEVERITY.get(lost.fact, (Severity.INFO, Severity.INFO))
        readers = baseline.others_reading(state, lost.fact)
        if state.gpu_only_control_plane and lost.fact in _GPU_FACTS:
            severity = Severity.INFO
        elif not reachable:
            severity = alone if lost.fact != "rdma" or state.host.fabric.type not in ("ib", "roce") else with_peers
            # With no peers, "no GPU facts" still makes the host useless to a GPU cluster.
            if lost.fact in ("topology", "gpus"):
                severity = Severity.WARNING
        elif readers * 2 > reachable:
            severity = with_peers
        else:
            severity = Severity.INFO
        out.append(finding(severity, "FACT_MISSING", state.name, f"{lost.fact}: {lost.reason}",
                           fact=lost.fact, reason=lost.reason))
    return out


def check_partial_facts(state: SurveyedHost) -> list[Finding]:
    """A fact read only in part on a live host: what was read is used, what was not is said."""
    if state.facts is None:
        return []
    out: list[Finding] = []
    for fact, warnings in state.facts.warnings.items():
        shown = first_few([str(w) for w in warnings], 3)
        out.append(finding(Severity.WARNING, "FACT_PARTIAL", state.name, f"{fact}: read in part: {shown}",
                           fact=fact, warnings=[w.to_json() for w in warnings]))
    return out
