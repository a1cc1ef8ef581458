"""Errors that clusterctl turns into exit codes and one-paragraph messages.

Library code raises these; only the CLI layer (``clusterctl.cli.app``) turns them
into output and an exit code, so no module below the CLI calls ``sys.exit``.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from enum import IntEnum


class ExitCode(IntEnum):
    """What clusterctl's exit status means."""

    OK = 0
    #: Findings at error level, or at least one host failed.
    FAILED = 1
    #: Bad inventory, bad option, unreadable input: the user must fix something first.
    USAGE = 2


class ClusterctlError(Exception):
    """Base class of every error clusterctl reports without a traceback."""

    exit_code: ExitCode = ExitCode.FAILED


class UsageError(ClusterctlError):
    """A problem in what the user gave us: an option, a file, an inventory value.

    ``file``, ``line`` and ``field`` are optional and, when given, lead the message so that
    the user can jump straight to the place to fix.
    """

    exit_code = ExitCode.USAGE

    def __init__(
        self,
        message: str,
        *,
        file: str | None = None,
        line: int | None = None,
        field: str | None = None,
        hint: str | None = None,
    ) -> None:
        self.message = message
        self.file = file
        self.line = line
        self.field = field
        self.hint = hint
        super().__init__(self.render())

    def render(self) -> str:
        line = f":{self.line}" if self.line is not None else ""
        where = f"{self.file}{line}: " if self.file else ""
        # An option's message that starts with it ("--url must ...") names it once.
        said = (self.field or "").startswith("-") and self.message.startswith((f"{self.field} ", f"{self.field}:"))
        field = f"field '{self.field}': " if self.field and not said else ""
        text = f"{where}{field}{self.message}"
        if self.hint:  # a sentence of its own: "... in the inventory. Add a 'bmc:' entry", never "inventory Add"
            text += f"{'' if text.endswith(('.', '?', '!', ':')) else '.'} {self.hint}"
        return text


class InventoryError(UsageError):
    """The inventory file is wrong: syntax, unknown field, bad value, duplicate host."""


class BadValue(Exception):
    """A value the inventory cannot use; ``hint`` says what would be accepted (``values_at`` adds where)."""

    def __init__(self, message: str, hint: str | None = None) -> None:
        self.message = message
        self.hint = hint
        super().__init__(message)


class InventoryFileReader:
    """A reader of one inventory file (``file``): ``error`` builds the error that names it, the line and the field."""

    file: str

    def error(self, message: str, line: int | None, field: str | None = None,
              hint: str | None = None) -> InventoryError:
        return InventoryError(message, file=self.file, line=line, field=field or None, hint=hint)

    @contextmanager
    def values_at(self, line: int | None, field: str | None, lead: str = "") -> Iterator[None]:
        """A ``BadValue`` raised inside becomes the error at ``line`` naming ``field``, ``lead`` before its message."""
        try:
            yield
        except BadValue as exc:
            raise self.error(lead + exc.message, line, field, exc.hint) from None


class ParseError(ClusterctlError):
    """A tool's output could not be understood.

    Parsers raise this (never IndexError or KeyError) and name the 1-based line of the
    input where they gave up, so a user can compare with the raw output.
    """

    def __init__(self, what: str, message: str, *, line: int | None = None, text: str | None = None) -> None:
        self.what = what
        self.line = line
        self.text = text
        self.reason = message
        where = f" at line {line}" if line is not None else ""
        shown = f": {text.strip()[:120]!r}" if text else ""
        super().__init__(f"cannot parse {what}{where}: {message}{shown}")


class Interrupted(BaseException):
    """Ctrl-C or SIGTERM. A ``BaseException`` (like ``KeyboardInterrupt``) so that no
    ``except Exception`` swallows it, while every ``finally`` (remote cleanup) still runs; the
    CLI reports it and exits 130 (SIGINT) or 143 (SIGTERM)."""

    def __init__(self, signal_name: str = "SIGINT") -> None:
        self.signal_name = signal_name
        #: How to go on, when the command knows better than "retry with --limit @retry"
        #: (``upgrade apply --resume``); set by the command before the interrupt reaches the CLI.
        self.retry_hint: str | None = None
        super().__init__(signal_name)

    @property
    def exit_code(self) -> int:
        return 143 if self.signal_name == "SIGTERM" else 130
