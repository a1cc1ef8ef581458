"""Outputs of several commands read in ONE round trip, each under a ``### <name>`` line.

``section_command`` builds the compound shell line (every command may fail without hiding
the others: the commands are joined with ``;`` and the line ends in ``; true``, stderr kept),
``split_sections`` cuts the output back into pieces, each with the 1-based line number where
it starts so that parsers can name the real line.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TypeVar

from clusterctl.errors import ParseError

T = TypeVar("T")

#: The default header. Probes that print files people write (TOML, fstab) use a marker no such
#: file would hold on a line of its own (``MARKER_FILES``).
MARKER = "###"
MARKER_FILES = "@@clusterctl@@"


#: A header line by its marker; group 1 is the section's name.
HEADERS = {m: re.compile(rf"^{re.escape(m)} (\S+)\s*$") for m in (MARKER, MARKER_FILES)}


@dataclass(frozen=True)
class Section:
    name: str
    lines: tuple[str, ...]
    #: 1-based line number of the section's first content line in the whole output.
    first_line: int

    @property
    def text(self) -> str:
        return "\n".join(self.lines) + ("\n" if self.lines else "")

    @contextmanager
    def reading(self, what: str) -> Iterator[None]:
        """A ``ParseError`` raised inside, by a parser of this section's text, becomes an error of the whole
        output: the section named, the line counted from the output's start."""
        try:
            yield
        except ParseError as exc:
            line = None if exc.line is None else exc.line + self.first_line - 1
            raise ParseError(what, f"section '{self.name}': {exc.reason}", line=line, text=exc.text) from None


class Sections(dict[str, Section]):
    """An output's sections by name, and what the output is (``what``), for errors."""

    def __init__(self, what: str) -> None:
        super().__init__()
        self.what = what

    def text(self, name: str) -> str:
        """The text of the section ``name`` ("" where the output has none)."""
        section = self.get(name)
        return section.text if section is not None else ""

    def read(self, name: str, parse: Callable[[str], T]) -> T:
        """``parse`` of the section ``name``'s text (an absent one reads as empty); its ``ParseError`` names
        the section and the line in the whole output (``Section.reading``)."""
        section = self.get(name) or Section(name, (), 1)
        with section.reading(self.what):
            return parse(section.text)


#: GNU cat's answer for a missing file. It names itself as it was called: ``cat: PATH: ...``, or
#: ``/usr/bin/cat: PATH: ...`` where a wrapper or sudo's secure_path ran it by its full path.
_CAT_MISSING = re.compile(r"^(?:\S*/)?cat: .+: No such file or directory$")
_LS_ERROR = re.compile(r"^(?:\S*/)?ls: ")


def filled_lines(section_text: str) -> list[str]:
    """The section's lines that hold something, stripped: a one-line answer reads ``[answer]``."""
    return [line.strip() for line in section_text.splitlines() if line.strip()]


def cat_missing(section_text: str) -> bool:
    """Whether a ``cat PATH 2>&1`` section says the file does not exist."""
    return bool(_CAT_MISSING.match(next(iter(filled_lines(section_text)), "")))


def ls_failed(section_text: str) -> bool:
    """Whether an ``ls DIR 2>&1`` section is ls's error (no such folder) rather than a listing."""
    return bool(_LS_ERROR.match(section_text.lstrip()))


def file_sections(paths: Sequence[str]) -> list[tuple[str, str]]:
    """A ``file:PATH`` section printing each file (``files_read`` reads them back)."""
    return [(f"file:{path}", f"cat {shlex.quote(path)}") for path in paths]


def files_read(sections: Mapping[str, Section], prefix: str = "file:") -> dict[str, str | None]:
    """The text of each file ``cat`` printed under a ``<prefix><name>`` section (``file_sections``: the path)
    by name; ``None`` for a file that does not exist."""
    return {name[len(prefix):]: None if cat_missing(section.text) else section.text
            for name, section in sections.items() if name.startswith(prefix)}


def section_command(sections: Sequence[tuple[str, str]], *, marker: str = MARKER) -> str:
    """``echo 'M name'; command 2>&1; ...``: each command a simple one (no groups or loops), so the
    line runs the same on any POSIX shell and on the mock hosts' shell subset."""
    return "; ".join(f"echo '{marker} {name}'; {command} 2>&1" for name, command in sections) + "; true"


def split_sections(text: str, what: str, *, marker: str = MARKER) -> Sections:
    opening = f"{marker} "  # a header line starts so: the pattern runs on those lines alone
    lines = text.splitlines()
    # The header lines first, then each section is one slice (a health probe's output is ~3,500 lines a host).
    names = {index: match.group(1) for index, line in enumerate(lines)
             if line.startswith(opening) and (match := HEADERS[marker].match(line))}
    starts = list(names)
    for index in range(starts[0] if starts else len(lines)):
        if lines[index].strip():
            raise ParseError(what, f"output does not start with a '{marker} <section>' line", line=index + 1,
                             text=lines[index])
    found = Sections(what)
    for position, index in enumerate(starts):
        name = names[index]
        if name in found:
            raise ParseError(what, f"section '{name}' appears twice", line=index + 1, text=lines[index])
        end = starts[position + 1] if position + 1 < len(starts) else len(lines)
        found[name] = Section(name, tuple(lines[index + 1:end]), index + 2)
    if not found:
        raise ParseError(what, f"no '{marker} <section>' lines in the output")
    return found
