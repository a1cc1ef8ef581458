"""Alerts the receiver accepted and has not finished acting on, kept in a file across restarts.

The receiver answers Alertmanager before it acts (so that no answer waits on a host), and
Alertmanager does not send an alert again before its ``repeat_interval`` (hours). An accepted
alert must therefore outlive the process: it is written here before the answer goes out, and
taken out once its host's work reached a verdict the cluster gave (acted, duplicate, held). A
receiver that stops or fails meanwhile (or whose work failed: the control plane unreachable)
finds it here when it starts again and acts on it then, deciding from the cluster as always.

The file (mode 0600) maps each host to the strongest action asked, the alerts and a sequence
number; it is replaced whole (write, then rename), so a crash leaves the old or the new one.
"""

from __future__ import annotations

import json
import os
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from clusterctl.errors import UsageError

KIND = "clusterctl.remediate.pending"
_STRENGTH = {"quarantine": 1, "drain": 2}


@dataclass(frozen=True)
class PendingHost:
    host: str
    action: str
    alerts: tuple[str, ...]
    caller: str
    seq: int


class PendingWork:
    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()
        self._hosts: dict[str, dict[str, object]] = {}
        self._seq = 0
        self._load()

    def _load(self) -> None:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return
        except (OSError, UnicodeDecodeError, ValueError) as exc:
            raise UsageError(f"cannot read the receiver's pending work: {exc}", file=str(self.path),
                             hint="Move the file away to start without it (its alerts are then not acted on).") \
                from None
        hosts = data.get("hosts") if isinstance(data, dict) and data.get("kind") == KIND else None
        if not isinstance(hosts, dict):
            raise UsageError("not the receiver's pending work file", file=str(self.path))
        for name, entry in hosts.items():
            if isinstance(entry, dict) and entry.get("action") in _STRENGTH and isinstance(entry.get("alerts"), list):
                self._hosts[str(name)] = entry
                self._seq = max(self._seq, int(entry.get("seq", 0)))

    def _save(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".pending-", dir=self.path.parent)
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(json.dumps({"kind": KIND, "version": 1, "hosts": self._hosts}, indent=1, sort_keys=True))
        os.replace(tmp, self.path)

    def accept(self, host: str, action: str, alert: str, caller: str) -> int:
        """Record an accepted alert (before it is answered); its sequence number."""
        with self._lock:
            self._seq += 1
            entry = self._hosts.get(host)
            alerts = list(dict.fromkeys([*(entry or {}).get("alerts", []), alert]))  # type: ignore[misc]
            if entry is not None and _STRENGTH[str(entry["action"])] > _STRENGTH[action]:
                action = str(entry["action"])
            self._hosts[host] = {"action": action, "alerts": alerts, "caller": caller, "seq": self._seq,
                                 "accepted": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
            self._save()
            return self._seq

    def done(self, host: str, seq: int) -> None:
        """The host's work that covered everything accepted up to ``seq`` reached its verdict."""
        with self._lock:
            entry = self._hosts.get(host)
            if entry is not None and int(entry.get("seq", 0)) <= seq:  # type: ignore[call-overload]
                del self._hosts[host]
                self._save()

    def waiting(self) -> list[PendingHost]:
        with self._lock:
            return [PendingHost(name, str(e["action"]), tuple(str(a) for a in e["alerts"]),  # type: ignore[attr-defined]
                                str(e.get("caller", "")), int(e.get("seq", 0)))  # type: ignore[call-overload]
                    for name, e in sorted(self._hosts.items())]
