"""``clusterctl survey``: topology, NICs and software stack of every host, judged against the fleet."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import typer

from clusterctl.cli.context import AppContext, app_context
from clusterctl.cli.output import save_report
from clusterctl.errors import UsageError
from clusterctl.hostlist import compress
from clusterctl.terminal_layout import print_wrapped
from clusterctl.wording import plural

if TYPE_CHECKING:
    from clusterctl.survey.report import SurveyReport

HELP = """Survey the hosts: GPUs, NVLink topology, NICs and software stack, with findings.

Each host is compared with the inventory (fabric rate, stack pin) and with the majority of
its peers; findings have a severity and a stable code (see docs/survey.md). With --tp the
survey also proposes a parallel layout: TP groups inside NVLink domains, the NIC of each
local rank, pipeline stages within racks, data parallelism across hosts.

Exits 0 when nothing is at error level, 1 with error findings or unreachable hosts (the
partial results are still printed), 2 for usage problems.

Examples:

  clusterctl -i inventories/demo.yaml survey

  clusterctl survey --matrix --tp 8 --pp 2

  clusterctl survey -o json --save survey.json --graph graphs/

  clusterctl survey --local
"""


#: ``--tp`` and ``--pp``, as survey and ``topo show`` take them.
TP = typer.Option(None, "--tp", min=1, help="Tensor-parallel size to advise a layout for.")
PP = typer.Option(1, "--pp", min=1, help="Pipeline-parallel size (with --tp).")


def register(app: typer.Typer) -> None:
    app.command("survey", help=HELP)(survey_command)


def survey_command(
    ctx: typer.Context,
    local: bool = typer.Option(False, "--local", help="Survey this machine (local transport, NVML for GPUs)."),
    tp: int | None = TP,
    pp: int = PP,
    world_size: int | None = typer.Option(
        None, "--world-size", min=1, help="GPUs the job uses (default: all whole replicas that fit)."
    ),
    matrix: bool = typer.Option(False, "--matrix", help="Also print each host's colour-coded topology matrix."),
    save: str | None = typer.Option(
        None, "--save", metavar="FILE", help="Keep the report as JSON for later commands (tune-nccl, bootstrap)."
    ),
    graph: str | None = typer.Option(
        None, "--graph", metavar="DIR", help="Write each host's GPU/NIC/NUMA graph (DOT, SVG/PNG if dot exists)."
    ),
) -> None:
    app = app_context(ctx)
    if (pp != 1 or world_size is not None) and tp is None:
        raise UsageError("--pp and --world-size need --tp")
    if save:  # refused before the fleet is read, not after
        from clusterctl.writable import writable_file

        writable_file(save, "--save")
    from clusterctl.facts.nvml import probe_gpus_via_nvml
    from clusterctl.survey.run import run_survey

    # --local: this machine through the local transport, its GPUs read through NVML.
    hosts = (app.this_machine(),) if local else app.hosts()
    with app.runner(force_transport="local" if local else None) as runner:
        report = run_survey(runner, hosts, inventory=None if local else app.inventory().name, tp=tp, pp=pp,
                            world_size=world_size, gpu_reader=probe_gpus_via_nvml if local else None)
    from clusterctl.survey.render import render_fleet_table, render_matrix

    def fleet_view() -> None:
        render_fleet_table(app.console, report)
        for host in report.hosts if matrix else ():
            render_matrix(app.console, host)

    finish(app, report, head=fleet_view, save=save, graph=graph)


def finish(app: AppContext, report: SurveyReport, *, head: Callable[[], None], save: str | None = None,
           graph: str | None = None) -> None:
    """Save, draw, print and set the exit code: shared by ``survey`` and ``topo show``.

    ``head`` prints the command's own view (the fleet table, or one host's summary); the
    findings and the layout advice follow it the same way for both.
    """
    from clusterctl.cli.findings_view import print_findings
    from clusterctl.survey.render import render_advice
    from clusterctl.survey.report import report_to_json

    payload = report_to_json(report)
    if save:
        save_report(save, payload)
    if graph:
        from clusterctl.survey.graph import write_report_graphs

        for files in write_report_graphs(graph, report):
            app.say(files.describe(), err=True, soft_wrap=False)

    def human() -> None:
        head()
        app.console.print()
        print_findings(app.console, report.findings)
        if report.advice:
            app.console.print()
            render_advice(app.console, report.advice)
        app.console.print()
        print_wrapped(app.console, exit_summary(report), 2)

    app.emit(payload, human, failed=not report.ok)


def exit_summary(report: SurveyReport) -> str:
    """The last line: the counts, and what the exit code will be and why (a demo exits 1 by design)."""
    from clusterctl.cli.findings_view import summary_line
    from clusterctl.findings import Severity, fails

    counts = f"{plural(len(report.hosts), 'host')}: {summary_line(report.findings)}"
    if report.ok:
        return f"{counts}; exit 0: no error findings, every host reached."
    reasons = []
    erring = sorted({f.host or "" for f in report.findings if f.severity is Severity.ERROR} - {""})
    if erring:
        reasons.append(f"error findings on {plural(len(erring), 'host')}: {compress(erring)}")
    elif fails(report.findings):
        reasons.append("error findings")
    if report.unreachable:
        unreached = [h.name for h in report.hosts if h.state.facts is None]
        reasons.append(f"{plural(len(unreached), 'host')} not reached: {compress(unreached)}")
    return f"{counts}; exit 1: {'; '.join(reasons)}."
