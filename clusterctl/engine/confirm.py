"""One batched read per host instead of every phase's own: how a re-run skips hosts nothing changed on.

After a run in which a host's phases all ended with nothing left to do (their check planned
nothing, or what they changed verified and a second check planned nothing), the engine notes
the exact reads those checks and verifies made there (``HostReader.transcript``: the command
lines, in order) and runs them once more as ONE command, keeping a digest of the answer. The
next run (a plain ``clusterctl bootstrap``, an inventory with new hosts) sends that one command
first: a host whose answer has the same digest, with the same inventory entry, pins and run
options, answers every read of every phase exactly as when its phases last found nothing to
do, so the phases would plan nothing again (check and plan are functions of those reads and
the inventory). It is skipped (``SkipReason.CONFIRMED``) without its own per-phase reads or
a lock. Any other answer (a module unloaded, a package unheld, a file edited, a service
stopped) and the host runs every phase as usual, and the phases repair it.

The record is a hint kept on the control machine (``<state dir>/bootstrap/<cluster>-<digest>
.confirmed.json``, mode 600): the commands (masked), their digest, never an answer. Like the
progress file, it decides nothing alone: the host's own answer does (issue #20's rule).
Phases opt in with ``Phase.confirmable``: their plan depends only on what they read from the
host, the inventory and the run's options. Read-only phases (preflight) check a host before
changes; a confirmed host gets none, so they are skipped with it.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from clusterctl.engine.read_ahead import batch_command
from clusterctl.errors import UsageError
from clusterctl.host_reader import HostReader
from clusterctl.json_input import read_json
from clusterctl.secret import mask_text
from clusterctl.utc import utc_stamp
from clusterctl.writable import replace_file

if TYPE_CHECKING:
    from clusterctl.fanout import Runner
    from clusterctl.inventory.model import Host
    from clusterctl.transport.base import Transport

#: 2: the reads batched as read-ahead batches them (version 1's digests answer no more).
FORMAT_VERSION = 2
#: A read as the transcript keeps it: the command line and whether it ran as root.
Read = tuple[str, bool]
#: The confirmation read's marker token: fixed, so that the same answers give the same digest run after run.
TOKEN = "confirm"


@dataclass(frozen=True)
class HostRecord:
    inputs: str
    phases: tuple[str, ...]
    reads: tuple[Read, ...]
    digest: str
    when: str

    @classmethod
    def from_json(cls, raw: Any) -> HostRecord | None:
        try:
            return cls(str(raw["inputs"]), tuple(str(p) for p in raw["phases"]),
                       tuple((str(c), bool(s)) for c, s in raw["reads"]), str(raw["digest"]), str(raw["when"]))
        except (KeyError, TypeError, ValueError):
            return None


class HostConfirmations:
    """Per host: the reads that confirm it and their digest. Thread-safe; saved atomically, mode 600."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()
        self.hosts: dict[str, HostRecord] = {}

    @classmethod
    def load(cls, path: Path) -> HostConfirmations:
        store = cls(path)
        try:
            raw = read_json(str(path), "state", "a confirmation record", lambda value: value)
        except UsageError:
            return store  # no record (or an unreadable one): every host runs its phases
        hosts = raw.get("hosts") if isinstance(raw, dict) and raw.get("version") == FORMAT_VERSION else None
        for name, entry in (hosts if isinstance(hosts, dict) else {}).items():
            record = HostRecord.from_json(entry)
            if record is not None:
                store.hosts[str(name)] = record
        return store

    def get(self, host: str) -> HostRecord | None:
        with self._lock:
            return self.hosts.get(host)

    def put(self, host: str, record: HostRecord | None) -> None:
        with self._lock:
            if record is None:
                self.hosts.pop(host, None)
            else:
                self.hosts[host] = record

    def save(self) -> None:
        with self._lock:
            payload = {"version": FORMAT_VERSION, "hosts": {h: asdict(r) for h, r in sorted(self.hosts.items())}}
        replace_file(self.path, mask_text(json.dumps(payload, indent=1, sort_keys=True) + "\n"), mode=0o600)


def _ask(transport: Transport, reads: Sequence[Read]) -> str:
    # As root when any read ran as root: the digest only needs the same answer as when it was recorded.
    result = HostReader(transport, what="the confirmation read").run(batch_command([line for line, _ in reads], TOKEN),
                                                                     sudo=any(sudo for _, sudo in reads))
    return hashlib.sha256(f"{result.exit_code}\0{result.stdout}\0{result.stderr}".encode()).hexdigest()


def _digests(runner: Runner, reads: Sequence[tuple[Host, Sequence[Read]]], label: str) -> dict[str, str]:
    """Each host's digest of its one batched read (none for a host that does not answer)."""
    if not reads:
        return {}
    by_name = {h.name: r for h, r in reads}
    fleet = runner.run_task([h for h, _ in reads], lambda t: _ask(t, by_name[t.host.name]), label=label)
    return {o.host.name: str(o.value) for o in fleet.outcomes if o.ok and o.value}


def confirm_hosts(runner: Runner, candidates: Sequence[tuple[Host, HostRecord]]) -> set[str]:
    """The hosts whose one batched read answers as recorded (a host that fails to answer is not confirmed)."""
    digests = _digests(runner, [(h, r.reads) for h, r in candidates], "confirm")
    return {h.name for h, r in candidates if digests.get(h.name) == r.digest}


def record_hosts(runner: Runner, store: HostConfirmations, entries: Sequence[tuple[Host, str, tuple[str, ...],
                                                                                  tuple[Read, ...]]]) -> None:
    """Run each host's batched read once and keep its digest (hosts that do not answer keep none)."""
    digests = _digests(runner, [(h, reads) for h, _, _, reads in entries], "record confirmation")
    when = utc_stamp()
    for host, inputs, phases, reads in entries:
        digest = digests.get(host.name)
        store.put(host.name, HostRecord(inputs, phases, reads, digest, when) if digest else None)
