"""The checks a host passes before release: its health, then nccl-tests on its GPUs alone.

``health_findings`` returns each host's findings (error level: not healthy); ``nccl_findings``
runs ``all_reduce_perf`` on each host by itself (``bench nccl``'s single-host mode) and returns
its findings (a failed or implausible run is an error; a figure below the GPUs' expected
peak is a warning, shown but not blocking, as in ``bench nccl``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from clusterctl.findings import Finding

if TYPE_CHECKING:
    from clusterctl.fanout import Runner
    from clusterctl.inventory.model import Host


def health_findings(runner: Runner, hosts: Sequence[Host], level: int = 1) -> dict[str, list[Finding]]:
    """Each host's health findings, judged on the host alone (a quarantined host is no peer baseline)."""
    from clusterctl.survey.run import run_survey

    found: dict[str, list[Finding]] = {h.name: [] for h in hosts}
    for host in hosts:
        report = run_survey(runner, [host])
        found[host.name] = [f for f in report.findings if f.host in (None, host.name)]
    return found


def nccl_findings(runner: Runner, hosts: Sequence[Host]) -> dict[str, list[Finding]]:
    from clusterctl.bench.nccl_tests import run_nccl_test

    found: dict[str, list[Finding]] = {h.name: [] for h in hosts}
    if not hosts:
        return found
    run = run_nccl_test(runner, list(hosts))
    for finding in run.findings:
        if finding.host in found:
            found[finding.host].append(finding)
    for host_run in run.runs:
        if host_run.busbw_gbs is not None and host_run.host in found:
            found[host_run.host].append(_info(host_run.host, host_run.busbw_gbs))
    return found


def _info(host: str, busbw: float) -> Finding:
    from clusterctl.findings import Severity

    return Finding(Severity.INFO, "NCCL_RESULT", f"all_reduce bus bandwidth {busbw:.1f} GB/s on the host alone",
                   host=host)
