"""``clusterctl bench``: ib (perftest matrix), nccl (nccl-tests), report (saved logs), compare."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any, cast

import typer

from clusterctl.cli.context import STATE_DIR, AppContext, app_context
from clusterctl.findings import fails
from clusterctl.inventory.model import Fabric, FabricType
from clusterctl.terminal_layout import Column, print_table, print_wrapped
from clusterctl.terminal_text import one_line, visible
from clusterctl.wording import plural

if TYPE_CHECKING:
    from collections.abc import Sequence

    from clusterctl.bench.ib_bench import IBBenchReport
    from clusterctl.bench.model import Matrix


bench_app = typer.Typer(
    name="bench",
    help="Benchmark the fabric (perftest between host pairs) and the GPUs (nccl-tests).",
    no_args_is_help=True,
    rich_markup_mode=None,
)

#: ``--results-dir`` of the commands that run a benchmark (ib, nccl).
RESULTS_DIR = typer.Option(None, "--results-dir", metavar="DIR",
                           help="Where to keep raw outputs and results.json (a new folder).")


def register(app: typer.Typer) -> None:
    app.add_typer(bench_app, name="bench")


def _matrix_table(app: AppContext, matrix: Matrix, good: float | None) -> None:
    from rich.text import Text

    from clusterctl.bench.plot import colour

    def cell(a: str, b: str) -> Text:
        if a == b or not matrix.tested(a, b):
            return Text("·")
        value = matrix.get(a, b)
        text = "fail" if value is None else f"{value:.1f}"
        return Text(text, style=colour(value, good, latency=matrix.unit == "us"))

    # Host names are copied and figures read whole: a fleet too wide for the terminal prints a block per host.
    columns = [Column("", keep=True), *(Column(node, keep=True, justify="right") for node in matrix.nodes)]
    print_table(app.console, columns, [[Text(a), *(cell(a, b) for b in matrix.nodes)] for a in matrix.nodes],
                title=matrix.cell_meaning)


@bench_app.command("ib", help="""perftest (ib_write_bw, or ib_write_lat with --latency) between host pairs.

Pairs run in rounds of disjoint pairs (round-robin tournament: N-1 rounds for N hosts),
one test per HCA pair with its own port; every server is killed by PID afterwards.
Exits 1 when a link is below its threshold or a test failed.

Examples:

  clusterctl -i inventories/demo.yaml bench ib --dry-run

  clusterctl bench ib --pattern within-rack --plot matrix.svg

  clusterctl bench ib --find-straggler -o json
""")
def ib_command(
    ctx: typer.Context,
    pattern: str = typer.Option("all-pairs", "--pattern", help="all-pairs | ring | within-rack | across-racks."),
    latency: bool = typer.Option(False, "--latency", help="Run ib_write_lat instead of ib_write_bw."),
    hca: list[str] = typer.Option([], "--hca", help="HCA to test (repeatable); default: every active HCA."),
    survey: str | None = typer.Option(None, "--survey", metavar="FILE",
                                         help="Saved survey (survey --save): active HCAs, GID indexes."),
    find_straggler: bool = typer.Option(False, "--find-straggler",
                                        help="Ring first, then targeted re-tests: few rounds on big fleets."),
    by_hca: bool = typer.Option(False, "--by-hca", help="Show an HCA x HCA matrix instead of host x host."),
    duration: int = typer.Option(5, "--duration", min=1, help="Seconds per bandwidth test (-D)."),
    size: int | None = typer.Option(None, "--size", min=1, help="Message size in bytes (-s)."),
    qps: int | None = typer.Option(None, "--qps", min=1, help="Queue pairs per test (-q)."),
    port: int = typer.Option(18515, "--port", min=1, max=65000, help="First TCP port; each test of a round adds one."),
    sudo: bool = typer.Option(False, "--sudo", help="Run perftest with sudo -n."),
    settle: float = typer.Option(1.0, "--settle", min=0.0, help="Seconds between starting servers and clients."),
    client_timeout: float | None = typer.Option(None, "--client-timeout", min=0.1,
                                                   help="Limit per client run (default: duration + 30 s)."),
    plot: str | None = typer.Option(None, "--plot", metavar="FILE",
                                       help="Write a heat map (.svg, or .png with matplotlib)."),
    results_dir: str | None = RESULTS_DIR,
    dry_run: bool = typer.Option(False, "--dry-run", help="Print the rounds and exact commands; run nothing."),
) -> None:
    from clusterctl.bench.hcas import choose_hcas
    from clusterctl.bench.ib_bench import run_ib_bench
    from clusterctl.bench.payload import dry_run_payload, ib_payload
    from clusterctl.bench.perftest_rounds import IBOptions
    from clusterctl.bench.results import given_back_if_refused, new_results_dir, save_ib_run
    from clusterctl.changes import Gate
    from clusterctl.cli.findings_view import print_findings

    app = app_context(ctx)
    opts = IBOptions(test="ib_write_lat" if latency else "ib_write_bw", hcas=tuple(hca), size_bytes=size,
                     duration_s=duration, qps=qps, base_port=port, sudo=sudo, settle_s=settle,
                     client_timeout_s=client_timeout)
    hosts = app.hosts()
    folder = None
    if not dry_run:
        # Where results go is checked (and claimed) before any host is touched.
        if plot:
            from clusterctl.bench.plot import check_plot_target

            check_plot_target(plot)
        folder = new_results_dir(results_dir)
    # Dry run: the gate records every server and client command; no host is reached.
    gate = Gate(apply=not dry_run)
    with app.runner() as runner, given_back_if_refused(folder, named=results_dir is not None):
        hcas, warnings = choose_hcas(runner, hosts, survey=survey, given=hca, discover=gate.apply)
        for host, warning in warnings.items():
            app.warn(f"{host}: {warning}")
        report = run_ib_bench(runner, hosts, hcas, opts, pattern=pattern, find_stragglers=find_straggler, gate=gate)
    if not gate.apply:
        plan = {**dry_run_payload(report), "changes": [r.change.to_json() for r in gate.records]}
        app.emit(plan, lambda: _print_plan(app, report))
        return
    payload = ib_payload(report, by_hca=by_hca)
    assert folder is not None
    save_ib_run(folder, report, payload)
    matrix = report.matrix(by_hca=by_hca)
    if plot:
        from clusterctl.bench.plot import write_plot

        write_plot(matrix, plot, good=report.good_gbps, title=f"{report.test} {report.pattern}")

    def table() -> None:
        _matrix_table(app, matrix, report.good_gbps)
        if find_straggler:
            app.console.print(f"rounds used: {report.rounds_used} (all pairs would take {report.all_pairs_rounds})")
        print_findings(app.console, list(report.findings))
        app.say(f"results: {folder}", err=True, soft_wrap=False)

    app.emit({**payload, "results_dir": str(folder)}, table, failed=fails(report.findings))


def _print_plan(app: AppContext, report: IBBenchReport) -> None:
    app.console.print(f"{report.test}, pattern {report.pattern}: {len(report.rounds)} round(s), "
                      f"{len(report.planned)} test(s)", highlight=False)
    for index in range(1, len(report.rounds) + 1):
        app.console.print(f"round {index}:", style="bold")
        for t in (t for t in report.planned if t.round == index):
            app.say(f"  {t.server.name}$ {t.server_command}")
            app.say(f"  {t.client.name}$ {t.client_command}")


@bench_app.command("nccl", help="""nccl-tests on each host alone, or across hosts with mpirun (--multi-node).

Compares each host's bus bandwidth with the fleet median (median/MAD) and the peak expected for
its GPUs, an mpirun job's with its hosts' links; #wrong > 0 or a missing summary is a failure.

Examples:

  clusterctl bench nccl

  clusterctl bench nccl --op all_gather --env NCCL_ALGO=Ring

  clusterctl bench nccl --multi-node --env-file tuned-nccl.env
""")
def nccl_command(
    ctx: typer.Context,
    op: str = typer.Option("all_reduce", "--op", help="all_reduce, all_gather, reduce_scatter, alltoall, ..."),
    env: list[str] = typer.Option([], "--env", metavar="KEY=VALUE", help="NCCL setting (repeatable)."),
    env_file: str | None = typer.Option(None, "--env-file", metavar="FILE",
                                           help="NCCL settings from a file: tune-nccl's nccl.conf, profile.d, "
                                                "ConfigMap or Slurm output, or a job script."),
    min_bytes: str = typer.Option("8", "-b", "--min-bytes", metavar="SIZE",
                                  help="Smallest message size, as nccl-tests takes it (8, 1K, 1M)."),
    max_bytes: str = typer.Option("8G", "-e", "--max-bytes", metavar="SIZE",
                                  help="Largest message size, as nccl-tests takes it (8G)."),
    factor: int = typer.Option(2, "-f", "--factor", min=2, help="Multiply the size by this between steps."),
    gpus: int | None = typer.Option(None, "-g", "--gpus", min=1,
                                       help="GPUs per host (default: nvidia-smi -L)."),
    multi_node: bool = typer.Option(False, "--multi-node", help="One mpirun job across the selected hosts."),
    binary_dir: str | None = typer.Option(None, "--bin-dir", metavar="DIR",
                                             help="Folder of the *_perf binaries (default: PATH)."),
    results_dir: str | None = RESULTS_DIR,
    state_dir: str | None = STATE_DIR,
) -> None:
    from clusterctl.bench.nccl_tests import run_nccl_test
    from clusterctl.bench.payload import nccl_payload
    from clusterctl.bench.results import given_back_if_refused, new_results_dir, save_nccl_run
    from clusterctl.cli.findings_view import print_findings
    from clusterctl.nccl.run_env import nccl_env

    app = app_context(ctx)
    settings = nccl_env(env, env_file)
    hosts = app.hosts()
    folder = new_results_dir(results_dir)  # checked and claimed before any host is touched
    with app.runner() as runner, given_back_if_refused(folder, named=results_dir is not None):
        run = run_nccl_test(runner, hosts, op=op, env=settings, min_bytes=min_bytes, max_bytes=max_bytes,
                            factor=factor, gpus=gpus, multi_node=multi_node, binary_dir=binary_dir,
                            inventory=app.inventory(), state_dir=state_dir)
    payload = nccl_payload(run)
    save_nccl_run(folder, run, payload)

    def table() -> None:
        from clusterctl.findings import sorted_findings

        # A host's status is its worst finding: a figure its topology cannot give is not "ok".
        # (Read worst last, so that it is the one a host keeps.)
        worst = {f.host: f"{f.severity.value}: {f.code}" for f in reversed(sorted_findings(run.findings)) if f.host}
        rows = [(r.host, f"{r.busbw_gbs:.1f}" if r.busbw_gbs is not None else "-",
                 f"{r.result.avg_busbw_gbs:.2f}" if r.result and r.result.avg_busbw_gbs is not None else "-",
                 visible(r.error) if r.error else worst.get(r.host, "ok")) for r in run.runs]
        print_table(app.console, (Column("host", keep=True), Column("busbw", keep=True),
                                  Column("avg busbw", keep=True), Column("status")), rows,
                    title=f"{op}_perf bus bandwidth (GB/s), median {run.median_busbw_gbs}")
        print_findings(app.console, list(run.findings))
        app.say(f"results: {folder}", err=True, soft_wrap=False)

    app.emit({**payload, "results_dir": str(folder)}, table, failed=fails(run.findings))


@bench_app.command("report", help="""Parse saved nccl-tests and perftest logs (client or server side).

Pasted or captured logs are fine: shell prompts, code fences and terminal borders are ignored,
and a row that cannot be read is listed with its line number while the rest is judged. A figure
above what the link (or, for one host, the GPUs' NVLinks) can carry is an error, not a result;
with --fabric and --gpus-per-host a log that describes another machine says so. An nccl-tests log
is judged as bench nccl judges a run (failed, unvalidated, warned, below the 8-GPU NVSwitch peak)
but for what a log cannot tell: the host's NVLinks now; its GPU count unless --gpus-per-host says;
its inter-node links unless its NCCL INFO lines (NCCL_DEBUG=INFO), --rate-gbps or --survey do. A
perftest log is judged as bench ib judges a link, with the same findings and words. With -i, it meets
the inventory's fabric thresholds (within_rack_min, latency_warn_us, latency_error_us; the strictest
of the hosts selected), as bench ib's links do. A log does not name its port's rate: it is
--rate-gbps, else with -i the inventory's fabric.rate_gbps (the lowest of the hosts selected) for a
port the banner puts on the fabric (Device, Link type); without either the checks against it are
skipped.

Examples:

  clusterctl bench report slurm-1234.out ib_write_bw-*.log -o json

  clusterctl bench report --rate-gbps 200 --fabric ib node1-mlx5_0.log

  clusterctl bench report --gpus-per-host 8 all_reduce-gpu-a1.log

  clusterctl bench report --rate-gbps 400 slurm-2node-all_reduce.out
""")
def report_command(
    ctx: typer.Context,
    files: list[str] = typer.Argument(..., metavar="FILE...|-", help="Log files; '-' reads standard input."),
    rate_gbps: float | None = typer.Option(None, "--rate-gbps", min=0.1,
                                              help="Line rate to judge perftest bandwidth against; for a "
                                              "multi-node nccl-tests log, each NIC's line rate."),
    min_fraction: float | None = typer.Option(
        None, "--min-fraction", min=0.0, max=1.0, show_default=False,
        help="Fraction of --rate-gbps a perftest peak must reach (0.9 = 90%). Default: the inventory's fabric "
        f"within_rack_min when -i names one (the highest of the hosts selected), else {Fabric().within_rack_min:g}."),
    fabric: str | None = typer.Option(
        None, "--fabric", help="ib, roce or ethernet: a perftest banner naming another link type is a finding."),
    gpus_per_host: int | None = typer.Option(
        None, "--gpus-per-host", min=1, help="GPUs per host: an nccl-tests log with another rank count per host is "
        "a finding."),
    survey: str | None = typer.Option(None, "--survey", metavar="FILE",
                                         help="Saved survey (survey --save): NIC line rates for nccl-tests logs."),
) -> None:
    from clusterctl.bench.judge import fleet_limits
    from clusterctl.bench.logs import report_files, saved_survey_ports
    from clusterctl.cli.findings_view import print_findings
    from clusterctl.findings import FINDINGS_SCHEMA_VERSION
    from clusterctl.inventory import values
    from clusterctl.inventory.cluster_sections import by_rule

    app = app_context(ctx)
    fabric = None if fabric is None else by_rule(values.fabric_type, fabric, "--fabric")
    limits = replace(fleet_limits(app.hosts() if app.inventory_path else ()), type=cast("FabricType | None", fabric))
    if min_fraction is not None:
        limits = replace(limits, within_rack_min=min_fraction)
    reports = report_files(files, rate_gbps=rate_gbps, limits=limits,
                           gpus_per_host=gpus_per_host,
                           survey_ports=None if survey is None else saved_survey_ports(survey))
    payload = {"schema_version": FINDINGS_SCHEMA_VERSION,
               "files": [{"file": r.file, **r.record, "findings": [f.to_json() for f in r.findings],
                          **({"error": r.error} if r.error else {})}
                         for r in reports]}

    def table() -> None:
        from rich.text import Text

        for r in reports:
            if r.error:
                continue
            rec = r.record
            head = Text(r.file, style="bold")
            # A log that does not name its test (no command line in the paste) shows the tool alone.
            head.append(f": {' '.join(filter(None, (rec['tool'], rec.get('test'))))} - {_report_figure(rec)}")
            print_wrapped(app.console, head, 2)
            for warning in rec.get("parse_warnings", []):
                where = f"line {warning['line']}: " if warning["line"] is not None else ""
                line = Text("  ")
                line.append("read in part:", style="yellow")
                line.append(f" {one_line(where + warning['message'])}")
                print_wrapped(app.console, line, 4)
        print_findings(app.console, [f for r in reports for f in r.findings])

    app.emit(payload, table, errors=[r.error for r in reports if r.error], inputs=len(reports),
             failed=fails(f for r in reports for f in r.findings))


def _report_figure(record: dict[str, Any]) -> str:
    """The headline figure of one log: bus bandwidth, peak bandwidth, or latency (typical, average, p99)."""
    if record["tool"] == "nccl-tests":
        figure = record.get("avg_busbw_gbs")
        if figure is not None:
            return f"{figure} GB/s avg busbw"
        largest = record.get("largest_busbw_gbs")
        return f"{largest} GB/s busbw at the largest size (no Avg line)" if largest is not None else "no figure"
    latency = record.get("latency") or []
    if latency:
        row = min(latency, key=lambda r: r["size_bytes"])
        parts = [f"typical {row['t_typical_us']:g} us"]
        parts += [f"{word} {row[key]:g} us" for word, key in (("avg", "t_avg_us"), ("p99", "p99_us"))
                  if row.get(key) is not None]
        return f"{', '.join(parts)} at {row['size_bytes']} B"
    figure = record.get("peak_gbps")
    return f"{figure} Gb/s peak" if figure is not None else "no figure"


@bench_app.command("compare", help="""What got faster or slower between two bench runs (results folders).

Example:

  clusterctl bench ib --results-dir runs/before

  clusterctl bench ib --results-dir runs/after

  clusterctl bench compare runs/before runs/after
""")
def compare_command(
    ctx: typer.Context,
    before: str = typer.Argument(..., metavar="A", help="Results folder (or its results.json) of the earlier run."),
    after: str = typer.Argument(..., metavar="B", help="Results folder (or its results.json) of the later run."),
) -> None:
    from clusterctl.bench.results import comparability, compare, load_results

    app = app_context(ctx)
    first, second = load_results(before), load_results(after)
    problem = comparability(first, second)
    if problem:
        app.warn(problem)
    changes = compare(first, second)
    payload = {"before": before, "after": after, "warning": problem, "changes": [
        {"key": c.key, "unit": c.unit, "before": c.before, "after": c.after, "verdict": c.verdict} for c in changes]}

    def table() -> None:
        from rich.text import Text

        style = {"faster": "green", "slower": "red", "gone": "yellow", "new": "cyan"}
        # What moved is listed; what did not is counted (a 120-link run that held its figures
        # is one line, not 120 "unchanged" rows). -o json has every figure.
        rows = [(c.key, _fmt(c.before, c.unit), _fmt(c.after, c.unit),
                 f"{(c.ratio - 1):+.0%}" if c.ratio is not None else "-", Text(c.verdict, style=style[c.verdict]))
                for c in changes if c.verdict != "unchanged"]
        if rows:
            print_table(app.console, (Column("what", keep=True), Column("before", keep=True),
                                      Column("after", keep=True), Column("change", keep=True),
                                      Column("verdict", keep=True)), rows, title=f"{before} -> {after}")
        print_wrapped(app.console, compare_summary(changes), 2)

    app.emit(payload, table)


def compare_summary(changes: Sequence[Any]) -> str:
    """``120 figures compared: 2 slower, 1 faster, 117 unchanged (within 5%)``, in that order of concern."""
    counts = {verdict: sum(1 for c in changes if c.verdict == verdict)
              for verdict in ("slower", "gone", "faster", "new", "unchanged")}
    parts = [f"{n} {verdict}" for verdict, n in counts.items() if n and verdict != "unchanged"]
    if counts["unchanged"]:
        parts.append(f"{counts['unchanged']} unchanged (within 5%{', not listed' if len(parts) else ''})")
    return f"{plural(len(changes), 'figure')} compared: " + (", ".join(parts) if parts else "none in common")


def _fmt(value: float | None, unit: str) -> str:
    return "-" if value is None else f"{value:.2f} {unit}"
