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
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from clusterctl.changes import Change, ChangeKind, GateRecord
from clusterctl.errors import UsageError

if TYPE_CHECKING:
    from clusterctl.fanout import FleetResult, Runner
    from clusterctl.inventory.model import Host
    from clusterctl.transport.base import Transport

JOURNAL_KIND = "clusterctl.undo"
#: 2 adds what each change made (``makes``, for ``clusterctl reset``) and the fleet the run was on.
JOURNAL_VERSION = 2
#: Versions this clusterctl reads (``clusterctl undo`` takes a version-1 journal as it always did).
READABLE_VERSIONS = (1, 2)
#: Where journals go unless a command is told otherwise (next to bench's results).
DEFAULT_FOLDER = Path("clusterctl-results") / "undo"


def undoable(records: Sequence[GateRecord]) -> list[GateRecord]:
    """The records that changed a host for good (applied, not already as wanted, not temporary)."""
    return [r for r in records if r.applied and r.changed and not r.temporary]


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
        data.update(undo_command=change.undo_command)
    if change.makes:
        data["makes"] = list(change.makes)
    return data


def save_journal(records: Sequence[GateRecord], *, command: str, folder: str | Path | None = None,
                 now: float | None = None, cluster: str | None = None, fleet: str | None = None) -> Path | None:
    """Write the undoable records to ``FOLDER/<command>-YYYYmmdd-HHMMSS.json``; ``None`` when nothing changed.

    ``cluster`` and ``fleet`` (bootstrap's runs: the inventory's name and ``progress.fleet_key``) say
    which fleet the hosts' names belong to, so that ``clusterctl reset`` reads only its own fleet's."""
    kept = undoable(records)
    if not kept:
        return None
    target_dir = Path(folder) if folder is not None else DEFAULT_FOLDER
    stamp = time.strftime("%Y%m%d-%H%M%S", time.localtime(now))
    slug = "-".join(command.replace("--", "").split())
    path = target_dir / f"{slug}-{stamp}.json"
    # Two runs in the same second must not share a journal: the second would overwrite what
    # undoes the first (and one marked used would hide the other).
    serial = 2
    while path.exists():
        path = target_dir / f"{slug}-{stamp}-{serial}.json"
        serial += 1
    payload = {"kind": JOURNAL_KIND, "version": JOURNAL_VERSION, "command": command,
               "created": time.strftime("%Y-%m-%dT%H:%M:%S%z", time.localtime(now)),
               "changes": [record_json(r) for r in kept]}
    if cluster is not None:
        payload["cluster"] = cluster
    if fleet is not None:
        payload["fleet"] = fleet
    try:
        target_dir.mkdir(parents=True, exist_ok=True)
        # Two runs in the same second keep two journals: never overwrite one (its undo would be lost).
        serial = 1
        while True:
            try:
                with path.open("x") as handle:
                    handle.write(json.dumps(payload, indent=2) + "\n")
                break
            except FileExistsError:
                serial += 1
                path = target_dir / f"{slug}-{stamp}-{serial}.json"
    except OSError as exc:
        raise UsageError(f"cannot write the undo journal ({exc.strerror})", file=str(path)) from exc
    return path


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


def load_journal(path: str | Path) -> list[GateRecord]:
    """The records of a journal, as the gate's ``undo`` takes them. Bad files are a ``UsageError``."""
    return read_journal(path).records


def read_journal(path: str | Path) -> Journal:
    """A whole journal; bad files are a ``UsageError`` naming the file."""
    from clusterctl.inputfile import read_state_file

    where = str(path)
    remedy = ("Give 'clusterctl undo' the file a command named after 'undo with:' (journals are kept under "
              "~/.local/state/clusterctl/undo/, or --state-dir's undo/); a damaged journal cannot be replayed: "
              "revert its changes by hand from the backups next to each file it wrote (FILE.bak.<time>.*).")
    try:
        data = read_state_file(path, "a clusterctl undo journal", remedy)
    except FileNotFoundError:
        raise UsageError("no such undo journal", file=where,
                         hint="Journals are kept under ~/.local/state/clusterctl/undo/.") from None
    if data.get("kind") != JOURNAL_KIND:
        raise UsageError(f"not a clusterctl undo journal (no 'kind: {JOURNAL_KIND}'). {remedy}", file=where)
    if data.get("version") not in READABLE_VERSIONS:
        raise UsageError(f"undo journal version {data.get('version')!r}; this clusterctl reads "
                         f"{', '.join(str(v) for v in READABLE_VERSIONS)}", file=where)
    records: list[GateRecord] = []
    changes = data.get("changes") or []
    if not isinstance(changes, list):
        raise UsageError(f"not a clusterctl undo journal ('changes' is not a list). {remedy}", file=where)
    for index, item in enumerate(changes):
        try:
            records.append(_record_from_json(item))
        except (KeyError, TypeError, ValueError) as exc:
            raise UsageError(f"change {index + 1} is malformed ({exc})", file=where) from exc
    used = data.get("used")
    return Journal(Path(path), int(data["version"]), str(data.get("command") or ""), str(data.get("created") or ""),
                   _text_or_none(data.get("cluster")), _text_or_none(data.get("fleet")),
                   {str(k): str(v) for k, v in used.items()} if isinstance(used, dict) else {}, records)


def _text_or_none(value: object) -> str | None:
    return value if isinstance(value, str) else None


def _record_from_json(item: dict[str, Any]) -> GateRecord:
    host, summary, sudo = str(item["host"]), str(item["summary"]), bool(item["sudo"])
    makes = tuple(str(m) for m in item.get("makes") or ())
    if ChangeKind(item["kind"]) is ChangeKind.WRITE_FILE:
        # Undo needs where the file is, its mode, whether it was new and where its backup is;
        # the content itself stays on the host, in the backup.
        mode = int(str(item["mode"]), 8) if item.get("mode") else None
        change = Change(host, summary, ChangeKind.WRITE_FILE, path=str(item["path"]), content=b"",
                        current=None if item["new_file"] else b"\0", mode=mode, sudo=sudo, makes=makes)
        return GateRecord(change, applied=True, changed=True, backup_path=item.get("backup_path"),
                          written_sha256=item.get("sha256"))
    change = Change(host, summary, ChangeKind.RUN_COMMAND, command=summary, undo_command=item.get("undo_command"),
                    sudo=sudo, makes=makes)
    return GateRecord(change, applied=True, changed=True)


def journal_used_by(path: str | Path) -> dict[str, str]:
    """Hosts an earlier ``clusterctl undo`` already reverted with this journal -> when (ISO time)."""
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return {}
    used = data.get("used") if isinstance(data, dict) else None
    return {str(k): str(v) for k, v in used.items()} if isinstance(used, dict) else {}


def mark_journal_used(path: str | Path, hosts: Sequence[str], *, now: float | None = None) -> None:
    """Note in the journal that these hosts were reverted with it: replaying it later would delete or
    overwrite what was made since (a file created again), so the next undo refuses without --force."""
    if not hosts:
        return
    target = Path(path)
    data = json.loads(target.read_text())
    used = data.get("used") if isinstance(data.get("used"), dict) else {}
    when = time.strftime("%Y-%m-%dT%H:%M:%S%z", time.localtime(now))
    used.update({host: when for host in hosts})
    data["used"] = used
    try:
        temp = target.with_name(target.name + ".tmp")
        temp.write_text(json.dumps(data, indent=2) + "\n")
        temp.replace(target)
    except OSError as exc:
        raise UsageError(f"cannot mark the undo journal as used ({exc.strerror})", file=str(target)) from exc


def undo_on_hosts(runner: Runner, hosts: Sequence[Host], records: Sequence[GateRecord], *, apply: bool,
                  force: bool = False) -> FleetResult[list[str]]:
    """Revert ``records`` on those of ``hosts`` they concern, newest change first; one line per change.

    Journal hosts not in ``hosts`` (narrowed with ``-l``) are left alone; none selected is a ``UsageError``.
    """
    from clusterctl.changes import Gate

    by_host: dict[str, list[GateRecord]] = {}
    for record in records:
        by_host.setdefault(record.change.host, []).append(record)
    targets = [h for h in hosts if h.name in by_host]
    if not targets:
        raise UsageError(f"the journal changed {', '.join(sorted(by_host)) or 'no host'}; none of them is selected")

    gate = Gate(apply=apply)

    def task(transport: Transport) -> list[str]:
        # One code path for undo and its dry run: the gate works out each step and applies or records it.
        return gate.undo(transport, by_host[transport.host.name], force=force)

    return runner.run_task(targets, task, label="undo" if apply else "undo (dry run)")
