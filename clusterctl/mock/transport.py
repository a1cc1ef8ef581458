"""A host that replays a recorded profile over simulated tools, with state that lasts.

Used by tests, the demo inventory and CI dry-runs: no network, no GPU. Profile rules answer
first; what they do not answer is run by the mock shell and the simulated tools
(``clusterctl.mock``). Files written with ``put``, services started, packages installed and
``set_state`` values are kept in the host's state folder, so the next ``clusterctl`` process
finds them (``clusterctl mock reset`` forgets them).
"""

from __future__ import annotations

import contextlib
import os
import secrets
import stat
import threading
import time
from contextlib import AbstractContextManager
from pathlib import Path
from typing import TYPE_CHECKING

from clusterctl.errors import UsageError
from clusterctl.mock.machine import MockMachine, SimulatedFailure
from clusterctl.mock.power import powered_off
from clusterctl.mock.profile import Profile, load_profile
from clusterctl.mock.state import ReadOnlyViolation, StateError, read_only
from clusterctl.mock.turns import simulating
from clusterctl.secret import mask_text
from clusterctl.transport.base import (
    CommandResult,
    Exclusive,
    FailureKind,
    PutRequest,
    PutResult,
    RunRequest,
    Transport,
    TransportError,
    env_prefix,
)
from clusterctl.wording import seconds

if TYPE_CHECKING:
    from clusterctl.inventory.model import Host


def state_folder_for(host: Host, profile: Profile) -> Path:
    """The mock cluster state folder of ``host``: the inventory's choice, else a default per profile."""
    if getattr(host, "mock_state", None):
        return Path(str(host.mock_state))
    from clusterctl.inventory.mock_state import default_state_folder

    return default_state_folder(None, str(profile.root))


class MockTransport(Transport):
    """Answers commands from a profile and the simulated tools; state lives in the host's state folder."""

    def __init__(self, host: Host, profile: Profile | None = None, *, state_folder: Path | str | None = None) -> None:
        super().__init__(host)
        if profile is None:
            if not host.profile:
                raise UsageError(f"host {host.name} uses the mock transport but names no profile", field="profile")
            profile = load_profile(host.profile)
        self.profile = profile
        self.state_folder = Path(state_folder) if state_folder is not None else state_folder_for(host, profile)
        self._machine: MockMachine | None = None
        #: Every command line this host was asked to run, in order (tests and dry-run read it); each
        #: line is added by one ``list.append``, which threads need no lock for.
        self.history: list[str] = []
        self._lock = threading.Lock()
        self._closed = False

    @property
    def machine(self) -> MockMachine:
        """The simulated machine (its state is created on first use)."""
        with simulating(), self._lock:
            if self._machine is None:
                try:
                    self._machine = MockMachine.open(self.profile, self.state_folder, self.host.name)
                except (StateError, OSError) as exc:
                    raise TransportError(FailureKind.ERROR, f"mock state of {self.host.name}: {exc}") from exc
            return self._machine

    def burst(self) -> AbstractContextManager[None]:
        """The simulator keeps this host's turn for the whole burst (``clusterctl.mock.turns``)."""
        return simulating()

    def execute(self, request: RunRequest) -> CommandResult:
        command, timeout, env, stdin = request.command, request.timeout, request.env, request.stdin
        if self._closed:
            raise TransportError(FailureKind.ERROR, "connection closed")
        start = time.monotonic()
        # Like ssh, the environment travels as an ``export A='x'; `` prefix of the command
        # line, so rules can match on it (a fake nccl-tests answering per NCCL_ALGO).
        command = env_prefix(env) + command
        self.history.append(mask_text(command))
        # A command asked through a read-only view may not change the simulated host (a real
        # host cannot tell): the caller is told, naming the command, and the host stays as it was.
        guard = read_only(command) if request.read_only else contextlib.nullcontext()
        try:
            with simulating():  # one turn for the command, the host's first-use seeding included
                machine = self.machine  # seeded before the guard: a fresh host writes its state once
                self._answering()
                with guard:
                    result = machine.run_line(command, stdin or b"", timeout=timeout)
        except ReadOnlyViolation as exc:
            raise TransportError(FailureKind.ERROR, str(exc)) from None
        except SimulatedFailure as exc:
            kind = FailureKind(exc.kind)
            if kind is FailureKind.TIMED_OUT:
                message = f"no answer within {seconds(timeout)}: {command}" if timeout else str(exc)
                raise TransportError(kind, message) from None
            raise TransportError(kind, "simulated failure") from None
        if request.on_line is not None:
            # The recorded output is handed on line by line, as a real host's would arrive.
            from clusterctl.transport.output import splitters

            for lines, text in zip(splitters(request.on_line), (result.stdout, result.stderr), strict=True):
                assert lines is not None
                lines.add(text.encode())
                lines.flush()
        return CommandResult(command, result.stdout, result.stderr, result.exit_code,
                             round(time.monotonic() - start, 4))

    def write(self, request: PutRequest) -> PutResult:
        """As over ssh: atomic, a unique backup of the old content, an existing file keeps its mode."""
        path, data, mode, backup = request.path, request.data, request.mode, request.backup
        fs = self.machine.host.fs
        self.history.append(f"# put {path} ({len(data)} bytes, mode {mode or 0o644:o})")
        try:
            parent, _, name = path.rpartition("/")
            if not fs.is_dir(parent or "/"):
                raise TransportError(
                    FailureKind.COMMAND_FAILED,
                    f"could not write {path} (exit 1): mktemp: failed to create file via template "
                    f"'{parent}/.{name}.clusterctl-tmp.XXXXXX': No such file or directory",
                )
            old = fs.read(path)
            current_mode = stat.S_IMODE(os.stat(fs.local(path)).st_mode) if old is not None else None
            if old == data and (mode is None or mode == current_mode):
                return PutResult(path=path, changed=False)
            backup_path = None
            if old is not None and backup:
                stamp = time.strftime("%Y%m%d%H%M%S", time.gmtime())
                backup_path = f"{path}.bak.{stamp}.{secrets.token_hex(3)}"
                fs.write(backup_path, old, mode=current_mode or 0o644)
            fs.write(path, data, mode=mode if mode is not None else (current_mode or 0o644))
        except StateError as exc:
            raise TransportError(FailureKind.COMMAND_FAILED, f"could not write {path}: {exc}") from None
        return PutResult(path=path, changed=True, backup_path=backup_path)

    def _answering(self) -> None:
        if powered_off(self.machine.host):
            # As ssh would find it: no route, no answer (clusterctl.mock.power).
            raise TransportError(FailureKind.UNREACHABLE, "no answer (switched off)")

    def create_exclusive_then(self, path: str, data: bytes, command: str | None, *, sudo: bool = False) -> Exclusive:
        """Create ``path`` only if absent (``O_EXCL`` in the host's tree: racing processes agree), then ``command``."""
        self.history.append(f"# create {path} ({len(data)} bytes)")
        self._answering()  # a host switched off takes no lock, as over ssh
        made_folder = not self.machine.host.fs.is_dir(path.rsplit("/", 1)[0] or "/")
        try:
            held = self.machine.host.fs.create_exclusive(path, data)
        except StateError as exc:
            raise TransportError(FailureKind.COMMAND_FAILED, f"could not create {path}: {exc}") from None
        if held is not None:
            return Exclusive(held, None)
        return Exclusive(None, self.run(command, sudo=sudo) if command else None, made_folder=made_folder)

    def remove(self, path: str, *, sudo: bool = False) -> None:
        self.history.append(f"# remove {path}")
        try:
            self.machine.host.fs.remove(path)
        except (StateError, IsADirectoryError) as exc:
            raise TransportError(FailureKind.COMMAND_FAILED, f"could not remove {path}: {exc}") from None

    def get(self, path: str, *, sudo: bool = False) -> bytes | None:
        return self.machine.host.fs.read_inside(path)

    def close(self) -> None:
        self._closed = True
