"""Values that must never be shown: join tokens, certificate keys, passwords, registry credentials.

A ``Secret`` prints as a mask; only ``reveal()`` gives the value, and only code that hands it to
a host (on stdin, or in a file of mode 0600) should call it. Every secret created is also
registered process-wide, so ``mask_text`` can scrub it from anything that might still carry it
by accident (a command line in an error message, a debug log line, a saved progress file).
"""

from __future__ import annotations

import functools
import threading
from typing import Any

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


def __getattr__(name: str) -> Any:
    # ``SecretMaskingFilter`` is built on first use: importing ``logging`` for it at start-up
    # would cost every command (``clusterctl --help`` included) for what only --debug needs.
    if name == "SecretMaskingFilter":
        return _masking_filter_class()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


@functools.lru_cache(maxsize=1)
def _masking_filter_class() -> type:
    import logging

    class SecretMaskingFilter(logging.Filter):
        """A logging filter that scrubs registered secrets from every record it passes."""

        def filter(self, record: logging.LogRecord) -> bool:
            message = record.getMessage()
            masked = mask_text(message)
            if masked != message:
                record.msg = masked
                record.args = None
            return True

    return SecretMaskingFilter
