"""A gate for a command that changes hosts in one step (quarantine, release, health --quarantine):
every change in the undo journal before it reaches its host, the journal finished however the
step ends.

The same write-ahead journal the phase runs keep (``undo_journal.WriteAheadJournal``): its folder
is checked before the first change (one that cannot be made stops the command with nothing
changed), each change is written down before it is made, and on Ctrl-C or SIGTERM the journal is
finished with what was made, and the interrupt's message names it. Changes that failed (an
eviction a budget refused) changed nothing and stay out of it.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from clusterctl.changes import Gate
from clusterctl.engine.progress import RunPlace
from clusterctl.errors import Interrupted

if TYPE_CHECKING:
    from clusterctl.inventory.model import Inventory


@dataclass
class JournaledGate:
    gate: Gate
    #: The finished journal (``clusterctl undo`` takes it); ``None``: nothing changed, or a dry run.
    journal: str | None = None


@contextlib.contextmanager
def journaled_gate(command: str, inventory: Inventory, *, apply: bool, state_dir: str | None = None,
                   interrupted: threading.Event | None = None) -> Iterator[JournaledGate]:
    """``with journaled_gate("quarantine", inventory, apply=True) as step: ...step.gate...``; ``step.journal``
    after (``interrupted``: the runner's, for phases run through this gate, ``RunSettings.gate``). The journal
    names the cluster and fleet and goes where a phase run's does (``RunPlace.journal``: one writer, one
    folder: ``<state dir>/undo``, ``state_dir`` the command's ``--state-dir``)."""
    journal = RunPlace.of(inventory, command, state_dir).journal(command) if apply else None
    step = JournaledGate(Gate(apply=apply, log=journal, interrupted=interrupted))
    try:
        yield step
    except BaseException as exc:  # an interrupt, a control plane gone mid-way: what was made stays undoable
        signal = exc.signal_name if isinstance(exc, Interrupted) else "error"
        path = journal.finish(step.gate.records, interrupted=signal) if journal is not None else None
        if path is not None and isinstance(exc, Interrupted):
            undo = f"to take back what {command} changed before it stopped: clusterctl undo {path}"
            exc.retry_hint = "\n".join(line for line in (exc.retry_hint, undo) if line)
        raise
    path = journal.finish(step.gate.records) if journal is not None else None
    step.journal = str(path) if path is not None else None
