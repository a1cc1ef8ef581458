"""The one function each ``clusterctl bootstrap`` command calls: choose phases, set up, run."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from clusterctl.bootstrap.engine import BootstrapReport, HostPhaseResult, RunSettings, SkipReason, Status, run_bootstrap
from clusterctl.bootstrap.lock import DEFAULT_LOCK_PATH
from clusterctl.bootstrap.phase import Phase
from clusterctl.bootstrap.progress import DONE, ProgressStore, default_state_dir, fleet_key, progress_path
from clusterctl.bootstrap.registry import select_phases
from clusterctl.bootstrap.run_data import RunOptions
from clusterctl.changes import ChangeKind
from clusterctl.errors import UsageError
from clusterctl.secret import mask_text

if TYPE_CHECKING:
    from clusterctl.bootstrap.reset_journals import ResetJournals
    from clusterctl.fanout import Runner
    from clusterctl.inventory.model import Host, Inventory


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
    #: ``clusterctl reset --restore-containerd``: containerd's config back from clusterctl's first backup.
    restore_containerd: bool = False
    #: ``clusterctl reset --force``: also remove what bootstrap did not make (listed otherwise).
    force: bool = False
    #: ``bootstrap --without-survey``: drop what an earlier run's survey gave, knowingly.
    without_survey: bool = False
    #: ``bootstrap --allow-downgrade``: go back to pins below what the hosts run.
    allow_downgrade: bool = False
    #: Where that journal goes (and where ``reset`` reads bootstrap's); ``None``: ``<state dir>/undo``.
    journal_dir: str | None = None
    #: ``clusterctl reset --purge-packages``: purge what the journals say bootstrap installed.
    purge_packages: bool = False


def run(
    inventory: Inventory,
    hosts: Sequence[Host],
    runner: Runner,
    request: BootstrapRequest,
    on_phase: Callable[[Phase[Any], list[HostPhaseResult]], None] | None = None,
) -> BootstrapReport:
    phases = select_phases(request.phase, request.skip_phases)
    if not phases:
        raise UsageError("--skip-phases leaves no phase to run")
    if request.resume and not request.apply:
        raise UsageError("--resume only makes sense for a run that applies (not with --dry-run or plan)")
    store = None
    resumed_with = None
    state_dir = Path(request.state_dir).expanduser() if request.state_dir else default_state_dir()
    journal_dir = Path(request.journal_dir) if request.journal_dir else state_dir / "undo"
    fleet = [str(Path(inventory.source).resolve()) if inventory.source else inventory.name,
             *sorted({str(h.mock_state) for h in inventory.hosts if h.mock_state})]
    journals = None
    if any(p.name == "reset" for p in phases):
        from clusterctl.bootstrap.reset_journals import bootstrap_journals

        journals = bootstrap_journals(journal_dir, cluster=inventory.name, fleet=fleet_key(fleet))
    if request.apply:
        path = progress_path(state_dir, inventory.name, fleet)
        store = ProgressStore.load(path, inventory.name) if request.resume else ProgressStore(path, inventory.name)
        if request.resume and not path.exists():
            raise UsageError(f"--resume: no progress file for cluster '{inventory.name}' at {path}",
                             hint="Run without --resume first (or pass the same --state-dir).")
        request, resumed_with = _survey_of_the_run(request, store)
        if request.survey:
            store.survey = str(Path(request.survey).expanduser().resolve())
    options = run_options(inventory, hosts, phases, request, journals)
    from clusterctl.bootstrap.confirm import HostConfirmations

    fleet_path = progress_path(state_dir, inventory.name, fleet)
    confirmations = HostConfirmations.load(fleet_path.with_name(fleet_path.stem + ".confirmed.json"))
    # A plan changes nothing before any read; an applying run reads ahead where it expects no change.
    read_ahead = converged_hosts(store, phases, hosts) if request.apply else frozenset(h.name for h in hosts)
    settings = RunSettings(apply=request.apply, resume=request.resume, force_unlock=request.force_unlock,
                           lock_path=request.lock_path, progress=store, on_phase=on_phase, options=options,
                           read_ahead=read_ahead, confirmations=confirmations)
    report = run_bootstrap(inventory, hosts, runner, phases, settings)
    if resumed_with:
        report.notes.append(f"resumed with the survey the earlier run was given: {resumed_with}")
    if store is not None:
        report.notes.append(f"progress kept in {store.path}")
    if request.apply:
        from clusterctl.undo_journal import save_journal

        command = f"bootstrap phase {request.phase}" if request.phase else "bootstrap"
        journal = save_journal(report.kept_records(), command=command, folder=journal_dir,
                               cluster=inventory.name, fleet=fleet_key(fleet))
        if journal is not None:
            report.undo_journal = str(journal)
            report.notes.append(f"undo with: clusterctl undo {journal}")
        if journals is not None:
            _mark_used_by_reset(report, journals)
    return report


def _survey_of_the_run(request: BootstrapRequest, store: ProgressStore) -> tuple[BootstrapRequest, str | None]:
    """A ``--resume`` given no ``--survey`` goes on with the one the run it resumes was given: its
    topology labels and NVLink alert rule came from it, and a phase must not read their absence as
    a wish to remove them. The survey it names, and whether it was taken (``None``: not)."""
    if not request.resume or request.survey or request.without_survey or not store.survey:
        return request, None
    if not Path(store.survey).is_file():
        raise UsageError(f"--resume: the run it continues was given --survey {store.survey}, which is gone",
                         file=str(store.path), hint="Pass --survey FILE (a saved 'clusterctl survey --save FILE'), "
                         "or --without-survey to go on without one.")
    return replace(request, survey=store.survey), store.survey


def downgrade_refusal(report: BootstrapReport, inventory: Inventory) -> UsageError | None:
    """The packages phase refused to downgrade (``DOWNGRADE_REFUSED``): one paragraph for the whole
    fleet, exit 2, naming what each group of hosts runs, the pins, and the two ways on."""
    from clusterctl.bootstrap.phases.packages import DOWNGRADE_REFUSED, packages_at
    from clusterctl.hostlist import compress

    groups: dict[str, list[str]] = {}
    pinned: dict[str, str] = {}
    for finding in report.all_findings():
        if finding.code != DOWNGRADE_REFUSED or not finding.host:
            continue
        groups.setdefault(packages_at(finding.evidence.get("running", {}).items()), []).append(finding.host)
        fields = finding.evidence.get("fields", {})
        for package, version in finding.evidence.get("pinned", {}).items():
            pinned[package] = f"{version} ({fields.get(package, '')})"
    if not groups:
        return None
    runs = "; ".join(f"{compress(hosts)} run{'s' if len(hosts) == 1 else ''} {running}"
                     for running, hosts in groups.items())
    return UsageError(f"bootstrap would downgrade what the hosts run, and does not unless asked: {runs}; the "
                      f"inventory pins {packages_at(pinned.items())}.", file=inventory.source or None,
                      hint="Pick one: set the pin to what the hosts run (after 'clusterctl upgrade apply --to X', "
                      "stack.kubernetes: X), or pass --allow-downgrade to go back to the pin.")


def _mark_used_by_reset(report: BootstrapReport, journals: ResetJournals) -> None:
    """Note in each journal reset read which hosts it took back, so that no later reset or undo replays
    it there (a host joined again by hand would be reset as bootstrap's). A host where reset kept a
    file that changed since bootstrap wrote it keeps its journals: the next ``reset --force`` needs them."""
    from clusterctl.bootstrap.phases.reset import KEPT_CHANGED
    from clusterctl.undo_journal import mark_journal_used

    done = {r.host for r in report.results if r.phase == "reset" and r.status is not Status.FAILED
            and not any(f.code == KEPT_CHANGED for f in r.findings)}
    done -= set(report.failed_hosts)
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

    def finished(entry: dict[str, Any] | None) -> bool:
        if not entry:
            return False
        status = entry.get("status")
        return status in DONE or (status == "skipped" and entry.get("message") in (SkipReason.NOT_THIS_HOST.value,
                                                                                    SkipReason.CONFIRMED.value))

    return frozenset(h.name for h in hosts if all(finished(previous.hosts.get(h.name, {}).get(p)) for p in per_host))


def run_options(inventory: Inventory, hosts: Sequence[Host], phases: Sequence[Phase[Any]],
                request: BootstrapRequest, journals: ResetJournals | None = None) -> RunOptions:
    """``ctx.options`` of the run; checks the cluster settings and the survey up front (exit 2, not a
    failure per host) when a phase that reads them is part of the run."""
    survey = request.survey or getattr(getattr(inventory, "bootstrap", None), "survey", None)
    options = RunOptions(hosts=tuple(h.name for h in hosts), survey=survey,
                         restore_containerd=request.restore_containerd, force=request.force,
                         applying=request.apply, without_survey=request.without_survey,
                         reset_journals=journals, purge_packages=request.purge_packages,
                         allow_downgrade=request.allow_downgrade)
    if any(p.uses_cluster_settings for p in phases):
        from clusterctl.bootstrap.cluster.settings import cluster_settings

        cluster_settings(inventory)
        if survey:
            from clusterctl.saved_survey import load_saved_survey

            load_saved_survey(survey)
    return options


def write_plan_files(report: BootstrapReport, out_dir: str) -> list[Path]:
    """Each file the plan would write, under ``out_dir/<host>/<path on the host>``, plus
    ``out_dir/<host>/COMMANDS.sh`` listing the commands in order. Secrets are masked."""
    root = Path(out_dir).expanduser()
    written: list[Path] = []
    commands: dict[str, list[str]] = {}
    for result in report.results:
        for change in result.changes:
            if change.kind is ChangeKind.WRITE_FILE and change.path:
                target = root / _safe(result.host) / change.path.lstrip("/")
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
        target = root / _safe(host) / "COMMANDS.sh"
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text("#!/bin/sh\n# What 'clusterctl bootstrap' would run on " + host + ", in order.\n"
                          + "\n".join(lines) + "\n")
        written.append(target)
    return written


def _safe(host: str) -> str:
    cleaned = "".join(c if c.isalnum() or c in "-_.@" else "_" for c in host)
    return cleaned.lstrip(".") or "_"
