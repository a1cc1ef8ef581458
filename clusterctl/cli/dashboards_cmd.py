"""``clusterctl dashboards``: Grafana dashboards for this cluster, rendered from its survey and bench results."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from clusterctl.cli.context import AppContext, app_context
from clusterctl.errors import UsageError
from clusterctl.terminal_layout import Column, print_table

if TYPE_CHECKING:
    from clusterctl.dashboards.inputs import DashboardInputs
    from clusterctl.dashboards.render import Rendered
    from clusterctl.saved_survey import SavedSurvey

HELP = """\
Render Grafana dashboards (fleet health, fabric, repairs, utilisation) from survey and bench.

Fleet health (GPU and memory-copy utilisation by host and GPU, NVLink traffic per NVLink domain the survey found,
temperature and power against their limits, Xid and row-remap events, hosts out of service),
fabric (bench's pairwise matrix against line rate, nccl-tests per host, live InfiniBand and
NVLink counters), repairs (quarantines, time out of service, flapping hosts) and utilisation
(GPU-hours used against available per pool).

--out DIR writes each dashboard as Grafana JSON, dashboards-configmaps.yaml (ConfigMaps the
kube-prometheus-stack Grafana sidecar loads: label grafana_dashboard="1") and
clusterctl-measured.prom, the survey's topology and bench's figures as metrics for
node-exporter's textfile collector, which the dashboards join to the live series
(docs/dashboards.md). Without --out, lists the dashboards and their panels.

The hosts are surveyed now unless --survey names a saved survey (clusterctl survey --save).

Examples:

  clusterctl -i inventories/demo.yaml dashboards --out dashboards/

  clusterctl dashboards --survey survey.json --out dashboards/ \\
      --bench clusterctl-results/bench-20261206-101500

  kubectl apply -f dashboards/dashboards-configmaps.yaml
"""


def register(app: typer.Typer) -> None:
    app.command("dashboards", help=HELP)(dashboards_command)


def dashboards_command(
    ctx: typer.Context,
    out: str | None = typer.Option(None, "--out", metavar="DIR",
                                      help="Write the dashboards, their ConfigMaps and the textfile metrics here."),
    survey: str | None = typer.Option(None, "--survey", metavar="FILE",
                                         help="A saved survey (clusterctl survey --save) instead of surveying now."),
    bench: list[str] = typer.Option([], "--bench", metavar="DIR|FILE",
                                    help="A bench results folder or results.json; repeat for several (the later "
                                    "file's figure for a link wins)."),
    namespace: str = typer.Option("monitoring", "--namespace", help="Namespace of the ConfigMaps."),
    folder: str = typer.Option("GPU cluster", "--folder", help="Grafana folder the sidecar puts them in."),
) -> None:
    if sys.version_info < (3, 11):
        raise UsageError("clusterctl dashboards needs Python 3.11 or newer (grafana-foundation-sdk does); this is "
                         f"Python {sys.version_info.major}.{sys.version_info.minor}.")
    from clusterctl.bench.results import load_results
    from clusterctl.dashboards.render import render_dashboards
    from clusterctl.inventory.cluster_sections import namespace_name

    app = app_context(ctx)
    inventory = app.inventory()
    saved = _survey(app, survey)
    results = [load_results(path) for path in bench]
    inputs, rendered = render_dashboards(inventory, saved, results,
                                         hosts=app.hosts() if app.limit else None,
                                         namespace=namespace_name(namespace, "--namespace"), folder=folder)
    if not inputs.hosts:
        raise UsageError("the survey has no host of this inventory's selection: nothing to draw",
                         hint="Run clusterctl survey --save FILE on these hosts, then pass --survey FILE.")
    written: list[Path] = []
    if out:
        from clusterctl.dashboards.render import write

        written = write(rendered, Path(out).expanduser())
    app.emit(_payload(inputs, rendered, written), lambda: _table(app, inputs, rendered, written))


def _survey(app: AppContext, path: str | None) -> SavedSurvey:
    from clusterctl.saved_survey import load_saved_survey, survey_from_json

    if path:
        return load_saved_survey(path)
    from clusterctl.survey.report import report_to_json
    from clusterctl.survey.run import run_survey

    hosts = app.hosts()
    with app.runner() as runner:
        report = run_survey(runner, hosts, inventory=app.inventory().name)
    for host in report.hosts:
        if host.state.facts is None:
            app.warn(f"{host.state.name} was not reached; its GPUs are left out of the dashboards' NVLink and "
                     "pool panels")
    return survey_from_json(report_to_json(report))


def _payload(inputs: DashboardInputs, rendered: Rendered, written: list[Path]) -> dict[str, Any]:
    return {
        "cluster": inputs.cluster,
        "dashboards": [
            {"file": f"{stem}.json", "uid": board["uid"], "title": board["title"],
             "panels": [p["title"] for p in board.get("panels", []) if p.get("type") != "row"]}
            for stem, board in rendered.dashboards.items()
        ],
        "nvlink_layouts": [{"domains": [list(d) for d in domains], "hosts": hosts}
                           for domains, hosts in inputs.layouts()],
        "bench_links": len(inputs.links),
        "files": [str(p) for p in written],
    }


def _table(app: AppContext, inputs: DashboardInputs, rendered: Rendered, written: list[Path]) -> None:
    rows = [(f"{stem}.json", "; ".join(p["title"] for p in board.get("panels", []) if p.get("type") != "row"))
            for stem, board in rendered.dashboards.items()]
    print_table(app.console, (Column("dashboard", keep=True), Column("panels")), rows,
                title=f"Dashboards for {inputs.cluster}")
    for path in written:
        app.say(f"wrote {path}", soft_wrap=False)
    if not written:
        app.say("(nothing written: add --out DIR)", soft_wrap=False)
