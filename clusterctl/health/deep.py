"""Levels 1-3: ``dcgmi diag -r N`` where DCGM is installed; level 2+: single-host nccl-tests."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from clusterctl.errors import ParseError
from clusterctl.facts.base import not_found
from clusterctl.facts.health_model import DcgmDiag
from clusterctl.findings import Finding
from clusterctl.health.checks import HostInput
from clusterctl.health.model import HealthOptions
from clusterctl.health.probe import RC_MISSING, RC_TIMED_OUT, ProbeProblem
from clusterctl.inventory.model import Host
from clusterctl.transport.base import Transport

if TYPE_CHECKING:
    from clusterctl.fanout import Runner


def dcgm_command(level: int, timeout_s: float) -> str:
    """``dcgmi diag -r N -j``: JSON (DCGM 3.x and 4.x both print it), under ``timeout``."""
    return f"timeout {int(timeout_s)} dcgmi diag -r {int(level)} -j"


def _dcgm_task(options: HealthOptions) -> Callable[[Transport], tuple[DcgmDiag | None, ProbeProblem | None]]:
    from clusterctl.facts.dcgmi import parse_dcgmi_diag

    def task(transport: Transport) -> tuple[DcgmDiag | None, ProbeProblem | None]:
        result = transport.run(dcgm_command(options.level, options.dcgm_timeout_s), timeout=options.dcgm_timeout_s + 30)
        text = result.stdout + ("\n" + result.stderr if result.stderr.strip() and not result.stdout.strip() else "")
        if result.exit_code == RC_MISSING:
            return None, ProbeProblem("dcgm", "dcgmi", "missing", not_found("dcgmi"))
        if result.exit_code == RC_TIMED_OUT:
            return None, ProbeProblem("dcgm", "dcgmi", "hung", f"dcgmi diag -r {options.level} did not finish in "
                                                               f"{int(options.dcgm_timeout_s)} s")
        try:
            return parse_dcgmi_diag(text), None
        except ParseError as exc:
            reason = (result.stderr.strip() or result.stdout.strip())[:200] if result.exit_code else str(exc)
            return None, ProbeProblem("dcgm", "dcgmi", "failed", reason or str(exc))

    return task


def run_dcgm(runner: Runner, hosts: Sequence[Host], inputs: Sequence[HostInput], options: HealthOptions) -> None:
    """Run the DCGM diagnostic on the hosts that answered the level-0 probes; results land on their probes."""
    probes = {i.name: i.probe for i in inputs if i.probe is not None}
    chosen = [h for h in hosts if h.name in probes]
    if not chosen:
        return
    fleet = runner.run_task(chosen, _dcgm_task(options), label=f"health: dcgmi diag -r {options.level}",
                            timeout_s=options.dcgm_timeout_s + 60)
    for outcome in fleet.outcomes:
        probe = probes[outcome.host.name]
        if not outcome.ok or outcome.value is None:
            reason = outcome.failure.describe() if outcome.failure else "no result"
            probe.problems.append(ProbeProblem("dcgm", "dcgmi", "failed", reason))
            continue
        diag, problem = outcome.value
        if problem is not None:
            probe.problems.append(problem)
        probe.dcgm = diag


def run_nccl(runner: Runner, hosts: Sequence[Host], inputs: Sequence[HostInput],
             options: HealthOptions) -> dict[str, list[Finding]]:
    """bench nccl's single-host run on every host that answered, judged against the fleet (bench's judge)."""
    from clusterctl.bench.nccl_tests import run_nccl_test

    reachable = {i.name for i in inputs if i.probe is not None and i.gpus}
    chosen = [h for h in hosts if h.name in reachable]
    if not chosen:
        return {}
    run = run_nccl_test(runner, chosen, op=options.nccl_op, max_bytes=options.nccl_max_bytes, min_bytes="8M",
                        binary_dir=options.nccl_binary_dir)
    for host_run in run.runs:
        probe = next((i.probe for i in inputs if i.name == host_run.host), None)
        if probe is not None:
            probe.nccl = host_run
    # bench's findings keep their codes; "health" reads an NCCL_FAILED host as one to take out.
    return run.host_findings()
