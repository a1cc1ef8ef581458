"""``clusterctl record --out DIR [--redact]``: mock profiles of real hosts, for replay in CI."""

from __future__ import annotations

from pathlib import Path

import typer

from clusterctl.cli.context import app_context
from clusterctl.errors import UsageError
from clusterctl.terminal_layout import print_wrapped
from clusterctl.terminal_text import one_line


def register(app: typer.Typer) -> None:
    app.command(
        "record",
        help="""Record the selected hosts as mock profiles that replay them in CI.

Runs every read-only fact command clusterctl knows (survey's facts, bootstrap's preflight
node facts) through the normal transport, and writes one mock profile per host, an
inventory pointing at them and a README saying when, from where and with which clusterctl.
Nothing that changes a host is run. --redact replaces addresses, MACs, UUIDs, GUIDs and
serial numbers consistently.

Examples:

  clusterctl -i hosts.ini -l rack-a record --out replica/ --redact

  clusterctl -i replica/inventory.yaml survey
""",
    )(record_command)


def record_command(
    ctx: typer.Context,
    out: Path = typer.Option(..., "--out", metavar="DIR", help="Folder to write (created; must be empty)."),
    redact: bool = typer.Option(False, "--redact", help="Replace addresses, MACs, UUIDs, GUIDs, serial numbers."),
) -> None:
    from clusterctl.record.run import record

    app = app_context(ctx)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise UsageError(f"--out {out}: not an empty folder; record writes a fresh replica",
                         hint="Give a new folder, or empty this one first.")
    inventory = app.inventory()
    hosts = app.hosts()
    with app.runner() as runner:
        report = record(runner, inventory, hosts, out, redact=redact)

    def table() -> None:
        replay = f"clusterctl -i {out / 'inventory.yaml'} survey"
        # The replay command is copied: on a line of its own, never broken.
        print_wrapped(app.console, f"recorded {len(report.hosts)} host(s) into {report.out} "
                                   f"({len(report.commands)} commands each); replay with:", 2)
        app.say(f"  {replay}")
        for host, why in report.failed.items():
            print_wrapped(app.console, f"FAILED {host}: {one_line(why)}", 4)

    app.emit(report.to_json(), table, failed=bool(report.failed))
