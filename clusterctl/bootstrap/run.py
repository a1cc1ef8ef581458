"""The one function each ``clusterctl bootstrap`` command calls: choose phases, set up, run."""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from clusterctl import __version__
from clusterctl.bootstrap.cluster.addons import addon_plan
from clusterctl.bootstrap.cluster.settings import cluster_settings, kubelet_node_labels
from clusterctl.bootstrap.phase import Phase, PhaseContext
from clusterctl.bootstrap.registry import select_phases
from clusterctl.bootstrap.reset_journals import ResetJournals, bootstrap_journals
from clusterctl.bootstrap.run_data import RunData, RunOptions
from clusterctl.changes import ChangeKind
from clusterctl.engine.confirm import HostConfirmations
from clusterctl.engine.lock import DEFAULT_LOCK_PATH
from clusterctl.engine.phase import Phase as EnginePhase
from clusterctl.engine.progress import ProgressStore, RunPlace
from clusterctl.engine.run import (
    GivenOptions,
    HostPhaseResult,
    RunReport,
    RunSettings,
    SkipReason,
    Status,
    command_line,
    finished,
    run_phases,
)
from clusterctl.errors import UsageError
from clusterctl.inputfile import LIMITS
from clusterctl.saved_survey import load_saved_survey
from clusterctl.secret import mask_text
from clusterctl.writable import host_file_name

if TYPE_CHECKING:
    from clusterctl.fanout import Runner
    from clusterctl.host_reader import HostReader
    from clusterctl.inventory.model import Host, Inventory
    from clusterctl.transport.base import CommandResult


@dataclass(frozen=True)
class BootstrapRequest:
    apply: bool
    phase: str | None = None
    skip_phases: str | None = None
    resume: bool = False
    force_unlock: bool = False
    state_dir: str | None = None
    lock_path: str = DEFAULT_LOCK_PATH
    #: A saved ``clusterctl survey`` report: topology labels, GPU counts for verify, NVLink alert hosts.
    survey: str | None = None
    #: What the command line chose for the phases (``--force``, ``--allow-downgrade``...); ``run_options``
    #: adds the run's hosts, survey, mode and journals.
    options: RunOptions = field(default_factory=RunOptions)
    #: The global options (-i, -l...) and the command's (``--only``, ``--state-dir``...) as typed: the line that goes on
    #: after an interrupt runs the same inventory, hosts, state folder and options.
    given: GivenOptions = field(default_factory=GivenOptions)


def run(
    inventory: Inventory,
    hosts: Sequence[Host],
    runner: Runner,
    request: BootstrapRequest,
    on_phase: Callable[[EnginePhase[Any, Any], list[HostPhaseResult]], None] | None = None,
) -> RunReport:
    phases = select_phases(request.phase, request.skip_phases)
    place = RunPlace.of(inventory, "bootstrap", request.state_dir)
    store = place.progress(apply=request.apply, resume=request.resume, first="clusterctl bootstrap")
    answered: dict[str, dict[tuple[str, bool], CommandResult]] = {}
    if not request.options.allow_downgrade and any(p.name == "packages" for p in phases):
        # Refused before any phase changes a host (the kernel's come before the packages'), not halfway; a plan
        # the same, in one paragraph, as the run it shows (not once per host in its phases, findings and FAILED).
        # Its answers are the packages phase's first read, not made again (unless a phase before it changes the host).
        answered = _refuse_downgrades(runner, hosts, inventory, request.options)
    resumed_with = None
    journals = bootstrap_journals(place.journal_dir, cluster=inventory.name, fleet=place.key) \
        if any(p.name == "reset" for p in phases) else None
    if store is not None:
        request, resumed_with = _survey_of_the_run(request, store)
        if request.survey:
            store.survey = str(Path(request.survey).expanduser().resolve())
    options = run_options(inventory, hosts, phases, request, journals)
    fleet_path = place.progress_path
    confirmations = HostConfirmations.load(fleet_path.with_name(fleet_path.stem + ".confirmed.json"))
    # A plan changes nothing before any read; an applying run reads ahead where it expects no change.
    read_ahead = converged_hosts(store, phases, hosts) if request.apply else frozenset(h.name for h in hosts)
    command = f"bootstrap phase {request.phase}" if request.phase else "bootstrap"
    journal = place.journal(command) if request.apply else None
    settings = RunSettings(apply=request.apply, resume=request.resume, force_unlock=request.force_unlock,
                           lock_path=request.lock_path, progress=store, on_phase=on_phase, options=options,
                           read_ahead=read_ahead, answered=answered, confirmations=confirmations,
                           journal=journal, resume_hint=command_line(  # reset has no --resume: it runs again
                               *(("reset",) if request.phase == "reset" else command.split()), given=request.given,
                               resume=request.phase != "reset"))
    report = run_bootstrap(inventory, hosts, runner, phases, settings)
    if resumed_with:
        report.notes.append(f"resumed with the survey the earlier run was given: {resumed_with}")
    if store is not None:
        report.notes.append(f"progress kept in {store.path}")
    if journals is not None and request.apply:
        _mark_used_by_reset(report, journals)
    return report


def run_bootstrap(inventory: Inventory, hosts: Sequence[Host], runner: Runner, phases: Sequence[EnginePhase[Any, Any]],
                  settings: RunSettings) -> RunReport:
    """Bootstrap's phases on the engine, each with bootstrap's context (``RunOptions``, one ``RunData``)."""
    shared = RunData()
    options = settings.options if settings.options is not None else RunOptions()

    def context(host: Host, reader: HostReader) -> PhaseContext:
        return PhaseContext(host, reader, inventory, shared, options)

    def before_phase(failed: frozenset[str]) -> None:
        shared.failed_hosts = failed

    # Taken at the first host's digest, once: a run that keeps no record of its hosts never reads it.
    survey = functools.cache(lambda: survey_digest(options.survey))

    def digest(host: Host) -> str:
        return inputs_digest(inventory, host, options, survey())

    settings = replace(settings, context=context, before_phase=before_phase, inputs_digest=digest, options=options)
    report = run_phases(inventory, hosts, runner, phases, settings)
    report.not_verified = _not_verified(report) if settings.apply else None
    return report


def _not_verified(report: RunReport) -> str | None:
    """Why the run's ``verify`` phase checked nothing, or ``None`` (it ran, or was not asked for)."""
    if "verify" not in report.phases:
        return None
    results = [r for r in report.results if r.phase == "verify"]
    # A verify that passed (ok, changed) or was confirmed on resume checked the cluster on that host.
    if any(r.status in (Status.OK, Status.CHANGED) or r.skipped is SkipReason.DONE_BEFORE for r in results):
        return None
    if any(r.status is Status.FAILED for r in results):
        return None  # a failed verify is already a failed host, with its reason
    reasons = sorted({r.message for r in results if r.message}) or ["no host of this run could run it"]
    return ("verify did not run: " + "; ".join(reasons) + " (it runs on the first control-plane host: include "
            "that host in the run, or run 'clusterctl bootstrap phase verify' afterwards)")


def inputs_digest(inventory: Inventory, host: Host, options: RunOptions, survey: str) -> str:
    """What the phases plan from besides the host's answers: its inventory entry (without the line it
    is on: adding a host moves the others), the cluster-wide sections (without the hosts and the
    groups' member lists), the run's options (without the list of hosts), the saved survey's content
    (``survey``: ``survey_digest``, taken once per run) and clusterctl's version."""
    entry = replace(host, source=None)
    cluster = replace(inventory, hosts=(), groups={}, source=None)
    opts = replace(options, hosts=(), applying=False)
    text = "\0".join((__version__, repr(entry), repr(cluster), repr(opts), survey))
    return hashlib.sha256(text.encode()).hexdigest()


def survey_digest(path: str | None) -> str:
    """The saved survey's content as a digest (its content, not only its name: the labels come from
    it), read in pieces and no further than the survey's input limit: ``--survey /dev/zero`` on a run
    whose phases never read it must not read forever."""
    survey = hashlib.sha256()
    if path:
        left = LIMITS["survey"] + 1
        try:
            with Path(path).expanduser().open("rb") as handle:
                while left > 0 and (piece := handle.read(min(left, 1 << 20))):
                    survey.update(piece)
                    left -= len(piece)
        except OSError:
            survey.update(b"unreadable")
    return survey.hexdigest()


def _survey_of_the_run(request: BootstrapRequest, store: ProgressStore) -> tuple[BootstrapRequest, str | None]:
    """A ``--resume`` given no ``--survey`` goes on with the one the run it resumes was given: its
    topology labels and NVLink alert rule came from it, and a phase must not read their absence as
    a wish to remove them. The survey it names, and whether it was taken (``None``: not)."""
    if not request.resume or request.survey or request.options.without_survey or not store.survey:
        return request, None
    if not Path(store.survey).is_file():
        raise UsageError(f"--resume: the run it continues was given --survey {store.survey}, which is gone",
                         file=str(store.path), hint="Pass --survey FILE (a saved 'clusterctl survey --save FILE'), "
                         "or --without-survey to go on without one.")
    return replace(request, survey=store.survey), store.survey


def _refuse_downgrades(runner: Runner, hosts: Sequence[Host], inventory: Inventory, options: RunOptions
                       ) -> dict[str, dict[tuple[str, bool], CommandResult]]:
    """The packages phase refuses to downgrade (``DOWNGRADE_REFUSED``): one paragraph for the whole
    fleet, exit 2, naming what each group of hosts runs, the pins, and the two ways on; asked before the
    first phase, by a plan as by an applying run. Returns what it read, for the run (``RunSettings.answered``)."""
    from clusterctl.bootstrap.phases.packages import read_downgrades, refused_downgrades

    findings, answered = read_downgrades(runner, hosts, inventory, options)
    refused = refused_downgrades(findings)
    if refused is None:
        return answered
    runs, pins, fields = refused
    raise UsageError(f"bootstrap would downgrade what the hosts run, and does not unless asked: {runs}; the "
                     f"inventory pins {pins}. Nothing was changed.", file=inventory.source or None,
                     hint=f"Pick one: set {next(iter(fields.values()), '') or 'the pin'} to what the hosts run "
                     "(after 'clusterctl upgrade apply --to X': X), or pass --allow-downgrade to go back to the pin.")


def _mark_used_by_reset(report: RunReport, journals: ResetJournals) -> None:
    """Note in each journal reset read which hosts it took back, so that no later reset or undo replays
    it there (a host joined again by hand would be reset as bootstrap's). A host where reset kept a
    file that changed since bootstrap wrote it keeps its journals: the next ``reset --force`` needs them."""
    from clusterctl.bootstrap.phases.reset import KEPT_CHANGED
    from clusterctl.undo_journal import mark_journal_used

    done = {r.host for r in report.results if r.phase == "reset" and r.status is not Status.FAILED
            and r.host not in report.failed_hosts and not any(f.code == KEPT_CHANGED for f in r.findings)}
    by_path: dict[str, list[str]] = {}
    for host, entries in journals.hosts.items():
        if host in done:
            for entry in entries:
                by_path.setdefault(entry.path, []).append(host)
    for path, names in by_path.items():
        mark_journal_used(path, sorted(names))
    if by_path:
        report.notes.append(f"bootstrap's journals used by this reset are marked as such ({len(by_path)} in "
                            f"{journals.folder})")


def converged_hosts(store: ProgressStore | None, phases: Sequence[Phase[Any]], hosts: Sequence[Host]) -> frozenset[str]:
    """Hosts whose previous run finished (ok or changed) every phase of this run that runs on each
    host alone: most likely already as wanted, so their phases' reads are done ahead in one round
    trip (``RunSettings.read_ahead``). Only a guess, read from the progress file: a host that
    drifted since costs its later phases' reads again, nothing else."""
    if store is None:
        return frozenset()
    previous = store
    if not store.hosts and store.path.exists():
        try:
            previous = ProgressStore.load(store.path, store.cluster)
        except UsageError:
            return frozenset()
    per_host = [p.name for p in phases if not (p.serial or p.once_per_cluster)]
    return frozenset(h.name for h in hosts if all(finished(previous, h.name, p) for p in per_host))


def run_options(inventory: Inventory, hosts: Sequence[Host], phases: Sequence[Phase[Any]],
                request: BootstrapRequest, journals: ResetJournals | None = None) -> RunOptions:
    """``ctx.options`` of the run; checks the cluster settings and the survey up front (exit 2, not a
    failure per host) when a phase that reads them is part of the run."""
    survey = request.survey or inventory.bootstrap.survey
    options = replace(request.options, hosts=tuple(h.name for h in hosts), survey=survey, applying=request.apply,
                      reset_journals=journals)
    if any(p.uses_cluster_settings for p in phases):
        settings = cluster_settings(inventory)
        if any(p.name in ("control-plane", "join") for p in phases):
            for host in hosts:  # kubeadm's kubelet flags label the node: refused before any phase changes a host
                kubelet_node_labels(host)
        if any(p.name == "gpu-addons" for p in phases):  # an air-gapped site's chart archives: read up front too
            for release in addon_plan(settings, runtime_class=False, service_monitor=False).releases:
                release.archive_data()
        if survey:
            load_saved_survey(survey)
    return options


def write_plan_files(report: RunReport, out_dir: str) -> list[Path]:
    """Each file the plan would write, under ``out_dir/<host>/<path on the host>``, plus
    ``out_dir/<host>/COMMANDS.sh`` listing the commands in order. Secrets are masked."""
    root = Path(out_dir).expanduser()
    written: list[Path] = []
    commands: dict[str, list[str]] = {}
    for result in report.results:
        for change in result.changes:
            if change.kind is ChangeKind.WRITE_FILE and change.path:
                target = root / host_file_name(result.host, "") / change.path.lstrip("/")
                if root.resolve() not in target.resolve().parents:
                    raise UsageError(f"refusing to write {change.path} of {result.host} outside {root}")
                target.parent.mkdir(parents=True, exist_ok=True)
                content = change.content or b""
                if b"\0" in content[:8192]:
                    target.write_bytes(content)  # a chart archive: as it would land on the host
                else:
                    target.write_text(mask_text(content.decode("utf-8", errors="replace")))
                written.append(target)
            else:
                commands.setdefault(result.host, []).append(
                    f"# [{result.phase}] {mask_text(change.summary)}\n{change.describe()}")
    for host, lines in commands.items():
        target = root / host_file_name(host, "") / "COMMANDS.sh"
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text("#!/bin/sh\n# What 'clusterctl bootstrap' would run on " + host + ", in order.\n"
                          + "\n".join(lines) + "\n")
        written.append(target)
    return written
