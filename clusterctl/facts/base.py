"""A fact is a command string plus a pure function that parses its output.

Parsers never touch the network, the clock or the file system: they take text and return
typed data or raise ``clusterctl.errors.ParseError`` naming the line. That makes them
testable on recorded real outputs, and lets the same fact run over ssh, locally or
against a mock profile.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar

T = TypeVar("T")


class CommandOutput(Protocol):
    """What ``missing_reason`` reads of a command's result (``transport.base.CommandResult`` has it).

    A protocol, so that facts stay pure parsers that import no transport.
    """

    @property
    def command(self) -> str: ...

    @property
    def stdout(self) -> str: ...

    @property
    def stderr(self) -> str: ...

    @property
    def exit_code(self) -> int: ...


@dataclass(frozen=True)
class Fact(Generic[T]):
    #: Short stable name, used as a key in reports (``topology``, ``gpus``, ``rdma``...).
    name: str
    #: The shell command line run on the host.
    command: str
    parse: Callable[[str], T]
    sudo: bool = False
    #: Other commands that give the same fact, tried in order when this one cannot (tool not
    #: installed, no output): ``ibstat`` where ``ibv_devinfo`` is missing.
    fallbacks: tuple[Fact[T], ...] = ()


@dataclass(frozen=True)
class Missing:
    """A fact that could not be read on a host, and why (shown to the user, kept in JSON)."""

    fact: str
    reason: str


_KNOWN_FAILURES: tuple[tuple[str, str], ...] = (
    ("Driver/library version mismatch", "NVIDIA driver/library version mismatch (reboot or reload the kernel module)"),
    ("couldn't communicate with the NVIDIA driver", "nvidia-smi cannot talk to the NVIDIA driver (driver not loaded)"),
    ("No devices were found", "no NVIDIA devices were found"),
    ("No IB devices found", "no RDMA devices found"),
    ("Permission denied", "permission denied"),
)
#: The shell's words for a program it did not find, naming it: ``sh: 1: nvcc: not found`` (dash, busybox; a
#: script's ``/tmp/probe.sh: 1: nvcc: not found``), ``bash: line 1: nvcc: command not found`` (sudo's alike),
#: ``zsh:1: command not found: nvcc`` (a login shell). Only a shell's or a script's line: a tool's own
#: ``Error: release: not found`` (helm) names no missing program.
_NOT_FOUND = re.compile(r"^(?:-?(?:\S*/)?(?:sh|ash|dash|bash|ksh|sudo)(?:: (?:line )?\d+)?"
                        r"|[^\s:]*/[^\s:]+: (?:line )?\d+): ([^\s:]+): (?:command )?not found\s*$"
                        r"|^(?:\S*/)?zsh(?::\d+)?: command not found: (\S+)\s*$", re.MULTILINE)
#: A line that says the tool could not answer, shown as it is (it names the file or the service):
#: ``cat: /sys/module/nvidia/version: No such file or directory``, systemd's tools in a container.
_CANNOT_ANSWER = re.compile(r"No such file or directory|has failed|not been booted with systemd|"
                            r"Failed to connect to bus", re.IGNORECASE)


def absent_reason(text: str, *, tool: str | None = None) -> str | None:
    """Why a command's output, or its section of a compound script's output, holds no fact; ``None`` when it
    may hold one. The one decision, and wording, for every reader of a missing tool: ``"nvcc: command not found"``
    (named as the shell names it; ``tool``: the name to give where the shell exited 127 without saying it),
    ``"no output"``, a failure seen on real hosts in words (``"NVIDIA driver/library version mismatch ..."`` rather
    than its exit code), or the line that says the tool could not answer."""
    found = _NOT_FOUND.search(text)
    named = (found.group(1) or found.group(2)) if found else tool
    if named:
        return not_found(named)
    if not text.strip():
        return "no output"
    for needle, reason in _KNOWN_FAILURES:
        if needle in text:
            return reason
    return next((line.strip() for line in text.splitlines() if _CANNOT_ANSWER.search(line)), None)


def not_found(tool: str) -> str:
    """How every reader says a program is missing (``absent_reason``; health's probes, which know it by exit 127)."""
    return f"{tool}: command not found"


def missing_reason(result: CommandOutput) -> str | None:
    """Why a fact's command gave no usable output (``absent_reason``, else its exit code), or ``None`` if it
    succeeded."""
    text = f"{result.stdout}\n{result.stderr}"
    not_run = (result.command.split() or [result.command])[0] if result.exit_code == 127 else None
    reason = absent_reason(text, tool=not_run) if text.strip() or not_run else None
    if reason is None and result.exit_code != 0:
        tail = "\n".join(result.stderr.strip().splitlines()[-2:]) or result.stdout.strip()[-200:]
        return f"exit code {result.exit_code}" + (f": {tail}" if tail else "")
    return reason
