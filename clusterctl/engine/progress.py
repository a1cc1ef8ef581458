"""What a run has done, kept on the control machine so that ``--resume`` can skip it: the one progress file.

One JSON file per command and fleet, ``<state dir>/<command>/<cluster>-<fleet>.json`` (``RunPlace``:
bootstrap's, ``certs-renew``'s); the state dir is
``--state-dir``, else ``$CLUSTERCTL_STATE_DIR``, else ``$XDG_STATE_HOME/clusterctl``, else
``~/.local/state/clusterctl``. It is rewritten atomically (temporary file, then rename) after
every phase, so a crash or Ctrl-C leaves the last complete state. It holds phase names,
statuses and times, and the saved survey the run was given (``--survey FILE``: a ``--resume``
without one goes on with it); never a command, a diff or a value from the hosts, and the text is
passed through ``mask_text`` before it is written, so no secret can reach it.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from clusterctl.errors import UsageError
from clusterctl.json_input import matching, read_json
from clusterctl.secret import mask_text
from clusterctl.undo_journal import WriteAheadJournal
from clusterctl.utc import utc_stamp
from clusterctl.writable import replace_file
from clusterctl.writable import state_dir as chosen_state_dir

if TYPE_CHECKING:
    from clusterctl.inventory.model import Inventory

FORMAT_VERSION = 1
#: Statuses that mean "done": a resumed run verifies these and skips them.
DONE = ("ok", "changed")
#: A phase an interrupt cut short: never done, so --resume runs it again.
INTERRUPTED = "interrupted"


@dataclass(frozen=True)
class RunPlace:
    """Where one command's runs on one fleet keep their progress (``--resume``) and undo journals."""

    state_dir: Path
    cluster: str
    #: What identifies the fleet: the inventory file, the mock hosts' state folders.
    fleet: tuple[str, ...]
    #: The progress file's folder: ``bootstrap``, ``certs-renew``.
    command: str

    @classmethod
    def of(cls, inventory: Inventory, command: str, state_dir: str | None = None) -> RunPlace:
        base = Path(state_dir).expanduser() if state_dir else chosen_state_dir()
        fleet = (str(Path(inventory.source).resolve()) if inventory.source else inventory.name,
                 *sorted({str(h.mock_state) for h in inventory.hosts if h.mock_state}))
        return cls(base, inventory.name, fleet, command)

    @property
    def key(self) -> str:
        """A short digest of ``fleet``: the progress file's name and the undo journals' ``fleet`` carry it."""
        return hashlib.sha256("\0".join(self.fleet).encode()).hexdigest()[:10]

    @property
    def progress_path(self) -> Path:
        """The progress file of one fleet: the cluster name plus a digest of what identifies the fleet
        (the inventory file, the mock hosts' state folders), so two checkouts of one cluster name, or a
        mock fleet and its real twin, never share a record. The record stays a hint either way: a
        resumed run skips a phase only when the host confirms there is nothing to do."""
        safe = re.sub(r"[^A-Za-z0-9._-]", "_", self.cluster) or "cluster"
        return self.state_dir / self.command / f"{safe}-{self.key}.json"

    @property
    def journal_dir(self) -> Path:
        """Where every undo journal goes, whichever command wrote it: ``<state dir>/undo``."""
        return self.state_dir / "undo"

    def progress(self, *, apply: bool, resume: bool, first: str) -> ProgressStore | None:
        """The run's progress: the last run's to go on from (``resume``), else a fresh one; ``None`` for a run
        that does not apply, which keeps none to go on from. ``first``: the command to run when there is
        nothing to resume."""
        if resume and not apply:
            raise UsageError("--resume only makes sense for a run that applies (not with --dry-run or plan)")
        if not apply:
            return None
        path = self.progress_path
        if resume and not path.exists():
            raise UsageError(f"--resume: no progress file for cluster '{self.cluster}' at {path}",
                             hint=f"Run '{first}' first (or pass the same --state-dir).")
        return ProgressStore.load(path, self.cluster, self.command) if resume else ProgressStore(path, self.cluster)

    def last_progress(self) -> ProgressStore:
        """The progress the last run left (empty when none did; a damaged file is a ``UsageError``)."""
        return ProgressStore.load(self.progress_path, self.cluster, self.command)

    def journal(self, command: str) -> WriteAheadJournal:
        return WriteAheadJournal(command=command, folder=self.journal_dir, cluster=self.cluster, fleet=self.key)


class ProgressStore:
    """Per host and phase: the last status and when. Thread-safe; saved atomically."""

    def __init__(self, path: Path, cluster: str) -> None:
        self.path = path
        self.cluster = cluster
        self._lock = threading.Lock()
        self.hosts: dict[str, dict[str, dict[str, Any]]] = {}
        #: The saved survey (absolute path) the run was given: what its topology labels and alert
        #: rules were made from, so a resumed run goes on from the same one.
        self.survey: str | None = None
        #: What a command keeps about the run as a whole beside each host's phases (upgrade: its target,
        #: the nodes it cordoned); plain JSON values, no secret.
        self.run: dict[str, Any] = {}

    @classmethod
    def load(cls, path: Path, cluster: str, command: str = "bootstrap") -> ProgressStore:
        store = cls(path, cluster)
        if not path.exists():
            return store

        # hosts -> phases -> each phase's last status
        shape = {"type": "object", "required": ["hosts"], "properties": {"hosts": {
            "type": "object", "additionalProperties": {"type": "object", "additionalProperties": {"type": "object"}}}}}
        what = f"a clusterctl {command} progress file"
        raw = read_json(str(path), "state", what, lambda value: matching(value, shape), hint=(
            f"It only records which phases each host finished, for --resume: remove {path} and run {command} "
            "without --resume (a phase a host already has changes nothing), or pass the --state-dir of the run to "
            "resume."))
        store.hosts = {str(h): dict(p) for h, p in raw["hosts"].items()}
        survey = raw.get("survey")
        store.survey = survey if isinstance(survey, str) and survey else None
        run = raw.get("run")
        store.run = dict(run) if isinstance(run, dict) else {}
        return store

    def last(self, host: str, phase: str) -> dict[str, Any]:
        """What the host's last run of ``phase`` recorded (``{}``: none); ``engine.run.finished`` judges it."""
        with self._lock:
            return dict(self.hosts.get(host, {}).get(phase) or {})

    def forget(self, hosts: list[str]) -> None:
        """A fresh (not resumed) run starts these hosts' history again."""
        with self._lock:
            for host in hosts:
                self.hosts.pop(host, None)

    def record(self, host: str, phase: str, status: str, duration_s: float, message: str = "",
               skipped: str | None = None) -> None:
        """``skipped``: the name of the ``SkipReason`` of a skipped phase (``engine.run.finished`` reads it)."""
        entry: dict[str, Any] = {
            "status": status,
            "finished": utc_stamp(),
            "duration_s": round(duration_s, 3),
        }
        if message:
            entry["message"] = message[:300]
        if skipped:
            entry["skipped"] = skipped
        with self._lock:
            self.hosts.setdefault(host, {})[phase] = entry

    def save(self) -> None:
        with self._lock:
            payload = {"version": FORMAT_VERSION, "cluster": self.cluster, "updated": utc_stamp(), "hosts": self.hosts,
                       **{key: value for key, value in (("survey", self.survey), ("run", self.run)) if value}}
            text = mask_text(json.dumps(payload, indent=2, sort_keys=True) + "\n")
        replace_file(self.path, text, mode=0o600)
