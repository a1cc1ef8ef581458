"""Text from a host, made safe to print on the user's terminal: the one place that does it.

A remote tool's output or error can hold terminal control sequences (``ESC ] 0;title BEL`` sets
the window title, ``ESC [2J`` clears the screen, a bare ``\\r`` overwrites what was printed) and
square brackets that Rich would read as markup (``[bold red]``, ``grep "[y]es$"``). Everything
remote goes through :func:`visible` before it reaches a stream, and through :func:`markup_safe`
before it reaches a Rich ``print(..., markup=True)``: control characters are shown as ``\\x1b``-style
escapes, brackets stay brackets. Newlines and tabs are kept (``visible``) or, for one-line
messages, shown too (``one_line``).
"""

from __future__ import annotations

import re

#: The Unicode line separators and bidirectional overrides: they make text read differently from what it is.
UNICODE_TRICKS = "\u2028\u2029\u202a-\u202e\u2066-\u2069"
# C0 controls except tab and newline, DEL, the C1 controls (0x9b is a one-byte CSI) and those tricks.
_CONTROL = re.compile(rf"[\x00-\x08\x0b-\x1f\x7f\x80-\x9f{UNICODE_TRICKS}]")
_CONTROL_OR_NEWLINE = re.compile(rf"[\x00-\x08\x0a-\x1f\x7f\x80-\x9f{UNICODE_TRICKS}]")
_NAMED = {"\r": "\\r", "\n": "\\n", "\x1b": "\\x1b"}


def _escape(match: re.Match[str]) -> str:
    char = match.group(0)
    return _NAMED.get(char) or (f"\\x{ord(char):02x}" if ord(char) < 0x100 else f"\\u{ord(char):04x}")


def visible(text: str) -> str:
    """``text`` with every control character but newline and tab written as an escape (``\\x1b``)."""
    return _CONTROL.sub(_escape, text)  # ``text`` itself where nothing matches: one scan, no copy (a million lines)


def one_line(text: str) -> str:
    """``visible``, with newlines shown as ``\\n`` too: for text that must stay on one line."""
    return _CONTROL_OR_NEWLINE.sub(_escape, text)


def markup_safe(text: str) -> str:
    """``visible`` and Rich-escaped: remote text put into a Rich markup string prints as itself."""
    from rich.markup import escape

    return escape(visible(text))
