"""``tune-nccl`` as one call: inputs, derived settings, optional sweep, rendering, lint, push.

Every step that reaches hosts (a live survey, the sweep, the push) runs on the one fan-out
``runner`` it is given, so each host is connected once for the whole command.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from clusterctl.changes import GateRecord
from clusterctl.errors import UsageError
from clusterctl.fanout import FleetResult, Runner
from clusterctl.findings import Finding, Severity
from clusterctl.inventory.model import FABRIC_TYPES, Host, Inventory
from clusterctl.nccl.lint import lint_settings
from clusterctl.nccl.sources import read_settings
from clusterctl.nccl.tune.derive import Tuning, derive_settings
from clusterctl.nccl.tune.inputs import TuneHost, from_host_facts, from_saved_survey
from clusterctl.nccl.tune.managed_block import SiteConflict
from clusterctl.nccl.tune.render import render_files
from clusterctl.nccl.tune.sweep_result import SweepResult
from clusterctl.survey.collect import collect_fleet
from clusterctl.writable import write_files


@dataclass(frozen=True)
class TuneRequest:
    survey: str | None = None
    #: Folder of an earlier ``--sweep --out``: reuse its measured winners.
    bench: str | None = None
    sweep: bool = False
    budget: int = 120
    repeats: int = 3
    fmt: str = "conf"
    out: str | None = None
    push: bool = False
    #: With ``push``: record the changes (diffs), write nothing.
    dry_run: bool = False
    nccl_version: str | None = None
    namespace: str | None = None
    #: With ``push``: clear a host lock another run left (``--force-unlock``).
    force_unlock: bool = False
    #: ``--state-dir``: the push's (and the sweep's hostfile's) undo journal goes to its ``undo``.
    state_dir: str | None = None
    #: nccl-tests collectives the sweep measures (all_reduce, all_gather, reduce_scatter...).
    collectives: tuple[str, ...] = ("all_reduce",)


@dataclass
class TuneOutcome:
    tuning: Tuning
    measured: SweepResult | None
    #: Hosts left out, with why.
    skipped: list[str]
    #: Warnings and errors ``nccl lint`` finds in the rendered files (an error: the command exits 1).
    lint_findings: list[Finding]
    files: dict[str, str]
    written: list[str] = field(default_factory=list)
    pushed: FleetResult[GateRecord] | None = None
    #: The file ``clusterctl undo`` takes to revert the push, when it changed anything.
    undo_journal: Path | None = None
    #: Per host: site settings outside clusterctl's block of /etc/nccl.conf that the block overrides.
    site_conflicts: dict[str, list[SiteConflict]] = field(default_factory=dict)
    #: What the push's run says about itself (a stale lock cleared, a host whose lock is still held).
    notes: list[str] = field(default_factory=list)

    @property
    def lint_problems(self) -> list[str]:
        """Each lint finding as ``file:line: severity: message`` (the JSON's ``lint``, the warnings printed)."""
        return [f"{f.file}:{f.line}: {f.severity.value}: {f.message}" for f in self.lint_findings]


def tune_nccl(runner: Runner, hosts: Sequence[Host], request: TuneRequest, *, inventory: Inventory) -> TuneOutcome:
    tune_hosts, skipped = tune_inputs(runner, hosts, request.survey)
    if not tune_hosts:
        raise UsageError("no reachable host to tune")
    tuning = derive_settings(tune_hosts, nccl_version=request.nccl_version)
    measured: SweepResult | None = None
    if request.sweep:
        measured = run_tuning_sweep(runner, inventory, [h for h in hosts if h.name in tuning.hosts], tuning, request)
    elif request.bench:
        from clusterctl.nccl.tune.saved_sweep import load_sweep

        measured = load_sweep(request.bench)
    gpus = sum(len(h.gpu_indices) for h in tune_hosts)
    files = render_files(tuning, measured, fmt=request.fmt, namespace=request.namespace,
                         nodes=len(tune_hosts), ranks=gpus or -1)
    outcome = TuneOutcome(tuning, measured, skipped, lint_rendered(files, tuning), files)
    if request.out:
        outcome.written = [str(p) for p in write_files(files, request.out)]
        if measured is not None and request.sweep:
            from clusterctl.nccl.tune.saved_sweep import save_sweep

            outcome.written.append(str(save_sweep(measured, request.out)))
    if request.push:
        from clusterctl.nccl.tune.push import push_conf, pushed_records
        from clusterctl.nccl.tune.render import conf_for_host

        targets = [h for h in hosts if h.name in tuning.hosts]
        # On the engine: the host lock, each write in the undo journal before it is made, Ctrl-C handled there.
        report = push_conf(runner, inventory, targets, lambda name: conf_for_host(tuning, measured, name),
                           apply=not request.dry_run, state_dir=request.state_dir,
                           force_unlock=request.force_unlock, site_conflicts=outcome.site_conflicts)
        outcome.pushed = pushed_records(report, targets)
        outcome.undo_journal = Path(report.undo_journal) if report.undo_journal else None
        outcome.notes = [n for n in report.notes if not n.startswith("undo with: ")]
    return outcome


def tune_inputs(runner: Runner, hosts: Sequence[Host], survey: str | None) -> tuple[list[TuneHost], list[str]]:
    """Tuning input per host: from a saved survey when given, else surveyed now on ``runner``."""
    if survey:
        return from_saved_survey(survey, hosts)
    fleet = collect_fleet(runner, hosts)  # the survey's facts, the IPv4 addresses among them
    out = [from_host_facts(o.host, o.value) for o in fleet.outcomes if o.ok and o.value is not None]
    skipped = [f"{o.host.name}: {o.failure.describe()}" for o in fleet.outcomes if o.failure is not None]
    return out, skipped


def run_tuning_sweep(runner: Runner, inventory: Inventory, hosts: list[Host], tuning: Tuning,
                     request: TuneRequest) -> SweepResult:
    from clusterctl.nccl.tune.bench_measure import bench_measure
    from clusterctl.nccl.tune.candidates import lint_validator
    from clusterctl.nccl.tune.sweep import candidates_for, run_sweep

    # the common knobs plus what the topology made worth measuring (GDR level, socket threads)
    candidates = candidates_for(tuning, validate=lint_validator())
    # Candidates run on top of the derived settings: the sweep measures what a job would get.
    base_env = {s.name: s.value for s in tuning.settings}
    measures = {op: bench_measure(runner, inventory, hosts, base_env=base_env, op=op, state_dir=request.state_dir)
                for op in request.collectives}
    return run_sweep(measures, candidates, budget=request.budget, baseline_repeats=request.repeats,
                     nccl_version=tuning.nccl_version)


def lint_rendered(files: dict[str, str], tuning: Tuning) -> list[Finding]:
    """Lint every rendered settings file; anything at warning level or above is reported."""
    fabric = tuning.fabric if tuning.fabric in FABRIC_TYPES else None
    problems: list[Finding] = []
    for name, text in files.items():
        if name.endswith("nccl_tuner.conf"):
            continue  # the tuner plugin's CSV: no settings
        settings = read_settings(text, name=name)  # the format from the name, as nccl lint finds it
        problems += [f for f in lint_settings(settings, nccl_version=tuning.nccl_version, fabric=fabric)
                     if f.severity in (Severity.ERROR, Severity.WARNING)]
    return problems
