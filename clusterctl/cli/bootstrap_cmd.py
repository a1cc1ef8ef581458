"""``clusterctl bootstrap``: Kubernetes on the inventory's hosts, phase by phase."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import typer

from clusterctl.cli.changes_view import PLANNED_WORDS
from clusterctl.cli.confirm import YES, confirm_change
from clusterctl.cli.context import SKIP_PHASES, STATE_DIR, AppContext, app_context, given_options, with_options
from clusterctl.errors import ExitCode
from clusterctl.hostlist import compress
from clusterctl.secret import mask_text
from clusterctl.terminal_layout import Column, print_table, print_wrapped
from clusterctl.terminal_text import one_line

if TYPE_CHECKING:
    from collections.abc import Sequence, Set

    from clusterctl.engine.phase import Phase
    from clusterctl.engine.run import HostPhaseResult, RunReport
    from clusterctl.inventory.model import Host

HELP = """\
Bring up Kubernetes (kubeadm, containerd with the NVIDIA runtime) on the inventory's hosts.

Phases run in order on every selected host at once; a host that fails a phase is left out of
the later ones, the others go on. Each phase reads the host first and changes only what
differs, so a second run changes nothing. 'bootstrap plan' shows every command and file diff
without touching anything.

On a real host an apply runs commands as root through sudo: it loads kernel modules and sets
sysctls, turns swap off and comments it out of /etc/fstab, adds apt sources and downloads and
installs containerd, kubelet, kubeadm and kubectl, rewrites containerd's config and restarts it,
and runs kubeadm init/join (see docs/bootstrap.md). It asks first, naming the hosts; --yes (or
CLUSTERCTL_YES=1) confirms without asking, and is required off a terminal.

Examples:

  clusterctl -i inventories/demo.yaml bootstrap plan

  clusterctl bootstrap plan --out review/

  clusterctl bootstrap --dry-run --skip-phases packages

  clusterctl bootstrap --only 'gpu-b*' --yes

  clusterctl bootstrap --resume

  clusterctl bootstrap phase containerd -l gpu-a1
"""

bootstrap_app = typer.Typer(help=HELP, invoke_without_command=True, no_args_is_help=False,
                            rich_markup_mode=None)

#: Options reset shares (``reset_cmd``).
ONLY = typer.Option(None, "--only", metavar="PATTERN", help="Only these hosts (like -l/--limit).")
FORCE_UNLOCK = typer.Option(False, "--force-unlock", help="Clear a lock left by a dead run before taking it.")


def _planned(
    only: str | None = ONLY,
    survey: str | None = typer.Option(None, "--survey", metavar="FILE", envvar="CLUSTERCTL_SURVEY",
                                      help="A saved 'clusterctl survey --save FILE' report: topology labels, GPU "
                                      "counts for verify, NVLink alert hosts."),
    allow_downgrade: bool = typer.Option(False, "--allow-downgrade", help="Install the inventory's pins even where "
                                         "a host runs a newer version (without it such a run stops with exit 2, "
                                         "naming both)."),
) -> None:
    """What bootstrap, 'bootstrap phase' and 'bootstrap plan' plan from (``with_options``)."""


def _applied(
    dry_run: bool = typer.Option(False, "--dry-run", help="Plan and stop: show what would change, touch nothing."),
    resume: bool = typer.Option(False, "--resume", help="Skip phases an earlier run finished (verified again)."),
    force_unlock: bool = FORCE_UNLOCK,
    state_dir: str | None = STATE_DIR,
    without_survey: bool = typer.Option(False, "--without-survey", help="Run without a saved survey even where "
                                        "that drops what an earlier run's survey gave (the NVLink alert rule)."),
    yes: bool = YES,
) -> None:
    """How bootstrap and 'bootstrap phase' apply their plan (``with_options``)."""


def register(app: typer.Typer) -> None:
    from clusterctl.cli.artifacts_cmd import register_on

    register_on(bootstrap_app)
    app.add_typer(bootstrap_app, name="bootstrap")


@bootstrap_app.callback()
@with_options(_planned, _applied)
def bootstrap_all(ctx: typer.Context, skip_phases: str | None = SKIP_PHASES, **options: Any) -> None:
    if ctx.invoked_subcommand is None:
        _execute(ctx, **ctx.params)


@bootstrap_app.command("phase", help="""Run one phase by name (see 'bootstrap phases').

Examples:

  clusterctl bootstrap phase containerd -l gpu-a1 --dry-run

  clusterctl bootstrap phase kernel --only 'gpu-b*' --yes
""")
@with_options(_planned, _applied)
def bootstrap_phase(ctx: typer.Context, phase: str = typer.Argument(
        ..., metavar="NAME", help="preflight, kernel, packages, containerd, ..."), **options: Any) -> None:
    _execute(ctx, **ctx.params)


@bootstrap_app.command("plan", help="""Per host and phase: the commands and a unified diff of every file that
would change. Touches nothing.

Examples:

  clusterctl -i inventories/demo.yaml bootstrap plan

  clusterctl bootstrap plan --phase containerd --out review/

  clusterctl bootstrap plan --survey survey.json -o json
""")
@with_options(_planned)
def bootstrap_plan(
    ctx: typer.Context,
    out: str | None = typer.Option(None, "--out", metavar="DIR",
                                      help="Also write each file under DIR/<host>/<path on the host>."),
    phase: str | None = typer.Option(None, "--phase", metavar="NAME", help="Plan one phase only."),
    skip_phases: str | None = SKIP_PHASES,
    **options: Any,
) -> None:
    _execute(ctx, dry_run=True, **ctx.params)


@bootstrap_app.command("phases", help="""List the phases in the order they run.

Example:

  clusterctl bootstrap phases -o json
""")
def bootstrap_phases(ctx: typer.Context) -> None:
    from clusterctl.bootstrap.registry import all_phases

    emit_phases(app_context(ctx), all_phases(include_on_demand=True), default={p.name for p in all_phases()})


def emit_phases(app: AppContext, phases: Sequence[Phase[Any, Any]], *, default: Set[str],
                batched: bool = False) -> None:
    """``bootstrap phases`` and ``upgrade phases``: each phase in run order, where and how it runs (its hosts'
    role, one at a time, once for the cluster; ``batched``: upgrade's nodes in batches, some phases from the first
    control plane) and whether it changes anything; a phase not in ``default`` runs only when named."""
    payload = [{"name": p.name, "description": p.description, "read_only": p.read_only, "role": p.role,
                "not_role": p.not_role, "serial": p.serial, "once_per_cluster": p.once_per_cluster,
                "default": p.name in default} | ({"in_batches": not p.once_per_cluster, "runs_from":
                                                  None if p.via is None else "first-control-plane"} if batched else {})
               for p in phases]
    rows = [[p.name, _where_it_runs(p, batched=batched), "no" if p.read_only else "yes",
             p.description + ("" if p.name in default else " (only when asked by name)")] for p in phases]
    columns = (Column("PHASE", keep=True), Column("RUNS"), Column("CHANGES", keep=True), Column("WHAT IT DOES"))
    app.emit(payload, lambda: print_table(app.console, columns, rows, boxed=False))


def _where_it_runs(phase: Phase[Any, Any], *, batched: bool) -> str:
    """What ``Phase.applies_to`` decides by default, ``serial`` and ``once_per_cluster``, in words: "each host",
    "control planes, one at a time", "once, on the first control plane"; a batched run's node phases (its
    ``via``: upgrade's, the first control plane) "each batch of nodes, from the first control plane"."""
    kind = phase.role.replace("-", " ") if phase.role else "host"
    but = f" but {phase.not_role.replace('-', ' ')}s" if phase.not_role else ""
    if phase.once_per_cluster:
        return f"once, on the first {kind}{but}"
    if batched:
        return "each batch of nodes" + ("" if phase.via is None else ", from the first control plane")
    return (f"{kind}s" if phase.role else "each host") + but + (", one at a time" if phase.serial else "")


def hosts_of_run(app: AppContext, only: str | None) -> tuple[Host, ...]:
    """The hosts ``-l`` selects, narrowed by ``--only``."""
    from clusterctl.inventory.limit import select_hosts

    keep = {h.name for h in select_hosts(app.inventory(), only, "--only")} if only is not None else None
    return tuple(h for h in app.hosts() if keep is None or h.name in keep)


def _execute(ctx: typer.Context, *, only: str | None, dry_run: bool, yes: bool = False, out: str | None = None,
             phase: str | None = None, skip_phases: str | None = None, resume: bool = False,
             force_unlock: bool = False, state_dir: str | None = None, survey: str | None = None,
             **options: Any) -> None:
    """bootstrap, its phase and plan, and reset: each passes its options by name (``ctx.params``);
    ``options`` are the run's flags (``RunOptions``: --force, --allow-downgrade, ...)."""
    from clusterctl.bootstrap.run import BootstrapRequest, run, write_plan_files
    from clusterctl.bootstrap.run_data import RunOptions
    from clusterctl.cli.findings_view import print_findings
    from clusterctl.writable import writable_dir

    app = app_context(ctx)
    inventory = app.inventory()
    hosts = hosts_of_run(app, only)
    if out:
        writable_dir(out, "--out")  # before any host is read, as 'bootstrap artifacts --out'
    if not dry_run:
        _confirm_bootstrap(phase, skip_phases, [h.name for h in hosts], yes=yes)
    request = BootstrapRequest(apply=not dry_run, phase=phase, skip_phases=skip_phases, resume=resume,
                               force_unlock=force_unlock, state_dir=state_dir, survey=survey,
                               options=RunOptions(**options), given=given_options(ctx))
    show = None if app.machine_output else (lambda p, r: _print_phase(app, p, r, plan=dry_run))
    with app.runner() as runner:
        report = run(inventory, hosts, runner, request, on_phase=show)
    written = write_plan_files(report, out) if out else []

    def table() -> None:
        # Each finding with its fix, as every report prints findings (the plan's rows say "see findings").
        if findings := report.all_findings():
            app.say("findings")
            print_findings(app.console, findings)
        _print_recap(app, report)
        if out:
            app.say(f"wrote {len(written)} file(s) under {out}", soft_wrap=False)
        for note in report.notes:
            app.note(note)

    payload: dict[str, Any] = report.to_json()
    if out:
        payload["out_files"] = [str(p) for p in written]
    app.emit(payload, table)
    for host, why in report.failed_hosts.items():
        app.say(f"FAILED {host}: {one_line(why)}", err=True, soft_wrap=False)
    if report.not_verified:
        # No host failed, but nothing says the cluster works: that is not a success.
        app.say(f"NOT VERIFIED: {one_line(report.not_verified)}", err=True, soft_wrap=False)
    if not report.ok:
        raise typer.Exit(ExitCode.FAILED)


#: What each phase that changes a host does to it, in words for the confirmation question.
_PHASE_WORDS = {
    "kernel": "load kernel modules, set sysctls, turn swap off and comment it out of /etc/fstab",
    "packages": "add apt sources, download and install packages",
    "containerd": "rewrite containerd's config and restart it",
    "nvidia-runtime": "configure the NVIDIA container runtime",
    "control-plane": "run kubeadm init",
    "join": "run kubeadm join",
    "reset": "tear Kubernetes down",
}


def _confirm_bootstrap(phase: str | None, skip_phases: str | None, hosts: list[str], *, yes: bool) -> None:
    """Apply asks first, like reset and tune-nccl --push: --yes, or a question on the terminal."""
    from clusterctl.bootstrap.registry import select_phases

    changing = [p for p in select_phases(phase, skip_phases) if not p.read_only]
    if not changing:
        return  # preflight or verify alone only read
    done = [_PHASE_WORDS[p.name] for p in changing if p.name in _PHASE_WORDS]
    others = [p.name for p in changing if p.name not in _PHASE_WORDS]
    what = "run commands as root (sudo): " + "; ".join(done + ([f"apply {', '.join(others)}"] if others else []))
    confirm_change(what, hosts, yes=yes, preview="clusterctl bootstrap plan" + (f" --phase {phase}" if phase else ""))


def _print_phase(app: AppContext, phase: Phase[Any, Any], results: list[HostPhaseResult], *, plan: bool) -> None:
    from clusterctl.engine.run import SkipReason, Status

    console = app.console
    app.say(f"\nPHASE [{phase.name}] {'*' * max(3, 60 - len(phase.name))}", soft_wrap=False)
    by_status: dict[str, list[str]] = {}
    for r in results:
        if r.skipped is SkipReason.NOT_NEEDED:
            by_status.setdefault(r.message, []).append(r.host)  # why: "nothing to do: the host has no GPUs"
        elif r.status is not Status.FAILED:
            by_status.setdefault(plan_word(phase, r) if plan else r.status.value, []).append(r.host)
    # The rows wrap under their message column on a narrow terminal (``print_wrapped``), one line off it.
    for status, names in by_status.items():
        print_wrapped(console, f"{status}: {compress(names)}")
    if not plan:
        # What changed, hosts with the same changes on one line (a fleet reads in a few lines).
        done: dict[tuple[str, ...], list[str]] = {}
        for r in results:
            if r.status is Status.CHANGED and r.changes:
                done.setdefault(tuple(c.summary for c in r.changes), []).append(r.host)
        for summaries, names in done.items():
            print_wrapped(console, one_line(mask_text("; ".join(summaries))), first_indent=f"  {compress(names)}: ")
    for r in results:
        if r.status is Status.FAILED:
            print_wrapped(console, one_line(r.message), first_indent=f"failed: {r.host}: ")
            for line in r.rollback:
                print_wrapped(console, one_line(line), first_indent="  rollback: ")
    if plan:
        _print_plan(app, phase, results)


#: A plan's word for a host where the phase planned nothing: "ok" would claim a check that did not
#: happen (verify only checks after the changes) or work that will not be done (no survey, no labels).
PLAN_VERIFY = "checks after the changes are applied"


def plan_word(phase: Phase[Any, Any], result: HostPhaseResult) -> str:
    """What a plan says of one host and phase (``would change``, ``nothing to change``, ...)."""
    from clusterctl.engine.run import Status
    from clusterctl.findings import Severity

    if result.status is Status.CHANGED:
        return PLANNED_WORDS["changed"]
    if result.status is not Status.OK:
        return result.status.value
    if phase.name == "verify":
        return PLAN_VERIFY
    left = sorted({f.code for f in result.findings if f.severity in (Severity.WARNING, Severity.ERROR)})
    if left:
        return f"not done ({', '.join(left)}: see findings)"
    return "ok" if phase.read_only else PLANNED_WORDS["ok"]  # preflight's checks did run in the plan


def _print_plan(app: AppContext, phase: Phase[Any, Any], results: list[HostPhaseResult]) -> None:
    """Each host's commands and diffs; hosts whose plan is the same are printed once, together."""
    from clusterctl.bootstrap.phases.reset import KNOWN_NAMES_MARK

    groups: dict[tuple[str, ...], list[str]] = {}
    for r in results:
        if not r.changes:
            continue
        lines: list[str] = []
        for change in r.changes:
            diff = change.diff()
            # The diff labels name the host: neutral labels let identical hosts share one block.
            text = diff.replace(f"{r.host}:", "HOST:") if diff else f"$ {change.describe()}"
            if not diff and change.summary.endswith(KNOWN_NAMES_MARK):
                text += f"   #{KNOWN_NAMES_MARK}"  # reset chose it by name: no journal of bootstrap names the host
            lines.append(text.rstrip("\n"))
        groups.setdefault(tuple(lines), []).append(r.host)
    for block, hosts in groups.items():
        app.say(f"--- {compress(hosts)} [{phase.name}]: {len(block)} change(s)", soft_wrap=False)
        for text in block:
            shown = text.replace("HOST:", f"{hosts[0]}:") if len(hosts) == 1 else text
            app.say(shown)


def _print_recap(app: AppContext, report: RunReport) -> None:
    from clusterctl.engine.run import Status

    # A plan's "ok" is a phase with nothing to change, not a phase that passed.
    planned = {Status.CHANGED: PLANNED_WORDS["changed"], Status.OK: "no change"}
    count_columns = [Column(s.value if report.applied else planned.get(s, s.value), keep=True, justify="right")
                     for s in Status]
    print_table(app.console, (Column("phase", keep=True), *count_columns, Column("time", keep=True, justify="right")),
                [(p.phase, *(str(p.counts.get(s, 0)) for s in Status), f"{p.duration_s:.1f}s") for p in report.recap],
                title="PLAN RECAP (nothing was changed)" if not report.applied else "RECAP")
    for host, counts in report.host_counts().items():
        parts = " ".join(f"{s.value}={counts[s]}" for s in Status)
        app.say(f"{host:<20} : {parts}", soft_wrap=False)
    if report.applied and not report.changed and report.ok:
        app.say("nothing changed: every host was already as wanted", soft_wrap=False)
    elif report.ok and not report.applied and not any(r.changes for r in report.results):
        app.say("nothing to do: every host is already as wanted", soft_wrap=False)
