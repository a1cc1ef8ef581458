"""``clusterctl inventory show|check``: the resolved hosts, and what is wrong with the file."""

from __future__ import annotations

from typing import Any

import typer

from clusterctl.cli.context import app_context
from clusterctl.errors import ExitCode
from clusterctl.wording import plural

inventory_app = typer.Typer(
    help="""Show or validate the inventory.

Examples:

  clusterctl -i inventories/demo.yaml inventory show

  clusterctl -i hosts.ini inventory check
""",
    no_args_is_help=True,
)


def register(app: typer.Typer) -> None:
    app.add_typer(inventory_app, name="inventory")


def host_record(host: Any) -> dict[str, Any]:
    return {
        "name": host.name,
        "address": host.connect_address,
        "port": host.port,
        "user": host.user,
        "transport": host.transport,
        "roles": list(host.roles),
        "rack": host.rack,
        "gpus": host.gpus,
        "groups": list(host.groups),
        "labels": dict(host.labels),
        "fabric": {
            "type": host.fabric.type,
            "rate_gbps": host.fabric.rate_gbps,
            "hcas": list(host.fabric.hcas),
        },
        "ssh": {"key_file": host.ssh.key_file, "jump_host": host.ssh.jump_host},
        "profile": host.profile,
        "stack": host.stack.pinned(),
        "source": host.source,
    }


@inventory_app.command("show", help="Print the hosts as clusterctl resolved them (defaults and group vars applied).")
def show(ctx: typer.Context) -> None:
    app = app_context(ctx)
    inventory = app.inventory()
    hosts = app.hosts()

    def table() -> None:
        from rich.table import Table

        t = Table(title=f"{inventory.name} ({inventory.format}, {plural(len(hosts), 'host')})", title_justify="left")
        for col in ("host", "address", "user", "transport", "roles", "rack", "fabric", "groups"):
            t.add_column(col)
        for h in hosts:
            fabric = ""
            if h.fabric.type:
                fabric = h.fabric.type + (f" {h.fabric.rate_gbps:g}G" if h.fabric.rate_gbps else "")
            address = h.connect_address + (f":{h.port}" if h.port and h.port != 22 else "")
            if h.ssh.jump_host:
                address += f" via {h.ssh.jump_host}"
            # A host without GPUs says so where its roles are (no column of its own: 80 columns).
            roles = ",".join(h.roles) + ("" if h.gpus else " (no GPUs)")
            t.add_row(
                h.name, address, h.user or "", h.transport, roles, h.rack or "", fabric,
                ",".join(h.groups),
            )
        app.console.print(t)

    app.emit(
        {"cluster": inventory.name, "source": inventory.source, "format": inventory.format,
         "hosts": [host_record(h) for h in hosts]},
        table,
    )


@inventory_app.command("check", help="Validate the inventory; exit 2 on errors, print warnings.")
def check(ctx: typer.Context) -> None:
    from clusterctl.inventory.checks import check_inventory

    app = app_context(ctx)
    inventory = app.inventory()
    warnings = check_inventory(inventory)

    def table() -> None:
        for w in warnings:
            app.warn(w)
        app.say(f"{inventory.source}: {plural(len(inventory.hosts), 'host')}, {plural(len(warnings), 'warning')}",
                soft_wrap=False)

    app.emit({"source": inventory.source, "hosts": len(inventory.hosts), "warnings": warnings}, table)
    if warnings and app.machine_output:
        raise typer.Exit(ExitCode.OK)
