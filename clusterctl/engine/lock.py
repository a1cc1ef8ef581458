"""A per-host lock so that two runs (bootstrap, upgrade, a push...) never interleave their changes on one host.

The lock is a small JSON file on the host (owner, control machine, PID, start time, run id),
created with ``O_EXCL`` semantics through the transport, so two runs racing for a host cannot
both win. A run that finds a lock refuses the host and says who holds it; when the holder looks
gone (its PID no longer runs on this control machine, or it is older than ``STALE_AFTER_S``) the
message says the lock looks stale. ``--force-unlock`` removes a lock before taking it.

The lock's folder is made by the lock itself, outside the gate and its journal: the run that made it
removes it as it gives its lock back, once empty (another run's lock or its file being written keeps
it), so no run leaves it behind and a folder that was there (an earlier clusterctl's) is never removed.
"""

from __future__ import annotations

import getpass
import json
import os
import shlex
import socket
import time
from dataclasses import dataclass
from typing import NamedTuple

from clusterctl.errors import ClusterctlError
from clusterctl.transport.base import CommandResult, FailureKind, Transport, TransportError
from clusterctl.utc import epoch, utc_stamp

DEFAULT_LOCK_PATH = "/var/lib/clusterctl/bootstrap.lock"
#: A lock older than this is reported as probably stale (no run takes six hours per host).
STALE_AFTER_S = 6 * 3600


class HostLocked(ClusterctlError):
    """Another run holds the host's lock."""


def who_runs_this() -> tuple[str, str]:
    """This run's user and control machine: a lock's owner, a quarantine's ``user@machine``."""
    try:
        user = getpass.getuser()
    except (KeyError, OSError):  # no passwd entry in some containers
        user = str(os.getuid())
    return user, socket.gethostname()


@dataclass(frozen=True)
class LockInfo:
    owner: str
    control_host: str
    pid: int
    started: str
    run_id: str

    @classmethod
    def mine(cls, run_id: str) -> LockInfo:
        return cls(*who_runs_this(), os.getpid(), utc_stamp(), run_id)

    def to_bytes(self) -> bytes:
        return (json.dumps(self.__dict__, sort_keys=True) + "\n").encode()

    @classmethod
    def parse(cls, data: bytes) -> LockInfo | None:
        try:
            raw = json.loads(data.decode(errors="replace"))
            return cls(str(raw["owner"]), str(raw["control_host"]), int(raw["pid"]), str(raw["started"]),
                       str(raw["run_id"]))
        except (ValueError, KeyError, TypeError):
            return None

    def describe(self) -> str:
        return f"{self.owner}@{self.control_host} (pid {self.pid}, since {self.started})"

    def stale_reason(self) -> str | None:
        """Why this lock looks abandoned, or ``None`` when its holder may still be running."""
        if self.control_host == socket.gethostname() and not _pid_alive(self.pid):
            return f"process {self.pid} no longer runs on {self.control_host}"
        started = epoch(self.started)
        if started is None:
            return "its start time is unreadable"
        age = time.time() - started
        if age > STALE_AFTER_S:
            return f"it was taken {age / 3600:.0f} h ago"
        return None


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class Taken(NamedTuple):
    """A lock this run holds: a note for the run ("" or "cleared the lock held by ..."), the result of the
    command run with it (``None`` where it did not run), whether taking it made its folder."""

    note: str
    result: CommandResult | None
    made_folder: bool = False


def acquire_then(transport: Transport, info: LockInfo, command: str | None, *, path: str = DEFAULT_LOCK_PATH,
                 force: bool = False) -> Taken:
    """Take the host's lock, and once it is this run's, ``command`` (under sudo; ``None``: none) in the same
    round trip where the lock was free.

    Raises ``HostLocked`` naming the holder when another run has it (and ``force`` is off).
    """
    held, result, made_folder = transport.create_exclusive_then(path, info.to_bytes(), command, sudo=True)
    if held is None:
        return Taken("", result, made_folder)
    other = LockInfo.parse(held)
    if other is not None and other.run_id == info.run_id:
        return Taken("", None)
    holder = other.describe() if other else f"an unreadable lock file {path}"
    if not force:
        stale = other.stale_reason() if other else "the lock file is unreadable"
        if stale:
            raise HostLocked(f"locked by {holder}; the lock looks stale ({stale}): rerun with --force-unlock "
                             f"to clear it")
        raise HostLocked(f"locked by {holder}: another clusterctl run is working on this host "
                         f"(--force-unlock clears the lock if that run is dead)")
    transport.remove(path, sudo=True)
    if transport.create_exclusive(path, info.to_bytes(), sudo=True) is not None:
        raise HostLocked(f"another run took the lock again right after --force-unlock cleared {holder}'s")
    return Taken(f"cleared the lock held by {holder}", None)


def release(transport: Transport, info: LockInfo, *, path: str = DEFAULT_LOCK_PATH, made_folder: bool = False) -> None:
    """Remove the lock if it is still ours (a forced unlock by someone else must not be undone), and the
    folder taking it made (``made_folder``) if nothing else is in it.

    One round trip: the host removes the file only if it names this run (the ``run_id`` field as
    ``to_bytes`` writes it), so releasing costs what taking the lock costs.
    """
    ours = shlex.quote(f'"run_id": {json.dumps(info.run_id)}')
    q = shlex.quote(path)
    folder = shlex.quote(path.rsplit("/", 1)[0] or "/")
    # rmdir removes it only when empty: another run's lock, or one being taken, keeps it.
    empty = f" && {{ rmdir {folder} 2>/dev/null || true; }}" if made_folder else ""
    result = transport.run(f"if grep -qF -- {ours} {q} 2>/dev/null; then rm -f {q}{empty}; fi", sudo=True)
    if not result.ok:
        raise TransportError(FailureKind.COMMAND_FAILED,
                             f"could not release the lock {path} (exit {result.exit_code}): {result.stderr_tail()}")
