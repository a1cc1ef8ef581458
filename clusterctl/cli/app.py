"""The ``clusterctl`` command: global options, command registration, errors -> exit codes."""

from __future__ import annotations

import importlib
import inspect
import os
import sys
from collections.abc import Callable
from typing import Any

import typer
from typer.core import TyperGroup

from clusterctl import __version__
from clusterctl.cli.context import AppContext, OutputFormat
from clusterctl.errors import ClusterctlError, ExitCode, Interrupted, UsageError
from clusterctl.terminal_text import visible

HELP = """\
Survey, benchmark, tune and bootstrap bare-metal GPU clusters over SSH.

Every command works on the hosts of an inventory (clusterctl YAML or an Ansible
INI/YAML inventory) and accepts the global options below, before or after the
command name.

Examples:

  clusterctl -i inventories/demo.yaml survey

  clusterctl -i hosts.ini -l 'rack-a,!gpu-a3' exec -- nvidia-smi -L

  clusterctl topo show saved-topo.txt -o json
"""


#: Every top-level command: the module whose ``register(app)`` defines it, and the one line
#: ``clusterctl --help`` shows for it. A module is imported only when its command runs (or its
#: own ``--help`` is asked for), so start-up pays for none of them; a test checks each line
#: against the command's own help. A new command is one module plus one entry here.
COMMANDS: dict[str, tuple[str, str]] = {
    "inventory": ("clusterctl.cli.inventory_cmd", "Show or validate the inventory."),
    "exec": ("clusterctl.cli.exec_cmd", "Run a shell command on the selected hosts, at once."),
    "copy": ("clusterctl.cli.copy_cmd", "Copy a local file to the same path on every selected host."),
    "survey": ("clusterctl.cli.survey_cmd",
               "Survey the hosts: GPUs, NVLink topology, NICs and software stack, with findings."),
    "health": ("clusterctl.cli.health_cmd",
               "Check the hosts' GPUs, NVLinks, NICs and PCIe paths; give each host a verdict."),
    "topo": ("clusterctl.cli.topo_cmd", "Work with nvidia-smi topo -m matrices without reaching any host."),
    "bench": ("clusterctl.cli.bench_cmd",
              "Benchmark the fabric (perftest between host pairs) and the GPUs (nccl-tests)."),
    "nccl": ("clusterctl.cli.nccl_cmd",
             "NCCL settings: check them against what each NCCL release reads and accepts."),
    "tune-nccl": ("clusterctl.cli.tune_cmd", "Derive NCCL settings for the selected hosts, each with its reason."),
    "bootstrap": ("clusterctl.cli.bootstrap_cmd",
                  "Bring up Kubernetes (kubeadm, containerd with the NVIDIA runtime) on the inventory's hosts."),
    "upgrade": ("clusterctl.cli.upgrade_cmd",
                "Upgrade the cluster's Kubernetes and node stack, node by node, in kubeadm's order."),
    "remove-node": ("clusterctl.cli.remove_node_cmd",
                    "Take one host out of the cluster: drain, etcd member, kubeadm reset, delete node."),
    "certs": ("clusterctl.cli.certs_cmd",
              "Check and renew the certificates kubeadm manages on every control plane."),
    "reset": ("clusterctl.cli.reset_cmd",
              "Undo what 'clusterctl bootstrap' did on the selected hosts, as its own undo journals say."),
    "undo": ("clusterctl.cli.undo_cmd", "Revert the changes a run made on hosts, from the undo journal it wrote."),
    "quarantine": ("clusterctl.cli.quarantine_cmd",
                   "Take hosts out of service: taint, cordon and (--drain) drain them, in Kubernetes and Slurm."),
    "release": ("clusterctl.cli.quarantine_cmd",
                "Bring quarantined hosts back once their health and a one-host NCCL test pass."),
    "remediate": ("clusterctl.cli.remediate_cmd",
                  "Act on alerts: quarantine the hosts that bootstrap's DCGM alert rules name."),
    "status": ("clusterctl.cli.quarantine_cmd",
               "Which nodes are quarantined: since when, by whom, why (reason and finding codes), and what their "
               "release needs."),
    "heal": ("clusterctl.cli.heal_cmd",
             "Heal quarantined hosts: reset GPU, reboot, power-cycle via the BMC; release once proven healthy."),
    "dashboards": ("clusterctl.cli.dashboards_cmd",
                   "Render Grafana dashboards (fleet health, fabric, repairs, utilisation) from survey and bench."),
    "power": ("clusterctl.cli.power_cmd",
              "Read or change hosts' power through their BMCs (Redfish): status, on, off, cycle."),
    "record": ("clusterctl.cli.record_cmd", "Record the selected hosts as mock profiles that replay them in CI."),
    "mock": ("clusterctl.cli.mock_cmd", "Show or forget what mock hosts remember between runs."),
}


class LazyCommands(TyperGroup):
    """The top-level group: commands are built from their module on first use (see ``COMMANDS``)."""

    def list_commands(self, ctx: Any) -> list[str]:
        return [*COMMANDS, *(name for name in self.commands if name not in COMMANDS)]

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        if cmd_name not in self.commands and cmd_name in COMMANDS:
            self.commands[cmd_name] = load_command(cmd_name)
        return self.commands.get(cmd_name)

    def resolve_command(self, ctx: Any, args: list[str]) -> Any:
        """Click's own lookup; a typo is answered with the nearest command names, loaded or not
        (typer suggests only among the commands already built, and these are built lazily)."""
        try:
            return super().resolve_command(ctx, args)
        except Exception as exc:
            message = getattr(exc, "message", None)
            if isinstance(message, str) and args and "Did you mean" not in message:
                from clusterctl.inventory.values import did_you_mean

                hint = did_you_mean(args[0], self.list_commands(ctx), n=3)
                if hint:
                    exc.message = f"{message.rstrip('.')}. {hint}"  # type: ignore[attr-defined]
            raise


def whole_command_lines(group: Any, ctx: Any, formatter: Any) -> None:
    """A group's commands in its help, each with its whole line, wrapped to the terminal (click cuts
    it with '...' to fit one line). A command not built yet has its line in ``COMMANDS``."""
    rows = [(name, command.get_short_help_str(limit=1000) if (command := group.commands.get(name)) else
             COMMANDS[name][1]) for name in group.list_commands(ctx)]
    with formatter.section("Commands"):
        formatter.write_dl(rows)


def load_command(name: str) -> Any:
    """The click command ``name`` as its module registers it (typer vendors click: duck-typed)."""
    module = importlib.import_module(COMMANDS[name][0])
    holder = typer.Typer(add_completion=False, rich_markup_mode=None)
    module.register(holder)
    built = typer.main.get_command(holder)
    inner = getattr(built, "commands", None)
    if inner is not None and name in inner:
        built = inner[name]
    else:
        built.name = name  # typer returns a lone command itself, named after its function
    help_as_written(built)
    check_number_options(built)
    return built


def check_number_options(command: Any) -> None:
    """Every number option of ``command`` (and its subcommands) refuses a value that is not a number of
    its kind (``--level 1.5``), out of its range, ``nan`` and ``inf`` in one line that names the option,
    the value given and what it takes, exit 2.

    typer's refusal names neither the value nor, for a value of the wrong kind, the range, and Python's
    ``float()`` takes ``nan`` and ``inf``, which a range's ``min`` does not stop: ``--drain-timeout inf``
    would drain without a limit. Done once here, where commands are built, so that no option can be left out.
    """
    import math
    import re

    for param in getattr(command, "params", ()):
        if getattr(param, "number_checked", False) or param.bare_type() not in ("int", "float"):
            continue
        process = param.process_value

        def checked(ctx: Any, value: Any, process: Any = process, param: Any = param) -> Any:
            if not isinstance(value, str):
                return process(ctx, value)
            try:
                number: float | None = float(value)
            except ValueError:
                number = None
            whole, low, high = param.bare_type() == "int", param.min, param.max
            problem = ("not a number" if number is None else "not a finite number" if not math.isfinite(number)
                       else "not a whole number" if whole and not re.fullmatch(r"\s*[+-]?\d+\s*", value)
                       else "out of range" if (low is not None and number < low) or (high is not None and number > high)
                       else None)
            if problem is None:
                return process(ctx, value)
            name = max(getattr(param, "opts", None) or [param.name], key=len)
            wanted = (f" from {low} to {high}" if None not in (low, high) else f" of at least {low}"
                      if low is not None else f" of at most {high}" if high is not None else "")
            default = f" (the default is {param.default})" if param.default is not None else ""
            raise UsageError(f"{name} {value}: {problem}; give a {'whole ' * whole}number{wanted}{default}.")

        param.process_value = checked
        param.number_checked = True
    for sub in getattr(command, "commands", {}).values():
        check_number_options(sub)


app = typer.Typer(
    cls=LazyCommands,
    name="clusterctl",
    help=HELP,
    no_args_is_help=True,
    add_completion=False,
    rich_markup_mode=None,
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
)

def _version(value: bool) -> None:
    if value:
        typer.echo(f"clusterctl {__version__}")
        raise typer.Exit()


@app.callback()
def global_options(
    ctx: typer.Context,
    inventory_path: str | None = typer.Option(
        None, "-i", "--inventory", envvar="CLUSTERCTL_INVENTORY", metavar="FILE",
        help="Inventory file (clusterctl YAML, Ansible INI or YAML), or a host list such as "
        "'gpu-[01-16],login1' or 'a,b,'. Default: ./inventory.yaml.",
    ),
    limit: str | None = typer.Option(
        None, "-l", "--limit", metavar="PATTERN",
        help="Hosts to act on, like Ansible's --limit: names, addresses, globs, groups; '!x' excludes, "
        "'&g' intersects, '~regex' matches names, '@FILE' reads names from a file (@retry: the last run's failed "
        "hosts).",
    ),
    output: OutputFormat = typer.Option(OutputFormat.table, "-o", "--output", help="Output format."),
    parallel: int = typer.Option(64, "--parallel", min=1, max=4096, help="Hosts worked on at once."),
    timeout: float | None = typer.Option(
        None, "--timeout", min=0.1, metavar="SECONDS",
        help="Time limit per host (default 60); when given, also the most any one remote step may take "
        "(bootstrap phases that allow longer are held to it)."),
    accept_new_host_keys: bool = typer.Option(
        False, "--accept-new-host-keys", help="Record unknown SSH host keys instead of refusing them."
    ),
    ssh_config: str | None = typer.Option(
        None, "--ssh-config", metavar="FILE", help="ssh_config file to read (default ~/.ssh/config)."
    ),
    known_hosts: str | None = typer.Option(
        None, "--known-hosts", metavar="FILE", help="known_hosts file (default ~/.ssh/known_hosts)."
    ),
    ask_sudo_pass: bool = typer.Option(
        False, "-K", "--ask-sudo-pass",
        help="Ask once for the sudo password (also CLUSTERCTL_SUDO_PASS or CLUSTERCTL_SUDO_PASS_FILE, mode 0600).",
    ),
    ask_key_passphrase: bool = typer.Option(
        False, "--ask-key-passphrase",
        help="Ask once for the passphrase of encrypted SSH keys not in ssh-agent (also CLUSTERCTL_KEY_PASSPHRASE).",
    ),
    ask_pass: bool = typer.Option(
        False, "-k", "--ask-pass", help="Ask once for an SSH login password (also CLUSTERCTL_SSH_PASS)."
    ),
    debug: bool = typer.Option(False, "--debug", help="Log every step and show tracebacks."),
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True, expose_value=False,
                                 help="Print the version."),
) -> None:
    if ssh_config is not None and not os.path.isfile(os.path.expanduser(ssh_config)):
        raise UsageError(f"--ssh-config {ssh_config}: no such file")
    # The options' names are AppContext's fields: what the user gave, as given.
    ctx.obj = AppContext(**ctx.params)
    if debug:
        import logging

        from clusterctl.secret import mask_log_record

        logging.basicConfig(level=logging.DEBUG, format="%(asctime)s %(name)s %(message)s")
        logging.getLogger("paramiko").setLevel(logging.INFO)
        # On the handlers, so records of every logger (paramiko's too) pass the filter.
        for handler in logging.getLogger().handlers:
            handler.addFilter(mask_log_record)


#: Global options: name -> takes a value (all but flags). Used to let users put them after the command.
GLOBAL_OPTIONS: dict[str, bool] = {
    name: param.annotation != "bool" for param in inspect.signature(global_options).parameters.values()
    if isinstance(param.default, typer.models.OptionInfo) and not param.default.is_eager
    for name in param.default.param_decls or ()}


#: Commands whose trailing words are a remote command line, and their own options (-> takes a value).
#: Everything from the first word that is not one of these options belongs to the remote command.
COMMAND_LINE_COMMANDS: dict[str, dict[str, bool]] = {
    "exec": {"--sudo": False, "--stream": False, "--out-dir": True, "-h": False, "--help": False},
}


def hoist_global_options(argv: list[str]) -> list[str]:
    """Move global options found after the command name to the front.

    Users write ``clusterctl survey -i inv.yaml`` as often as ``clusterctl -i inv.yaml
    survey``; click only accepts the latter. Nothing after ``--`` is touched, so
    ``exec -- cmd -o x`` keeps its own arguments; for ``exec`` the first word of the remote
    command starts it just as ``--`` would (``exec nvidia-smi -i 0`` runs ``nvidia-smi -i 0``).
    """
    front: list[str] = []
    rest: list[str] = []
    command: str | None = None
    i = 0
    while i < len(argv):
        arg = argv[i]
        if arg == "--":
            rest.extend(argv[i:])
            break
        name = arg.split("=", 1)[0]
        own = COMMAND_LINE_COMMANDS.get(command or "")
        options = GLOBAL_OPTIONS if name in GLOBAL_OPTIONS else own if own is not None and name in own else None
        if options is not None:
            into = front if options is GLOBAL_OPTIONS else rest
            into.append(arg)
            if options[name] and "=" not in arg and i + 1 == len(argv) and into is front:
                return front  # its value missing: click says so, where it would take the command's name for it
            if options[name] and "=" not in arg and i + 1 < len(argv):
                into.append(argv[i + 1])
                i += 1
        elif own is not None and not arg.startswith("-"):
            rest.extend(["--", *argv[i:]])
            break
        else:
            if command is None and not arg.startswith("-"):
                command = arg
            rest.append(arg)
        i += 1
    return front + rest


def help_as_written(command: Any) -> None:
    """The help of ``command`` and its subcommands as written. Every indented paragraph (examples, file
    previews) is kept unwrapped: click would break a long path or command mid-word, and a copy-paste
    would fail (click keeps a paragraph that starts with a ``\\b`` line; the prose is still wrapped).
    An argument reads as its metavar says it ('HOST...', '[HOST]...'), where typer would add braces, a
    second '...' and the Python type ('{HOST...}...', 'HOST... <list[str]>'); a text option without
    one is named after itself, a number option reads 'N'. A group lists its commands whole (``whole_command_lines``).
    """
    import types

    help_text = getattr(command, "help", None)
    if help_text:
        paragraphs = help_text.split("\n\n")
        command.help = "\n\n".join(
            "\b\n" + p if p.startswith("  ") and not p.startswith("\b") else p for p in paragraphs)
    for param in getattr(command, "params", ()):
        if param.param_type_name == "argument" and param.metavar:
            shown = param.metavar if param.required or param.metavar.startswith("[") else f"[{param.metavar}]"
            param.get_usage_pieces = lambda ctx, shown=shown: [shown]
            param.display_type_rich = lambda ctx: None
        elif param.param_type_name == "option" and param.metavar is None and param.bare_type() in ("str", "list[str]"):
            param.metavar = max(param.opts, key=len).lstrip("-").upper()  # '--op OP', not '--op <str>'
        elif param.param_type_name == "option" and param.metavar is None and param.bare_type() in ("int", "float"):
            param.metavar = "N"  # '--tp N', not '--tp <int range>': the help's '[x>=1]' says the range
    if hasattr(command, "commands"):
        command.format_commands = types.MethodType(whole_command_lines, command)
        for sub in command.commands.values():
            help_as_written(sub)


def run_program() -> None:
    """The program's entry point (``clusterctl``, ``python -m clusterctl``): ``main``, then a quick exit.

    Once a command has finished (its output written, its connections closed, ``finally`` blocks
    and exit handlers run), tearing the interpreter down object by object is all that is left:
    after a fan-out over 32 hosts that took 0.3 s of CPU and up to a second on a loaded machine
    (benchmarks/fanout), a third of the whole run. So the streams are flushed, the exit handlers
    run (logging's, temporary folders'), and the process ends with ``os._exit``. An exception
    other than ``SystemExit`` takes Python's ordinary way out (its traceback, its exit status).
    """
    import atexit

    code: int = 0
    try:
        main()
    except SystemExit as exc:
        if isinstance(exc.code, int) or exc.code is None:
            code = exc.code or 0
        else:
            print(exc.code, file=sys.stderr)
            code = 1
    import threading

    # What Python's own exit does first: wait for threads that are not daemons.
    for thread in threading.enumerate():
        if thread is not threading.current_thread() and not thread.daemon:
            thread.join()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe (``| head``): nothing more can be written
            code = code or 1
    atexit._run_exitfuncs()
    os._exit(code)


def main(argv: list[str] | None = None) -> None:
    args = hoist_global_options(list(sys.argv[1:] if argv is None else argv))
    debug = "--debug" in args
    command = typer.main.get_command(app)
    help_as_written(command)
    check_number_options(command)
    restore = _interrupts_raise()
    try:
        _run(command, args, debug)
    finally:
        restore()


def _run(command: Any, args: list[str], debug: bool) -> None:
    try:
        code = command.main(args=args, prog_name="clusterctl", standalone_mode=False)
    except ClusterctlError as exc:
        if debug:
            import traceback

            traceback.print_exc()
        _print_error(str(exc))
        sys.exit(int(exc.exit_code))
    except Interrupted as exc:
        from clusterctl.cli.host_failures import print_interrupted

        # The command's context is gone: its -o is read again from the global options (hoisted to the front).
        given = command.make_context("clusterctl", list(args), resilient_parsing=True).params.get("output")
        print_interrupted(exc, output=given.value if given else "table")
        sys.exit(exc.exit_code)
    except KeyboardInterrupt:
        _print_error("interrupted")
        sys.exit(130)
    except typer.Abort:
        _print_error("aborted")
        sys.exit(130)
    except Exception as exc:
        # Click's own errors (a bad option, a missing argument). Recent typer releases vendor
        # click under a private name, so they are recognised by shape, not by import.
        show = getattr(exc, "show", None)
        if not callable(show) or not isinstance(getattr(exc, "exit_code", None), int):
            if debug:
                raise
            _print_error(f"internal error: {type(exc).__name__}: {exc} (rerun with --debug for the traceback)")
            sys.exit(ExitCode.FAILED)
        kinds = {cls.__name__ for cls in type(exc).__mro__}
        if "NoArgsIsHelpError" in kinds:  # a command group alone ('clusterctl upgrade'): its help
            show()
        else:
            _print_error(_click_error(exc))
        sys.exit(ExitCode.USAGE if "UsageError" in kinds else getattr(exc, "exit_code", 1))
    sys.exit(code if isinstance(code, int) else 0)


def _click_error(exc: Any) -> str:
    """A click error as the product's one paragraph: click's message (lower-case first, like every
    other error), then the command's usage and where its help is, as click shows them."""
    text = exc.format_message().replace(": Value error, ", ": ")  # typer 0.29's words for a bad choice
    if text[:1].isupper() and text[1:2].islower():
        text = text[0].lower() + text[1:]
    ctx = getattr(exc, "ctx", None)
    if ctx is None:
        return text
    text = text if text.endswith((".", "?", "!")) else text + "."
    usage = " ".join(ctx.get_usage().split())
    if ctx.command.get_help_option(ctx) is None:
        return f"{text} {usage}"
    return f"{text} {usage}; try '{ctx.command_path} {ctx.help_option_names[0]}' for help."


def _interrupts_raise() -> Callable[[], None]:
    """Ctrl-C and SIGTERM become ``Interrupted``: typer would turn a KeyboardInterrupt into a
    silent exit 130, and SIGTERM would end Python at once, skipping every ``finally`` that
    stops remote perftest servers and removes their logs."""
    import signal

    def on_signal(signum: int, frame: object) -> None:
        raise Interrupted(signal.Signals(signum).name)

    try:
        previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
    except ValueError:  # not the main thread (an embedding program): leave signals as they are
        return lambda: None

    def restore() -> None:
        for sig, handler in previous.items():
            signal.signal(sig, handler)

    return restore


def _print_error(message: str) -> None:
    from clusterctl.terminal_layout import stderr_width, wrap_lines

    text = wrap_lines("error: " + visible(message), stderr_width())
    if not os.environ.get("NO_COLOR") and sys.stderr.isatty():
        text = text.replace("error:", "\x1b[1;31merror:\x1b[0m", 1)
    sys.stderr.write(text + "\n")
