"""Output that fits the terminal without cutting what a user must copy: the one rule, in one place.

Names and values a user copies (a host, a variable, a value, an image reference, a path, a
``clusterctl undo FILE`` command) are never cut with ``…`` nor broken inside; long text (a reason,
a message, a fix) wraps at the terminal's width with a hanging indent, never back to column 0, and
a path or command that does not fit the rest of its line goes whole onto a line of its own
(``hanging``; off a terminal a line stays whole unless ``COLUMNS`` is set: ``wrap_width``). A
table whose copyable columns do not fit leaves out its least important columns first (saying so),
and when even that is not enough prints each row as a block of ``column: value`` lines instead; a
prose column is never narrower than its longest word. A table's title is a line of its own above it
(``print_title``), wrapped like long text, never at the table's width.

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


#: A command a user copies ('clusterctl undo FILE', 'clusterctl release HOST', any quoted 'clusterctl ...', one
#: that ends its line with --yes (what goes on after Ctrl-C), or a limit such as -l '!gpu-a3'): wrapped, it stays
#: whole on one line, as a path or a name does.
_COMMAND = r"'clusterctl [^'\n]*'|clusterctl (?:undo|release) \S+|clusterctl [^\n]* --yes(?=\n|$)|-l '[^'\s]+'"
_GLUE = "\u00a0"  # not a place textwrap breaks at (it breaks at ASCII whitespace only)


def hanging(text: str, width: int, indent: int | str = 2, *, first_indent: str = "") -> str:
    """``text`` wrapped at ``width``; lines after the first start with ``indent`` (spaces or a prefix).

    Words are never broken, nor a command a user copies (``_COMMAND``): one longer than the rest
    of the line (a URL, a path, ``clusterctl undo FILE``) goes whole onto a line of its own. Where
    a numeric ``indent`` leaves too little room (for prose, or for that longest word), the text
    hangs 2 columns in instead, so that a path fits an 80-column line whenever it can. A text
    that already fits is returned as it is (the common case, and fast).
    """
    import re

    if "\n" not in text and len(first_indent) + len(text) <= width:
        return first_indent + text
    glued = re.sub(_COMMAND, lambda m: m.group(0).replace(" ", _GLUE), text.replace(_GLUE, " "))
    if isinstance(indent, int):
        longest = max(len(word) for word in re.split(r"[ \t\n]+", glued))  # a command counts whole
        indent = 2 if width - indent < max(MIN_PROSE_WIDTH, longest) else indent
    later = " " * indent if isinstance(indent, int) else indent
    lines: list[str] = []
    for number, paragraph in enumerate(glued.split("\n")):
        lead = first_indent if number == 0 else later
        if len(lead) + len(paragraph) <= width:
            lines.append(lead + paragraph)
            continue
        lines.extend(textwrap.wrap(paragraph, width=max(width, len(later) + 8), initial_indent=lead,
                                   subsequent_indent=later, break_long_words=False, break_on_hyphens=False)
                     or [lead])
    return "\n".join(lines).replace(_GLUE, " ")


def wrap_width(console: Console) -> int:
    """Where long text wraps: the terminal's width. Off a terminal (a pipe, a log, a CI job) a line
    stays whole, so that grep finds it, unless ``COLUMNS`` asks for a width."""
    import os

    if console.is_terminal or os.environ.get("COLUMNS", "").strip().isdigit():
        return console.width
    return 1 << 20


def wrap_lines(text: str, width: int) -> str:
    """``hanging`` for text whose lines are already its own (an error paragraph, an interrupt's report):
    each line wrapped alone, its continuation 2 columns deeper than the line starts; a line that fits
    is left as it is, so that off a terminal the text is unchanged."""
    return "\n".join(hanging(line, width, len(line) - len(line.lstrip(" ")) + 2) for line in text.split("\n"))


def stderr_width() -> int:
    """``wrap_width`` of stderr, for what is written there without a command's console (errors)."""
    from rich.console import Console

    return wrap_width(Console(stderr=True))


def print_wrapped(console: Console, text: str | Text, indent: int | str | None = None, *, first_indent: str = "",
                  style: str | None = None) -> None:
    """Print ``text`` (plain, never markup; or a styled ``Text``) wrapped at the console's width
    with a hanging indent, its styles kept: ``first_indent`` (a row's host and status columns)
    leads the first line, and ``indent`` (default: that column, else 2) the lines after it."""
    if indent is None:
        indent = len(first_indent) or 2
    width = wrap_width(console)
    wrapped = (hanging(text, width, indent, first_indent=first_indent) if isinstance(text, str)
               else wrap_styled(text, width, indent))
    console.print(wrapped, markup=False, highlight=False, soft_wrap=True, style=style or "")


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
    #: How narrow each column may be (``_needed``), by column index: the table's minimum widths.
    needed: tuple[int, ...]


def _overhead(columns: int, boxed: bool) -> int:
    # Rich: one space of padding each side of a cell; a boxed table adds a rule between and around.
    return columns * 3 + 1 if boxed else columns * 2


def _needed(column: Column, cells: Sequence[str | Text]) -> int:
    """How narrow the column may be: a kept column as its widest cell; prose (which wraps between
    words) as its longest word (a path in a message is never folded), else ``MIN_PROSE_WIDTH``."""
    parts = [part for cell in cells for part in str(cell).split("\n")]
    widest = max([len(column.header), *(len(part) for part in parts)])
    if column.keep:
        return widest
    return max([min(widest, MIN_PROSE_WIDTH), *(len(word) for part in parts for word in part.split())])


def fit(columns: Sequence[Column], rows: Sequence[Sequence[str | Text]], width: int, *, boxed: bool = True) -> Fitted:
    needed = [_needed(c, [row[i] for row in rows]) for i, c in enumerate(columns)]
    shown = list(range(len(columns)))
    left_out: list[str] = []
    droppable = sorted((i for i, c in enumerate(columns) if c.drop_order), key=lambda i: -columns[i].drop_order)
    while sum(needed[i] for i in shown) + _overhead(len(shown), boxed) > width and droppable:
        gone = droppable.pop(0)
        shown.remove(gone)
        left_out.append(columns[gone].header)
    if sum(needed[i] for i in shown) + _overhead(len(shown), boxed) > width:
        # Printed as blocks, every column has room again: nothing is left out.
        return Fitted(tuple(range(len(columns))), (), False, tuple(needed))
    return Fitted(tuple(shown), tuple(reversed(left_out)), True, tuple(needed))  # named most important first


def print_table(console: Console, columns: Sequence[Column], rows: Sequence[Sequence[str | Text]], *,
                title: str | None = None, boxed: bool = True) -> None:
    """``rows`` as a table that fits ``console.width`` under the rule above (cells are plain text)."""
    from rich import box
    from rich.table import Table
    from rich.text import Text

    if title:
        print_title(console, title)
    fitted = fit(columns, rows, console.width, boxed=boxed)
    if not fitted.as_table:
        print_blocks(console, columns, rows)
        return
    table = Table(highlight=False, box=box.HEAVY_HEAD if boxed else None, pad_edge=boxed, show_edge=boxed)
    widths = _prose_widths(columns, rows, fitted, console.width, boxed)
    for i in fitted.shown:
        column = columns[i]
        table.add_column(column.header, no_wrap=column.keep, overflow="fold", justify=column.justify,  # type: ignore[arg-type]
                         min_width=fitted.needed[i], width=widths.get(i))
    for row in rows:
        table.add_row(*(Text(cell) if isinstance(cell, str) else cell for cell in (row[i] for i in fitted.shown)))
    console.print(table)
    if fitted.left_out:
        print_wrapped(console, f"(left out to fit {console.width} columns: {', '.join(fitted.left_out)}; "
                               "-o json has every field)", style="dim")


def _prose_widths(columns: Sequence[Column], rows: Sequence[Sequence[str | Text]], fitted: Fitted, width: int,
                  boxed: bool) -> dict[int, int]:
    """Each shown prose column's width, where the table at its natural width is wider than ``width``: rich
    would narrow the widest prose columns evenly, one below its longest word, then crop every line at the
    terminal's edge (words, and the end of a command to copy, lost). Each keeps its longest word and takes
    a share of the room left by how much wider it would be."""
    prose = [i for i in fitted.shown if not columns[i].keep]
    wider = {i: max(len(part) for cell in (columns[i].header, *(row[i] for row in rows))
                    for part in str(cell).split("\n")) - fitted.needed[i] for i in prose}
    room = width - _overhead(len(fitted.shown), boxed) - sum(fitted.needed[i] for i in fitted.shown)
    if sum(wider.values()) <= room:
        return {}
    return {i: fitted.needed[i] + room * wider[i] // sum(wider.values()) for i in prose}


def print_title(console: Console, title: str) -> None:
    """A table's title (plain text), left-aligned on a line of its own above the table: wrapped only where
    any long text is (the terminal's width), so that a title longer than a narrow table is neither folded
    to the table's width nor made to stretch its columns, and a pasted report keeps it on one line."""
    print_wrapped(console, title, 2, style="table.title")


def print_blocks(console: Console, columns: Sequence[Column], rows: Sequence[Sequence[str | Text]]) -> None:
    """Each row as a block: its first cell alone, then ``column: value`` lines indented below it."""
    width = wrap_width(console)
    lines: list[str] = []
    for row in rows:
        lines.append(str(row[0]))
        for column, cell in zip(columns[1:], row[1:], strict=False):
            if not str(cell):
                continue
            # The value wraps under itself; a path longer than the room after its header goes whole onto
            # a line of its own (``hanging``'s rule), where it fits an 80-column line.
            lines.append(hanging(f"{column.header}: {cell}", width, len(column.header) + 4, first_indent="  "))
    console.print("\n".join(lines), markup=False, highlight=False, soft_wrap=True)
