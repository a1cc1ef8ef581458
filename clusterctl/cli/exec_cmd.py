"""``clusterctl exec``: an ad-hoc command on the selected hosts, outputs grouped like dshbak -c."""

from __future__ import annotations

import typer

from clusterctl.cli.context import app_context
from clusterctl.cli.host_failures import outcome_record, print_failures
from clusterctl.errors import ExitCode, UsageError


def register(app: typer.Typer) -> None:
    app.command(
        "exec",
        help="""Run a shell command on the selected hosts, at once.

Identical outputs are printed once with the hosts that gave them (like pdsh | dshbak -c).
The command line is passed to the remote shell as ssh does: write it after '--'.
Exits 1 when any host failed or the command exited non-zero there.

Examples:

  clusterctl -i inventories/demo.yaml exec -- nvidia-smi -L

  clusterctl -l 'gpu-*' exec --sudo -- systemctl is-active containerd

  clusterctl exec -o json -- uname -r
""",
    )(exec_command)


def exec_command(
    ctx: typer.Context,
    command: list[str] = typer.Argument(..., metavar="-- COMMAND...", help="The command line to run."),
    sudo: bool = typer.Option(False, "--sudo", help="Run it with 'sudo -n' (never prompts)."),
) -> None:
    app = app_context(ctx)
    line = " ".join(command).strip()
    if not line:
        raise UsageError("exec needs a command, e.g. clusterctl exec -- uname -r")
    hosts = app.hosts()
    with app.runner() as runner:
        fleet = runner.run_command(hosts, line, sudo=sudo, label="exec")

    def table() -> None:
        from clusterctl.hostlist import compress

        groups: dict[tuple[str, str, int], list[str]] = {}
        for o in fleet.outcomes:
            if o.value is None:
                continue
            key = (o.value.stdout, o.value.stderr, o.value.exit_code)
            groups.setdefault(key, []).append(o.host.name)
        for (stdout, stderr, code), names in groups.items():
            rule = "-" * 16
            status = "" if code == 0 else f" (exit {code})"
            app.console.print(f"{rule}\n{compress(names)}{status}\n{rule}", markup=False, highlight=False)
            text = stdout + (stderr if stderr else "")
            app.console.print(text.rstrip("\n"), markup=False, highlight=False)
        print_failures(app, fleet)

    records = []
    for o in fleet.outcomes:
        rec = outcome_record(o)
        rec.update(
            stdout=o.value.stdout if o.value else None,
            stderr=o.value.stderr if o.value else None,
            exit_code=o.value.exit_code if o.value else None,
        )
        records.append(rec)
    app.emit({"command": line, "sudo": sudo, "hosts": records}, table)
    if not fleet.ok:
        if app.machine_output:
            print_failures(app, fleet)
        raise typer.Exit(ExitCode.FAILED)
