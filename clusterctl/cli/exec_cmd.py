"""``clusterctl exec``: an ad-hoc command on the selected hosts, outputs grouped like dshbak -c."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from clusterctl.cli.context import AppContext, app_context
from clusterctl.cli.host_failures import outcome_record, print_failures
from clusterctl.errors import ExitCode, UsageError
from clusterctl.terminal_text import one_line, visible
from clusterctl.transport.base import HOST_LOCALE
from clusterctl.wording import first_few
from clusterctl.writable import host_file_name, replace_file, writable_dir

if TYPE_CHECKING:
    from clusterctl.fanout import FleetInterrupted, FleetResult, HostOutcome
    from clusterctl.transport.base import CommandResult


def register(app: typer.Typer) -> None:
    app.command(
        "exec",
        help="""Run a shell command on the selected hosts, at once.

Identical outputs are printed once with the hosts that gave them (like pdsh | dshbak -c).
Everything after the first word of the command belongs to the command, with or without
'--' (so 'exec nvidia-smi -i 0' runs 'nvidia-smi -i 0'); put clusterctl's own options
before it. Exits 1 when any host failed or the command exited non-zero there; 130 on
Ctrl-C, after printing what finished and which hosts were still running.

Examples:

  clusterctl -i inventories/demo.yaml exec -- nvidia-smi -L

  clusterctl -l 'gpu-*' exec --sudo -- systemctl is-active containerd

  clusterctl exec --stream -- dmesg -w   # 'host: line' as each arrives (pdsh)

  clusterctl exec --out-dir logs/ -- journalctl -b   # logs/HOST.out, HOST.err

  clusterctl exec -o json -- uname -r
""",
    )(exec_command)


def exec_command(
    ctx: typer.Context,
    command: list[str] = typer.Argument(..., metavar="[--] COMMAND...", help="The command line to run."),
    sudo: bool = typer.Option(
        False, "--sudo", help="Run it under sudo: 'sudo -n' (never prompts), or with the -K/--ask-sudo-pass password."
    ),
    stream: bool = typer.Option(
        False, "--stream",
        help="Print 'host: line' as each line arrives (stderr's as 'host: [stderr] line'), instead of grouping.",
    ),
    out_dir: str | None = typer.Option(
        None, "--out-dir", metavar="DIR",
        help="Write each host's output to DIR/HOST.out (and DIR/HOST.err) instead of printing it; for big outputs.",
    ),
) -> None:
    from clusterctl.fanout import FleetInterrupted

    app = app_context(ctx)
    line = " ".join(command).strip()
    if not line:
        raise UsageError("exec needs a command, e.g. clusterctl exec -- uname -r")
    if stream and out_dir:
        raise UsageError("--stream and --out-dir exclude each other: print the lines, or write them to files.")
    folder = writable_dir(out_dir, "--out-dir") if out_dir is not None else None
    hosts = app.hosts()
    streamer = _Streamer() if stream and not app.machine_output else None
    try:
        with app.runner(progress=streamer) as runner:
            fleet = runner.run_command(
                hosts, line, sudo=sudo, env=HOST_LOCALE, label="exec",
                on_line=streamer.line if streamer is not None else None,
            )
    except FleetInterrupted as exc:
        # What finished is printed as it would have been; main then says what was still running.
        _report(app, exc.finished, line, sudo, folder, streamed=streamer is not None, interrupted=exc)
        exc.reported = True  # the machine output above already says it: main adds only stderr lines
        raise
    _report(app, fleet, line, sudo, folder, streamed=streamer is not None)
    if not fleet.ok:
        raise typer.Exit(ExitCode.FAILED)


class _Streamer:
    """Prints ``host: line`` as each line arrives (stderr's as ``host: [stderr] line``), like pdsh.

    Lines come from every host's thread at once; one lock around each write keeps them whole.
    Also the fan-out's progress hook: a host whose transport sent no lines (one that cannot
    stream) gets its output printed when it finishes.
    """

    def __init__(self) -> None:
        import threading

        self._lock = threading.Lock()
        self._heard: set[str] = set()

    def line(self, host: str, stream: str, text: str) -> None:
        marker = "[stderr] " if stream == "stderr" else ""
        with self._lock:
            self._heard.add(host)
            sys.stdout.write(f"{host}: {marker}{one_line(text)}\n")
            sys.stdout.flush()

    def start(self, total: int, label: str) -> None:
        pass

    def advance(self, outcome: HostOutcome[Any]) -> None:
        result = outcome.value
        if result is None or outcome.host.name in self._heard:
            return
        for stream, text in (("stdout", result.stdout), ("stderr", result.stderr)):
            for line in text.splitlines():
                self.line(outcome.host.name, stream, line)

    def stop(self) -> None:
        pass


def _report(
    app: AppContext,
    fleet: FleetResult[CommandResult],
    line: str,
    sudo: bool,
    folder: Path | None,
    *,
    streamed: bool,
    interrupted: FleetInterrupted | None = None,
) -> None:
    files, unsaved = _write_files(folder, fleet) if folder is not None else ({}, [])
    records = []
    for o in fleet.outcomes:
        saved = files.get(o.host.name)
        shown = None if saved else o.value  # output written to files is named there, not repeated
        records.append({**outcome_record(o), "stdout": shown.stdout if shown else None,
                        "stderr": shown.stderr if shown else None, "exit_code": o.value.exit_code if o.value else None,
                        **({"files": saved} if saved else {})})

    def table() -> None:
        if folder is not None:
            for record in records:
                if "files" in record:
                    sys.stdout.write(f"{record['host']}: exit {record['exit_code']}, {', '.join(record['files'])}\n")
        elif not streamed:
            from clusterctl.dshbak import group_outputs

            outputs = ((o.host.name, o.value.stdout, o.value.stderr, o.value.exit_code)
                       for o in fleet.outcomes if o.value is not None)
            for group in group_outputs(outputs):
                # Never wrapped or re-rendered (and fast for a million lines); control characters
                # are shown, not obeyed (--out-dir keeps the bytes as they came).
                sys.stdout.write(group.header)
                sys.stdout.write(visible(group.body()))
        sys.stdout.flush()

    payload: dict[str, Any] = {"command": line, "sudo": sudo, "hosts": records}
    if interrupted is not None:
        payload.update(interrupted=True, still_running=[h.name for h in interrupted.running],
                       not_started=[h.name for h in interrupted.waiting])
    app.emit(payload, table)
    if interrupted is None:  # an interrupted run's failures are in main's report of it
        print_failures(app, fleet)
    if unsaved:  # after the report, so that what was written is listed first
        error = f"--out-dir {folder}: cannot write {first_few(unsaved, 3)}."
        if interrupted is None:
            raise UsageError(error)
        sys.stderr.write(f"error: {error}\n")  # the interrupt keeps its exit status


def _write_files(folder: Path, fleet: FleetResult[CommandResult]) -> tuple[dict[str, list[str]], list[str]]:
    """Each host's stdout to HOST.out and, when it printed any, its stderr to HOST.err; and each file that
    could not be written (a full disk, a folder in the way), with why: the other hosts' files are written."""
    written: dict[str, list[str]] = {}
    unsaved: list[str] = []
    for o in fleet.outcomes:
        if o.value is None:
            continue
        for suffix, text in ((".out", o.value.stdout), (".err", o.value.stderr)):
            if text or suffix == ".out":
                path = folder / host_file_name(o.host.name, suffix)
                try:
                    # Whole or the last run's, without a flush to disk for each of thousands of hosts' files.
                    replace_file(path, text, durable=False)
                except OSError as exc:
                    unsaved.append(f"{path} ({exc.strerror or exc})")
                    written.pop(o.host.name, None)  # its whole output goes in -o json instead
                    break
                written.setdefault(o.host.name, []).append(str(path))
    return written, unsaved

