"""``clusterctl power status|on|off|cycle HOST...``: hosts' power through their BMCs (Redfish)."""

from __future__ import annotations

import typer

from clusterctl.cli.changes_view import say_run_end
from clusterctl.cli.confirm import YES, confirm_change
from clusterctl.cli.context import STATE_DIR, app_context

POWER_HELP = """\
Read or change hosts' power through their BMCs over Redfish (the inventory's 'bmc:' section:
address, username, and the password in a file of mode 0600 or an environment variable; TLS
certificates verified unless it says verify_tls: false; ca_file for a private CA). 'on', 'off'
and 'cycle' wait until the BMC reports the new state (power_timeout_s, 300 s by default); 'cycle'
is off, then on, so that both are seen to happen. A BMC that does not answer, refuses the
credentials or never reports the change fails that host, named (exit 1); the others go on.
Changes ask first (--yes for scripts; required off a terminal); --dry-run reads the power state
and says what would change. The password is never printed, logged or put on a command line.

Examples:

  clusterctl power status gpu-a3

  clusterctl power cycle gpu-a3 --dry-run

  clusterctl power off gpu-a3 --graceful --yes
"""
POWER_SHORT = "Read or change hosts' power through their BMCs (Redfish): status, on, off, cycle."


def register(app: typer.Typer) -> None:
    group = typer.Typer(help=POWER_HELP, short_help=POWER_SHORT, no_args_is_help=True)
    group.command("status", help="""The power state each host's BMC reports (changes nothing).

Examples:

  clusterctl power status gpu-a3 gpu-b1

  clusterctl power status gpu-b1 gpu-b2 gpu-b3 -o json
""")(status_command)
    group.command("on", help="""Switch hosts on and wait until their BMCs report On.

Examples:

  clusterctl power on gpu-a3 --dry-run

  clusterctl power on gpu-a3 gpu-b1 --yes
""")(on_command)
    group.command("off", help="""Switch hosts off (forced; --graceful: an orderly shutdown) and wait for Off.

Examples:

  clusterctl power off gpu-a3 --dry-run

  clusterctl power off gpu-a3 --graceful --yes
""")(off_or_cycle_command)
    group.command("cycle", help="""Switch hosts off, then on, waiting for each (a host that is off is only
switched on).

Examples:

  clusterctl power cycle gpu-a3 --dry-run

  clusterctl power cycle gpu-a3 --graceful --yes
""")(off_or_cycle_command)
    app.add_typer(group, name="power")


HOSTS = typer.Argument(..., metavar="HOST...", help="Hosts (inventory names).")
DRY_RUN = typer.Option(False, "--dry-run", help="Read the power state and say what would change; change nothing.")
GRACEFUL = typer.Option(False, "--graceful", help="Off by an orderly shutdown, not a forced power-off.")


def status_command(ctx: typer.Context, hosts: list[str] = HOSTS) -> None:
    _power(ctx, hosts, "status", dry_run=True, yes=True, graceful=False, state_dir=None)


def on_command(ctx: typer.Context, hosts: list[str] = HOSTS, dry_run: bool = DRY_RUN, yes: bool = YES,
               state_dir: str | None = STATE_DIR) -> None:
    _power(ctx, hosts, "on", dry_run=dry_run, yes=yes, graceful=False, state_dir=state_dir)


def off_or_cycle_command(ctx: typer.Context, hosts: list[str] = HOSTS, graceful: bool = GRACEFUL,
                         dry_run: bool = DRY_RUN, yes: bool = YES, state_dir: str | None = STATE_DIR) -> None:
    """``power off`` and ``power cycle``: the command's name is the action."""
    _power(ctx, hosts, str(ctx.info_name), dry_run=dry_run, yes=yes, graceful=graceful, state_dir=state_dir)


def _power(ctx: typer.Context, names: list[str], verb: str, *, dry_run: bool, yes: bool, graceful: bool,
           state_dir: str | None) -> None:
    from clusterctl.bmc.power import DOING, PowerAction, power

    app = app_context(ctx)
    targets = app.named_hosts(names)
    action = PowerAction(verb)
    if action is not PowerAction.STATUS and not dry_run:
        confirm_change(f"{DOING[verb]} (through the BMC)", [h.name for h in targets], yes=yes,
                       preview=f"clusterctl power {verb} {' '.join(h.name for h in targets)} --dry-run")
    results, journal = power(app.inventory(), targets, action, apply=not dry_run, graceful=graceful,
                             state_dir=state_dir)
    payload = {"action": verb, "dry_run": dry_run, "undo_journal": journal, "hosts": [r.to_json() for r in results]}

    def human() -> None:
        from clusterctl.terminal_layout import Column, print_table

        if action is PowerAction.STATUS:
            print_table(app.console, [Column(header, keep=True) for header in ("HOST", "POWER", "BMC")],
                        [(r.host, r.before or "?", r.bmc) for r in results], boxed=False)
        for r in results:
            if action is not PowerAction.STATUS:
                for line in r.done:
                    app.say(f"{r.host}: {line}", soft_wrap=False)
                if r.after:
                    app.say(f"{r.host}: power {r.after} ({r.seconds:.1f} s)" if r.seconds is not None
                            else f"{r.host}: power {r.after}", soft_wrap=False)
            if r.error:
                app.say(f"FAILED {r.host}: {r.error}", soft_wrap=False)
        if action is not PowerAction.STATUS:
            say_run_end(app, dry_run=dry_run)

    app.emit(payload, human, failed=not all(r.ok for r in results))
