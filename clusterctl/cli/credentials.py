"""Secrets the user hands to a run: the sudo password, a key passphrase, a login password.

Each comes from, in order: a prompt (``--ask-sudo-pass``, ``--ask-key-passphrase``,
``--ask-pass``; read without echo from the terminal, or one line from stdin when stdin is
not a terminal, so ``pass show x | clusterctl --ask-sudo-pass ...`` works), the environment
variable (``CLUSTERCTL_SUDO_PASS``, ...), or a file named by ``..._FILE`` that only its
owner may read (mode 0600 or stricter, as ssh demands of private keys). Never from an
option's argument: that would show in ``ps`` and in shell history. Every value becomes a
``Secret`` at once, so it is masked wherever it could be printed or logged.
"""

from __future__ import annotations

import os
import sys

from clusterctl.errors import UsageError
from clusterctl.secret import Secret, read_secret_file


def read_secret(label: str, env: str, *, ask: bool) -> Secret | None:
    """The ``label`` (a sudo password) from the prompt (when ``ask``), the environment variable ``env``, or the
    0600 file ``env``_FILE names; else None."""
    if ask:
        return Secret(_prompt(f"{label}: "), label)
    value = os.environ.get(env)
    if value:
        return Secret(value, label)
    path = os.environ.get(f"{env}_FILE")
    if path:
        return Secret(read_secret_file(path, label, f"{env}_FILE={path}")[0], label)
    return None


def _prompt(text: str) -> str:
    if sys.stdin is not None and sys.stdin.isatty():
        import getpass

        return getpass.getpass(text)
    line = sys.stdin.readline() if sys.stdin is not None else ""
    if not line:
        raise UsageError(f"{text.rstrip(': ')} was asked for, but stdin is closed and there is no terminal")
    return line.rstrip("\r\n")
