"""Output that fits the terminal without cutting what a user must copy: the one rule, in one place.

Names and values a user copies (a host, a variable, a value, an image reference, a path) are
never cut with ``…`` nor broken inside; long text (a reason, a message, a fix) wraps at the
terminal's width with a hanging indent, never back to column 0 (off a terminal it stays on one
line unless ``COLUMNS`` is set: ``wrap_width``). A table whose copyable columns
do not fit leaves out its least important columns first (saying so), and when even that is not
enough prints each row as a block of ``column: value`` lines instead.

Pure text layout (no clusterctl import), so the renderers of every command and the CLI share it;
cells are plain text that the caller has already made safe (``terminal_text.one_line``).
"""

from __future__ import annotations

import textwrap
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rich.console import Console
    from rich.text import Text


#: The narrowest a wrapped (prose) column is allowed to become before columns are left out.
MIN_PROSE_WIDTH = 16


def hanging(text: str, width: int, indent: int | str = 2, *, first_indent: str = "") -> str:
    """``text`` wrapped at ``width``; lines after the first start with ``indent`` (spaces or a prefix).

    Words are never broken: a token longer than the line (a URL, a path) stays whole on a line
    of its own. A text that already fits is returned as it is (the common case, and fast).
    """
    later = " " * indent if isinstance(indent, int) else indent
    if "\n" not in text and len(first_indent) + len(text) <= width:
        return first_indent + text
    lines: list[str] = []
    for number, paragraph in enumerate(text.split("\n")):
        lead = first_indent if number == 0 else later
        if len(lead) + len(paragraph) <= width:
            lines.append(lead + paragraph)
            continue
        lines.extend(textwrap.wrap(paragraph, width=max(width, len(later) + 8), initial_indent=lead,
                                   subsequent_indent=later, break_long_words=False, break_on_hyphens=False)
                     or [lead])
    return "\n".join(lines)


def wrap_width(console: Console) -> int:
    """Where long text wraps: the terminal's width. Off a terminal (a pipe, a log, a CI job) a line
    stays whole, so that grep finds it, unless ``COLUMNS`` asks for a width."""
    import os

    if console.is_terminal or os.environ.get("COLUMNS", "").strip().isdigit():
        return console.width
    return 1 << 20


def print_wrapped(console: Console, text: str | Text, indent: int | str = 2, *, style: str | None = None) -> None:
    """Print ``text`` (plain, never markup; or a styled ``Text``) wrapped at the console's width
    with a hanging indent, its styles kept."""
    if isinstance(text, str):
        console.print(hanging(text, wrap_width(console), indent), markup=False, highlight=False, soft_wrap=True,
                      style=style)
        return
    console.print(wrap_styled(text, wrap_width(console), indent), highlight=False, soft_wrap=True,
                  style=style or "")


def wrap_styled(text: Text, width: int, indent: int | str = 2) -> Text:
    """``hanging`` for a styled ``Text``: the same breaks, each piece keeping its styles."""
    from rich.text import Text as RichText

    plain = text.plain
    wrapped = hanging(plain, width, indent)
    if wrapped == plain:
        return text
    later = " " * indent if isinstance(indent, int) else indent
    result = RichText()
    cursor = 0
    for number, line in enumerate(wrapped.split("\n")):
        body = line[len(later):] if number and line.startswith(later) else line
        start = plain.find(body, cursor) if body else cursor
        if start < 0:  # whitespace was rewritten (a tab): fall back to the plain wrapped text
            return RichText(wrapped)
        if number:
            result.append("\n" + later)
        result.append_text(text[start:start + len(body)])
        cursor = start + len(body)
    return result


@dataclass(frozen=True)
class Column:
    header: str
    #: A name or value a user copies: never cut, never wrapped.
    keep: bool = False
    #: 0: always shown; otherwise the column may be left out when the width is short, the
    #: highest number first (its content is in ``-o json``).
    drop_order: int = 0
    justify: str = "left"


@dataclass(frozen=True)
class Fitted:
    """Which columns a table shows at a width, and whether it still is a table."""

    shown: tuple[int, ...]
    left_out: tuple[str, ...]
    #: False: even the kept columns alone are wider than the terminal: print rows as blocks.
    as_table: bool


def _overhead(columns: int, boxed: bool) -> int:
    # Rich: one space of padding each side of a cell; a boxed table adds a rule between and around.
    return columns * 3 + 1 if boxed else columns * 2


def _needed(column: Column, cells: Sequence[str | Text]) -> int:
    longest = max((max(len(part) for part in str(cell).split("\n")) for cell in cells), default=0)
    widest = max(len(column.header), longest)
    return widest if column.keep else min(widest, MIN_PROSE_WIDTH)


def fit(columns: Sequence[Column], rows: Sequence[Sequence[str | Text]], width: int, *, boxed: bool = True) -> Fitted:
    needed = [_needed(c, [row[i] for row in rows]) for i, c in enumerate(columns)]
    shown = list(range(len(columns)))
    left_out: list[str] = []
    droppable = sorted((i for i, c in enumerate(columns) if c.drop_order), key=lambda i: -columns[i].drop_order)
    while sum(needed[i] for i in shown) + _overhead(len(shown), boxed) > width and droppable:
        gone = droppable.pop(0)
        shown.remove(gone)
        left_out.append(columns[gone].header)
    fits = sum(needed[i] for i in shown) + _overhead(len(shown), boxed) <= width
    if not fits:
        # Printed as blocks, every column has room again: nothing is left out.
        return Fitted(tuple(range(len(columns))), (), False)
    return Fitted(tuple(shown), tuple(left_out), True)


def print_table(console: Console, columns: Sequence[Column], rows: Sequence[Sequence[str | Text]], *,
                title: str | None = None, boxed: bool = True, note_left_out: bool = True) -> None:
    """``rows`` as a table that fits ``console.width`` under the rule above (cells are plain text)."""
    from rich import box
    from rich.table import Table
    from rich.text import Text

    fitted = fit(columns, rows, console.width, boxed=boxed)
    if not fitted.as_table:
        print_blocks(console, columns, rows, title=title)
        return
    table = Table(title=title, title_justify="left", highlight=False, box=box.HEAVY_HEAD if boxed else None,
                  pad_edge=boxed, show_edge=boxed)
    for i in fitted.shown:
        column = columns[i]
        if column.keep:
            width = _needed(column, [row[i] for row in rows])
            table.add_column(column.header, no_wrap=True, min_width=width, justify=column.justify)  # type: ignore[arg-type]
        else:
            table.add_column(column.header, overflow="fold", min_width=min(MIN_PROSE_WIDTH, _needed(
                column, [row[i] for row in rows])), justify=column.justify)  # type: ignore[arg-type]
    for row in rows:
        table.add_row(*(Text(cell) if isinstance(cell, str) else cell for cell in (row[i] for i in fitted.shown)))
    console.print(table)
    if fitted.left_out and note_left_out:
        print_wrapped(console, f"(left out at {console.width} columns: {', '.join(fitted.left_out)}; "
                               "a wider terminal or -o json shows them)", style="dim")


def print_blocks(console: Console, columns: Sequence[Column], rows: Sequence[Sequence[str | Text]], *,
                 title: str | None = None) -> None:
    """Each row as a block: its first cell alone, then ``column: value`` lines indented below it."""
    width = wrap_width(console)
    lines: list[str] = []
    if title:
        lines.append(hanging(title, width, 2))
    for row in rows:
        lines.append(str(row[0]))
        for column, cell in zip(columns[1:], row[1:], strict=False):
            if not str(cell):
                continue
            lead = f"  {column.header}: "
            lines.append(hanging(str(cell), width, " " * len(lead), first_indent=lead))
    console.print("\n".join(lines), markup=False, highlight=False, soft_wrap=True)
