"""``release``: a quarantined host comes back only after it proves healthy.

For each host: the health checks (level 1 by default, ``health_findings``) and a single-host ``bench nccl``
(all_reduce over its GPUs, ``nccl_findings``) run first; only a host that passes both has its taint removed, is
uncordoned, loses clusterctl's quarantine annotations and is resumed in Slurm (when clusterctl
drained it there). A host that fails stays quarantined, with the reasons. ``skip_checks``
releases without them (the operator knows better; said in the output). A host that is not
quarantined is left as it is.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from clusterctl.changes import MAKES_QUARANTINE, ChangeFailed, Gate, GateRecord
from clusterctl.cluster_access import on_control_plane, read_node, reason
from clusterctl.engine.journaled import journaled_gate
from clusterctl.findings import Finding, Severity
from clusterctl.quarantine import node_ops, slurm
from clusterctl.quarantine.policy import counts_against

if TYPE_CHECKING:
    from clusterctl.fanout import Runner
    from clusterctl.inventory.model import Host, Inventory, QuarantineConfig
    from clusterctl.slurm_changes import SlurmOutcome
    from clusterctl.transport.base import Transport


@dataclass
class HostRelease:
    host: str
    released: bool = False
    #: Why the host stays quarantined (failed checks, not a node, a failed change).
    refused: list[str] = field(default_factory=list)
    done: list[str] = field(default_factory=list)
    checks: list[str] = field(default_factory=list)
    slurm: SlurmOutcome | None = None
    not_quarantined: bool = False
    #: The node was quarantined when read: only then does a refusal leave it "quarantined".
    quarantined: bool = False

    @property
    def ok(self) -> bool:
        return not self.refused

    @property
    def refusal(self) -> str:
        """What a refusal means for the host, in words: ``stays quarantined: ...`` or ``not released: ...``."""
        return ("stays quarantined: " if self.quarantined else "not released: ") + "; ".join(self.refused)

    def to_json(self) -> dict[str, object]:
        return {"host": self.host, "released": self.released, "not_quarantined": self.not_quarantined,
                "quarantined": self.quarantined,
                "refused": self.refused, "checks": self.checks, "done": self.done,
                "slurm": self.slurm.said if self.slurm else ""}


#: ``checks(runner, hosts) -> {host: findings}``: error-level findings keep a host quarantined.
ReleaseChecks = Callable[["Runner", Sequence["Host"]], dict[str, list[Finding]]]


def refusals(findings: Sequence[Finding], config: QuarantineConfig) -> list[str]:
    """What keeps a host quarantined: its findings that count against it (``policy.counts_against``: errors
    the inventory's ``quarantine.ignore_codes`` does not name), ``CODE: message`` each."""
    return [f"{f.code}: {f.message}" for f in findings if counts_against(f, config)]


def health_and_nccl_checks(level: int, peers: Sequence[Host], config: QuarantineConfig) -> ReleaseChecks:
    """The default release gate: ``health --level LEVEL`` (judged beside ``peers``, the rest of the
    fleet, read at level 0) and ``bench nccl`` on each host alone; a host is judged by ``refusals``
    (``config``'s ``ignore_codes`` do not count against it)."""

    def checks(runner: Runner, hosts: Sequence[Host]) -> dict[str, list[Finding]]:
        found: dict[str, list[Finding]] = {h.name: [] for h in hosts}
        for name, findings in health_findings(runner, hosts, level, peers, config).items():
            found[name] += findings
        passed = [h for h in hosts if not refusals(found[h.name], config)]
        # The NCCL test only on hosts whose health passed: a broken host need not be benchmarked.
        for name, findings in nccl_findings(runner, passed).items():
            found[name] += findings
        return found

    return checks


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
    """``all_reduce_perf`` on each host by itself (``bench nccl``'s single-host mode): a failed or implausible
    run is an error; a figure below the GPUs' expected peak is a warning, shown but not blocking."""
    from clusterctl.bench.nccl_tests import run_nccl_test

    if not hosts:
        return {}
    found = run_nccl_test(runner, list(hosts)).host_findings()
    return {h.name: found.get(h.name, []) for h in hosts}


def release_hosts(runner: Runner, inventory: Inventory, hosts: Sequence[Host], gate: Gate, *,
                  checks: ReleaseChecks | None = None,
                  confirm: Callable[[list[str]], None] | None = None) -> list[HostRelease]:
    """Release the quarantined hosts among ``hosts`` that pass ``checks`` (None: no checks, ``--skip-checks``).

    ``confirm(names)`` is called once the checks are done and before any change, with the hosts
    about to be released (not at all when none passed): the question is asked only when there is
    something to answer; it raises to stop.
    """
    cp = inventory.first_control_plane  # None: a Slurm-only cluster
    results = {h.name: HostRelease(h.name) for h in hosts}

    def read_all(transport: Transport) -> dict[str, bool | None]:
        nodes = {h.name: read_node(transport, h.name) for h in hosts}
        return {name: None if node is None else node_ops.is_quarantined(node) for name, node in nodes.items()}

    nodes = on_control_plane(runner, cp, read_all, what="read the nodes to release",
                             label="release: read nodes") if cp is not None else {h.name: None for h in hosts}
    # A host without a quarantined node (Slurm-only, or its resume failed) is quarantined if clusterctl drained it.
    in_slurm = slurm.slurm_nodes(runner, [h for h in hosts if not nodes[h.name]])
    slurm_only: set[str] = set()
    candidates: list[Host] = []
    for host in hosts:
        state = nodes[host.name]
        slurm_node = in_slurm.get(host.name)
        if slurm_node is not None and (state is None or slurm_node.drained_by_clusterctl):
            state = slurm_node.drained_by_clusterctl
            slurm_only.add(host.name)
        if state is None:
            results[host.name].refused.append(f"{host.name} is not a node of the cluster nor a Slurm node")
        elif not state:
            results[host.name].not_quarantined = True
        else:
            results[host.name].quarantined = True
            candidates.append(host)
    if checks is not None and candidates:
        found = checks(runner, candidates)
        for host in list(candidates):
            findings = found.get(host.name, [])
            errors = refusals(findings, inventory.quarantine)
            # Warnings and errors, and the figures that passed (the NCCL bus bandwidth measured).
            results[host.name].checks = [f"{f.severity.value} {f.code}: {f.message}" for f in findings
                                         if f.severity is not Severity.INFO or f.code == "NCCL_BUSBW"]
            if errors:
                results[host.name].refused += errors
                candidates.remove(host)
    if not candidates:
        return [results[h.name] for h in hosts]
    if confirm is not None:
        confirm([h.name for h in candidates])

    on_cp = [h for h in candidates if h.name not in slurm_only]

    def release_on_cp(transport: Transport) -> None:
        for host in on_cp:
            node = read_node(transport, host.name)
            if node is None:
                results[host.name].refused.append(f"{host.name} is no longer a node of the cluster")
                continue
            cp_name = transport.host.name
            changes = (node_ops.untaint(cp_name, node) + node_ops.cordon(cp_name, node, on=False)
                       + node_ops.annotate(cp_name, node, node_ops.release_annotations()))
            try:
                for record in gate.submit_all(transport, changes):
                    results[host.name].done.append(record.change.summary)
                results[host.name].released = True
            except ChangeFailed as exc:
                results[host.name].refused.append(str(exc))

    for host in candidates:
        results[host.name].released = host.name in slurm_only  # for those, Slurm's resume below is all of it
    if cp is not None and on_cp:
        (released,) = runner.run_task([cp], release_on_cp, label="release").outcomes
        if not released.ok:
            why = reason(released.failure)
            for host in candidates:
                if not results[host.name].released:
                    results[host.name].refused.append(f"the control plane {cp.name} failed ({why})")
    back = [h for h in candidates if results[h.name].released]
    for name, outcome in slurm.drain_or_resume(runner, back, gate, reason=None).items():
        results[name].slurm = outcome
        if outcome.failed:  # still drained in Slurm: not back, whatever Kubernetes' side did
            results[name].released = False
            results[name].refused.append(outcome.said)
    return [results[h.name] for h in hosts]


def release(runner: Runner, inventory: Inventory, hosts: Sequence[Host], *, apply: bool,
            checks: ReleaseChecks | None = None,
            confirm: Callable[[list[str]], None] | None = None,
            state_dir: str | None = None) -> tuple[list[HostRelease], str | None]:
    """``clusterctl release``: ``release_hosts`` through the engine's journaled gate; results and journal."""
    with journaled_gate("release", inventory, apply=apply, state_dir=state_dir) as step:
        results = release_hosts(runner, inventory, hosts, step.gate, checks=checks, confirm=confirm)
    return results, step.journal


def undo_refusals(runner: Runner, inventory: Inventory, records: Sequence[GateRecord]) -> dict[str, list[str]]:
    """Node -> why it must stay quarantined, for each node an undo of ``records`` would return to service
    (clusterctl's quarantine taint taken away: ``MAKES_QUARANTINE``): release's own checks
    (``health_and_nccl_checks``), so that ``undo`` of a quarantine never brings back a host ``release``
    would refuse. Empty: nothing to refuse."""
    names = dict.fromkeys(r.change.node for r in records if MAKES_QUARANTINE in r.change.makes)
    known = {h.name: h for h in inventory.hosts}
    hosts = [known[n] for n in names if n in known]
    if not hosts:
        return {}
    found = health_and_nccl_checks(1, inventory.hosts, inventory.quarantine)(runner, hosts)
    refused = {name: refusals(findings, inventory.quarantine) for name, findings in found.items()}
    return {name: why for name, why in refused.items() if why}
