"""Lines of a command's raw output with their numbers, columns under a header line, blocks under opening lines.

For outputs read straight from a host (``/proc/meminfo``, ``ss``, ``ctr plugins ls``): no pasted-text
pre-cleaning (``clusterctl.facts.clean``), only blank lines skipped, so errors name the real line.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TypeVar

from clusterctl.errors import ParseError
from clusterctl.facts.clean import Line

T = TypeVar("T")
#: A block of lines: the line that opens it, what ``opens`` made of that line, the lines after it.
Block = tuple[Line, T, list[Line]]


def figure(token: str, read: Callable[[str], T], what: str, number: int, line: str) -> T:
    """A table cell read as a number (``read``: ``int`` or ``float``); one that is not is a ``ParseError`` naming
    the line."""
    try:
        return read(token)
    except ValueError:
        raise ParseError(what, f"{token!r} is not a{' whole' if read is int else ''} number", line=number,
                         text=line) from None


def numbered_lines(text: str) -> list[Line]:
    """The non-blank lines of ``text``, as printed, with their 1-based line numbers."""
    return [Line(number, line) for number, line in enumerate(text.splitlines(), start=1) if line.strip()]


def read_lines(text: str, what: str, read: Callable[[str], T | None], expected: str, *,
               skip: Callable[[str], object] = lambda _: False) -> list[T]:
    """``read`` of each non-blank line of ``text`` (as printed) but those ``skip`` accepts; a line ``read`` cannot
    read (``None``) is a ``ParseError`` naming it, with ``expected`` as the reason."""
    found: list[T] = []
    for line in numbered_lines(text):
        if skip(line.text):
            continue
        value = read(line.text)
        if value is None:
            raise ParseError(what, expected, line=line.number, text=line.text)
        found.append(value)
    return found


def rows_under_header(text: str, what: str, header: str) -> list[Line]:
    """The non-blank lines after ``header`` (its words, however spaced), with their 1-based numbers.

    Raises ``ParseError`` naming line 1 when the output does not start with that header.
    """
    first = text.splitlines()[:1]
    words = header.split()
    if not first or first[0].split()[:len(words)] != words:
        raise ParseError(what, f"expected the '{header}' header", line=1, text=first[0] if first else "")
    return [line for line in numbered_lines(text) if line.number > 1]


def cells_under_header(text: str, what: str, header: str, fits: Callable[[list[str]], bool],
                       refusal: str) -> list[list[str]]:
    """The cells (words) of each row after ``header``; a row whose cells ``fits`` refuses is a
    ``ParseError`` naming its line, with ``refusal`` as the reason."""
    rows = rows_under_header(text, what, header)
    for row in rows:
        if not fits(row.tokens):
            raise ParseError(what, refusal, line=row.number, text=row.text)
    return [row.tokens for row in rows]


def blocks(lines: Iterable[Line], opens: Callable[[str], T | None]) -> tuple[list[Line], list[Block[T]]]:
    """``lines`` cut into blocks, each opened by a line whose text ``opens`` reads (not ``None``) and holding
    the lines up to the next one: the lines before the first block, and the blocks in order."""
    before: list[Line] = []
    found: list[Block[T]] = []
    for line in lines:
        opened = opens(line.text)
        if opened is not None:
            found.append((line, opened, []))
        else:
            (found[-1][2] if found else before).append(line)
    return before, found
