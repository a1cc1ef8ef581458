"""``clusterctl tune-nccl``: NCCL settings from survey facts and a measured sweep, rendered for deployment."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from clusterctl.cli.confirm import confirm_change
from clusterctl.cli.context import STATE_DIR, AppContext, app_context
from clusterctl.errors import ExitCode, UsageError
from clusterctl.findings import fails
from clusterctl.terminal_layout import Column, print_table

if TYPE_CHECKING:
    from clusterctl.nccl.tune.run import TuneOutcome
    from clusterctl.nccl.tune.sweep_result import SweepResult

HELP = """Derive NCCL settings for the selected hosts, each with its reason.

From a saved survey (--survey FILE, else a live survey of the hosts): NCCL_IB_HCA with the
active fabric ports in GPU order (a port that trained below the fleet's rate is left out and
named), the RoCE GID index/address family, NCCL_SOCKET_IFNAME for bootstrap, the socket
threads on TCP fabrics, and NCCL_CROSS_NIC=0 only where the inventory declares the fabric
rail-optimised (fabric.rail_optimized). Nothing that repeats a default. Debugging settings
(NCCL_NET_GDR_LEVEL, NCCL_IB_DISABLE) are never derived: no RDMA is a warning to fix, and a
GPU that reaches its NIC through the CPU gets NCCL_NET_GDR_LEVEL=PHB measured by --sweep.

--sweep measures NCCL_ALGO/PROTO, channel counts, NCCL_BUFFSIZE and NCCL_NTHREADS against the
defaults with nccl-tests on the hosts, within --budget runs: candidates alternate with the
baseline (ABAB), the best of each size range is re-measured with fresh runs, and a value is
kept only where its confidence interval (corrected for every candidate and size range) lies
above the defaults and the baseline did not move during the sweep. Winners with an algorithm
and protocol go to NCCL's tuner plugin file (2.28+), per collective and size.

Examples:

  clusterctl -i inventories/demo.yaml tune-nccl --survey survey.json

  clusterctl tune-nccl --survey survey.json --format all --out nccl/

  clusterctl tune-nccl --sweep --budget 120 --out nccl/

  clusterctl tune-nccl --survey survey.json --push --dry-run
"""


def register(app: typer.Typer) -> None:
    app.command("tune-nccl", help=HELP)(tune_nccl_command)


def tune_nccl_command(
    ctx: typer.Context,
    survey: str | None = typer.Option(
        None, "--survey", metavar="FILE", help="Saved survey (clusterctl survey --save FILE); default: survey now."
    ),
    bench: str | None = typer.Option(
        None, "--bench", metavar="DIR", help="Folder of an earlier --sweep --out: reuse its measured winners."
    ),
    sweep: bool = typer.Option(False, "--sweep", help="Measure candidates with nccl-tests on the hosts."),
    budget: int = typer.Option(120, "--budget", min=1, metavar="N", help="Most nccl-tests runs the sweep may use."),
    repeats: int = typer.Option(3, "--repeats", min=2, metavar="N", help="Baseline runs that measure the noise."),
    collectives: list[str] = typer.Option(
        ["all_reduce"], "--collective", metavar="OP",
        help="Collective the sweep measures (repeatable): all_reduce, all_gather, reduce_scatter, broadcast, reduce."),
    fmt: str = typer.Option("conf", "--format", metavar="FORMAT", help="conf|env|k8s|slurm|tuner|all"),
    out: str | None = typer.Option(None, "--out", metavar="DIR", help="Write the rendered files here."),
    push: bool = typer.Option(False, "--push", help="Write /etc/nccl.conf on the hosts (atomic, with a backup, "
                              "under the host lock; each write in the undo journal before it is made)."),
    dry_run: bool = typer.Option(False, "--dry-run", help="With --push: show the diff per host, change nothing."),
    nccl_version: str | None = typer.Option(
        None, "--nccl-version", metavar="VERSION", help="Tune for this NCCL version instead of the surveyed one."
    ),
    namespace: str | None = typer.Option(None, "--namespace", help="Namespace of the ConfigMap."),
    yes: bool = typer.Option(
        False, "--yes", "-y", help="With --push: change the hosts without asking (required off a terminal)."
    ),
    force_unlock: bool = typer.Option(
        False, "--force-unlock", help="With --push: clear a host lock a dead clusterctl run left behind."
    ),
    state_dir: str | None = STATE_DIR,
) -> None:
    from clusterctl.inventory.cluster_sections import namespace_name
    from clusterctl.nccl.tune.render import FORMATS

    if fmt not in FORMATS:
        raise UsageError(f"unknown --format {fmt!r}", hint=f"Use one of: {', '.join(FORMATS)}.")
    if dry_run and not push:
        raise UsageError("--dry-run goes with --push (it shows what --push would change)")
    if force_unlock and not push:
        raise UsageError("--force-unlock goes with --push (it clears a host lock before the write)")
    if not sweep and (budget, repeats, collectives) != (120, 3, ["all_reduce"]):  # the options' defaults
        raise UsageError("--budget, --repeats and --collective go with --sweep (they shape what it measures)")
    if sweep and bench:
        raise UsageError("--sweep measures now and --bench reuses an earlier sweep: give one of them")
    from clusterctl.nccl.tune.run import TuneRequest, tune_nccl

    if nccl_version is not None:
        from clusterctl.nccl.versions import parse_version

        parse_version(nccl_version)  # the same rule as nccl lint: 'banana' is a usage error
    app = app_context(ctx)
    if push and not dry_run:
        confirm_change("write /etc/nccl.conf", [h.name for h in app.hosts()], yes=yes,
                       preview="clusterctl tune-nccl --push --dry-run")
    request = TuneRequest(survey=survey, bench=bench, sweep=sweep, budget=budget, repeats=repeats, fmt=fmt, out=out,
                          push=push, dry_run=dry_run, force_unlock=force_unlock, nccl_version=nccl_version,
                          namespace=None if namespace is None else namespace_name(namespace, "--namespace"),
                          collectives=tuple(dict.fromkeys(collectives)), state_dir=state_dir)
    with app.runner() as runner:
        outcome = tune_nccl(runner, app.hosts(), request, inventory=app.inventory())
    app.emit(_payload(outcome), lambda: _print_table(app, outcome, out, dry_run=dry_run, bench=bench))
    for host, conflicts in outcome.site_conflicts.items():
        for c in conflicts:
            app.warn(f"{host}: /etc/nccl.conf line {c.line} (a site setting outside clusterctl's block) sets "
                     f"{c.name}={c.site_value}; NCCL keeps the first value it reads, the block's {c.block_value}")
    # A host the push failed on, or files just rendered that fail clusterctl's own lint: exit 1.
    if (outcome.pushed is not None and not outcome.pushed.ok) or fails(outcome.lint_findings):
        raise typer.Exit(ExitCode.FAILED)


def _payload(outcome: TuneOutcome) -> dict[str, Any]:
    tuning, measured, files = outcome.tuning, outcome.measured, outcome.files
    payload: dict[str, Any] = {
        "hosts": list(tuning.hosts),
        "nccl_version": tuning.nccl_version,
        "fabric": tuning.fabric,
        "settings": tuning.settings,
        "host_overrides": tuning.host_overrides,
        "notes": list(tuning.notes),
        "warnings": list(tuning.warnings) + outcome.skipped,
        "lint": outcome.lint_problems,
        "sweep": measured,
        "written": outcome.written,
    }
    if not outcome.written:
        payload["files"] = files
    if outcome.pushed is not None:
        from clusterctl.cli.changes_view import gate_outcome_record

        payload["push"] = [gate_outcome_record(o, diff=True) for o in outcome.pushed.outcomes]
        payload["undo_journal"] = str(outcome.undo_journal) if outcome.undo_journal else None
        payload["push_notes"] = outcome.notes
        payload["site_conflicts"] = outcome.site_conflicts  # SiteConflict's fields, as -o json/yaml write them
    return payload


def _print_table(app: AppContext, outcome: TuneOutcome, out: str | None, *, dry_run: bool = False,
                 bench: str | None = None) -> None:
    tuning, measured, files, pushed = outcome.tuning, outcome.measured, outcome.files, outcome.pushed

    console = app.console
    title = f"NCCL settings for {len(tuning.hosts)} host(s), NCCL {tuning.nccl_version or '?'}, fabric {tuning.fabric}"
    # The variable (with the host an override is for) and its value are copied: never cut. The
    # reason wraps, and goes first when even that does not fit (each row then prints as a block).
    columns = (Column("variable", keep=True), Column("value", keep=True), Column("reason"))
    rows = [(s.name, s.value, s.reason) for s in (*tuning.settings, *(measured.settings if measured else ()))]
    for host, own in sorted(tuning.host_overrides.items()):
        rows.extend((f"{s.name} @{host}", s.value, s.reason) for s in own)
    if rows:
        print_table(console, columns, rows, title=title)
    else:
        console.print("NCCL's defaults are right for these hosts: nothing to set.")
    for note in tuning.notes:
        app.note(note)
    if measured is not None:
        from clusterctl.nccl.tune.saved_sweep import SWEEP_FILE

        # where the sweep's JSON lies: just written by --sweep --out, or read by --bench
        saved = next((path for path in outcome.written if Path(path).name == SWEEP_FILE), None)
        _print_sweep(app, measured, saved or (str(Path(bench) / SWEEP_FILE) if bench else None))
    for warning in list(tuning.warnings) + outcome.skipped:
        app.warn(warning)
    for problem in outcome.lint_problems:
        app.warn(f"lint: {problem}")
    if outcome.written:
        app.say(f"wrote {len(outcome.written)} file(s) under {out}", soft_wrap=False)
    elif not pushed:
        for name, text in files.items():
            if len(files) > 1:
                app.say(f"--- {name}", soft_wrap=False)
            # A file's lines as they are (soft_wrap: never broken mid-path, so a copy-paste works).
            app.say(text.rstrip("\n"))
    if pushed is not None:
        from clusterctl.cli.changes_view import print_gate_outcomes, say_run_end

        print_gate_outcomes(app, pushed)
        for note in outcome.notes:
            app.note(note)
        say_run_end(app, dry_run=dry_run, journal=outcome.undo_journal)


def _print_sweep(app: AppContext, measured: SweepResult, sweep_file: str | None) -> None:
    # The range and its best settings are what a user acts on: noise, then the baseline, go first.
    columns = (Column("collective", keep=True), Column("size range", keep=True),
               Column("baseline GB/s", keep=True, drop_order=2), Column("noise", keep=True, drop_order=3),
               Column("best", keep=True), Column("gain (interval)", keep=True, drop_order=1), Column("kept"))
    rows = [(r.collective, r.range, f"{r.baseline_gbps:.1f}", f"{r.noise:.1%}", r.best_label,
             f"{r.gain:+.1%} ({r.ci_low:+.1%}..{r.ci_high:+.1%})" if r.best_runs else "-",
             "yes" if r.significant else "no: defaults best") for r in measured.ranges]
    print_table(app.console, columns, rows, title=f"sweep: {measured.runs_used} of {measured.budget} runs "
                                                  f"(a full grid would take {measured.full_grid_runs})")
    for note in measured.notes:
        app.note(note)
    if measured.unread_rows:
        runs = len({(r.collective, r.run) for r in measured.unread_rows})
        where = f"'unread_rows' in {sweep_file}" if sweep_file else "'sweep.unread_rows' of -o json"
        app.warn(f"{len(measured.unread_rows)} nccl-tests row(s) in {runs} run(s) could not be read (those runs "
                 f"are judged without their sizes); the run, host and line of each: {where}")
