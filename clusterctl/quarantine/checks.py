"""The checks a host passes before release: its health, then nccl-tests on its GPUs alone.

``health_findings`` returns each host's ``clusterctl health`` findings (error level: not healthy); ``nccl_findings``
runs ``all_reduce_perf`` on each host by itself (``bench nccl``'s single-host mode) and returns
its findings (a failed or implausible run is an error; a figure below the GPUs' expected
peak is a warning, shown but not blocking, as in ``bench nccl``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from clusterctl.findings import Finding, Severity
from clusterctl.quarantine.policy import counts_against

if TYPE_CHECKING:
    from clusterctl.fanout import Runner
    from clusterctl.inventory.model import Host, QuarantineConfig


def health_findings(runner: Runner, hosts: Sequence[Host], level: int, peers: Sequence[Host],
                    config: QuarantineConfig) -> dict[str, list[Finding]]:
    """Each host's ``clusterctl health --level LEVEL`` findings. An unhealthy host has error findings;
    a host that could not be checked gets one (``HEALTH_UNKNOWN``): not known healthy is not healthy.
    A degraded host (warnings only: watch it, it can keep jobs) passes, its warnings shown.

    ``peers`` (the rest of the fleet) are read at level 0 only, so that the hosts are judged beside
    them as ``clusterctl health`` judges the fleet: a host alone has nothing to compare its IB port
    rates or NVLink counters with, and would pass with a link at a twentieth of everyone's speed."""
    from clusterctl.health.model import HealthOptions, Verdict
    from clusterctl.health.run import run_health

    report = run_health(list(hosts), runner, HealthOptions(level=level), peers=peers)
    found: dict[str, list[Finding]] = {h.name: [] for h in hosts}
    for checked in report.hosts:
        findings = list(checked.findings)
        # Unless a finding that counts against the host (``config``'s ``ignore_codes`` aside) already keeps it out.
        if checked.verdict is Verdict.UNKNOWN and not any(counts_against(f, config) for f in findings):
            findings.append(Finding(Severity.ERROR, "HEALTH_UNKNOWN", f"health could not check it: {checked.reason}",
                                    host=checked.host))
        found[checked.host] = findings
    return found


def nccl_findings(runner: Runner, hosts: Sequence[Host]) -> dict[str, list[Finding]]:
    from clusterctl.bench.nccl_tests import run_nccl_test

    if not hosts:
        return {}
    found = run_nccl_test(runner, list(hosts)).host_findings()
    return {h.name: found.get(h.name, []) for h in hosts}
