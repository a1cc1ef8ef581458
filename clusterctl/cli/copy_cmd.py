"""``clusterctl copy SRC DEST``: a local file to every selected host, atomically, with a backup."""

from __future__ import annotations

import typer

from clusterctl.cli.confirm import YES, confirm_change
from clusterctl.cli.context import STATE_DIR, app_context
from clusterctl.errors import ExitCode, UsageError


def register(app: typer.Typer) -> None:
    app.command(
        "copy",
        help="""Copy a local file to the same path on every selected host.

Each host's file is written atomically (temporary file, then rename) with a backup of the
previous one; an unchanged file is left alone. --dry-run shows the diff per host and writes
nothing; 'clusterctl undo JOURNAL' puts the previous files back (the journal is kept in the
state folder, as bootstrap's: --state-dir, else $CLUSTERCTL_STATE_DIR, else
~/.local/state/clusterctl). It asks first, naming the hosts; --yes confirms without asking
(required off a terminal). Exits 1 when a host failed.

Examples:

  clusterctl -l 'gpu-*' copy nccl.conf /etc/nccl.conf --sudo

  clusterctl copy mlx.conf /etc/modprobe.d/ --mode 644 --sudo --dry-run
""",
    )(copy_command)


def copy_command(
    ctx: typer.Context,
    source: str = typer.Argument(..., metavar="SRC", help="Local file to send."),
    dest: str = typer.Argument(..., metavar="DEST", help="Absolute path on the hosts; ending in '/': keep SRC's name."),
    mode: str | None = typer.Option(
        None, "--mode", metavar="OCTAL", help="File mode on the hosts, e.g. 644 (default: SRC's mode)."
    ),
    sudo: bool = typer.Option(False, "--sudo", help="Write as root with 'sudo -n' (for /etc and the like)."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Show the diff per host; write nothing."),
    yes: bool = YES,
    state_dir: str | None = STATE_DIR,
) -> None:
    from clusterctl.cli.changes_view import gate_outcome_record, print_gate_outcomes, say_run_end
    from clusterctl.cli.host_failures import print_failures
    from clusterctl.copy import CopyRequest, copy_file, read_source, remote_path

    app = app_context(ctx)
    file_mode = None
    if mode is not None:
        try:
            file_mode = int(mode, 8)
        except ValueError:
            raise UsageError(f"--mode takes an octal mode such as 644, got {mode!r}") from None
    read_source(source)  # a missing or unreadable SRC stops here, before any host is touched
    path = remote_path(source, dest)
    hosts = app.hosts()
    confirm_change(f"write {path}", [h.name for h in hosts], yes=yes, dry_run=dry_run,
                   preview=f"clusterctl copy --dry-run {source} {dest}")
    request = CopyRequest(source=source, dest=dest, mode=file_mode, sudo=sudo, dry_run=dry_run, state_dir=state_dir)
    with app.runner() as runner:
        fleet, journal = copy_file(runner, app.inventory(), hosts, request)
    records = [gate_outcome_record(o) for o in fleet.outcomes]

    def table() -> None:
        print_gate_outcomes(app, fleet)
        say_run_end(app, dry_run=dry_run, journal=journal, err=True)

    app.emit({"source": source, "dest": path, "dry_run": dry_run, "hosts": records,
              "undo_journal": str(journal) if journal else None}, table)
    print_failures(app, fleet)  # on stderr, after the output in every format
    if not fleet.ok:
        raise typer.Exit(ExitCode.FAILED)
