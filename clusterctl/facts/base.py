"""A fact is a command string plus a pure function that parses its output.

Parsers never touch the network, the clock or the file system: they take text and return
typed data or raise ``clusterctl.errors.ParseError`` naming the line. That makes them
testable on recorded real outputs, and lets the same fact run over ssh, locally or
against a mock profile.
"""

from __future__ import annotations

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
    ("No such file or directory", "file or device not present"),
    ("Permission denied", "permission denied"),
)


def missing_reason(result: CommandOutput) -> str | None:
    """Why a fact's command gave no usable output, or ``None`` if it succeeded.

    Recognises the failures seen on real hosts so the report says "driver/library
    version mismatch" rather than "exit 18".
    """
    text = f"{result.stdout}\n{result.stderr}"
    if result.exit_code == 127 or "command not found" in text:
        tool = result.command.split()[0] if result.command.split() else result.command
        return f"{tool}: command not found"
    for needle, reason in _KNOWN_FAILURES:
        if needle in text:
            return reason
    if result.exit_code != 0:
        tail = "\n".join(result.stderr.strip().splitlines()[-2:]) or result.stdout.strip()[-200:]
        return f"exit code {result.exit_code}" + (f": {tail}" if tail else "")
    return None
