"""``clusterctl mock show|reset``: the persistent state of the inventory's mock hosts."""

from __future__ import annotations

import typer

from clusterctl.cli.context import app_context

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


@mock_app.command("show", help="Where each mock host keeps its state, and its services and packages.")
def show(ctx: typer.Context) -> None:
    from clusterctl.mock.admin import summaries

    app = app_context(ctx)
    found = summaries(app.hosts())

    def table() -> None:
        from clusterctl.terminal_layout import Column, print_table

        # The host and its state folder are copied (to look inside): never cut; the lists wrap.
        rows = [(s.host, s.folder if s.exists else f"{s.folder} (not created yet)",
                 ", ".join(f"{k}={v}" for k, v in s.services.items()),
                 ", ".join(f"{k}={v}" for k, v in s.packages.items())) for s in found]
        print_table(app.console, (Column("host", keep=True), Column("state folder", keep=True),
                                  Column("services"), Column("packages")), rows, title="mock host state")
        if not found:
            app.warn("no mock hosts among the selected hosts")

    app.emit({"hosts": [s.to_json() for s in found]}, table)


@mock_app.command(
    "reset",
    help="Forget what the selected mock hosts remember (all of the cluster's state when no --limit is given).",
)
def reset(ctx: typer.Context) -> None:
    from clusterctl.mock.admin import mock_hosts
    from clusterctl.mock.admin import reset as reset_state

    app = app_context(ctx)
    hosts = app.hosts()
    if not mock_hosts(hosts):
        app.warn("no mock hosts among the selected hosts: nothing to reset")
        return
    removed = reset_state(hosts, whole_cluster=app.limit is None)
    app.emit({"removed": removed}, lambda: app.console.print(
        "\n".join(f"removed {path}" for path in removed) or "nothing to reset: no state was kept yet",
        markup=False, highlight=False))
