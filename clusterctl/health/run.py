"""``clusterctl health`` as one call: probe every host (one command each), judge, give verdicts.

``run_health(hosts, runner, options) -> HealthReport`` is the public entry point (``quarantine``'s
release gate calls it on the hosts to release, with the rest of the fleet as ``peers``). Level 0
only reads. Levels 1-3 add ``dcgmi diag -r N`` on hosts that have DCGM (a missing ``dcgmi`` is a
finding, not a crash); level 2+ also runs the single-host nccl-tests of ``bench nccl``
(``clusterctl.bench.nccl_tests.run_nccl_test``), judged against the fleet the way ``bench nccl``
judges it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from functools import partial
from typing import TYPE_CHECKING

from clusterctl.findings import Finding, Severity
from clusterctl.health.checks import Baseline, HostInput, judge_host
from clusterctl.health.deep import run_dcgm, run_nccl
from clusterctl.health.model import HealthOptions, HealthReport, HostHealth, verdict_of
from clusterctl.health.probe import (
    TRANSPORT_KEEPS,
    HostProbe,
    ProbeCollector,
    level0_probes,
    probe_command,
    read_probe_outputs,
)
from clusterctl.health.summary import host_facts
from clusterctl.inventory.model import Host, Inventory
from clusterctl.survey.checks.host import MadeOnce
from clusterctl.transport.base import Transport
from clusterctl.utc import utc_stamp

if TYPE_CHECKING:
    from clusterctl.fanout import Runner


def probe_host(transport: Transport, options: HealthOptions, timeout: float | None = None) -> HostProbe:
    """Run the level-0 probes on one host (one command) and read their outputs; ``timeout``: the whole
    command's bound (by default each probe's limit in turn, and 30 s)."""
    probes = level0_probes(options.since_s, options.probe_timeout_s)
    # Read as it streams, each probe's output bounded (a host printing 40 MB costs a few MB here).
    collected = ProbeCollector()
    transport.run(probe_command(probes), timeout=timeout or options.probe_timeout_s * len(probes) + 30,
                  on_line=collected, max_output=TRANSPORT_KEEPS)
    probe = read_probe_outputs(collected.outputs(), probes)
    probe.since = options.since
    probe.cut = collected.cut()
    return probe


def judge(inputs: Sequence[HostInput], *, level: int = 0, since: str = "24h", inventory: str | None = None,
          extra: dict[str, list[Finding]] | None = None, source: str = "health",
          generated_at: str | None = None) -> HealthReport:
    """Findings and verdicts for hosts already probed (``health read`` uses it on pasted outputs)."""
    baseline = Baseline(inputs)
    shared = MadeOnce()  # alike hosts' facts parts made once, written once
    hosts = []
    for item in inputs:
        if item.probe is None:
            failure = item.failure or "no result"
            finding = Finding(Severity.ERROR, "HOST_UNREACHABLE", f"could not be checked: {failure}",
                              host=item.name, fix="Check that the host is up and reachable over SSH, then run "
                                                  "'clusterctl health' on it again (-l HOST).")
            verdict, reason = verdict_of([finding], failure)
            hosts.append(HostHealth(item.name, verdict, reason, (finding,), failure=failure))
            continue
        tests = list((extra or {}).get(item.name, ()))
        findings = judge_host(item, baseline) + tests
        results = tests + [f for f in findings if f.code.startswith("DCGM_DIAG")]
        verdict, reason = verdict_of(findings, results=results)
        hosts.append(HostHealth(item.name, verdict, reason, tuple(findings), facts=host_facts(item.probe, shared)))
    return HealthReport(tuple(hosts), generated_at or utc_stamp(), level, since, inventory, source=source)


def run_health(hosts: Sequence[Host], runner: Runner, options: HealthOptions | None = None, *,
               inventory: str | None = None, peers: Sequence[Host] = (),
               cluster: Inventory | None = None) -> HealthReport:
    """Check ``hosts`` at ``options.level`` and judge each alone and against the others.

    ``peers``: more hosts read at level 0 only (never a DCGM or NCCL run) that ``hosts`` are judged
    against and that the report leaves out: one host checked alone has no fleet to compare with
    (an IB port at 10 Gb/s where every other host's runs at 200 is only seen beside the others).

    Never raises for a host: an unreachable or hung host is a host with verdict ``unknown``
    (``HOST_UNREACHABLE``), the others are judged as usual.
    """
    options = options or HealthOptions()
    budget = options.probe_timeout_s * len(level0_probes(options.since_s, options.probe_timeout_s)) + 60
    checked = {h.name for h in hosts}
    probed = [*hosts, *(p for p in peers if p.name not in checked)]

    fleet = runner.run_task(probed, partial(probe_host, options=options), label="health", timeout_s=budget)
    inputs = [HostInput(o.host.name, o.value if o.ok else None, o.failure.describe() if o.failure else None,
                        o.host.fabric) for o in fleet.outcomes]
    extra: dict[str, list[Finding]] = {}
    tested = list(hosts)
    if options.level >= 2 and not options.force:
        tested = _idle_hosts(runner, hosts, inputs, options, cluster, extra)
    if options.level >= 1:
        run_dcgm(runner, tested, inputs, options)
    if options.level >= 2:
        for name, findings in run_nccl(runner, tested, inputs, options).items():
            extra.setdefault(name, []).extend(findings)
    report = judge(inputs, level=options.level, since=options.since, inventory=inventory, extra=extra)
    if len(probed) == len(hosts):
        return report
    return dataclasses.replace(report, hosts=tuple(h for h in report.hosts if h.host in checked))


def _idle_hosts(runner: Runner, hosts: Sequence[Host], inputs: Sequence[HostInput], options: HealthOptions,
                cluster: Inventory | None, extra: dict[str, list[Finding]]) -> list[Host]:
    """The hosts the invasive checks may take (``health.busy``); the others get a finding saying why not."""
    from clusterctl.health.busy import gpu_use

    reachable = [h for h in hosts if any(i.name == h.name and i.probe is not None for i in inputs)]
    uses = gpu_use(runner, reachable, inputs, cluster)
    idle = []
    for host in hosts:
        use = uses.get(host.name)
        if use is None or not use.busy or use.out_of_service:
            idle.append(host)
            continue
        extra.setdefault(host.name, []).append(Finding(
            Severity.WARNING, "INVASIVE_CHECK_REFUSED",
            f"dcgmi diag -r {options.level} and nccl-tests not run: "
            + ("the GPUs are in use" if use.processes or use.pods else "whether the GPUs are in use is not known")
            + f" ({use.describe()})",
            host=host.name, evidence={"processes": use.processes, "pods": use.pods, "unknown": use.unknown},
            fix=f"Quarantine the host first (clusterctl quarantine {host.name} --drain --reason ...) and run again "
                "once its jobs are gone, or pass --force to run them anyway (they take the GPUs from the jobs)."))
    return idle
