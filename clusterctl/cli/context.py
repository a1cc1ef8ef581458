"""What every command gets from the global options: the inventory, the hosts, a runner, output."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from enum import Enum
from typing import TYPE_CHECKING, Any, cast

import typer

from clusterctl.errors import ExitCode, UsageError
from clusterctl.secret import mask_text
from clusterctl.terminal_text import visible

if TYPE_CHECKING:
    from rich.console import Console

    from clusterctl.engine.run import GivenOptions
    from clusterctl.fanout import Progress, Runner
    from clusterctl.inventory.model import Host, Inventory


class OutputFormat(str, Enum):
    table = "table"
    json = "json"
    yaml = "yaml"


@dataclass
class AppContext:
    inventory_path: str | None = None
    limit: str | None = None
    output: OutputFormat = OutputFormat.table
    parallel: int = 64
    #: ``--timeout`` as the user gave it (else 60 s per host): then no remote step (connect, command, file)
    #: may take longer.
    timeout: float | None = None
    debug: bool = False
    accept_new_host_keys: bool = False
    ssh_config: str | None = None
    known_hosts: str | None = None
    ask_sudo_pass: bool = False
    ask_key_passphrase: bool = False
    ask_pass: bool = False
    _inventory: Inventory | None = field(default=None, repr=False)
    _console: Console | None = field(default=None, repr=False)
    _err_console: Console | None = field(default=None, repr=False)
    _secrets: dict[str, Any] | None = field(default=None, repr=False)

    # -- consoles ---------------------------------------------------------------------

    @property
    def console(self) -> Console:
        if self._console is None:
            from rich.console import Console

            # Off a terminal (a pipe, a ticket paste) rich would wrap at 80 columns; tables read better wider.
            width = None if sys.stdout.isatty() or os.environ.get("COLUMNS") else 160
            # emoji=False, here and on stderr: ':b:' in a host named 'rack:b:1' is text, not an emoji code.
            self._console = Console(no_color=_no_color(sys.stdout), highlight=False, width=width, emoji=False)
        return self._console

    @property
    def err_console(self) -> Console:
        if self._err_console is None:
            from rich.console import Console

            self._err_console = Console(stderr=True, no_color=_no_color(sys.stderr), highlight=False, emoji=False)
        return self._err_console

    @property
    def machine_output(self) -> bool:
        return self.output is not OutputFormat.table

    # -- inventory --------------------------------------------------------------------

    def inventory(self) -> Inventory:
        if self._inventory is None:
            from clusterctl.inventory.loader import open_inventory

            self._inventory = open_inventory(self.inventory_path)
        return self._inventory

    def hosts(self) -> tuple[Host, ...]:
        from clusterctl.inventory.limit import select_hosts

        hosts = select_hosts(self.inventory(), self.limit)
        if not hosts:
            # One rule for every command: a selection of nothing is a mistake, never a silent success.
            raise UsageError(
                f"no host selected: the --limit {self.limit!r} leaves no host of the inventory."
                if self.limit
                else "no host selected: the inventory has no hosts."
            )
        return hosts

    def named_hosts(self, names: Sequence[str]) -> list[Host]:
        """The inventory hosts named on the command line (``-l`` narrows them further); a name the
        inventory lacks is exit 2 (``inventory.limit.hosts_named``)."""
        from clusterctl.inventory.limit import hosts_named

        named = hosts_named(self.inventory(), names, "HOST")
        selected = {h.name for h in self.hosts()}
        chosen = [h for h in named if h.name in selected]
        if not chosen:
            raise UsageError(f"--limit {self.limit!r} leaves none of the named hosts ({', '.join(names)}); name "
                             "hosts it selects, or leave it out.")
        return chosen

    def this_machine(self) -> Host:
        """``--local``: this machine over the local transport; with -i, the inventory's entry that names
        it says what it is expected to have."""
        from clusterctl.inventory.this_machine import this_machine

        return this_machine(self.inventory() if self.inventory_path else None)

    # -- running ----------------------------------------------------------------------

    @contextmanager
    def runner(self, *, force_transport: str | None = None, progress: Progress | None = None) -> Iterator[Runner]:
        from clusterctl.fanout.scheduler import DEFAULT_TIMEOUT_S, Runner
        from clusterctl.transport.factory import ConnectOptions, make_connector
        from clusterctl.transport.output import max_output_bytes

        max_output_bytes()  # CLUSTERCTL_MAX_OUTPUT that is no size: said once, before any host, not by each
        options = ConnectOptions(
            accept_new_host_keys=self.accept_new_host_keys,
            ssh_config=self.ssh_config,
            known_hosts=self.known_hosts,
            force_transport=force_transport,
            **self.secrets(),
        )
        if progress is None and not self.machine_output and self.err_console.is_terminal:
            from clusterctl.cli.progress import RichProgress

            progress = RichProgress(self.err_console)
        with Runner(make_connector(options), parallel=self.parallel, progress=progress, step_timeout_s=self.timeout,
                    timeout_s=self.timeout or DEFAULT_TIMEOUT_S, on_wait=self._say_still_waiting) as r:
            try:
                yield r
            finally:
                from clusterctl.retry import record_failed

                record_failed(r.failed_hosts, self._inventory.source if self._inventory else None)

    def _say_still_waiting(self, label: str, hosts: list[str], waited_s: float) -> None:
        """A long wait says what it waits for (on stderr, also in scripts): never minutes of silence."""
        from clusterctl.hostlist import compress
        from clusterctl.wording import seconds

        step = f" ({label})" if label else ""
        self.say(f"still waiting{step} after {seconds(waited_s)} for {compress(hosts)}", err=True)

    def secrets(self) -> dict[str, Any]:
        """The sudo password and login secrets, asked for once per run (see ``cli.credentials``)."""
        if self._secrets is None:
            from clusterctl.cli.credentials import read_secret

            self._secrets = {
                "sudo_password": read_secret("sudo password", "CLUSTERCTL_SUDO_PASS", ask=self.ask_sudo_pass),
                "key_passphrase": read_secret("SSH key passphrase", "CLUSTERCTL_KEY_PASSPHRASE",
                                              ask=self.ask_key_passphrase),
                "password": read_secret("SSH password", "CLUSTERCTL_SSH_PASS", ask=self.ask_pass),
            }
        return self._secrets

    # -- output -----------------------------------------------------------------------

    def emit(self, payload: Any, render_table: Callable[[], None], *, failed: bool = False,
             errors: Sequence[str] = (), inputs: int = 0) -> None:
        """Print ``payload`` as JSON/YAML, or call ``render_table`` for the human view; then each of ``errors``
        (an input that could not be read while the others were) as ``error: ...`` on stderr, and exit 2;
        else, when ``failed`` (a host, check or item failed), exit 1: the output is printed either way.
        When none of the ``inputs`` could be read there is no result: stdout stays empty (not "No problems
        found" over nothing read), the errors alone are printed."""
        from clusterctl.cli.output import dump

        if not errors or len(errors) < inputs:  # a result (with no input read, the errors alone)
            if self.machine_output:
                sys.stdout.write(dump(payload, self.output.value))
            else:
                render_table()
        for message in errors:
            self.say(f"error: {message}", err=True)
        if errors:
            raise typer.Exit(ExitCode.USAGE)
        if failed:
            raise typer.Exit(ExitCode.FAILED)

    def say(self, text: str, *, err: bool = False, soft_wrap: bool = True, indent: int = 2) -> None:
        """Print ``text`` on stdout (``err``: stderr) as text, never markup: a '[host]' or a '[/]' that
        came from a host stays as it is. Each line as it is, however long (a file's line, a diff, a
        command), unless ``soft_wrap`` is False: then wrapped under the one rule (``terminal_layout.hanging``,
        ``indent`` columns in), a path or a command whole on a line of its own. A registered
        secret in it is masked, as in ``-o json`` output, and a control character that came from a host
        (a terminal escape) is shown as an escape (``say``, ``note`` and ``warn`` alike)."""
        from clusterctl.terminal_layout import hanging, wrap_width

        console = self.err_console if err else self.console
        text = visible(mask_text(text))
        if not soft_wrap:
            text = "\n".join(hanging(line, wrap_width(console), indent) for line in text.split("\n"))
        console.print(text, markup=False, highlight=False, soft_wrap=True)

    def note(self, text: str) -> None:
        """``note: TEXT`` on stdout, wrapped under the note (a journal's path or command whole)."""
        from clusterctl.terminal_layout import print_wrapped

        print_wrapped(self.console, f"note: {visible(mask_text(text))}", 6)

    def warn(self, message: str) -> None:
        from rich.text import Text

        from clusterctl.terminal_layout import print_wrapped

        # Wrapped between words with a hanging indent (never a host or file name broken in two);
        # a Text, not markup: '[user@]host' or '[control-plane]' in a message is text.
        text = Text(f"warning: {visible(mask_text(message))}")
        text.stylize("yellow", 0, len("warning:"))
        print_wrapped(self.err_console, text, 9)


def _no_color(stream: Any) -> bool:
    return bool(os.environ.get("NO_COLOR")) or not getattr(stream, "isatty", lambda: False)()


#: ``--state-dir`` of every command that changes hosts (its undo journal goes to DIR/undo) or keeps progress.
STATE_DIR = typer.Option(None, "--state-dir", metavar="DIR", envvar="CLUSTERCTL_STATE_DIR",
                         help="Where progress and undo journals are kept (default ~/.local/state/clusterctl).")


#: ``--drain-timeout`` of every command that drains nodes (quarantine, remediate serve, upgrade, remove-node).
DRAIN_TIMEOUT = typer.Option(300.0, "--drain-timeout", min=1.0, metavar="SECONDS",
                             help="How long a drain may wait for PodDisruptionBudgets and terminating pods.")


#: The one switch of every drain of a failing host (quarantine --drain, health --quarantine, remediate serve, heal).
DELETE_EMPTYDIR_DATA = typer.Option(False, "--delete-emptydir-data", help="Drains evict pods with emptyDir data too "
                                    "(it is lost); without it such pods stay, named, and the drain is incomplete.")


#: ``--skip-phases`` of the commands that run the engine's phases by name (bootstrap, upgrade).
SKIP_PHASES = typer.Option(None, "--skip-phases", metavar="A,B", help="Phases to leave out, comma-separated.")


def given_options(ctx: typer.Context, *decided: str) -> GivenOptions:
    """The global options (-i, -l, --ssh-config, -K...) and the command's, as the user typed them (not from the
    environment or a default), for the line that runs it again (``engine.run.command_line``: its inventory, its
    hosts, its state folder...), but --debug and those the line words itself (--resume, --yes, ``decided``),
    --dry-run (a plan does not go on) and --force-unlock (it clears a dead run's lock once: again, it would take
    a live run's)."""
    from clusterctl.engine.run import GivenOptions  # here: the help never loads the engine

    words: tuple[list[str], list[str]] = ([], [])
    for at, left_out, said in ((ctx.find_root(), {"debug"}, words[0]),
                               (ctx, {"resume", "yes", "dry_run", "force_unlock", *decided}, words[1])):
        for param in at.command.params:
            name = str(param.name)
            source = at.get_parameter_source(name)  # typer's own click: its enum is not click's, its name is
            if param.param_type_name != "option" or name in left_out or source is None \
                    or source.name != "COMMANDLINE":
                continue
            value = at.params[name]
            said += [param.opts[0]] if getattr(param, "is_flag", False) else \
                [param.opts[0], str(value.value if isinstance(value, Enum) else value)]
    return GivenOptions(tuple(words[0]), tuple(words[1]))


def with_options(*templates: Callable[..., None]) -> Callable[[Callable[..., None]], Callable[..., None]]:
    """Options declared once for several commands: each ``template`` is a function that only declares options,
    as a command's parameters do (name, type, ``typer.Option`` with its help); the decorated command gets them
    after its own parameters, in --help too, and takes them as ``**options`` (``ctx.params`` holds them all)."""
    import inspect

    def add(command: Callable[..., None]) -> Callable[..., None]:
        params = [p for f in (command, *templates) for p in inspect.signature(f, eval_str=True).parameters.values()
                  if p.kind is not p.VAR_KEYWORD]
        # typer reads the signature and the type hints: both hold the shared parameters, their types resolved.
        command.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
        command.__annotations__ = {p.name: p.annotation for p in params}
        return command

    return add


def app_context(ctx: typer.Context) -> AppContext:
    """What the global options gave: ``global_options`` puts it on the root context before any command runs."""
    return cast(AppContext, ctx.find_root().obj)
