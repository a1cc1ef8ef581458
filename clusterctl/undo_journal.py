"""What a run changed on hosts, kept on the control machine so that ``clusterctl undo FILE`` can revert it.

The gate keeps what undo needs in memory (``GateRecord``: the backup path of a replaced file,
the fact that a file was new, a command's undo command). This writes those records of one
run to a small JSON file and reads them back, so an undo works after the run has ended:
``tune-nccl --push`` names its journal, ``clusterctl undo JOURNAL`` restores each host's files
from their backups through the same gate.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shlex
import threading
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from clusterctl.changes import Change, ChangeKind, Gate, GateRecord, UndoLine
from clusterctl.errors import UsageError
from clusterctl.hostlist import compress
from clusterctl.json_input import MAX_PATH, flag, items, join, mapping, read_json, text, versioned
from clusterctl.utc import epoch, file_stamp, utc_stamp
from clusterctl.writable import replace_file, state_dir

if TYPE_CHECKING:
    from clusterctl.fanout import FleetResult, Runner
    from clusterctl.inventory.model import Host
    from clusterctl.transport.base import Transport

JOURNAL_KIND = "clusterctl.undo"
#: 2 adds what each change made (``makes``, for ``clusterctl reset``) and the fleet the run was on.
JOURNAL_VERSION = 2
#: Versions this clusterctl reads (``clusterctl undo`` takes a version-1 journal as it always did).
READABLE_VERSIONS = (1, 2)
#: A file's mode as a journal keeps it (``644``, ``0600``).
_MODE = re.compile(r"[0-7]{1,4}")
T = TypeVar("T")


def undo_line(journal: object) -> str:
    """The line every command that wrote ``journal`` ends with: the command to undo it, quoted to be pasted."""
    return f"undo with: clusterctl undo {shlex.quote(str(journal))}"


def changed_on(record: GateRecord) -> str:
    """The host a record changed: the node a change through a cluster's API was about (``Change.node``),
    else the host it ran on. What ``undo --list`` names, ``undo -l`` selects and a journal's ``used`` keeps."""
    return record.change.node or record.change.host


def undoable(records: Sequence[GateRecord]) -> list[GateRecord]:
    """The records that changed a host for good (applied, not already as wanted, not temporary, not failed)."""
    return [r for r in records if r.applied and r.changed and not r.temporary and not r.failed]


def record_json(record: GateRecord) -> dict[str, Any]:
    change = record.change
    data: dict[str, Any] = {"host": change.host, "summary": change.summary, "kind": change.kind.value,
                            "sudo": change.sudo}
    if change.kind is ChangeKind.WRITE_FILE:
        mode = None if change.mode is None else f"{change.mode:o}"
        # The gate's put keeps a backup of every file it replaces: none kept means there was no file, even
        # where the phase's read took a missing file for an empty one.
        new_file = change.current is None or (record.backup_path is None and change.backup)
        data.update(path=change.path, mode=mode, backup_path=record.backup_path, new_file=new_file,
                    # What the file held right after the write: undo refuses to touch it if it changed since.
                    sha256=record.written_sha256 or hashlib.sha256(change.content or b"").hexdigest())
    else:
        data.update(undo_command=change.undo_command, **({"node": change.node} if change.node else {}))
        if change.cannot_undo:
            data["cannot_undo"] = change.cannot_undo
    if change.makes:
        data["makes"] = list(change.makes)
    return data


def _pending_json(change: Change) -> dict[str, Any]:
    """A change written down before it reaches its host: it may or may not have happened."""
    data = record_json(GateRecord(change, applied=True, changed=True))
    if change.kind is ChangeKind.WRITE_FILE:
        data["new_file"] = change.current is None
        if change.current is not None:  # a file that still holds this was never written: nothing to undo
            data["previous_sha256"] = hashlib.sha256(change.current).hexdigest()
    data["pending"] = True
    return data


#: How long an interrupted run's journal waits for the changes that were on their way to their hosts
#: (their commands are stopped with the run: this is the time a write takes to return, not to finish).
SETTLE_S = 10.0


class WriteAheadJournal:
    """The undo journal of one run, written as the run goes: each change before it reaches its host.

    The folder is checked when the journal is made (before any change: a folder that cannot be made
    stops the command, not a half-done change) and the file is made with the first change. While
    the run goes the file is a log, one JSON line per event (``pending`` before a change, ``done``
    after it); ``finish`` replaces it with the whole journal. A run killed before ``finish`` leaves the
    log, which ``read_journal`` reads too: a change it shows pending is undone as if it had been made
    (a command's undo, a new file removed only if it holds what was written).
    """

    def __init__(self, *, command: str, folder: str | Path, cluster: str | None = None,
                 fleet: str | None = None, now: float | None = None) -> None:
        self.command, self.cluster, self.fleet, self.now = command, cluster, fleet, now
        self.folder = Path(folder)
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise UsageError(f"cannot make the undo journal's folder ({exc.strerror}): nothing was changed",
                             file=str(self.folder)) from exc
        if not os.access(self.folder, os.W_OK | os.X_OK):
            raise UsageError("cannot write the undo journal there: nothing was changed", file=str(self.folder))
        self.path: Path | None = None
        self._lock = threading.Lock()
        #: Signalled whenever a change's outcome is known (``after``, ``cut_off``).
        self._settled = threading.Condition(self._lock)
        self._pending: dict[int, dict[str, Any]] = {}
        #: Entries whose change is on its way to the host (``before`` without ``after`` or ``cut_off`` yet).
        self._open: set[int] = set()
        #: Each entry's record (from ``after``), when it left something to undo.
        self._done: dict[int, GateRecord] = {}
        #: Temporary changes (``temporary``) not cleaned up yet, and those cleaned up (``cleaned``).
        self._temporaries: dict[int, dict[str, Any]] = {}
        self._cleaned: dict[int, dict[str, Any]] = {}
        self._finished = False
        self._count = 0

    def _append(self, event: dict[str, Any]) -> None:
        if self.path is None:
            self.path = _new_journal_path(self.folder, self.command, self.now)
            header = {"kind": JOURNAL_KIND, "version": JOURNAL_VERSION, "command": self.command, "partial": True,
                      "created": utc_stamp(self.now), "cluster": self.cluster, "fleet": self.fleet}
            self._write(json.dumps(header) + "\n", mode="x")
        self._write(json.dumps(event) + "\n", mode="a")

    def _write(self, text: str, *, mode: str) -> None:
        assert self.path is not None
        try:
            with self.path.open(mode) as handle:
                handle.write(text)
                handle.flush()
                os.fsync(handle.fileno())
        except OSError as exc:
            raise UsageError(f"cannot write the undo journal ({exc.strerror}): the change was not made",
                             file=str(self.path)) from exc

    def _new_entry(self, change: Change, key: str, data: dict[str, Any], kept: dict[int, dict[str, Any]]) -> int:
        """``change``'s entry (under the lock): written down as ``key``, ``data`` kept in ``kept`` by its number;
        refused once the journal is finished."""
        if self._finished:  # a worker the interrupted run gave up on: the journal is closed, so no change
            raise UsageError(f"the undo journal is finished (the run stopped): not made: {change.summary}",
                             file=str(self.path or self.folder))
        self._count += 1
        self._append({"entry": self._count, key: data})
        kept[self._count] = data
        return self._count

    def before(self, change: Change) -> int:
        with self._lock:
            entry = self._new_entry(change, "pending", _pending_json(change), self._pending)
            self._open.add(entry)
            return entry

    def temporary(self, change: Change) -> int:
        """A temporary change (verify's GPU test pod), written down before it is set up: its undo is its
        clean-up, kept in the journal until ``cleaned``."""
        with self._lock:
            data = {**record_json(GateRecord(change, applied=True, changed=True)), "temporary": True}
            return self._new_entry(change, "temporary", data, self._temporaries)

    def cleaned(self, entry: int) -> None:
        """The temporary change of ``entry`` is cleaned up: nothing of it is left for undo."""
        with self._lock:
            data = self._temporaries.pop(entry, None)
            if data is None:
                return
            self._cleaned[entry] = {**data, "cleaned": True}
            if not self._finished:
                self._append({"entry": entry, "cleaned": True})

    def after(self, entry: int, record: GateRecord) -> None:
        with self._lock:
            self._pending.pop(entry, None)
            self._open.discard(entry)
            if undoable([record]):
                self._done[entry] = record
            self._settled.notify_all()
            if self._finished:  # the journal is written whole already (``finish`` waited as long as it may)
                return
            self._append({"entry": entry, "failed": True} if record.failed else
                         {"entry": entry, "done": record_json(record)})

    def cut_off(self, entry: int) -> None:
        """The change was cut off on its way (its command interrupted): whether it reached the host is not
        known, so it stays in the journal as pending, undone as if it had been made."""
        with self._lock:
            self._open.discard(entry)
            self._settled.notify_all()

    def finish(self, kept: Sequence[GateRecord], *, interrupted: str | None = None) -> Path | None:
        """Replace the log with the journal of what the run ``kept`` (and, interrupted, the changes it cut
        off half-way), with the temporary changes not cleaned up; ``None`` and no file when nothing is
        left to undo. An interrupted run's journal also names the temporary changes it cleaned up (after
        an interrupt, the user is told where its journal is: it says what happened, even if nothing is left).

        Interrupted, it first waits (up to ``SETTLE_S``) for the changes still on their way to their hosts:
        a file written just as Ctrl-C came is then journaled with the backup its write kept (a pending
        entry knows none), and one cut off stays pending."""
        with self._lock:
            changes = [record_json(r) for r in undoable(kept)]
            if interrupted:
                waiting = set(self._open)
                self._settled.wait_for(lambda: not waiting & self._open, timeout=SETTLE_S)
                late = [self._done[e] for e in sorted(waiting) if e in self._done]
                changes += [record_json(r) for r in late if not any(r is k for k in kept)]
                changes += list(self._pending.values())
            changes += list(self._temporaries.values())
            if interrupted:
                changes += list(self._cleaned.values())
            self._finished = True
            if self.path is None:
                return None
            if not changes:
                self.path.unlink(missing_ok=True)
                self.path = None
                return None
            payload: dict[str, Any] = {"kind": JOURNAL_KIND, "version": JOURNAL_VERSION, "command": self.command,
                                       "created": utc_stamp(self.now), "changes": changes}
            payload.update({key: value for key, value in (("cluster", self.cluster), ("fleet", self.fleet),
                                                          ("interrupted", interrupted or None)) if value is not None})
            try:
                replace_file(self.path, json.dumps(payload, indent=2) + "\n")
            except OSError as exc:
                raise UsageError(f"cannot write the undo journal ({exc.strerror}); its log stays there",
                                 file=str(self.path)) from exc
            return self.path


def _new_journal_path(folder: Path, command: str, now: float | None) -> Path:
    """``FOLDER/<command>-YYYYmmdd-HHMMSS[-N].json``, made here (exclusively: two runs in one second keep two)."""
    stamp = file_stamp(now)
    slug = "-".join(command.replace("--", "").split())
    serial = 1
    while True:
        path = folder / (f"{slug}-{stamp}.json" if serial == 1 else f"{slug}-{stamp}-{serial}.json")
        if not path.exists():
            return path
        serial += 1


@dataclass(frozen=True)
class Journal:
    """One journal as written: what ran, on which fleet, its records, and the hosts already reverted with it."""

    path: Path
    version: int
    command: str
    created: str
    cluster: str | None
    fleet: str | None
    used: dict[str, str]
    records: list[GateRecord]


def read_journal(path: str | Path, folder: Path | None = None) -> Journal:
    """A whole journal; bad files are a ``UsageError`` naming the file (and the field), a missing one the
    folder where the journals are (``folder``: the state folder's ``undo/`` the command was given)."""
    where = str(path)
    if not Path(where).exists():
        raise UsageError("no such undo journal", file=where, hint=f"Journals are kept in "
                         f"{folder or state_dir() / 'undo'} ('clusterctl undo --list' lists them).")

    def shape(value: Any) -> Journal:
        data = versioned(value, JOURNAL_KIND, READABLE_VERSIONS, key="version")
        used = data.get("used")
        return Journal(Path(path), int(data["version"]), str(data.get("command") or ""),
                       str(data.get("created") or ""), _text_or_none(data.get("cluster")),
                       _text_or_none(data.get("fleet")),
                       {str(k): str(v) for k, v in used.items()} if isinstance(used, dict) else {},
                       list(items(data.get("changes") or [], "changes", _record_from_json)))

    return _read(where, shape, folder)


def journals_in(folder: Path, pattern: str = "*.json") -> tuple[list[Journal], dict[str, str]]:
    """The journals under ``folder`` (``<state dir>/undo``), oldest first, and those that cannot be read
    (path -> why). Oldest by the moment each was written (an earlier release wrote local time), then by
    name (two runs in one second: NAME-2.json): the one order of reset, ``undo --last`` and ``--list``."""
    journals: list[Journal] = []
    unreadable: dict[str, str] = {}
    for path in sorted(folder.glob(pattern)) if folder.is_dir() else []:
        try:
            journals.append(read_journal(path))
        except UsageError as exc:
            unreadable[str(path)] = exc.message
    journals.sort(key=lambda j: (epoch(j.created) or 0.0, len(j.path.name), j.path.name))
    return journals, unreadable


def newest_journal(folder: Path, kind: str | None, cluster: str, hosts: Collection[str] | None = None) -> Journal:
    """``undo --last [KIND]``: the newest journal in ``folder`` of ``cluster`` (or naming none), of the runs of
    ``kind`` when given (the command's first word, ``quarantine``, or the whole command, ``bootstrap phase
    kernel``), that changed one of ``hosts`` when given (``-l``: ``changed_on``)."""
    journals, _ = journals_in(folder)
    mine = [j for j in journals if (kind is None or kind in (j.command, j.command.split(" ", 1)[0]))
            and j.cluster in (None, cluster) and (hosts is None or any(changed_on(r) in hosts for r in j.records))]
    if not mine:
        kinds = ", ".join(sorted({j.command.split(" ", 1)[0] for j in journals})) or "none"
        of = f"{kind!r} " if kind else ""
        of += f"undo journal that changed {compress(sorted(hosts))}" if hosts is not None else "undo journal"
        raise UsageError(f"--last: no {of} in {folder} (kinds there: {kinds}).",
                         hint="'clusterctl undo --list' lists those there; --state-dir names another state folder.")
    return mine[-1]


def _read(where: str, shape: Callable[[Any], T], folder: Path | None = None) -> T:
    # A log is the journal of a run that was stopped before it finished it.
    return read_json(where, "state", "a clusterctl undo journal", shape, decode=_from_log if _is_log(where) else None,
                     hint="Give 'clusterctl undo' the file a command named after 'undo with:' (journals are kept "
                     f"in {folder or state_dir() / 'undo'}); a damaged journal cannot be replayed: revert its changes "
                     "by hand from the backups next to each file it wrote (FILE.bak.<time>.*).")


def _is_log(path: str) -> bool:
    """Whether ``path`` is a journal still in its log form (``WriteAheadJournal``'s header first)."""
    try:
        with open(path, "rb") as handle:
            head = handle.readline(4096)
    except OSError:
        return False  # read_json says what is wrong
    return head.startswith(b'{"kind"') and b'"partial": true' in head


def _from_log(text: str) -> dict[str, Any]:
    """A journal still in its log form (the run was killed before it finished): header, then events.

    A change with no ``done`` line is kept as pending (it may have reached its host); a failed one
    is left out (it did not happen). A last line cut short by the kill is ignored."""
    lines = text.splitlines()
    data = json.loads(lines[0])
    changes: dict[int, Any] = {}
    for line in lines[1:]:
        try:
            event = json.loads(line)
            entry = int(event.get("entry", 0))
        except (ValueError, TypeError, AttributeError):
            continue
        # Each event is one of: a change on its way (pending, temporary), its outcome (done), or its end
        # (cleaned, failed).
        written = next((key for key in ("pending", "temporary", "done") if key in event), None)
        if written is not None:
            changes[entry] = event[written]
        elif event.get("cleaned") or event.get("failed"):
            changes.pop(entry, None)
    data["changes"] = [changes[k] for k in sorted(changes)]
    return dict(data)


def _text_or_none(value: object) -> str | None:
    return value if isinstance(value, str) else None


def _record_from_json(value: Any, field: str) -> GateRecord:
    item = mapping(value, field, required=("host", "summary", "kind", "sudo"))

    def word(key: str, **how: Any) -> Any:
        """The text at ``key``; ``None`` for a null or missing one where the record may leave it out."""
        optional = item.get(key) is None and key not in ("host", "summary", "kind", "path")
        return None if optional else text(item.get(key), join(field, key), **how)

    host, summary, sudo = word("host"), word("summary", line=False), flag(item["sudo"], join(field, "sudo"))
    makes = tuple(str(m) for m in item.get("makes") or ())
    if word("kind", choices=tuple(k.value for k in ChangeKind)) == ChangeKind.WRITE_FILE:
        # Undo needs where the file is, its mode, whether it was new and where its backup is;
        # the content itself stays on the host, in the backup.
        mapping(item, field, required=("path", "new_file"))
        mode = word("mode", pattern=_MODE, meaning="a file mode")
        change = Change(host, summary, ChangeKind.WRITE_FILE, path=word("path", limit=MAX_PATH), content=b"",
                        current=None if flag(item["new_file"], join(field, "new_file")) else b"\0",
                        mode=int(mode, 8) if mode else None, sudo=sudo, makes=makes)
        previous = word("previous_sha256") if item.get("pending") else None
        return GateRecord(change, applied=True, changed=True, backup_path=word("backup_path", limit=MAX_PATH),
                          written_sha256=word("sha256"), previous_sha256=previous)
    undo = word("undo_command", line=False)
    change = Change(host, summary, ChangeKind.RUN_COMMAND, command=summary, undo_command=undo, sudo=sudo, makes=makes,
                    cannot_undo=word("cannot_undo", line=False), node=word("node"))
    return GateRecord(change, applied=True, changed=True, cleaned_up=bool(item.get("cleaned")))


def mark_journal_used(path: str | Path, hosts: Sequence[str]) -> None:
    """Note in the journal that these hosts were reverted with it: replaying it later would delete or
    overwrite what was made since (a file created again), so the next undo refuses without --force."""
    if not hosts:
        return
    target = Path(path)
    # The log of a run killed before it finished its journal becomes the journal it stands for.
    data = _read(str(target), lambda value: dict(mapping(value, "")))
    data.pop("partial", None)
    used = data["used"] if isinstance(data.get("used"), dict) else {}
    data["used"] = {**used, **dict.fromkeys(hosts, utc_stamp())}
    try:
        replace_file(target, json.dumps(data, indent=2) + "\n")
    except OSError as exc:
        raise UsageError(f"cannot mark the undo journal as used ({exc.strerror})", file=str(target)) from exc


def undo_on_hosts(runner: Runner, hosts: Sequence[Host], records: Sequence[GateRecord], *, apply: bool,
                  force: bool = False) -> FleetResult[list[UndoLine]]:
    """Revert ``records`` on those of ``hosts`` they concern, newest change first; one line per change.

    Journal hosts not in ``hosts`` are left alone; none of them there is a ``UsageError``.
    """
    by_host: dict[str, list[GateRecord]] = {}
    for record in records:
        by_host.setdefault(record.change.host, []).append(record)
    targets = [h for h in hosts if h.name in by_host]
    if not targets:
        raise UsageError(f"the journal changed {', '.join(sorted(by_host)) or 'no host'}; none is in the inventory")

    gate = Gate(apply=apply)

    def task(transport: Transport) -> list[UndoLine]:
        # One code path for undo and its dry run: the gate works out each step and applies or records it.
        return gate.undo(transport, by_host[transport.host.name], force=force)

    return runner.run_task(targets, task, label="undo" if apply else "undo (dry run)")
