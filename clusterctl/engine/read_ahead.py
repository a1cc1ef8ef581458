"""Every phase's first read of a host in ONE round trip, when nothing is expected to change in between.

A plan, or a re-run on hosts that are already as wanted (a no-op bootstrap), reads each host once
per phase: five round trips for the node phases, each with its own SSH channel, sudo and shell.
When no change is expected before a phase reads its host (a plan changes nothing; an applying run
on a host whose previous run finished every phase), the engine asks each phase what its ``check``
reads (``Phase.reads``) and reads all of it at once, right after taking the host's lock, each
command's output under a marker line of its own (a random token per run, so no output can fake
one); what was read before the run (``RunSettings.answered``) is not read again. An answer is given
to the first read of that command, and once only, except in a plan: it changes nothing, so what a
phase read is handed on to the host's next phase (``hand_on``). The moment a change is applied on
the host the rest is forgotten (``forget``), so no phase ever reads a host older than a change. A
guess that was wrong (the host had drifted) costs the reads of the later phases, done again one by
one after the change.

Each command's exit status is kept with its output; one that failed there is not given (its
phase runs it again itself, and sees why). The answers carry no stderr (the batch's is shared), so
a phase names in ``reads`` only commands whose stderr means nothing when they succeed (the
``section_command`` probes fold it into their output). A batch that fails as a whole (sudo
refused, a shell missing, an output cut short) is not used: each phase then reads on its own.
"""

from __future__ import annotations

import re
import secrets
import shlex
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from clusterctl.transport.base import CommandResult, Transport

MARKER = "@@clusterctl-read-ahead@@"


def batch_command(commands: Sequence[str], token: str) -> str:
    """One shell line running ``commands`` in order, each output between two marker lines, the
    second with the command's exit status: the one batch of reads (read ahead here, the confirmation
    read of ``engine/confirm.py`` with a fixed token).

    Every output is followed by one ``echo`` (a newline), so a marker always starts a line even
    after an output without a final newline; ``split_batch`` takes that newline off again. A command
    is put in the line as it is (the phases' probes are plain sequences of commands); one that could
    end the line early (``exit``, more than one line, an unclosed quote) runs in a shell of its own.
    """
    return "; ".join(f"echo '{MARKER} {token} {i}'; {_in_line(command)}; clusterctl_read_rc=$?; echo; "
                     f"echo \"{MARKER} {token} {i} exit $clusterctl_read_rc\"" for i, command in enumerate(commands))


def _in_line(command: str) -> str:
    try:
        shlex.split(command)
    except ValueError:
        return f"sh -c {shlex.quote(command)}"
    return f"sh -c {shlex.quote(command)}" if "\n" in command or re.search(r"\bexit\b", command) else command


def split_batch(text: str, count: int, token: str) -> list[tuple[str, int]] | None:
    """The ``count`` (output, exit status) pairs of a ``batch_command`` run, or None when the
    output is not whole."""
    outputs: list[tuple[str, int]] = []
    for i in range(count):
        header = f"{MARKER} {token} {i}\n"
        if not text.startswith(header):
            return None
        text = text[len(header):]
        closing = re.search(rf"\n{re.escape(MARKER)} {token} {i} exit (\d+)\n", text)
        if closing is None:
            return None
        outputs.append((text[:closing.start()], int(closing.group(1))))  # without the echo's newline
        text = text[closing.end():]
    if text.strip():
        return None
    return outputs


@dataclass(frozen=True)
class Batch:
    commands: tuple[str, ...]
    sudo: bool
    #: Random per batch: no command's output can print a marker line of it.
    token: str

    @property
    def line(self) -> str:
        return batch_command(self.commands, self.token)


def batches(reads: Sequence[tuple[str, bool]]) -> list[Batch]:
    """The batches that read every command of ``reads``: one per sudo setting."""
    wanted: dict[bool, dict[str, None]] = {}  # each sudo setting's commands, in order, once
    for command, sudo in reads:
        wanted.setdefault(sudo, {})[command] = None
    # One command alone is read by its phase: nothing to save.
    return [Batch(tuple(commands), sudo, secrets.token_hex(8)) for sudo, commands in wanted.items()
            if len(commands) > 1]


class ReadAhead:
    """One host's answers read ahead: each given once (a plan hands them on), all forgotten after a change."""

    def __init__(self, answered: Mapping[tuple[str, bool], CommandResult] | None = None) -> None:
        self._answers: dict[tuple[str, bool], CommandResult] = dict(answered or {})
        self._lock = threading.Lock()

    def accept(self, batch: Batch, result: CommandResult | None) -> int:
        """Keep the answers of a batch that ran whole (``result``); returns how many were kept.

        A command that failed in the batch is not kept: its phase runs it itself (stderr and all)."""
        outputs = split_batch(result.stdout, len(batch.commands), batch.token) if result and result.ok else None
        if result is None or outputs is None:
            return 0
        share = round(result.duration_s / len(batch.commands), 4)
        kept = 0
        with self._lock:
            for command, (output, code) in zip(batch.commands, outputs, strict=True):
                if code == 0:
                    self._answers[(command, batch.sudo)] = CommandResult(command, output, "", 0, share)
                    kept += 1
        return kept

    def fill(self, transport: Transport, batches: Sequence[Batch]) -> int:
        """Read each of ``batches`` (``batches(reads)``) in one round trip; returns how many answers were kept."""
        return sum(self.accept(batch, transport.run(batch.line, sudo=batch.sudo)) for batch in batches)

    def hand_on(self, answers: Mapping[tuple[str, bool], CommandResult]) -> None:
        """What a phase of a plan read: a plan changes no host, so the next phase that runs the same command
        gets the same answer without asking again (upgrade plan's phases each read the node's packages)."""
        with self._lock:
            self._answers.update(answers)

    def take(self, command: str, sudo: bool) -> CommandResult | None:
        with self._lock:
            return self._answers.pop((command, sudo), None)

    def forget(self) -> None:
        """The host changed: what was read before may no longer be true."""
        with self._lock:
            self._answers.clear()
