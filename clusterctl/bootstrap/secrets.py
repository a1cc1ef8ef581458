"""Secrets a bootstrap run is given (registry credentials, a pre-made join token or certificate key).

They come from the environment or from a file, never from the inventory or the command line
(both end up in shell history, tickets and git), and are wrapped in ``Secret`` at once, so
every output, plan, ``--out`` file, log line and progress file shows them masked.
"""

from __future__ import annotations

import os
from pathlib import Path

from clusterctl.errors import UsageError
from clusterctl.secret import Secret


def read_secret(label: str, *, env: str | None = None, file: str | None = None) -> Secret | None:
    """The secret from ``$env`` (first) or the first line of ``file``; None when neither is set."""
    if env and os.environ.get(env):
        return Secret(os.environ[env].strip(), label)
    if file:
        path = Path(file).expanduser()
        try:
            text = path.read_text()
        except OSError as exc:
            raise UsageError(f"cannot read the {label} ({exc.strerror})", file=str(path)) from None
        value = text.strip().splitlines()[0].strip() if text.strip() else ""
        if not value:
            raise UsageError(f"the {label} file is empty", file=str(path))
        mode = path.stat().st_mode & 0o077
        if mode:
            raise UsageError(f"the {label} file can be read by other users (mode {path.stat().st_mode & 0o777:o})",
                             file=str(path), hint=f"chmod 600 {path}")
        return Secret(value, label)
    return None
