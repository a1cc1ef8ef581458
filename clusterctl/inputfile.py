"""Reading a file (or standard input) a user names, with a size limit and clear errors.

Every reader of user-given input goes through ``read_text_input``: a folder, a missing or
unreadable file, binary data, text that is not UTF-8 and input past the reader's limit are
usage errors (exit 2) that name the file, never a traceback, a hang on ``/dev/zero`` or
gigabytes of memory. The limits are far above any real input of each kind and are listed in
the README ("Input limits").
"""

from __future__ import annotations

import os
import stat
import sys
from typing import IO, AnyStr

from clusterctl.errors import UsageError

MiB = 1024 * 1024

#: Bytes each kind of input may have. Real ones are far smaller (a 72-GPU topo matrix is ~20 kB,
#: a 1,000-host survey ~20 MB).
LIMITS: dict[str, int] = {
    "topology": 1 * MiB,
    "nccl-settings": 16 * MiB,
    "sweep": 16 * MiB,
    "benchmark-log": 64 * MiB,
    "survey": 256 * MiB,
    "health-report": 256 * MiB,
    "inventory": 16 * MiB,
    "mock-profile": 16 * MiB,
    "results": 64 * MiB,
    #: What clusterctl wrote and reads back: a 10,000-host progress file is a few MB.
    "state": 64 * MiB,
    "tool output": 64 * MiB,
}


def read_text_input(source: str, kind: str, *, what: str = "") -> tuple[str, str]:
    """``(text, label)`` of ``source`` (a path, or ``-`` for standard input) within ``LIMITS[kind]``;
    ``what`` ("a saved sweep") leads the refusal of binary or non-UTF-8 data."""
    limit = LIMITS[kind]
    if source == "-":
        # A text stream (tests, embedding) has no buffer: its characters are read, then encoded back.
        data = _read_capped(getattr(sys.stdin, "buffer", None) or sys.stdin, limit, "<stdin>", kind)
        text = data.encode("utf-8", "surrogateescape") if isinstance(data, str) else data
        return decode_input(text, "<stdin>", what), "<stdin>"
    try:
        info = os.stat(source)
        if stat.S_ISDIR(info.st_mode):
            raise UsageError("is a folder, not a file; name the file inside it.", file=source)
        if stat.S_ISREG(info.st_mode) and info.st_size > limit:
            raise _too_big(source, kind, limit)
        with open(source, "rb") as handle:
            data = _read_capped(handle, limit, source, kind)
    except FileNotFoundError:
        raise UsageError("no such file.", file=source) from None
    except OSError as exc:
        raise UsageError(f"cannot read: {exc.strerror}.", file=source) from None
    return decode_input(data, source, what), source


def decode_input(data: bytes, label: str, what: str = "") -> str:
    """UTF-8 text, or a usage error saying where the binary or non-UTF-8 data starts."""
    lead = f"not {what}: " if what else ""
    nul = data.find(b"\0")
    if nul >= 0:
        line = data.count(b"\n", 0, nul) + 1
        raise UsageError(f"{lead}binary data (a NUL byte at offset {nul}), not text.", file=label, line=line)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise UsageError(f"{lead}not UTF-8 text (byte 0x{data[exc.start]:02x} at offset {exc.start}).",
                         file=label, line=line) from None


def _read_capped(stream: IO[AnyStr], limit: int, label: str, kind: str) -> AnyStr:
    # One byte past the limit tells "exactly at the limit" from "more": /dev/zero and endless
    # pipes stop here instead of filling memory.
    data = stream.read(limit + 1)
    if len(data) > limit:
        raise _too_big(label, kind, limit)
    return data


def _too_big(label: str, kind: str, limit: int) -> UsageError:
    return UsageError(
        f"larger than the {limit // MiB} MiB limit for {kind.replace('-', ' ')} input.",
        file=label, hint="Check that this is the file you meant (see 'Input limits' in the README).",
    )

