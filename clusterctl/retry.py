"""The last run's failed hosts, for ``--limit @retry`` (Ansible's retry files, without the clutter).

Every command that reaches hosts rewrites one small file with the hosts that failed (or were
still running at Ctrl-C); ``--limit @retry`` selects exactly those next time. ``--limit @FILE``
reads host names from any file, one per line (``#`` comments allowed), as Ansible does.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable
from pathlib import Path

from clusterctl.errors import UsageError
from clusterctl.inputfile import read_text_input
from clusterctl.writable import replace_file, state_home

RETRY_NAME = "retry"


def retry_file() -> Path:
    """``$XDG_STATE_HOME/clusterctl/last-failed`` (default ``~/.local/state/clusterctl/last-failed``)."""
    return state_home() / "last-failed"


def record_failed(names: Iterable[str], inventory_source: str | None) -> None:
    """Replace the retry file with ``names``; never fails the command that called it."""
    path = retry_file()
    lines = [f"# failed hosts of the last clusterctl run (inventory: {inventory_source or '?'})", *names]
    with contextlib.suppress(OSError):  # a read-only home must not turn a good run into a failure
        replace_file(path, "\n".join(lines) + "\n")


def names_from(term: str) -> list[str]:
    """Host names a ``@retry`` or ``@FILE`` limit term stands for."""
    spec = term[1:]
    path = retry_file() if spec == RETRY_NAME and not Path(spec).exists() else Path(spec).expanduser()
    if spec == RETRY_NAME and not path.exists():
        raise UsageError("--limit @retry: no run has recorded failed hosts yet.")
    try:  # within the inventory's size limit: '@/dev/zero' stops there
        text = read_text_input(str(path), "inventory")[0]
    except UsageError as exc:
        raise UsageError(f"--limit {term}: {exc.message}", hint=exc.hint) from None
    names = [line.split("#", 1)[0].strip() for line in text.splitlines()]
    names = [n for n in names if n]
    if not names:
        what = "the last run had no failed host" if spec == RETRY_NAME else f"{path} names no host"
        raise UsageError(f"--limit {term}: {what}.")
    return names
