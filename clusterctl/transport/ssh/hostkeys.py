"""known_hosts: reading it, checking a host's key against it, recording new keys.

Host keys are checked like ``StrictHostKeyChecking yes`` (or ``accept-new`` with
``--accept-new-host-keys``); a changed key is always refused.
"""

from __future__ import annotations

import base64
import fcntl
import hashlib
import hmac
import threading
from dataclasses import dataclass
from fnmatch import fnmatch
from pathlib import Path
from typing import TYPE_CHECKING

from clusterctl.transport.base import FailureKind, TransportError
from clusterctl.transport.ssh.config import SSHTarget, user_home

if TYPE_CHECKING:
    import paramiko


def sha256_fingerprint(key_blob: bytes) -> str:
    digest = hashlib.sha256(key_blob).digest()
    return "SHA256:" + base64.b64encode(digest).decode().rstrip("=")


@dataclass(frozen=True)
class KnownHostLine:
    line_no: int
    patterns: tuple[str, ...]
    key_type: str
    key_base64: str
    marker: str | None = None

    def matches(self, name: str) -> bool:
        matched = False
        for pattern in self.patterns:
            negated = pattern.startswith("!")
            pat = pattern[1:] if negated else pattern
            if pat.startswith("|1|"):
                hit = _hashed_match(pat, name)
            else:
                hit = fnmatch(name, pat) if ("*" in pat or "?" in pat) else name == pat
            if hit and negated:
                return False
            matched = matched or hit
        return matched

    @property
    def fingerprint(self) -> str:
        try:
            return sha256_fingerprint(base64.b64decode(self.key_base64))
        except ValueError:
            return "(unreadable key)"


def _hashed_match(pattern: str, name: str) -> bool:
    try:
        _, _, salt_b64, hash_b64 = pattern.split("|", 3)
        salt = base64.b64decode(salt_b64)
        expected = base64.b64decode(hash_b64)
    except ValueError:
        return False
    return hmac.compare_digest(hmac.new(salt, name.encode(), hashlib.sha1).digest(), expected)


class KnownHosts:
    """One known_hosts file, read once, shared by every connection of the process.

    Keys are kept as (type, base64) text and compared as text: no key object is built per
    line, so a file with thousands of entries costs nothing per host.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._lines: list[KnownHostLine] = []
        self._read()

    def _read(self) -> None:
        try:
            text = self.path.read_text(errors="replace")
        except FileNotFoundError:
            return
        except OSError as exc:
            raise TransportError(
                FailureKind.ERROR, f"cannot read known_hosts {self.path}: {exc.strerror}"
            ) from exc
        for number, raw in enumerate(text.splitlines(), start=1):
            entry = _parse_known_hosts_line(raw, number)
            if entry is not None:
                self._lines.append(entry)

    def entries_for(self, name: str) -> list[KnownHostLine]:
        with self._lock:
            return [e for e in self._lines if e.marker != "@cert-authority" and e.matches(name)]

    def add(self, name: str, key_type: str, key_base64: str) -> int:
        """Append ``name keytype key`` to the file (one writer at a time, across processes too)."""
        line = f"{name} {key_type} {key_base64}\n"
        with self._lock:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with open(self.path, "a+", encoding="utf-8") as fh:
                fcntl.flock(fh, fcntl.LOCK_EX)
                try:
                    fh.seek(0)
                    existing = fh.read()
                    if existing and not existing.endswith("\n"):
                        fh.write("\n")
                    fh.write(line)
                    fh.flush()
                    number = existing.count("\n") + (1 if existing and not existing.endswith("\n") else 0) + 1
                finally:
                    fcntl.flock(fh, fcntl.LOCK_UN)
            self._lines.append(KnownHostLine(number, (name,), key_type, key_base64))
            return number


def _parse_known_hosts_line(raw: str, number: int) -> KnownHostLine | None:
    text = raw.strip()
    if not text or text.startswith("#"):
        return None
    fields = text.split()
    marker = None
    if fields[0].startswith("@"):
        marker, fields = fields[0], fields[1:]
    if len(fields) < 3:
        return None
    return KnownHostLine(number, tuple(fields[0].split(",")), fields[1], fields[2], marker)


_known_hosts_lock = threading.Lock()
_known_hosts_cache: dict[str, KnownHosts] = {}


def known_hosts_file(path: str | None) -> KnownHosts:
    file = Path(path).expanduser() if path else user_home() / ".ssh" / "known_hosts"
    key = str(file.absolute())
    with _known_hosts_lock:
        known = _known_hosts_cache.get(key)
        if known is None:
            known = KnownHosts(file)
            _known_hosts_cache[key] = known
        return known


def check_host_key(known: KnownHosts, target: SSHTarget, key: paramiko.PKey, *, accept_new: bool) -> None:
    """Raise HOST_KEY_REFUSED unless ``key`` is the one known_hosts records for the target."""
    name = target.known_hosts_name
    key_type = key.get_name()
    key_b64 = key.get_base64()
    fingerprint = sha256_fingerprint(key.asbytes())
    entries = known.entries_for(name)
    for entry in entries:
        if entry.marker == "@revoked" and entry.key_base64 == key_b64:
            raise TransportError(
                FailureKind.HOST_KEY_REFUSED,
                f"{target.name}: the host key {key_type} {fingerprint} of {name} is marked @revoked "
                f"in {known.path}:{entry.line_no}",
            )
    plain = [e for e in entries if e.marker is None]
    if any(e.key_type == key_type and e.key_base64 == key_b64 for e in plain):
        return
    if plain:
        # Known under this name, but with other bytes (or another type we did not ask for):
        # exactly what a man-in-the-middle looks like. Never accepted automatically.
        recorded = plain[0]
        raise TransportError(
            FailureKind.HOST_KEY_REFUSED,
            f"{target.name}: HOST KEY CHANGED for {name} - possible man-in-the-middle attack! "
            f"It offered {key_type} {fingerprint}, but {known.path}:{recorded.line_no} records "
            f"{recorded.key_type} {recorded.fingerprint}. If the host was really reinstalled, "
            f"remove that line "
            f"(ssh-keygen -R '{name}' -f {known.path}) and verify the new key before connecting again.",
        )
    if not accept_new:
        raise TransportError(
            FailureKind.HOST_KEY_REFUSED,
            f"{target.name}: unknown host key for {name} ({key_type} {fingerprint}), not in {known.path}. "
            f"Verify this fingerprint with the host's administrator (on the host: ssh-keygen -lf "
            f"/etc/ssh/ssh_host_{key_type.split('-')[-1]}_key.pub), then rerun with --accept-new-host-keys "
            f"to record it.",
        )
    known.add(name, key_type, key_b64)
