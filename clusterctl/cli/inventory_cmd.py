"""``clusterctl inventory show|check``: the resolved hosts, and what is wrong with the file."""

from __future__ import annotations

from typing import Any

import typer

from clusterctl.cli.context import app_context
from clusterctl.terminal_layout import Column, print_table
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
        "host": host.name,
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


@inventory_app.command("show", help="""Print the hosts as clusterctl resolved them (defaults and group vars applied).

Examples:

  clusterctl -i inventories/demo.yaml inventory show

  clusterctl -i hosts.ini -l 'gpu-b*' inventory show -o yaml
""")
def show(ctx: typer.Context) -> None:
    app = app_context(ctx)
    inventory = app.inventory()
    hosts = app.hosts()

    def table() -> None:
        rows = []
        for h in hosts:
            fabric = ""
            if h.fabric.type:
                fabric = h.fabric.type + (f" {h.fabric.rate_gbps:g}G" if h.fabric.rate_gbps else "")
            address = h.connect_address + (f":{h.port}" if h.port and h.port != 22 else "")
            if h.ssh.jump_host:
                address += f" via {h.ssh.jump_host}"
            # A host without GPUs says so where its roles are (no column of its own: 80 columns).
            roles = ",".join(h.roles) + ("" if h.gpus else " (no GPUs)")
            rows.append((h.name, address, h.user or "", h.transport, roles, h.rack or "", fabric, ",".join(h.groups)))
        # Every cell is a name or value a user copies: never cut; the least needed columns go first.
        columns = [Column(c, keep=True, drop_order=rank) for c, rank in (
            ("host", 0), ("address", 0), ("user", 0), ("transport", 4), ("roles", 0), ("rack", 1), ("fabric", 2),
            ("groups", 3))]
        print_table(app.console, columns, rows, title=f"{inventory.name} ({inventory.format}, "
                                                      f"{plural(len(hosts), 'host')})")

    app.emit(
        {"cluster": inventory.name, "source": inventory.source, "format": inventory.format,
         "hosts": [host_record(h) for h in hosts]},
        table,
    )


@inventory_app.command("check", help="""Validate the inventory; exit 2 on errors, print warnings.

Examples:

  clusterctl -i inventories/demo.yaml inventory check

  clusterctl -i hosts.ini inventory check -o json
""")
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
