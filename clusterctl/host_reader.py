"""The read-only view of a host that code which must not change anything gets (a phase's check, plan, verify).

A ``HostReader`` runs commands that read and reads files; it has no way to write a file, remove
one or take a lock, and asking is an error (``ReadOnlyHost``). Every change goes as a ``Change``
to the ``Gate`` instead, so that plan and dry-run stay true and undo knows about it.

A command line cannot be told apart from a changing one by looking at it, so commands run through
the reader are *marked* read-only (``RunRequest.read_only``): simulated hosts refuse one that
would change their state (``clusterctl.mock``: the phase fails, naming the command), and a real
host runs it as asked. Tests therefore catch a phase that changes a host from ``plan``; the
tests' ``assert_hosts_unchanged`` checks the whole state folder after every plan and dry-run.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, NoReturn, Protocol

from clusterctl.transport.base import RunRequest

if TYPE_CHECKING:
    from clusterctl.inventory.model import Host
    from clusterctl.transport.base import CommandResult, Transport


class ReadOnlyHost(Exception):
    """Something holding a read-only view tried to change the host."""


class KnownAnswers(Protocol):
    """Answers read before they were asked (``clusterctl.engine.read_ahead``), each given once."""

    def take(self, command: str, sudo: bool) -> CommandResult | None: ...


class HostReader:
    """Reads one host through its transport; never changes it."""

    def __init__(self, transport: Transport, *, what: str = "this step", known: KnownAnswers | None = None) -> None:
        self._transport = transport
        #: Answers already read in a batch with other steps' reads (a plain command, no env or stdin).
        self._known = known
        #: Who holds the view, for the error ("phase kernel (plan)").
        self.what = what
        #: Answers kept by ``remember()``, each given back once by ``run`` (see ``replay_once``).
        self._kept: dict[tuple[str, bool, tuple[tuple[str, str], ...], bytes | None], CommandResult] = {}
        self._keeping = False
        #: Every read made while a transcript runs (``start_transcript``), in order, as one shell
        #: line each and whether it ran as root; ``None`` when one could not be replayed as a line
        #: (it had input or its own environment).
        self.transcript: list[tuple[str, bool]] | None = None
        self._transcribing = False

    def remember(self) -> None:
        """From now on, keep every answer, so that ``replay_once`` can give it back."""
        self._keeping = True

    def replay_once(self, keep: bool) -> None:
        """Stop keeping answers; with ``keep`` False, forget them (the host changed since).

        A phase reads its host in ``check`` and again in ``verify``; when nothing was applied in
        between, the second read would only repeat the first, one round trip per phase and host
        (a no-op bootstrap on 1,000 hosts). Each kept answer is given back once, so a verify
        that polls (waits for a node) still reaches the host from its second try on.
        """
        self._keeping = False
        if not keep:
            self._kept.clear()

    def kept(self) -> dict[tuple[str, bool], CommandResult]:
        """The answers kept since ``remember()`` of plain commands (no environment, no input), by command and
        sudo: what a later reader of the host may be given as already read (``RunSettings.answered``)."""
        return {(command, sudo): result for (command, sudo, env, stdin), result in self._kept.items()
                if not env and stdin is None}

    def start_transcript(self) -> None:
        """From now on, note every read (``transcript``): what a later run replays as one batch
        to learn whether the host still answers as it did (``clusterctl.engine.confirm``)."""
        self.transcript = []
        self._transcribing = True

    def _note(self, line: str, sudo: bool, replayable: bool = True) -> None:
        if not self._transcribing:
            return
        if not replayable:
            self.transcript, self._transcribing = None, False
        elif self.transcript is not None and (line, sudo) not in self.transcript:
            self.transcript.append((line, sudo))

    @property
    def host(self) -> Host:
        return self._transport.host

    def run(self, command: str, *, sudo: bool = False, timeout: float | None = None,
            env: Mapping[str, str] | None = None, stdin: bytes | None = None) -> CommandResult:
        """Run a command that only reads (values in it already quoted)."""
        key = (command, sudo, tuple(sorted((env or {}).items())), stdin)
        self._note(command, sudo, replayable=not env and stdin is None)
        if not self._keeping and key in self._kept:
            return self._kept.pop(key)
        result = self._known.take(command, sudo) if self._known is not None and not env and stdin is None else None
        if result is None:
            result = self._transport.execute(RunRequest(command, sudo, timeout, env, stdin, read_only=True))
        if self._keeping and result.exit_code == 0:
            self._kept[key] = result
        return result

    def get(self, path: str, *, sudo: bool = False) -> bytes | None:
        """Content of ``path`` or ``None`` when there is no such file."""
        import shlex

        self._note(f"cat -- {shlex.quote(path)}", sudo)
        return self._transport.get(path, sudo=sudo)

    # What the read-only view refuses, with a message that says what to do instead.

    def put(self, path: str, *_: object, **__: object) -> NoReturn:
        raise ReadOnlyHost(f"{self.what} may not write {path} on {self.host.name}: return a Change.write_file "
                           "for the gate instead")

    def remove(self, path: str, *_: object, **__: object) -> NoReturn:
        raise ReadOnlyHost(f"{self.what} may not remove {path} on {self.host.name}: return a Change for the "
                           "gate instead")

    def create_exclusive(self, path: str, *_: object, **__: object) -> NoReturn:
        raise ReadOnlyHost(f"{self.what} may not create {path} on {self.host.name}: return a Change for the "
                           "gate instead")
