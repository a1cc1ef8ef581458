"""A bounded capture of one command's output stream.

A runaway command (``yes``, a debug log on a loop) must not exhaust the control machine's
memory when hundreds of hosts run it at once. Each stream keeps its first and last
``cap / 2`` bytes; what is dropped in between is replaced by one marker line saying how many
bytes were left out, so the start (usually the command's banner) and the end (usually the
error) are both still there. Every byte is still *read*, so the remote side never blocks on a
full pipe.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from typing import Literal

from clusterctl.errors import UsageError

#: Which stream of a command a line came from.
OutputStream = Literal["stdout", "stderr"]
#: Called with each line of a command's output as it arrives (see ``LineSplitter``).
OnLine = Callable[[OutputStream, str], None]

#: Bytes kept per stream (stdout and stderr each) per command. ``CLUSTERCTL_MAX_OUTPUT``
#: (bytes, or with a K/M/G suffix) overrides it.
DEFAULT_MAX_OUTPUT = 64 * 1024 * 1024


def max_output_bytes() -> int:
    """The per-stream cap: ``CLUSTERCTL_MAX_OUTPUT`` when set (1 KiB at least), else the default; a value that is
    no size is the user's to mend (exit 2), never a cap silently other than the one they set."""
    given = os.environ.get("CLUSTERCTL_MAX_OUTPUT", "").strip()
    if not given:
        return DEFAULT_MAX_OUTPUT
    size = re.fullmatch(r"([0-9]+)([KMG]?)", given.upper())
    if size is None:
        raise UsageError(f"CLUSTERCTL_MAX_OUTPUT={given!r} is not a size: write bytes, or a whole number with K, M "
                         "or G (16M).")
    return max(int(size[1]) * {"K": 1024, "M": 1024**2, "G": 1024**3}.get(size[2], 1), 1024)


class CappedOutput:
    """Collects chunks of one stream, keeping the head and the tail within ``cap`` bytes; with ``lines``,
    also hands each line on as it arrives."""

    def __init__(self, cap: int | None = None, lines: LineSplitter | None = None) -> None:
        self.cap = cap if cap is not None else max_output_bytes()
        self.lines = lines
        self._head: list[bytes] = []
        self._head_len = 0
        self._tail: list[bytes] = []
        self._tail_len = 0
        self.total = 0

    @property
    def dropped(self) -> int:
        return self.total - self._head_len - self._tail_len

    def add(self, chunk: bytes) -> None:
        if not chunk:
            return
        if self.lines is not None:
            self.lines.add(chunk)
        self.total += len(chunk)
        half = self.cap // 2
        if self._head_len < half:
            take = chunk[: half - self._head_len]
            self._head.append(take)
            self._head_len += len(take)
            chunk = chunk[len(take) :]
            if not chunk:
                return
        self._tail.append(chunk)
        self._tail_len += len(chunk)
        # Trimmed in batches (at twice the tail's share), so a long stream of small chunks
        # costs linear time; memory stays under 1.5 x cap.
        if self._tail_len > 2 * (self.cap - half):
            self._trim()

    def _trim(self) -> None:
        keep_len = self.cap - self.cap // 2
        if self._tail_len > keep_len:
            keep = b"".join(self._tail)[-keep_len:]
            self._tail = [keep]
            self._tail_len = len(keep)

    def flush(self) -> None:
        """The stream ended: a last line without its newline is handed on."""
        if self.lines is not None:
            self.lines.flush()

    def value(self) -> bytes:
        self._trim()
        head = b"".join(self._head)
        tail = b"".join(self._tail)
        if not self.dropped:
            return head + tail
        marker = f"\n[... clusterctl dropped {self.dropped} bytes of output here (CLUSTERCTL_MAX_OUTPUT) ...]\n"
        return head + marker.encode() + tail


class LineSplitter:
    """Hands each complete line of one stream to ``on_line`` as it arrives (``exec --stream``).

    Lines are decoded as UTF-8 (bad bytes replaced) and masked (``mask_text``) before the
    callback sees them, without their newline; ``flush`` hands on a last partial line. A line
    that grows past ``MAX_LINE_BYTES`` without a newline (a progress bar drawn with ``\\r``, a
    binary blob) is handed on in pieces of that size, so memory stays bounded whatever the
    command prints. The whole output is still collected (``CappedOutput``, which feeds it).
    """

    #: The longest piece of a line held back waiting for its newline.
    MAX_LINE_BYTES = 64 * 1024

    def __init__(self, stream: OutputStream, on_line: OnLine) -> None:
        # Imported here, once per stream: per line, the import statement cost more than the line
        # (a health probe streams ~3,500 lines a host).
        from clusterctl.secret import mask_text, masks_any

        self.stream = stream
        self.on_line = on_line
        #: A receiver with ``add_text(stream, text)`` takes all the complete lines of a chunk in one call, as
        #: one text (the lines joined by ``\n``, no newline at the end): no list of lines is made for it.
        self._add_text: Callable[[OutputStream, str], None] | None = getattr(on_line, "add_text", None)
        self._mask = mask_text
        self._masks_any = masks_any
        self._held = b""
        self._failed = False

    def add(self, chunk: bytes) -> None:
        if not chunk:
            return
        data = self._held + chunk
        end = data.rfind(b"\n")
        if end >= 0:
            # Decoded at once, then split: a newline byte is never part of a UTF-8 sequence, so each
            # line reads as if decoded alone (bad bytes replaced the same way).
            self._emit(data[:end].decode(errors="replace"))
            data = data[end + 1 :]
        while len(data) > self.MAX_LINE_BYTES:
            self._emit(data[: self.MAX_LINE_BYTES].decode(errors="replace"))
            data = data[self.MAX_LINE_BYTES :]
        self._held = data

    def flush(self) -> None:
        held, self._held = self._held, b""
        if held:
            self._emit(held.decode(errors="replace"))

    def _emit(self, text: str) -> None:
        """Hand on ``text``: one or more whole lines joined by ``\\n`` (or a piece of a long line)."""
        if self._failed:
            return
        on_line, stream, mask, add_text = self.on_line, self.stream, self._mask, self._add_text
        try:
            if self._masks_any():  # masked line by line, as a receiver of single lines would see them
                text = "\n".join(mask(line) for line in text.split("\n"))
            if add_text is not None:
                add_text(stream, text)
                return
            for line in text.split("\n"):
                on_line(stream, line)
        except Exception:  # a closed stdout (| head): stop listening, never stop reading the command
            self._failed = True
            import logging

            logging.getLogger(__name__).debug("output line callback failed; no more lines sent", exc_info=True)


def splitters(on_line: OnLine | None) -> tuple[LineSplitter | None, LineSplitter | None]:
    """One splitter per stream (stdout, stderr), or none when nobody listens."""
    if on_line is None:
        return None, None
    return LineSplitter("stdout", on_line), LineSplitter("stderr", on_line)


def captures(max_output: int | None, on_line: OnLine | None) -> tuple[CappedOutput, CappedOutput]:
    """What a command's stdout and stderr are collected in (``RunRequest.max_output`` and ``on_line``)."""
    out_lines, err_lines = splitters(on_line)
    return CappedOutput(max_output, out_lines), CappedOutput(max_output, err_lines)

