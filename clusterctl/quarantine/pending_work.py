"""Alerts the receiver accepted and has not finished acting on, kept in a file across restarts.

The receiver answers Alertmanager before it acts (so that no answer waits on a host), and
Alertmanager does not send an alert again before its ``repeat_interval`` (hours). An accepted
alert must therefore outlive the process: it is written here before the answer goes out, and
taken out once its host's work reached a verdict the cluster gave (acted, duplicate, held). A
receiver that stops or fails meanwhile (or whose work failed: the control plane unreachable)
finds it here when it starts again and acts on it then, deciding from the cluster as always.

The file (mode 0600) maps each host to the strongest action asked, the alerts and a sequence
number; it is replaced whole (write, then rename), so a crash leaves the old or the new one.
It is state, not a result: by default it lives in clusterctl's state folder, one per fleet
(``default_pending_file``), so a receiver finds it wherever it is started from (a service unit
starts in ``/``), and it is read with the size limit of every state file.
"""

from __future__ import annotations

import json
import threading
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from clusterctl.engine.progress import RunPlace
from clusterctl.json_input import mapping, read_json, versioned
from clusterctl.utc import utc_stamp
from clusterctl.writable import replace_file

if TYPE_CHECKING:
    from clusterctl.inventory.model import Inventory

KIND = "clusterctl.remediate.pending"
#: The actions an alert leaves to do for a host, weakest first ("report" leaves nothing: it is not kept).
_STRENGTH = {"quarantine": 1, "drain": 2}


def stronger(action: str, other: str) -> str:
    """The stronger of two actions alerts ask for one host: drain, then quarantine, then report."""
    return other if _STRENGTH.get(other, 0) > _STRENGTH.get(action, 0) else action


def default_pending_file(inventory: Inventory, state_dir: Path | None = None) -> Path:
    """``<state dir>/remediate/<cluster>-<fleet>-pending.json``: the state folder of ``--state-dir`` (default
    ``$CLUSTERCTL_STATE_DIR``, else ``$XDG_STATE_HOME/clusterctl``, else ``~/.local/state/clusterctl``), one
    file per fleet, as the progress files are, so receivers of two clusters never share one."""
    progress = RunPlace.of(inventory, "remediate", str(state_dir) if state_dir else None).progress_path
    return progress.with_name(f"{progress.stem}-pending.json")


@dataclass(frozen=True)
class PendingHost:
    """What the alerts accepted for one host ask until its work starts (later alerts merge in)."""

    host: str
    action: str
    alerts: tuple[str, ...]
    caller: str
    #: The pending-work file's sequence number of the last alert merged in (0: no file).
    seq: int = 0
    #: When the first of its alerts was accepted (UTC).
    accepted: str = ""

    def merged(self, later: PendingHost, *, caller: str | None = None) -> PendingHost:
        """Both as one: the stronger action, every alert, the later sequence number; this one's caller
        (``caller``: that one) and acceptance time."""
        return PendingHost(self.host, stronger(self.action, later.action),
                           tuple(dict.fromkeys(self.alerts + later.alerts)), self.caller if caller is None else caller,
                           max(self.seq, later.seq), self.accepted)


class PendingWork:
    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()
        self._hosts: dict[str, PendingHost] = {}
        self._seq = 0
        self._load()

    def _load(self) -> None:
        if not self.path.exists():
            return
        hosts = read_json(str(self.path), "state", "the receiver's pending work", lambda value: mapping(
                          versioned(value, KIND, (1,), key="version", unversioned=1).get("hosts"), "hosts"),
                          hint="Move the file away to start without it (its alerts are then not acted on).")
        for name, entry in hosts.items():
            if not isinstance(entry, dict) or str(entry.get("action")) not in _STRENGTH or \
                    not isinstance(entry.get("alerts"), list) or not isinstance(entry.get("seq", 0), int):
                continue  # not one this receiver wrote: nothing to act on
            found = PendingHost(str(name), str(entry["action"]), tuple(str(a) for a in entry["alerts"]),
                                str(entry.get("caller", "")), int(entry.get("seq", 0)), str(entry.get("accepted", "")))
            self._hosts[found.host] = found
            self._seq = max(self._seq, found.seq)

    def _save(self) -> None:
        hosts = {name: {k: v for k, v in asdict(e).items() if k != "host"} for name, e in self._hosts.items()}
        replace_file(self.path, json.dumps({"kind": KIND, "version": 1, "hosts": hosts}, indent=1, sort_keys=True),
                     mode=0o600)

    def accept(self, host: str, action: str, alert: str, caller: str) -> int:
        """Record an accepted alert (before it is answered); its sequence number."""
        with self._lock:
            self._seq += 1
            asked = PendingHost(host, action, (alert,), caller, self._seq, utc_stamp())
            entry = self._hosts.get(host)
            self._hosts[host] = entry.merged(asked, caller=caller) if entry is not None else asked
            self._save()
            return self._seq

    def done(self, host: str, seq: int) -> None:
        """The host's work that covered everything accepted up to ``seq`` reached its verdict."""
        with self._lock:
            entry = self._hosts.get(host)
            if entry is not None and entry.seq <= seq:
                del self._hosts[host]
                self._save()

    def waiting(self) -> list[PendingHost]:
        with self._lock:
            return [self._hosts[name] for name in sorted(self._hosts)]
