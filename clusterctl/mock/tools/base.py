"""What a simulated tool gets (``ToolContext``) and what it answers (``ToolResult``)."""

from __future__ import annotations

import getopt
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from importlib import resources
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from clusterctl.mock.state import ClusterState, FileTree, HostState


@dataclass(frozen=True)
class ToolResult:
    stdout: str = ""
    stderr: str = ""
    exit_code: int = 0


@dataclass
class ToolContext:
    """One call of a simulated tool on one mock host."""

    #: The command as the shell split it; ``argv[0]`` is the tool's name.
    argv: list[str]
    #: What the caller piped in (``put`` data, a join token...).
    stdin: bytes
    #: Environment the command sees (``export`` and ``NAME=value`` prefixes included).
    env: dict[str, str]
    #: This host's persistent state: ``host.fs`` (its tree), ``host.edit()`` (its JSON document).
    host: HostState
    #: State shared by every host of the mock cluster: ``cluster.edit()``.
    cluster: ClusterState
    #: The inventory name of the host and the name it answers to ``hostname``.
    host_name: str
    hostname: str
    #: The profile's ``machine:`` section (package repository, services, modules...).
    machine: Mapping[str, Any] = field(default_factory=dict)
    #: Runs another command line on the same host, as a user would (rules, tools, shell).
    run: Callable[[str], ToolResult] | None = None
    #: The shell's working folder, for relative paths.
    cwd: str = "/root"
    #: Log lines the tool wrote to stderr along the way (klog warnings), before its answer's own.
    logged: list[str] = field(default_factory=list)

    def log(self, line: str) -> None:
        self.logged.append(line)

    @property
    def fs(self) -> FileTree:
        return self.host.fs

    @property
    def name(self) -> str:
        return self.argv[0]

    @property
    def args(self) -> list[str]:
        return self.argv[1:]

    def path(self, path: str) -> str:
        """``path`` made absolute against the working folder."""
        return path if path.startswith("/") else f"{self.cwd.rstrip('/')}/{path}"

    @staticmethod
    def ok(stdout: str = "", stderr: str = "") -> ToolResult:
        return ToolResult(stdout, stderr, 0)

    @staticmethod
    def fail(stderr: str, exit_code: int = 1) -> ToolResult:
        return ToolResult("", stderr, exit_code)

    def gpus(self) -> list[str]:
        """The host's GPUs as its ``nvidia-smi -L`` lists them (what the device plugin and nvidia-ctk find)."""
        if self.run is None:
            return []
        listing = self.run("nvidia-smi -L")
        return [line for line in listing.stdout.splitlines() if line.startswith("GPU ")] if listing.exit_code == 0 \
            else []

    def installed_version(self, *packages: str) -> str | None:
        """The installed version of the first of these Debian packages this host has (a program several
        packages ship: ``containerd``, ``containerd.io``), or None."""
        installed = self.host.section("packages")
        for package in packages:
            entry = installed.get(package)
            if isinstance(entry, dict) and entry.get("version"):
                return str(entry["version"])
        return None


_Item = TypeVar("_Item")


def each(items: Iterable[_Item], answer: Callable[[_Item], ToolResult]) -> ToolResult:
    """``answer`` for every operand in turn, as tools go on past a failed one (coreutils, dpkg-query,
    sysctl, systemctl): their outputs in order, and the worst exit status (0 when none failed)."""
    answers = [answer(item) for item in items]
    return ToolResult("".join(a.stdout for a in answers), "".join(a.stderr for a in answers),
                      max((a.exit_code for a in answers), default=0))


def _attached(arg: str, name: str) -> str | None:
    """The value ``arg`` carries for ``name``: ``--name=VALUE``, or ``-nVALUE`` and ``-n=VALUE`` for a short
    name (pflag and dpkg drop that one '=': ``-f==Z`` is ``=Z``); None when it carries none."""
    if arg.startswith(name + "=") or (len(name) == 2 and arg.startswith(name) and arg != name):
        return arg[len(name):].removeprefix("=")
    return None


def option_values(args: list[str], *names: str) -> Iterator[str]:
    """Each value of ``names`` given, in order (``--name VALUE`` or attached, as cobra reads
    them): a repeated slice flag (kubeadm's ``--skip-phases``) gives every one of its values."""
    for i, arg in enumerate(args):
        for name in names:
            if arg == name and i + 1 < len(args):
                yield args[i + 1]
            elif (value := _attached(arg, name)) is not None:
                yield value


def option(args: list[str], *names: str) -> str | None:
    """The value of ``names`` given last, or None: cobra tools (kubeadm, helm, etcdctl) keep a repeated flag's last."""
    return next(reversed(list(option_values(args, *names))), None)


def split_args(args: list[str], valued: Collection[str], long_names: Mapping[str, str] | None = None) \
        -> tuple[list[str], dict[str, str], set[str]]:
    """``args`` as its words (``-`` among them), its options with a value (``--name=VALUE``, a name of
    ``valued`` and the word after it: ``--config FILE``, or a short one of them attached: ``-nNS``; a short one
    kept by its long name in ``long_names``) and its bare flags."""
    words: list[str] = []
    options: dict[str, str] = {}
    flags: set[str] = set()
    i = 0
    while i < len(args):
        arg = args[i]
        if arg.startswith("--") and "=" in arg:
            name, value = arg.split("=", 1)
            options[name] = value
        elif arg in valued and i + 1 < len(args):
            options[arg] = args[i + 1]
            i += 1
        elif arg[:2] in valued and (attached := _attached(arg, arg[:2])) is not None:
            options[arg[:2]] = attached
        elif arg.startswith("-") and arg != "-":
            flags.add(arg)
        else:
            words.append(arg)
        i += 1
    return words, {(long_names or {}).get(name, name): value for name, value in options.items()}, flags


class UsageError(Exception):
    """An option the simulated tool does not know, one without its value, or no operand, in glibc getopt's words:
    the tool does nothing and the machine answers with the tool's usage error (``usage_error``)."""


def gnu_options(args: list[str], letters: str, *, operand: str = "", longs: dict[str, str] | None = None) \
        -> tuple[dict[str, str], list[str]]:
    """``args`` as GNU getopt reads them (options anywhere before ``--``, bundled, a letter followed by ':' in
    ``letters`` taking a value: ``-m 0755``, ``-m0755``; a long name in ``longs`` as its letter): the value of each
    option given ("" for a flag) by its letter, and the operands. An option not in ``letters`` or ``longs``, or
    none of the operands when ``operand`` names them for the message, is a usage error."""
    try:
        given, operands = getopt.gnu_getopt(args, letters, list(longs or {}))
    except getopt.GetoptError as exc:
        raise UsageError(f"option requires an argument -- '{exc.opt}'" if "requires" in exc.msg
                         else f"unrecognized option '--{exc.opt}'" if exc.msg.startswith("option --")
                         else f"invalid option -- '{exc.opt}'") from None
    if operand and not operands:
        raise UsageError(f"missing {operand}")
    return {(longs or {}).get(name[2:], name[1:]): value for name, value in given}, operands


_TRY = "Try '{tool} --help' for more information.\n"
#: What a tool says after its getopt line ("TOOL: invalid option -- 'z'"), the usage it prints on stdout (a
#: recording) and its exit status; coreutils' "Try" line and exit 1 for any tool not named (recordings/README.md).
USAGE_ENDS: dict[str, tuple[str, str, int]] = {
    "grep": ("Usage: grep [OPTION]... PATTERNS [FILE]...\n" + _TRY, "", 2), "ls": (_TRY, "", 2),
    "systemctl": ("", "", 1), "modprobe": ("", "", 1), "hostname": ("", "hostname-usage.txt", 255),
    "sysctl": ("", "sysctl-usage.txt", 0),
}


def usage_error(tool: str, error: UsageError) -> ToolResult:
    """The tool's answer to a usage error (grep without a pattern says its usage alone)."""
    follows, usage, code = USAGE_ENDS.get(tool, (_TRY, "", 1))
    said = f"{tool}: {error}\n" if str(error) else ""
    printed = (resources.files("clusterctl.mock.recordings") / usage).read_text() if usage else ""
    return ToolResult(printed, said + follows.format(tool=tool), code)
