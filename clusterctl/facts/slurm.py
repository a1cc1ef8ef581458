"""``scontrol show node [NAME]`` and ``scontrol -o show node``: each node's state and drain reason.

Both layouts are read: the default one (a block per node starting with ``NodeName=``, its
``Key=Value`` fields over indented lines) and ``-o`` (one line per node). A value runs to the next
`` Key=`` (``OS=Linux 5.14.0 #1 SMP ...`` has spaces); ``Reason=`` is the rest of its line in the
default layout, and in both ends with Slurm's ``[user@time]`` stamp, kept apart. A reason typed with
newlines is printed a line at a time, the stamp after its first: its next lines come under it, indented
deeper (``-o``: after the stamp, each after 8 spaces), and are kept in it, newlines and all. The state is
Slurm's compound word: a base state and ``+FLAGS`` (``IDLE+DRAIN``, ``MIXED+DRAIN``,
``DOWN+NOT_RESPONDING``), with ``*`` and the other sinfo-style suffixes when printed.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass

from clusterctl.errors import ParseError
from clusterctl.facts.base import CommandOutput
from clusterctl.facts.clean import Line
from clusterctl.facts.table import blocks, numbered_lines

COMMAND = "scontrol -o show node"
#: The mark clusterctl puts before every drain reason it writes: it resumes only nodes whose reason starts with it.
REASON_PREFIX = "clusterctl: "
#: The longest drain reason written (``sinfo -R`` shows the start; scontrol shows all).
REASON_LIMIT = 200
_KEY = re.compile(r"(?:^|\s)([A-Z][A-Za-z_]*)=")
#: Slurm's ``[user@time]`` stamp closes a Reason's first line (``-o``: its next lines, then fields such as a cloud
#: node's ``InstanceId=``, follow it): the FIRST one followed by a next line, else the LAST, as the reason's own
#: text may hold a ``[x@y]`` or ``Key=`` typed by an admin.
_STAMP = re.compile(r"\[([^\[\]@]*)@([^\[\]]*)\]")
#: Free-text fields: the value is the rest of the line (any text, `Key=` included), up to another
#: of them in the ``-o`` layout.
_FREE_TEXT = ("Reason", "Comment", "Extra")
#: What scontrol prints after a reason (its last field but these): in ``-o``, where its next lines end.
_AFTER_REASON = ("Comment", "Extra", "InstanceId", "InstanceType", "ReservationName")
#: In ``-o``, what scontrol puts before each next line of a reason: the layout's " " and 7 spaces of indent.
_NEXT_LINE = " " * 8

@dataclass(frozen=True)
class SlurmNode:
    name: str
    #: As printed: ``IDLE+DRAIN``.
    state: str
    #: The base state (``IDLE``) and the flags (``("DRAIN",)``), upper case, suffixes like ``*`` dropped.
    base: str
    flags: tuple[str, ...]
    #: Why it is drained or down ("" when none), without Slurm's ``[user@time]`` stamp.
    reason: str = ""
    reason_user: str | None = None
    reason_time: str | None = None
    partitions: tuple[str, ...] = ()
    #: Every field as printed (``Gres``, ``CfgTRES``, ``Version``...).
    fields: tuple[tuple[str, str], ...] = ()

    @property
    def drain_set(self) -> bool:
        """DRAIN (draining or drained): Slurm keeps the node out until resumed. DOWN alone does not: Slurm
        returns a DOWN node to service when its slurmd registers again (ReturnToService), so drains set it."""
        return "DRAIN" in self.flags or self.base in ("DRAINED", "DRAINING")

    @property
    def drained(self) -> bool:
        """DRAIN set or DOWN: Slurm gives it no new work."""
        return self.drain_set or "DOWN" in (self.base, *self.flags)

    @property
    def drained_by_clusterctl(self) -> bool:
        return self.drained and self.reason.startswith(REASON_PREFIX)

    def field(self, name: str) -> str | None:
        return dict(self.fields).get(name)

    def to_json(self) -> dict[str, object]:
        return {"name": self.name, "state": self.state, "base": self.base, "flags": list(self.flags),
                "drained": self.drained, "drained_by_clusterctl": self.drained_by_clusterctl, "reason": self.reason,
                "reason_user": self.reason_user, "reason_time": self.reason_time, "partitions": list(self.partitions),
                "fields": dict(self.fields)}


def _split_fields(text: str, line_no: int) -> list[tuple[str, str]]:
    """``Key=Value`` pairs of one line; a value runs to the next `` Key=``."""
    out: list[tuple[str, str]] = []
    matches = list(_KEY.finditer(text))
    if not matches or text[: matches[0].start()].strip():
        raise ParseError("scontrol show node", f"expected Key=Value fields, got {text.strip()[:80]!r}", line=line_no)
    index = 0
    while index < len(matches):
        match = matches[index]
        key = match.group(1)
        following = matches[index + 1:]
        first_line_end = None  # -o: where a reason's first line ends, when next lines follow it
        if key in _FREE_TEXT:
            limit = next((m.start() for m in following if m.group(1) in _FREE_TEXT), len(text))
            stamps = list(_STAMP.finditer(text, match.end(), limit)) if key == "Reason" else []
            stamp = next((s for s in stamps if text.startswith(_NEXT_LINE, s.end())), stamps[-1] if stamps else None)
            stamped = stamp.end() if stamp else limit
            if stamp and text.startswith(_NEXT_LINE, stamped):
                first_line_end = stamped
                stamped = next((m.start() for m in following if m.start() > stamped and m.group(1) in _AFTER_REASON),
                               len(text))
            following = [m for m in following if m.start() >= stamped]
        end = following[0].start() if following else len(text)
        value = text[match.end():first_line_end or end].strip()
        if first_line_end:
            value += "".join(f"\n{part.strip()}" for part in text[first_line_end:end].split(_NEXT_LINE) if part.strip())
        out.append((key, value))
        index = next((i for i, m in enumerate(matches) if m.start() >= end), len(matches))
    return out


def _node(fields: list[tuple[str, str]], line_no: int) -> SlurmNode:
    values = dict(fields)
    name = values.get("NodeName", "")
    if not name:
        raise ParseError("scontrol show node", "a node without NodeName=", line=line_no)
    state = values.get("State")
    if not state:
        raise ParseError("scontrol show node", f"node {name} has no State=", line=line_no)
    words = [w.rstrip("*~#$@^!%") for w in state.upper().split("+") if w]
    base, flags = (words[0] if words else "UNKNOWN"), tuple(words[1:])
    reason, user, stamp = values.get("Reason", ""), None, None
    first, newline, more = reason.partition("\n")
    found = [m for m in _STAMP.finditer(first) if not first[m.end():].strip()]
    if found:
        reason, user, stamp = first[:found[0].start()].strip() + newline + more, found[0].group(1), found[0].group(2)
    partitions = tuple(p for p in values.get("Partitions", "").split(",") if p)
    return SlurmNode(name, state, base, flags, reason, user, stamp, partitions, tuple(fields))


#: What scontrol answers instead of a node: read as no node.
_NOT_LISTED = re.compile(r"^(?:No nodes in the system|Node .*not found$)")


def parse_nodes(text: str) -> tuple[SlurmNode, ...]:
    """Every node of ``scontrol show node`` (either layout); ``()`` for an empty answer."""
    lines = [line for line in numbered_lines(text) if not _NOT_LISTED.match(line.text.strip())]
    before, found = blocks(lines, lambda line: line.strip().startswith("NodeName=") or None)
    if before:
        first = before[0]
        _split_fields(first.text.strip(), first.number)  # a line that holds no Key=Value fields says so first
        raise ParseError("scontrol show node", "fields before the first NodeName=", line=first.number)
    return tuple(_node(_block_fields([opening, *rest]), opening.number) for opening, _, rest in found)


def _block_fields(lines: list[Line]) -> list[tuple[str, str]]:
    """One node's fields in the default layout; a line under ``Reason=`` indented deeper is its next line."""
    fields: list[tuple[str, str]] = []
    reason_indent: int | None = None
    for line in lines:
        indent = len(line.text) - len(line.text.lstrip())
        if reason_indent is not None and indent > reason_indent:
            fields[-1] = ("Reason", f"{fields[-1][1]}\n{line.text.strip()}")
            continue
        fields += _split_fields(line.text.strip(), line.number)
        reason_indent = indent if fields and fields[-1][0] == "Reason" else None
    return fields


def parse_node(text: str, name: str) -> SlurmNode | None:
    """The node ``name`` of ``scontrol -o show node NAME``; None when Slurm does not list it."""
    return next((n for n in parse_nodes(text) if n.name == name), None)


def node_from(result: CommandOutput, name: str) -> SlurmNode | None:
    """The node ``name`` from the result of ``show_command(name)``; None when Slurm does not know it or says
    nothing readable (then nothing is drained or resumed on a guess)."""
    if result.exit_code != 0:
        return None
    try:
        return parse_node(result.stdout, name)
    except ParseError:
        return None


def show_command(name: str) -> str:
    return f"{COMMAND} {shlex.quote(name)}"


def drain_reason(text: str) -> str:
    """clusterctl's drain reason for ``text`` (untrusted): marked as clusterctl's, one line of printable
    characters (a newline would end the reason in ``scontrol -o``'s line), at most REASON_LIMIT long."""
    text = REASON_PREFIX + " ".join("".join(c if c.isprintable() else " " for c in text).split())
    return text if len(text) <= REASON_LIMIT else text[: REASON_LIMIT - 3] + "..."


def update_command(name: str, state: str, reason: str | None = None) -> str:
    """``scontrol update nodename=NAME state=STATE [reason=...]``, every value quoted."""
    words = f"scontrol update nodename={shlex.quote(name)} state={state}"
    return words + (f" reason={shlex.quote(reason)}" if reason is not None else "")
