"""``clusterctl tune-nccl``: NCCL settings from survey facts and a measured sweep, rendered for deployment."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Optional

import typer

from clusterctl.cli.context import AppContext, app_context
from clusterctl.errors import ExitCode, UsageError

if TYPE_CHECKING:
    from clusterctl.inventory.model import Host
    from clusterctl.nccl.tune.derive import Tuning
    from clusterctl.nccl.tune.inputs import TuneHost
    from clusterctl.nccl.tune.sweep import SweepResult

HELP = """Derive NCCL settings for the selected hosts, each with its reason.

From a saved survey (--survey FILE, else a live survey of the hosts): NCCL_IB_HCA with the
active fabric ports in GPU order, the RoCE GID index/address family, NCCL_SOCKET_IFNAME for
bootstrap, NCCL_NET_GDR_LEVEL and NCCL_CROSS_NIC where NCCL's own choice is not right, and
NCCL_IB_DISABLE only where there is no RDMA. Nothing that repeats a default.

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
    survey: Optional[str] = typer.Option(  # noqa: UP045 - typer needs Optional on 3.10
        None, "--survey", metavar="FILE", help="Saved survey (clusterctl survey --save FILE); default: survey now."
    ),
    bench: Optional[str] = typer.Option(  # noqa: UP045
        None, "--bench", metavar="DIR", help="Folder of an earlier --sweep --out: reuse its measured winners."
    ),
    sweep: bool = typer.Option(False, "--sweep", help="Measure candidates with nccl-tests on the hosts."),
    budget: int = typer.Option(120, "--budget", min=1, metavar="N", help="Most nccl-tests runs the sweep may use."),
    repeats: int = typer.Option(3, "--repeats", min=2, metavar="N", help="Baseline runs that measure the noise."),
    fmt: str = typer.Option("conf", "--format", metavar="FORMAT", help="conf|env|k8s|slurm|tuner|all"),
    out: Optional[str] = typer.Option(None, "--out", metavar="DIR", help="Write the rendered files here."),  # noqa: UP045
    push: bool = typer.Option(False, "--push", help="Write /etc/nccl.conf on the hosts (atomic, with a backup)."),
    dry_run: bool = typer.Option(False, "--dry-run", help="With --push: show the diff per host, change nothing."),
    nccl_version: Optional[str] = typer.Option(  # noqa: UP045
        None, "--nccl-version", metavar="VERSION", help="Tune for this NCCL version instead of the surveyed one."
    ),
    namespace: Optional[str] = typer.Option(None, "--namespace", help="Namespace of the ConfigMap."),  # noqa: UP045
) -> None:
    from clusterctl.nccl.tune.render import FORMATS

    if fmt not in FORMATS:
        raise UsageError(f"unknown --format {fmt!r}", hint=f"Use one of: {', '.join(FORMATS)}.")
    if dry_run and not push:
        raise UsageError("--dry-run goes with --push (it shows what --push would change)")
    if sweep and bench:
        raise UsageError("--sweep measures now and --bench reuses an earlier sweep: give one of them")
    app = app_context(ctx)
    hosts = app.hosts()
    tune_hosts, skipped = _tune_inputs(app, hosts, survey)
    if not tune_hosts:
        raise UsageError("no reachable host to tune")

    from clusterctl.nccl.tune.derive import derive_settings

    tuning = derive_settings(tune_hosts, nccl_version=nccl_version)
    measured: SweepResult | None = None
    if sweep:
        measured = _run_sweep(app, [h for h in hosts if h.name in tuning.hosts], tuning, budget, repeats)
    elif bench:
        from clusterctl.nccl.tune.sweep import load_sweep

        measured = load_sweep(bench)

    from clusterctl.nccl.tune.render import render_files, write_files

    gpus = sum(len(h.gpu_indices) for h in tune_hosts)
    files = render_files(tuning, measured, fmt=fmt, namespace=namespace,
                         nodes=len(tune_hosts), ranks=gpus or -1)
    lint_problems = lint_rendered(files, tuning)
    written: list[str] = []
    if out:
        written = [str(p) for p in write_files(files, out)]
        if measured is not None and sweep:
            from clusterctl.nccl.tune.sweep import save_sweep

            written.append(str(save_sweep(measured, out)))
    pushed = _push(app, hosts, tuning, measured, dry_run) if push else None

    payload = _payload(tuning, measured, skipped, lint_problems, written, pushed, files if not out else None)

    def table() -> None:
        _print_table(app, tuning, measured, skipped, lint_problems, written, pushed, files, fmt, out)

    app.emit(payload, table)
    if pushed is not None and not pushed.ok:
        raise typer.Exit(ExitCode.FAILED)


def _tune_inputs(app: AppContext, hosts: tuple[Host, ...], survey: str | None) -> tuple[list[TuneHost], list[str]]:
    if survey:
        from clusterctl.nccl.tune.inputs import from_saved_survey

        return from_saved_survey(survey, hosts)
    from clusterctl.facts.netdev import IPV4_ADDRS
    from clusterctl.nccl.tune.inputs import from_host_facts
    from clusterctl.survey.collect import collect_fleet, survey_facts

    with app.runner() as runner:
        fleet = collect_fleet(runner, hosts, facts=(*survey_facts(), IPV4_ADDRS))
    out = [from_host_facts(o.host, o.value) for o in fleet.outcomes if o.ok and o.value is not None]
    skipped = [f"{o.host.name}: {o.failure.describe()}" for o in fleet.outcomes if o.failure is not None]
    return out, skipped


def _run_sweep(app: AppContext, hosts: list[Host], tuning: Tuning, budget: int, repeats: int) -> SweepResult:
    from clusterctl.nccl.tune.sweep import bench_measure, candidate_space, lint_validator, run_sweep
    from clusterctl.nccl.versions import try_parse_version

    version = try_parse_version(tuning.nccl_version) if tuning.nccl_version else None
    candidates = candidate_space(version, validate=lint_validator())
    # Candidates run on top of the derived settings: the sweep measures what a job would get.
    base_env = {s.name: s.value for s in tuning.settings}
    with app.runner() as runner:
        measure = bench_measure(runner, hosts, base_env=base_env)
        return run_sweep(measure, candidates, budget=budget, baseline_repeats=repeats,
                         nccl_version=tuning.nccl_version)


def _push(app: AppContext, hosts: tuple[Host, ...], tuning: Tuning, measured: SweepResult | None, dry_run: bool) -> Any:
    from clusterctl.nccl.tune.push import push_conf
    from clusterctl.nccl.tune.render import conf_for_host

    targets = [h for h in hosts if h.name in tuning.hosts]
    with app.runner() as runner:
        return push_conf(runner, targets, lambda name: conf_for_host(tuning, measured, name), dry_run=dry_run)


def lint_rendered(files: dict[str, str], tuning: Tuning) -> list[str]:
    """Lint every rendered settings file; anything at warning level or above is reported."""
    from clusterctl.nccl.lint import lint_settings
    from clusterctl.nccl.sources import read_settings

    formats = {".conf": "env", ".sh": "shell", ".yaml": "k8s"}
    fabric = {"ib": "ib", "roce": "roce", "socket": "ethernet"}.get(tuning.fabric)
    problems: list[str] = []
    for name, text in files.items():
        fmt = next((f for suffix, f in formats.items() if name.endswith(suffix)), None)
        if fmt is None or name.endswith("nccl_tuner.conf"):
            continue
        settings = read_settings(text, fmt, name=name)
        for f in lint_settings(settings, nccl_version=tuning.nccl_version, fabric=fabric):
            if f.severity in ("error", "warning"):
                problems.append(f"{f.file}:{f.line}: {f.severity}: {f.message}")
    return problems


def _payload(tuning: Tuning, measured: SweepResult | None, skipped: list[str], lint_problems: list[str],
             written: list[str], pushed: Any, files: dict[str, str] | None) -> dict[str, Any]:
    payload: dict[str, Any] = {
        "hosts": list(tuning.hosts),
        "nccl_version": tuning.nccl_version,
        "fabric": tuning.fabric,
        "settings": tuning.settings,
        "host_overrides": tuning.host_overrides,
        "notes": list(tuning.notes),
        "warnings": list(tuning.warnings) + skipped,
        "lint": lint_problems,
        "sweep": measured,
        "written": written,
    }
    if files is not None:
        payload["files"] = files
    if pushed is not None:
        payload["push"] = [
            {"host": o.host.name, "ok": o.ok, "changed": o.value.changed if o.value else None,
             "diff": o.value.diff if o.value else None, "backup": o.value.backup_path if o.value else None,
             "error": o.failure.describe() if o.failure else None}
            for o in pushed.outcomes
        ]
    return payload


def _print_table(app: AppContext, tuning: Tuning, measured: SweepResult | None, skipped: list[str],
                 lint_problems: list[str], written: list[str], pushed: Any, files: dict[str, str], fmt: str,
                 out: str | None) -> None:
    from rich.table import Table

    console = app.console
    title = f"NCCL settings for {len(tuning.hosts)} host(s), NCCL {tuning.nccl_version or '?'}, fabric {tuning.fabric}"
    table = Table(title=title, title_justify="left", show_lines=False)
    table.add_column("variable", no_wrap=True)
    table.add_column("value", overflow="fold")
    table.add_column("reason", overflow="fold")
    settings = list(tuning.settings) + (list(measured.settings) if measured else [])
    for s in settings:
        table.add_row(s.name, s.value, s.reason)
    for host, own in sorted(tuning.host_overrides.items()):
        for s in own:
            table.add_row(f"{s.name} @{host}", s.value, s.reason)
    if settings or tuning.host_overrides:
        console.print(table)
    else:
        console.print("NCCL's defaults are right for these hosts: nothing to set.")
    for note in tuning.notes:
        console.print(f"note: {note}", markup=False, highlight=False)
    if measured is not None:
        _print_sweep(app, measured)
    for warning in list(tuning.warnings) + skipped:
        app.warn(warning)
    for problem in lint_problems:
        app.warn(f"lint: {problem}")
    if written:
        console.print(f"wrote {len(written)} file(s) under {out}", markup=False)
    elif not pushed:
        for name, text in files.items():
            if len(files) > 1:
                console.print(f"--- {name}", markup=False, highlight=False)
            console.print(text.rstrip("\n"), markup=False, highlight=False)
    if pushed is not None:
        _print_push(app, pushed)


def _print_sweep(app: AppContext, measured: SweepResult) -> None:
    from rich.table import Table

    table = Table(title=f"sweep: {measured.runs_used} of {measured.budget} runs "
                        f"(a full grid would take {measured.full_grid_runs})", title_justify="left")
    for column in ("collective", "size range", "baseline GB/s", "noise", "best", "gain (interval)", "kept"):
        table.add_column(column)
    for r in measured.ranges:
        gain = f"{r.gain:+.1%} ({r.ci_low:+.1%}..{r.ci_high:+.1%})" if r.best_runs else "-"
        table.add_row(r.collective, r.range, f"{r.baseline_gbps:.1f}", f"{r.noise:.1%}", r.best_label, gain,
                      "yes" if r.significant else "no: defaults best")
    app.console.print(table)
    for note in measured.notes:
        app.console.print(f"note: {note}", markup=False, highlight=False)


def _print_push(app: AppContext, pushed: Any) -> None:
    for o in pushed.outcomes:
        if o.failure is not None:
            app.console.print(f"{o.host.name}: failed: {o.failure.describe()}", markup=False)
            continue
        value = o.value
        if value.dry_run:
            app.console.print(value.diff.rstrip("\n") or f"{o.host.name}: {value.path} already up to date",
                              markup=False, highlight=False)
        elif value.changed:
            kept = f" (previous kept as {value.backup_path})" if value.backup_path else ""
            app.console.print(f"{o.host.name}: wrote {value.path}{kept}", markup=False)
        else:
            app.console.print(f"{o.host.name}: {value.path} already up to date", markup=False)
