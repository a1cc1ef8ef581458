"""One pre-cleaning step for tool output that was pasted, captured or piped, used by every reader.

What people paste into an issue or save from a terminal is rarely the bare output of the tool:
there is the shell prompt and command line above it (``user@host:~$ ibv_devinfo``,
``[root@gpu01 ~]# ibstat``, ``$ kubectl exec pod -- ibv_devinfo``), Markdown code fences, a
``> `` quote prefix on every line (mail, issue replies), a ``# `` or ``// `` comment prefix on
every line (a matrix kept as a comment block in a launch script or a source file), the common
indentation of a Markdown list, tmux/screen pane borders (``│`` at either end of a line, ``┌──┐``
rules), ANSI colour codes, ``\\r`` line ends, trailing padding, the author's elisions (a line of
just ``...``) and blank lines between rows. None of it is data.

``clean_lines`` removes all of that and hands each reader the remaining lines **with their
1-based line numbers in the original text**, so a warning or a parse error still points at the
line the user sees in their file. ``clean`` does the same and also says, in words, what it
removed; ``seen`` says what a text looked like, for a reader's refusal ("every line starts
with '; '"), and ``comment_block`` finds a tool's output kept as a comment block inside a
longer file (a launch script with ``nvidia-smi topo -m`` pasted above the commands).

Speed: real outputs run to thousands of lines (``ibv_devinfo -v`` on an 8-NIC host is about
1,300) and every host of a survey pays this step, so each line gets only cheap character tests;
the patterns run on the few lines that could hold what they look for (a prompt needs a ``$``, a
``#`` or a ``%``; a border needs a box-drawing character at either end).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import NamedTuple

from clusterctl.facts.model import ParseWarning
from clusterctl.wording import plural

_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07")
#: Box-drawing characters tmux, screen and many TUIs draw pane borders with.
_BOX = "─━│┃┄┅┆┇┈┉┊┋┌┍┎┏┐┑┒┓└┕┖┗┘┙┚┛├┝┞┟┠┡┢┣┤┥┦┧┨┩┪┫┬┭┮┯┰┱┲┳┴┵┶┷┸┹┺┻┼┽┾┿╀╁╂╃╄╅╆╇╈╉╊╋═║╒╓╔╕╖╗╘╙╚╛╜╝╞╟╠╡╢╣╤╥╦╧╨╩╪╫╬╭╮╯╰"
_BOX_CHARS = frozenset(_BOX)
_BORDER_ONLY = re.compile(rf"^[\s{_BOX}]+$")
_BORDER_LEFT = re.compile(rf"^\s*[{_BOX}]\s?")
_BORDER_RIGHT = re.compile(rf"\s*[{_BOX}]\s*$")
_FENCE = re.compile(r"^\s*(```|~~~)[\w+-]*\s*$")
#: The rank tag a launcher puts before each rank's output: Open MPI's ``mpirun --tag-output`` ``[1,0]<stdout>:``,
#: MPICH/Intel MPI (Hydra) ``-prepend-rank`` ``[0] ``, Slurm's ``srun --label`` (``-l``) `` 0: ``.
_MPI_TAG = re.compile(r"^\s*(?:(\[\d+,\d+\]<(?:stdout|stderr)>:|\[\d+\](?=\s|$))|\d+:(?:\s|$))")
#: Shell prompts, with or without the command after them:
#: ``user@host:~/dir$ cmd``, ``(venv) user@host:~$``, ``[root@host ~]# cmd``, ``$ cmd``, ``host$ cmd``,
#: ``~/nccl-tests$ cmd`` (a paste clipped at the left), ``sh-4.4# cmd``, ``bash-5.1$ cmd``, ``host:~ # cmd``.
_PROMPTS_AT = (
    re.compile(r"^\s*(?:\([^)]*\)\s*)?[\w.+-]+@[\w.-]+(?::[^\s$#]*)?\s?[$#%]\s*(?:\S.*)?$"),
    re.compile(r"^\s*(?:\([^)]*\)\s*)?\[[\w.+-]+@[\w.-]+[^\]]*\]\s?[$#%]\s*(?:\S.*)?$"),
)
_PROMPTS_DOLLAR = (
    re.compile(r"^\s*\$(?:\s+\S.*)?$"),
    re.compile(r"^\s*[\w.-]+\s?\$\s+\S.*$"),
    re.compile(r"^\s*~[\w./-]*\$(?:\s+\S.*)?$"),
)
#: ``[gpu6000 ~]# cmd``, ``[node01 nccl-tests]$ cmd``: a bracketed prompt without a user name (``[0] #``, a
#: bare number, is Hydra's rank tag before a ``#`` line).
_PROMPT_BRACKET_HOST = re.compile(r"^\s*\[(?!\d+\])[\w.-]+(?:\s+[^\]]*)?\]\s?[$#]\s*(?:\S.*)?$")
_PROMPT_SHELL_ROOT = re.compile(r"^\s*(?:ba|z|k|c|tc)?sh-\d+(?:\.\d+)*#(?:\s+\S.*)?$")
#: SUSE's root prompt, ``host:~ # ibstat`` / ``lehi-smoke:/tmp # cmd``: host, ``:``, a directory, `` #``.
_PROMPT_HOST_DIR_ROOT = re.compile(r"^\s*[\w.-]+:[~/][^\s$#]*\s?#(?:\s+\S.*|\s*)$")
#: A bare root prompt with its command, ``# ibv_devinfo -v`` (or notes' ``> nvidia-smi -q -i 0``): told from
#: a comment (``# Port counters``, nccl-tests' ``# nThread 1``) by the command word, a program whose output
#: clusterctl reads or a path.
_ROOT_PROMPT = re.compile(r"^\s*[#>]\s?(?:sudo\s+(?:-\S+\s+)*)?(\S+)(?:\s.*)?$")
#: The programs whose output clusterctl reads, and the launchers that run them.
_TOOLS = frozenset((
    "ibstat", "ibstatus", "ibv_devinfo", "ibdev2netdev", "iblinkinfo", "perfquery", "nvidia-smi", "dcgmi", "lspci",
    "dmesg", "journalctl", "ib_write_bw", "ib_read_bw", "ib_send_bw", "ib_write_lat", "ib_read_lat", "ib_send_lat",
    "mpirun", "srun",
))
_PROMPT_COMMANDS = _TOOLS | {"ibv_devices", "cat", "grep", "head", "tail", "less", "more", "mlxlink", "show_gids",
                             "kubectl", "docker", "ssh", "timeout", "env", "bash", "sh", "python", "python3", "numactl",
                             "ip"}
#: A line that is nothing but the author's elision of lines they left out.
ELISIONS = frozenset(("...", "…", "[...]", "(...)", "<...>", "[…]", "<snip>", "[snip]", "(snip)", "...snip...",
                      "[truncated]", "(truncated)", "<truncated>"))
#: Comment markers a block of pasted output is kept behind, longest first (``//`` before ``/``).
_COMMENT_MARKERS = ("//", "#", "--", ";", "%")
#: The markers a comment *block inside a longer file* is recognised by (``--``/``;``/``%`` lines are
#: too common in outputs themselves to be taken for comments unless every line has them).
_BLOCK_MARKERS = ("//", "#")


class Line(NamedTuple):
    """One line of cleaned input and where it was in the text the user gave (a named tuple: a
    survey makes thousands per host, and a tuple is made ten times faster than a frozen dataclass)."""

    #: 1-based line number in the original text.
    number: int
    text: str

    @property
    def tokens(self) -> list[str]:
        return self.text.split()


@dataclass(frozen=True)
class Cleaned:
    """The data lines of a text and what the cleaning took away, in words (for messages)."""

    lines: list[Line]
    #: ``("2 shell prompt lines", "a '# ' comment prefix on every line")``: empty for bare output.
    removed: tuple[str, ...] = ()

    def describe(self) -> str:
        """``"after removing 2 shell prompt lines and a '# ' comment prefix on every line"``, or ``""``."""
        if not self.removed:
            return ""
        *most, last = self.removed
        return f"after removing {', '.join(most)} and {last}" if most else f"after removing {last}"

    def elision_warnings(self, left_out: str, unknown: str) -> list[ParseWarning]:
        """The warning a reader starts with where the author elided lines (``...``): ``left_out`` (lines,
        links) are missing from the paste and ``unknown`` says what that costs."""
        # The elisions only: the prompt or fence around a paste changes no fact, nor the warning.
        elided = [note for note in self.removed if "elision" in note]
        return [ParseWarning(f"the paste leaves {left_out} out ({elided[0]}): {unknown}")] if elided else []


def is_prompt(text: str) -> bool:
    """Whether a line is a shell prompt (with or without the command typed after it)."""
    # Cheap character tests first: nearly every line of a real output has no '$', and a '#' or
    # '%' prompt needs a user@host (or sh-N.N) before it.
    if "$" in text:
        if any(pattern.match(text) for pattern in _PROMPTS_DOLLAR):
            return True
    elif "#" not in text and "%" not in text:
        return False
    if "@" in text and any(pattern.match(text) for pattern in _PROMPTS_AT):
        return True
    if ("]#" in text or "]$" in text or "] #" in text or "] $" in text) and _PROMPT_BRACKET_HOST.match(text):
        return True
    if ":" in text and _PROMPT_HOST_DIR_ROOT.match(text):
        return True
    return "sh-" in text and _PROMPT_SHELL_ROOT.match(text) is not None


#: A first line that is only the command, echoed without a prompt (``nvidia-smi nvlink -s`` above its output in
#: an issue): the programs whose output begins otherwise.
_BARE_COMMANDS = _TOOLS | {"sudo"}
_BARE_COMMAND = re.compile(r"^\s*(\S+)(?:\s+[-\w./=:,]+)*\s*$")


def _is_bare_command(text: str) -> bool:
    found = _BARE_COMMAND.match(text)
    # Windows' nvidia-smi is 'nvidia-smi.exe' (a Windows host's paste, or WSL).
    return found is not None and found.group(1).rsplit("/", 1)[-1].removesuffix(".exe") in _BARE_COMMANDS


def _is_root_prompt(text: str) -> bool:
    """``# ibv_devinfo -v`` / ``# ./all_reduce_perf -b 8``: a root shell's prompt and command (first line only:
    further down a ``# `` line is as likely a comment)."""
    found = _ROOT_PROMPT.match(text)
    if found is None:
        return False
    command = found.group(1)
    return command.rsplit("/", 1)[-1] in _PROMPT_COMMANDS or command.startswith(("./", "/"))


def _strip_borders(text: str) -> str | None:
    """The line without tmux/screen pane borders; ``None`` when it is nothing but border."""
    if _BORDER_ONLY.match(text):
        return None
    text = _BORDER_LEFT.sub("", text, count=1)
    return _BORDER_RIGHT.sub("", text)


def _may_have_border(text: str) -> bool:
    return bool(text) and (text[-1] in _BOX_CHARS or text.lstrip()[:1] in _BOX_CHARS)


def _split(text: str) -> list[str]:
    if "\r" in text:
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    return text.split("\n")


def _common_marker(lines: list[tuple[int, str]]) -> str | None:
    """The quote (``>``) or comment marker every non-blank line starts with, after its indentation."""
    texts = (stripped for _, text in lines if (stripped := text.lstrip()))
    first = next(texts, "")
    marker = ">" if first[:1] == ">" else next((m for m in _COMMENT_MARKERS if first.startswith(m)), None)
    return marker if marker is not None and all(text.startswith(marker) for text in texts) else None


def _unprefix(text: str, marker: str) -> str:
    """``text`` without its indentation, ``marker`` (``>>`` nested quotes too) and one space or tab after."""
    stripped = text.lstrip()
    if not stripped.startswith(marker):
        return text
    rest = stripped[len(marker):]
    if marker == ">":
        rest = rest.lstrip(">")
    return rest[1:] if rest[:1] in (" ", "\t") else rest


def _shown(marker: str, lines: list[tuple[int, str]]) -> str:
    """The marker as the lines show it: ``'# '`` when most have a space after it."""
    spaced = sum(1 for _, t in lines if t.lstrip().startswith(marker + " "))
    return f"'{marker} '" if spaced * 2 >= sum(1 for _, t in lines if t.strip()) else f"'{marker}'"


def _dedented(lines: list[tuple[int, str]]) -> list[Line]:
    """The non-blank lines, less the indentation common to them all (a block pasted indented as a whole)."""
    kept = [(number, text) for number, text in lines if text.strip()]
    cut = 0
    if kept and kept[0][1][:1].isspace():  # else no indentation is common to them (the usual case: no work)
        indents = [text[:len(text) - len(text.lstrip())] for _, text in kept]
        low, high = min(indents), max(indents)  # the prefix all of them share is the one these two share
        cut = next((at for at, (a, b) in enumerate(zip(low, high, strict=False)) if a != b), len(low))
    return [Line(number, text[cut:]) for number, text in kept]


#: What ``_first_pass`` could act on, as characters and words of a line: a text with none of them anywhere
#: (nearly every tool output) only has its lines' trailing blanks cut. Prompts need a ``$``, a ``#`` or, for
#: a ``%`` prompt, a user@host; fences a backquote or a tilde; elisions ``...``, ``…``, ``snip`` or ``truncated``;
#: pane borders a box-drawing character (all in U+2500-U+257F).
_NOTHING_TO_CLEAN = re.compile("[\x1b\x00`~$#@\u2500-\u257f\u2026]|\\.\\.\\.|snip|truncated")
_PLAIN_TRIGGERS = ("\x1b", "\x00", "`", "~", "$", "#", "@", "...", "snip", "truncated")


def _is_plain(text: str) -> bool:
    """Whether no line of ``text`` holds anything ``_first_pass`` removes (see ``_NOTHING_TO_CLEAN``)."""
    if text.isascii():  # the usual case: substring tests run at memory speed
        return not any(trigger in text for trigger in _PLAIN_TRIGGERS)
    return _NOTHING_TO_CLEAN.search(text) is None


def _first_pass(numbered: Iterable[tuple[int, str]], removed: dict[str, int], *,
                plain: bool = False) -> list[tuple[int, str]]:
    """ANSI codes, NULs, pane borders, fences, prompts and elisions out; trailing blanks off.
    ``plain``: the caller found none of what this removes anywhere in the text (``_is_plain``)."""
    if plain:
        return [(number, raw.rstrip()) for number, raw in numbered]
    kept: list[tuple[int, str]] = []
    for number, raw in numbered:
        line = raw
        if "\x1b" in line:
            line = _ANSI.sub("", line)
        if "\x00" in line:
            line = line.replace("\x00", "")
        line = line.rstrip()
        if _may_have_border(line):
            stripped = _strip_borders(line)
            removed["border"] += 1
            if stripped is None:
                continue
            line = stripped.rstrip()
        if ("`" in line or "~" in line) and _FENCE.match(line):
            removed["fence"] += 1
            continue
        if is_prompt(line):
            removed["prompt"] += 1
            continue
        bare = line.strip()
        # "....", "......": the longer elisions ("." or ".." alone is not one, and has no "..." for _is_plain to see).
        if bare in ELISIONS or (len(bare) > 3 and set(bare) == {"."}):
            removed["elision"] += 1
            continue
        kept.append((number, line))
    return kept


def clean(text: str) -> Cleaned:
    """The data lines of ``text`` with their original line numbers (see the module docstring),
    and what was removed.

    Trailing whitespace is removed; leading whitespace is kept except the indentation common
    to every line (a pasted block indented as a whole), because some formats (``ibv_devinfo``,
    ``ibstat``) nest by indentation. Blank lines are dropped.
    """
    return _clean(text, plain=_is_plain(text))


def _clean(text: str, *, plain: bool) -> Cleaned:
    removed: Counter[str] = Counter()
    kept = _first_pass(enumerate(_split(text), start=1), removed, plain=plain)
    first = next((i for i, (_, line) in enumerate(kept) if line.strip()), None)
    if first is not None and (_is_root_prompt(kept[first][1]) or _is_bare_command(kept[first][1])) and not any(
            line.lstrip().startswith("#") for _, line in kept[first + 1:first + 2]):
        del kept[first]
        removed["prompt"] += 1
    prefixes: list[str] = []
    # A quoted reply of a comment block, or a comment block in a quoted reply: peel one layer at a time.
    for _ in range(3):
        marker = _common_marker(kept)
        if marker is None:
            break
        shown = _shown(marker, kept)
        prefixes.append(f"a {shown} quote prefix on every line" if marker == ">"
                        else f"a {shown} comment prefix on every line")
        # Each line loses a prefix: what was not in the text is not in the lines now either.
        kept = _first_pass(((n, _unprefix(t, marker)) for n, t in kept), removed, plain=plain)
    notes = [plural(removed["prompt"], "shell prompt line")] if removed["prompt"] else []
    notes += prefixes
    if removed["fence"]:
        notes.append(plural(removed["fence"], "code fence"))
    if removed["border"]:
        notes.append("pane borders")
    if removed["elision"]:
        notes.append(plural(removed["elision"], "'...' elision line"))
    return Cleaned(_dedented(kept), tuple(notes))


def clean_lines(text: str) -> list[Line]:
    """The data lines of ``text`` with their original line numbers: ``clean(text).lines``."""
    return clean(text).lines


def comment_block(text: str, anchor: re.Pattern[str]) -> list[Line] | None:
    """The cleaned lines of the ``#``/``//`` comment block of ``text`` that holds a line matching
    ``anchor`` once its marker is off (``nvidia-smi topo -m`` kept above a launch script's commands),
    with their line numbers in the whole text; ``None`` when no comment block holds one."""
    # Borders, fences, prompts and elisions out first: the file may itself be a pasted pane.
    numbered = _first_pass(enumerate(_split(text), start=1), Counter())
    for start, end, marker in _marker_runs(numbered):
        block = numbered[start:end]
        if any(anchor.search(_unprefix(t, marker)) for _, t in block):
            kept = _first_pass(((n, _unprefix(t, marker)) for n, t in block), Counter())
            return _dedented(kept)
    return None


def _marker_runs(numbered: list[tuple[int, str]]) -> Iterator[tuple[int, int, str]]:
    """Each run of consecutive lines that start with the same ``#``/``//`` marker: ``numbered[start:end]``
    and the marker."""
    index = 0
    while index < len(numbered):
        stripped = numbered[index][1].lstrip()
        marker = next((m for m in _BLOCK_MARKERS if stripped.startswith(m)), None)
        end = index + 1
        if marker is not None:
            while end < len(numbered) and numbered[end][1].lstrip().startswith(marker):
                end += 1
            yield index, end, marker
        index = end


def _quoted_text(text: str, limit: int = 60) -> str:
    return repr(text if len(text) <= limit else text[:limit - 3] + "...")


def seen(text: str) -> str:
    """What ``text`` looked like, for a reader that refuses it: ``"every line starts with '| '"``,
    ``"lines 18-37 are a '#' comment block inside a longer text"``, ``"the input is empty"``,
    ``"the first data line is 'foo' (after removing 1 shell prompt line)"``."""
    raw = [(n, t.rstrip()) for n, t in enumerate(_split(text), start=1) if t.strip()]
    if not raw:
        return "the input is empty"
    cleaned = clean(text)
    after = cleaned.describe()
    if not cleaned.lines:
        return "nothing is left " + (after or "of the input")
    lead = _shared_lead(cleaned.lines)
    if lead:
        return f"every line starts with '{lead}'" + (f" ({after})" if after else "")
    blocks = _comment_runs(raw)
    if blocks and blocks[0][3] < len(raw):
        first, last, marker, _ = blocks[0]
        return (f"lines {first}-{last} are a '{marker}' comment block inside a longer text; the first data line "
                f"is {_quoted_text(cleaned.lines[0].text.strip())}")
    return f"the first data line (line {cleaned.lines[0].number}) is {_quoted_text(cleaned.lines[0].text.strip())}" + (
        f" ({after})" if after else "")


def _shared_lead(lines: list[Line]) -> str:
    """The punctuation (and the space after it) every line starts with, when there is one: a prefix
    the cleaning did not know (``| ``, ``* ``, ``;; ``)."""
    texts = [line.text.lstrip() for line in lines]
    if len(texts) < 2:
        return ""
    first = texts[0]
    length = 0
    while length < min(len(first), 4) and not first[length].isalnum() and not first[length].isspace():
        length += 1
    if length == 0:
        return ""
    lead = first[:length]
    if not all(t.startswith(lead) for t in texts):
        return ""
    spaced = all(t[length:length + 1] == " " for t in texts if len(t) > length)
    return lead + (" " if spaced else "")


def _comment_runs(raw: list[tuple[int, str]]) -> list[tuple[int, int, str, int]]:
    """Runs of at least 3 consecutive non-blank lines with the same ``#``/``//`` marker, longest first:
    (first line number, last line number, marker, how many lines)."""
    runs = [(raw[start][0], raw[end - 1][0], marker, end - start)
            for start, end, marker in _marker_runs(raw) if end - start >= 3]
    return sorted(runs, key=lambda run: -run[3])


def without_mpi_tags(lines: Iterable[Line]) -> Iterator[Line]:
    """``lines`` without the rank tag a launcher puts on each rank's lines (``_MPI_TAG``: benchmark logs of
    multi-node runs); lines that held nothing else are dropped."""
    for line in lines:
        found = _MPI_TAG.match(line.text)
        text = line.text[found.end():] if found else line.text
        if found and found.group(1):
            # Hydra tags each write, not each line: a row printed in pieces reads "-1[0]    1626.5 ... 0[0]    2302.3".
            text = re.sub(rf"(?<=\S){re.escape(found.group(1))}", " ", text)
        if text.strip():
            yield Line(line.number, text)
