"""The one small interface every way of reaching a host implements.

A transport runs shell commands on one host and moves files to and from it. It never
raises for a command that ran and exited non-zero (that is data: ``CommandResult``); it
raises ``TransportError`` when the host could not be asked at all (unreachable, refused
host key, authentication, timeout), with a ``FailureKind`` a user can act on.
"""

from __future__ import annotations

import shlex
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import Enum
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from clusterctl.inventory.model import Host


class FailureKind(str, Enum):
    UNREACHABLE = "unreachable"
    AUTH_FAILED = "authentication failed"
    HOST_KEY_REFUSED = "host key refused"
    TIMED_OUT = "timed out"
    COMMAND_FAILED = "command failed"
    ERROR = "error"


class TransportError(Exception):
    def __init__(self, kind: FailureKind, message: str) -> None:
        self.kind = kind
        self.message = message
        super().__init__(f"{kind.value}: {message}")


@dataclass(frozen=True)
class CommandResult:
    command: str
    stdout: str
    stderr: str
    exit_code: int
    duration_s: float

    @property
    def ok(self) -> bool:
        return self.exit_code == 0

    def stderr_tail(self, lines: int = 5) -> str:
        return "\n".join(self.stderr.strip().splitlines()[-lines:])


@dataclass(frozen=True)
class PutResult:
    path: str
    #: False when the file already held exactly these bytes (nothing written).
    changed: bool
    #: Where the previous content was kept, if there was any.
    backup_path: str | None = None


def env_prefix(env: Mapping[str, str] | None) -> str:
    """``export A='x' B='y'; `` with every name checked and every value quoted."""
    if not env:
        return ""
    parts = []
    for name, value in env.items():
        if not name.replace("_", "a").isalnum() or name[0].isdigit():
            raise ValueError(f"not a valid environment variable name: {name!r}")
        parts.append(f"{name}={shlex.quote(str(value))}")
    return "export " + " ".join(parts) + "; "


def wrap_command(command: str, *, sudo: bool = False, env: Mapping[str, str] | None = None) -> str:
    """The exact shell line a transport runs for ``command``.

    With sudo the whole line, environment included, runs under ``sudo -n sh -c`` so that
    a password prompt can never hang a fleet run (``-n`` fails instead of asking).
    """
    line = env_prefix(env) + command
    if sudo:
        return "sudo -n sh -c " + shlex.quote(line)
    return line


def atomic_write_script(path: str, *, mode: int, backup: bool) -> str:
    """Shell that writes stdin to ``path`` atomically, keeping a backup of the old file.

    The data goes to a temporary file in the same folder (so ``mv`` is a rename on one
    file system) and replaces ``path`` only when it differs from what is there. It prints
    ``unchanged`` or ``changed``, and ``backup:PATH`` when it kept the old content.
    """
    q = shlex.quote(path)
    tmp = shlex.quote(path + ".clusterctl-tmp.") + "$$"
    keep = ": ; "
    if backup:
        keep = f'ts=$(date +%Y%m%d%H%M%S); cp -p {q} {q}.bak.$ts; echo "backup:"{q}.bak.$ts; '
    return (
        "set -e; "
        f"tmp={tmp}; "
        f'cat > "$tmp"; chmod {mode:o} "$tmp"; '
        f'if [ -f {q} ] && cmp -s "$tmp" {q}; then rm -f "$tmp"; echo unchanged; exit 0; fi; '
        f"if [ -f {q} ]; then {keep}fi; "
        f'mv -f "$tmp" {q}; echo changed'
    )


class Transport(ABC):
    """Reaches one host. Use as a context manager so connections are closed."""

    def __init__(self, host: Host) -> None:
        self.host = host

    @abstractmethod
    def run(
        self,
        command: str,
        *,
        sudo: bool = False,
        timeout: float | None = None,
        env: Mapping[str, str] | None = None,
        stdin: bytes | None = None,
    ) -> CommandResult:
        """Run a shell command line. Values in it must already be quoted by the caller."""

    def put(self, path: str, data: bytes, *, mode: int = 0o644, sudo: bool = False, backup: bool = True) -> PutResult:
        """Write ``data`` to ``path`` atomically (temporary file, then rename), keeping a backup."""
        script = atomic_write_script(path, mode=mode, backup=backup)
        result = self.run("sh -c " + shlex.quote(script), sudo=sudo, stdin=data)
        if not result.ok:
            raise TransportError(
                FailureKind.COMMAND_FAILED,
                f"could not write {path} (exit {result.exit_code}): {result.stderr_tail()}",
            )
        backup_path = None
        for line in result.stdout.splitlines():
            if line.startswith("backup:"):
                backup_path = line[len("backup:") :]
        return PutResult(path=path, changed="changed" in result.stdout.split(), backup_path=backup_path)

    def get(self, path: str, *, sudo: bool = False) -> bytes | None:
        """Content of ``path``, or ``None`` when there is no such file."""
        q = shlex.quote(path)
        result = self.run(f"if [ -e {q} ]; then cat {q}; else exit 3; fi", sudo=sudo)
        if result.exit_code == 3:
            return None
        if not result.ok:
            raise TransportError(
                FailureKind.COMMAND_FAILED, f"could not read {path} (exit {result.exit_code}): {result.stderr_tail()}"
            )
        return result.stdout.encode()

    def create_exclusive(self, path: str, data: bytes, *, sudo: bool = False) -> bytes | None:
        """Create ``path`` holding ``data`` only if it does not exist (``O_EXCL``: a lock file).

        Returns ``None`` when this call created it, else the content already there. Two callers
        racing for the same path never both get ``None``.
        """
        q = shlex.quote(path)
        folder = shlex.quote(path.rsplit("/", 1)[0] or "/")
        script = f"mkdir -p {folder} && if (set -C; cat > {q}) 2>/dev/null; then echo created; else cat {q}; exit 3; fi"
        result = self.run("sh -c " + shlex.quote(script), sudo=sudo, stdin=data)
        if result.exit_code == 3:
            return result.stdout.encode()
        if not result.ok or result.stdout.strip() != "created":
            raise TransportError(
                FailureKind.COMMAND_FAILED, f"could not create {path} (exit {result.exit_code}): {result.stderr_tail()}"
            )
        return None

    def remove(self, path: str, *, sudo: bool = False) -> None:
        """Remove ``path`` if it exists."""
        result = self.run(f"rm -f {shlex.quote(path)}", sudo=sudo)
        if not result.ok:
            raise TransportError(
                FailureKind.COMMAND_FAILED, f"could not remove {path} (exit {result.exit_code}): {result.stderr_tail()}"
            )

    def close(self) -> None:  # noqa: B027 - optional hook, most transports hold nothing
        """Release the connection, if any. Safe to call twice and from another thread."""

    def __enter__(self) -> Transport:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


#: Opens a transport to a host within a time limit (seconds); used by the fan-out.
Connector = Callable[["Host", float], Transport]
