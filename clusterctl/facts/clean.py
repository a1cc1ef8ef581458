"""One pre-cleaning step for tool output that was pasted, captured or piped, used by every parser.

What people paste into an issue or save from a terminal is rarely the bare output of the tool:
there is the shell prompt and command line above it (``user@host:~$ ibv_devinfo``,
``[root@gpu01 ~]# ibstat``, ``$ kubectl exec pod -- ibv_devinfo``), Markdown code fences, a
``> `` quote prefix on every line (mail, issue replies), the common indentation of a Markdown
list, tmux/screen pane borders (``│`` at either end of a line, ``┌──┐`` rules), ANSI colour codes,
``\\r`` line ends, trailing padding, and blank lines between rows. None of it is data.

``clean_lines`` removes all of that and hands each parser the remaining lines **with their
1-based line numbers in the original text**, so a warning or a parse error still points at the
line the user sees in their file.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07")
#: Box-drawing characters tmux, screen and many TUIs draw pane borders with.
_BOX = "─━│┃┄┅┆┇┈┉┊┋┌┍┎┏┐┑┒┓└┕┖┗┘┙┚┛├┝┞┟┠┡┢┣┤┥┦┧┨┩┪┫┬┭┮┯┰┱┲┳┴┵┶┷┸┹┺┻┼┽┾┿╀╁╂╃╄╅╆╇╈╉╊╋═║╒╓╔╕╖╗╘╙╚╛╜╝╞╟╠╡╢╣╤╥╦╧╨╩╪╫╬╭╮╯╰"
_BORDER_ONLY = re.compile(rf"^[\s{_BOX}]+$")
_BORDER_LEFT = re.compile(rf"^\s*[{_BOX}]\s?")
_BORDER_RIGHT = re.compile(rf"\s*[{_BOX}]\s*$")
_FENCE = re.compile(r"^\s*(```|~~~)[\w+-]*\s*$")
#: ``mpirun --tag-output`` prefix: ``[1,0]<stdout>:``.
_MPI_TAG = re.compile(r"^\s*\[\d+,\d+\]<(?:stdout|stderr)>:")
#: Shell prompts, with or without the command after them:
#: ``user@host:~/dir$ cmd``, ``(venv) user@host:~$``, ``[root@host ~]# cmd``, ``$ cmd``, ``host$ cmd``.
_PROMPTS = (
    re.compile(r"^\s*(?:\([^)]*\)\s*)?[\w.+-]+@[\w.-]+(?::[^\s$#]*)?\s?[$#%]\s*(?:\S.*)?$"),
    re.compile(r"^\s*(?:\([^)]*\)\s*)?\[[\w.+-]+@[\w.-]+[^\]]*\]\s?[$#%]\s*(?:\S.*)?$"),
    re.compile(r"^\s*\$(?:\s+\S.*)?$"),
    re.compile(r"^\s*[\w.-]+\s?\$\s+\S.*$"),
)


@dataclass(frozen=True)
class Line:
    """One line of cleaned input and where it was in the text the user gave."""

    #: 1-based line number in the original text.
    number: int
    text: str

    @property
    def tokens(self) -> list[str]:
        return self.text.split()


def is_prompt(text: str) -> bool:
    """Whether a line is a shell prompt (with or without the command typed after it)."""
    return any(pattern.match(text) for pattern in _PROMPTS)


def _strip_borders(text: str) -> str | None:
    """The line without tmux/screen pane borders; ``None`` when it is nothing but border."""
    if _BORDER_ONLY.match(text):
        return None
    text = _BORDER_LEFT.sub("", text, count=1)
    return _BORDER_RIGHT.sub("", text)


def _quoted(lines: list[tuple[int, str]]) -> bool:
    """Every non-blank line starts with ``>``: a quoted reply (mail, GitHub)."""
    texts = [t for _, t in lines if t.strip()]
    return bool(texts) and all(t.lstrip().startswith(">") for t in texts)


def _common_indent(lines: list[tuple[int, str]]) -> str:
    texts = [t for _, t in lines if t.strip()]
    if not texts:
        return ""
    prefix = re.match(r"[ \t]*", texts[0])
    common = prefix.group(0) if prefix else ""
    for text in texts[1:]:
        while common and not text.startswith(common):
            common = common[:-1]
    return common


def clean_lines(text: str, *, keep_blank: bool = False) -> list[Line]:
    """The data lines of ``text`` with their original line numbers (see the module docstring).

    Trailing whitespace is removed; leading whitespace is kept except the indentation common
    to every line (a pasted block indented as a whole), because some formats (``ibv_devinfo``,
    ``ibstat``) nest by indentation. Blank lines are dropped unless ``keep_blank``.
    """
    kept: list[tuple[int, str]] = []
    for number, raw in enumerate(text.replace("\r\n", "\n").replace("\r", "\n").split("\n"), start=1):
        line = _ANSI.sub("", raw).replace("\x00", "").rstrip()
        stripped = _strip_borders(line)
        if stripped is None or _FENCE.match(stripped):
            continue
        kept.append((number, stripped.rstrip()))
    kept = [(n, t) for n, t in kept if not is_prompt(t)]
    if _quoted(kept):
        kept = [(n, re.sub(r"^\s*>+ ?", "", t)) for n, t in kept]
        kept = [(n, t) for n, t in kept if not is_prompt(t)]
    indent = _common_indent(kept)
    result: list[Line] = []
    for number, line in kept:
        if not line.strip():
            if keep_blank:
                result.append(Line(number, ""))
            continue
        result.append(Line(number, line[len(indent):] if indent else line))
    return result


def without_mpi_tags(lines: Iterable[Line]) -> Iterator[Line]:
    """``lines`` without the ``[1,0]<stdout>:`` prefix ``mpirun --tag-output`` puts on each rank's
    lines (benchmark logs of multi-node runs); lines that held nothing else are dropped."""
    for line in lines:
        text = _MPI_TAG.sub("", line.text)
        if text.strip():
            yield Line(line.number, text)
