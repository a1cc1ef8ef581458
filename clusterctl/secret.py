"""Values that must never be shown: join tokens, certificate keys, passwords, registry credentials.

A ``Secret`` prints as a mask; only ``reveal()`` gives the value, and only code that hands it to
a host (on stdin, or in a file of mode 0600) should call it. Every secret created is also
registered process-wide, so ``mask_text`` can scrub it from anything that might still carry it
by accident (a command line in an error message, a debug log line, a saved progress file).
"""

from __future__ import annotations

import os
import stat
import threading
from typing import TYPE_CHECKING, Any

from clusterctl.errors import UsageError

if TYPE_CHECKING:
    import logging

MASK = "********"
#: Values shorter than this are not scrubbed from free text: masking "a" would mangle everything.
MIN_SCRUB_LENGTH = 4

_registry: set[str] = set()
_registry_lock = threading.Lock()
#: The registry longest first, rebuilt when a secret is added: ``mask_text`` runs on every command
#: result, so it must not sort (or take a lock) each time.
_by_length: tuple[str, ...] = ()


class Secret:
    """A string that is masked wherever it is formatted. Compare and hash by value."""

    __slots__ = ("_value", "label")

    def __init__(self, value: str, label: str = "secret") -> None:
        self._value = value
        self.label = label
        register_secret(value)

    def reveal(self) -> str:
        """The real value: only for handing it to a host, never for display."""
        return self._value

    def __str__(self) -> str:
        return MASK

    def __repr__(self) -> str:
        return f"Secret({self.label}={MASK})"

    def __format__(self, spec: str) -> str:
        return MASK

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Secret) and other._value == self._value

    def __hash__(self) -> int:
        return hash(("clusterctl.Secret", self._value))

    def __bool__(self) -> bool:
        return bool(self._value)


#: A secret file holds one password or token: anything larger is not one.
SECRET_FILE_BYTES = 4096


def read_secret_file(path: str | os.PathLike[str], what: str, where: str, *, group_may_read: bool = False,
                     **place: Any) -> tuple[str, os.stat_result]:
    """The ``what`` (a password, a token) a file holds, and the file's ``stat`` (to see it change).

    The one reader of secret files: a regular file others may not read or change (mode 0600, as ssh
    wants of a key; 0640 too when ``group_may_read``: a service's group), the secret alone on one line
    of UTF-8, its line ending dropped; empty refused. Every refusal is a ``UsageError`` led by
    ``where`` (how the file was named: ``--token-file PATH``), with ``place`` (the inventory's
    ``file``, ``line``, ``field``) passed on.
    """
    try:
        info = os.stat(path)
        if not stat.S_ISREG(info.st_mode):
            raise UsageError(f"{where}: not a regular file", **place)
        if info.st_mode & (stat.S_IRWXO | stat.S_IWGRP | stat.S_IXGRP | (0 if group_may_read else stat.S_IRGRP)):
            raise UsageError(f"{where}: others may read or change it (mode {stat.S_IMODE(info.st_mode):o}); a file "
                             f"holding the {what} must be mode 0600{' or 0640' if group_may_read else ''} "
                             f"(chmod 600 {path})", **place)
        with open(path, "rb") as handle:
            data = handle.read(SECRET_FILE_BYTES + 1)
        value = data.decode("utf-8").rstrip("\r\n")
    except OSError as exc:
        raise UsageError(f"{where}: {exc.strerror}", **place) from None
    except UnicodeDecodeError:
        raise UsageError(f"{where}: not UTF-8 text", **place) from None
    if not value or "\n" in value or len(data) > SECRET_FILE_BYTES:
        raise UsageError(f"{where}: must hold the {what} alone on one line (at most {SECRET_FILE_BYTES} bytes)",
                         **place)
    return value, info


def register_secret(value: str) -> None:
    """Remember ``value`` so that ``mask_text`` removes it from any text shown or logged."""
    global _by_length
    if len(value) >= MIN_SCRUB_LENGTH:
        with _registry_lock:
            if value not in _registry:
                _registry.add(value)
                _by_length = tuple(sorted(_registry, key=len, reverse=True))


def masks_any() -> bool:
    """Whether any secret is registered: until one is, ``mask_text`` returns its text unchanged."""
    return bool(_by_length)


def mask_text(text: str) -> str:
    """``text`` with every registered secret value replaced by the mask (longest first)."""
    # One read of the tuple: a secret registered meanwhile is in the next call's snapshot.
    for value in _by_length:
        if value in text:
            text = text.replace(value, MASK)
    return text


def mask_log_record(record: logging.LogRecord) -> bool:
    """A logging filter (``Handler.addFilter`` takes a function) that scrubs registered secrets from
    every record it passes."""
    # A function, not a ``logging.Filter`` subclass: importing ``logging`` for one at start-up would
    # cost every command (``clusterctl --help`` included) for what only --debug needs.
    message = record.getMessage()
    masked = mask_text(message)
    if masked != message:
        record.msg = masked
        record.args = None
    return True
