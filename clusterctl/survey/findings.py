"""Findings: what is wrong with a host, judged against the inventory and its fleet peers.

Each check compares a host with what the inventory expects (fabric rate, stack pin) and
with the *majority* of comparable hosts. "Comparable" matters: an A100 host is compared to
A100 hosts, a port to the same HCA port elsewhere. A majority needs at least
``MIN_PEERS_FOR_MAJORITY`` hosts holding the value and more than half of them agreeing;
without one, only single-host rules apply, tuned to stay quiet on healthy hardware (a
difference that the whole fleet shares is a design, reported as ``info`` at most).

The checks live in ``clusterctl.survey.checks`` (one module per kind of fact); the fleet side
of every comparison (peer groups, majorities) in ``FleetBaseline``, built once per survey.

Severities (see docs/survey.md): lost NVLink, fewer NVLinks, a slow or down fabric NIC, GPU
count differences, ECC errors, a stack pin violated, an unreachable host are errors.
"""

from __future__ import annotations

from collections.abc import Sequence

from clusterctl.findings import Finding
from clusterctl.survey.checks.baseline import FleetBaseline
from clusterctl.survey.checks.gpu import (
    check_gpu_health,
    check_gpu_inventory,
    check_nvlink_lanes,
    check_nvlink_pairs,
    check_pcie,
)
from clusterctl.survey.checks.host import SurveyedHost
from clusterctl.survey.checks.nic import check_locality, check_nics
from clusterctl.survey.checks.reachability import check_missing_facts, check_partial_facts, check_reachability
from clusterctl.survey.checks.stack import check_stack

__all__ = ["fleet_findings"]


# --- all together ----------------------------------------------------------------------


def fleet_findings(fleet: Sequence[SurveyedHost]) -> list[Finding]:
    """Every finding for every surveyed host, each judged alone and against the fleet's baseline (built once:
    building one reads the whole fleet)."""
    baseline = FleetBaseline(fleet)
    found: list[Finding] = []
    for state in fleet:
        found += check_reachability(state) if state.facts is None else [
            *check_missing_facts(state, baseline),
            *check_partial_facts(state),
            *check_gpu_inventory(state, baseline),
            *check_nvlink_pairs(state, baseline),
            *check_nvlink_lanes(state, baseline),
            *check_pcie(state, baseline),
            *check_gpu_health(state),
            *check_nics(state, baseline),
            *check_locality(state, baseline),
            *check_stack(state, baseline),
        ]
    return sorted(found, key=Finding.sort_key)
