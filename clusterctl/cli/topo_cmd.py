"""``clusterctl topo show FILE|-``: explain a saved or pasted ``nvidia-smi topo -m``."""

from __future__ import annotations

from pathlib import Path

import typer

from clusterctl.cli.context import app_context
from clusterctl.cli.survey_cmd import PP, TP, finish
from clusterctl.errors import UsageError

topo_app = typer.Typer(
    help="""Work with nvidia-smi topo -m matrices without reaching any host.

Examples:

  nvidia-smi topo -m > topo.txt; clusterctl topo show topo.txt --tp 8

  ssh gpu-a3 nvidia-smi topo -m | clusterctl topo show - -o json
""",
    no_args_is_help=True,
)


def register(app: typer.Typer) -> None:
    app.add_typer(topo_app, name="topo")


@topo_app.command(
    "show",
    help="""Print the topology summary, single-host findings and (with --tp) layout advice.

FILE holds the output of 'nvidia-smi topo -m' (shell prompt and legend may be included);
'-' reads it from standard input. A damaged paste (clipped by a narrow terminal, a row or the
legend not pasted, cells run together) is read as far as it can be: what could not be read is
listed first, with its line numbers, and is in -o json as the host's parse_warnings.
Exits 1 when a finding is at error level (a GPU pair that lost its NVLink), 2 when the input
cannot be read or parsed.

Examples:

  clusterctl topo show topo.txt --tp 8 --pp 2 -o json

  ssh gpu-a3 nvidia-smi topo -m | clusterctl topo show - --graph graphs/
""",
)
def show(
    ctx: typer.Context,
    file: str = typer.Argument(..., metavar="FILE|-", help="Saved output of nvidia-smi topo -m, or '-' for stdin."),
    tp: int | None = TP,
    pp: int = PP,
    graph: str | None = typer.Option(
        None, "--graph", metavar="DIR", help="Write the GPU/NIC/NUMA graph (DOT, SVG/PNG if dot exists)."
    ),
) -> None:
    app = app_context(ctx)
    if pp != 1 and tp is None:
        raise UsageError("--pp needs --tp")
    from clusterctl.inputfile import read_text_input

    text, label = read_text_input(file, "topology")
    name = "stdin" if file == "-" else Path(label).name
    if not text.strip():
        raise UsageError("empty input: expected the output of nvidia-smi topo -m", file=name)

    from clusterctl.survey.render import render_host_summary, render_matrix, render_parse_warnings
    from clusterctl.survey.run import topo_show_report

    report = topo_show_report(text, name=name, tp=tp, pp=pp)

    def host_view() -> None:
        host = report.hosts[0]
        if host.state.facts is not None and host.state.facts.warnings:
            render_parse_warnings(app.console, host, name)
            app.console.print()
        render_host_summary(app.console, host)
        app.console.print()
        render_matrix(app.console, host)

    finish(app, report, head=host_view, graph=graph)
