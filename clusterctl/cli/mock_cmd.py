"""``clusterctl mock show|reset``: the persistent state of the inventory's mock hosts."""

from __future__ import annotations

from dataclasses import asdict

import typer

from clusterctl.cli.context import app_context
from clusterctl.errors import UsageError
from clusterctl.mock.admin import mock_hosts, summaries
from clusterctl.mock.admin import reset as reset_state
from clusterctl.mock.admin import set_values as set_state
from clusterctl.terminal_layout import Column, print_table
from clusterctl.terminal_text import visible

mock_app = typer.Typer(
    help="""Show or forget what mock hosts remember between runs.

A mock host (transport: mock) keeps the files written to it, its services, its installed
packages and its rules' set_state values in a state folder: the inventory's 'mock_state:'
when set, else $CLUSTERCTL_MOCK_STATE/<cluster>-<hash>, else
~/.local/state/clusterctl/mock/<cluster>-<hash>.

Examples:

  clusterctl -i inventories/demo.yaml mock show

  clusterctl -i inventories/demo.yaml mock reset

  clusterctl -i inventories/demo.yaml -l gpu-a3 mock reset
""",
    no_args_is_help=True,
)


def register(app: typer.Typer) -> None:
    app.add_typer(mock_app, name="mock")


@mock_app.command("show", help="""Where each mock host keeps its state, and its services and packages.

Examples:

  clusterctl -i inventories/demo.yaml mock show

  clusterctl -i inventories/demo.yaml -l gpu-a3 mock show -o json
""")
def show(ctx: typer.Context) -> None:
    app = app_context(ctx)
    found = summaries(app.hosts())

    def table() -> None:
        # The host and its state folder are copied (to look inside): never cut; the lists wrap.
        rows = [(s.host, s.folder if s.exists else f"{s.folder} (not created yet)",
                 ", ".join(f"{k}={v}" for k, v in s.services.items()),
                 ", ".join(f"{k}={v}" for k, v in s.packages.items())) for s in found]
        print_table(app.console, (Column("host", keep=True), Column("state folder", keep=True),
                                  Column("services"), Column("packages")), rows, title="mock host state")
        if not found:
            app.warn("no mock hosts among the selected hosts")

    app.emit({"hosts": [asdict(s) for s in found]}, table)


@mock_app.command(
    "reset",
    help="""Forget what the selected mock hosts remember (all of the cluster's state when no --limit is given).

Examples:

  clusterctl -i inventories/demo.yaml mock reset

  clusterctl -i inventories/demo.yaml -l gpu-a3 mock reset
""",
)
def reset(ctx: typer.Context) -> None:
    app = app_context(ctx)
    hosts = mock_hosts(app.hosts())
    if not hosts:
        app.warn("no mock hosts among the selected hosts: nothing to reset")
    removed = reset_state(hosts, whole_cluster=app.limit is None)

    def table() -> None:
        if hosts:  # the warning said it all
            app.say("\n".join(f"removed {path}" for path in removed) or "nothing to reset: no state was kept yet",
                    soft_wrap=False)

    app.emit({"removed": removed}, table)


@mock_app.command("set", help="""Set state values on the selected mock hosts: what their profiles' rules
test with when_state. The demo's profiles answer 'fault=xid-79' with a kernel log in which GPU 3
has fallen off the bus (Xid 79); 'fault=' clears it.

Example:

  clusterctl -i inventories/demo.yaml -l gpu-a2 mock set fault=xid-79
""")
def set_values(
    ctx: typer.Context,
    pairs: list[str] = typer.Argument(..., metavar="KEY=VALUE...", help="Values to set (KEY= removes one)."),
) -> None:
    app = app_context(ctx)
    values = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise UsageError(f"mock set takes KEY=VALUE, got {pair!r}", field="KEY=VALUE")
        values[key.strip()] = value.strip()
    changed = set_state(app.hosts(), values)
    if not changed:
        app.warn("no mock hosts among the selected hosts: nothing set")
    app.emit({"hosts": changed, "values": values}, lambda: app.say(
        "\n".join(f"{h}: " + ", ".join(f"{k}={v}" for k, v in values.items()) for h in changed), soft_wrap=False))


@mock_app.command("timers", help="""Fire the systemd timers active on the selected mock hosts, once.

A mock host's clock does not run between commands: this is its systemd starting, on the host,
the service of each active timer with the ExecStart= line of its unit file (bootstrap's
clusterctl-node-agent.timer: the node health agent runs on that host, with that host as its own
machine). Prints each service's exit status and output.

Example:

  clusterctl -i inventories/demo.yaml mock timers
""")
def timers(ctx: typer.Context) -> None:
    from clusterctl.agent.bundle import BUNDLE_PATH, PYTHON
    from clusterctl.agent.main import main as agent_main
    from clusterctl.mock.timers import fire

    app = app_context(ctx)
    results = fire(app.hosts(), (PYTHON, BUNDLE_PATH), agent_main)

    def table() -> None:
        for item in results:
            app.say(f"{item['host']}: {item['service']} exited {item['exit_code']}", soft_wrap=False)
            for line in str(item["output"]).splitlines()[-5:]:
                app.say("  " + visible(line), soft_wrap=False)
        if not results:
            app.warn("no active timers on the selected mock hosts")

    app.emit({"runs": results}, table, failed=any(item["exit_code"] for item in results))

