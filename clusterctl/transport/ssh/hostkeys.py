"""known_hosts: reading it, checking a host's key against it, recording new keys.

Host keys are checked as OpenSSH checks them (see ``HostKeyPolicy`` for the files and the
precedence): plain keys, hashed names, ``@cert-authority`` host certificates, ``@revoked``
keys; a changed key is always refused.
"""

from __future__ import annotations

import base64
import fcntl
import functools
import hashlib
import hmac
import logging
import os
import re
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from clusterctl.transport.base import FailureKind, TransportError
from clusterctl.transport.ssh.certs import HostCertificate, host_certificate
from clusterctl.transport.ssh.config import SSHTarget, once_per_process, user_home

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
                hit = _glob(pat).fullmatch(name) is not None if ("*" in pat or "?" in pat) else name == pat
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


@functools.lru_cache(maxsize=4096)
def _glob(pattern: str) -> re.Pattern[str]:
    """ssh's host patterns know only ``*`` and ``?``: ``[127.0.0.1]:*`` has no character class."""
    return re.compile(re.escape(pattern).replace(r"\*", ".*").replace(r"\?", "."), re.IGNORECASE)


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
    line. Lines naming hosts plainly (``node1``, ``[10.0.0.1]:2222``) are found by name; only
    lines with wildcards, negations or hashed names are matched against every host, so a fan-out
    over a fleet's file of N hosts costs N look-ups, not N x N pattern matches.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()
        #: Lines whose every pattern is a plain name, by that name (a line of several names under each).
        self._by_name: dict[str, list[KnownHostLine]] = {}
        #: Lines with a pattern that must be matched: ``*``/``?``, ``!``, ``|1|`` (hashed).
        self._matched: list[KnownHostLine] = []
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
                self._index(entry)

    def _index(self, entry: KnownHostLine) -> None:
        if any(p.startswith(("!", "|")) or "*" in p or "?" in p for p in entry.patterns):
            self._matched.append(entry)
            return
        for name in dict.fromkeys(entry.patterns):
            self._by_name.setdefault(name, []).append(entry)

    def entries_for(self, name: str, *, authorities: bool = False) -> list[KnownHostLine]:
        """The lines that match ``name``, in the file's order: its keys (``@revoked`` ones too), or with
        ``authorities`` its ``@cert-authority`` lines."""
        with self._lock:
            named = self._by_name.get(name, [])
            matched = [e for e in self._matched if e.matches(name)]
        lines = sorted([*named, *matched], key=lambda e: e.line_no) if named and matched else named or matched
        return [e for e in lines if (e.marker == "@cert-authority") == authorities]

    def add(self, name: str, key_type: str, key_base64: str) -> int:
        """Append ``name keytype key`` to the file (one writer at a time, across processes too)."""
        line = f"{name} {key_type} {key_base64}\n"
        with self._lock:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with open(self.path, "a+", encoding="utf-8") as fh:
                fcntl.flock(fh, fcntl.LOCK_EX)  # released when the file is closed
                fh.seek(0)
                existing = fh.read()
                if existing and not existing.endswith("\n"):
                    existing += "\n"
                    fh.write("\n")
                fh.write(line)
                fh.flush()
                number = existing.count("\n") + 1
            self._index(KnownHostLine(number, (name,), key_type, key_base64))
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
    """One known_hosts file (``~/.ssh/known_hosts`` when ``path`` is None), read once per process."""
    file = Path(path).expanduser() if path else user_home() / ".ssh" / "known_hosts"
    return once_per_process(_known_hosts_lock, _known_hosts_cache, str(file.absolute()), lambda: KnownHosts(file))


#: Read when ssh_config names no ``GlobalKnownHostsFile`` (clusters often manage it centrally).
DEFAULT_GLOBAL_KNOWN_HOSTS = ("/etc/ssh/ssh_known_hosts", "/etc/ssh/ssh_known_hosts2")
DEFAULT_USER_KNOWN_HOSTS = ("~/.ssh/known_hosts", "~/.ssh/known_hosts2")

log = logging.getLogger("clusterctl.transport.ssh")


@dataclass(frozen=True)
class HostKeyPolicy:
    """Where a host's key is looked up and what happens to one that is not there.

    Precedence (documented in the README): ``--known-hosts FILE`` is the only file read and
    written when given; otherwise the host's ``UserKnownHostsFile`` files, then its
    ``GlobalKnownHostsFile`` files (read only), from ssh_config or ssh's defaults. New keys
    are written to the first user file, as ssh does. ``StrictHostKeyChecking`` per host:
    ``yes`` (and ``ask``: there is no one to ask) refuses unknown keys, ``accept-new``
    records them, ``no`` records them with a warning; ``--accept-new-host-keys`` turns
    ``yes``/``ask`` into ``accept-new``. A changed key is refused whatever the setting.
    """

    user_files: tuple[KnownHosts, ...]
    global_files: tuple[KnownHosts, ...] = ()
    strict: str = "yes"
    check_host_ip: bool = False
    hash_new: bool = False

    @property
    def files(self) -> tuple[KnownHosts, ...]:
        return self.user_files + self.global_files

    def entries_for(self, name: str, *, authorities: bool = False) -> list[tuple[KnownHosts, KnownHostLine]]:
        return [(f, e) for f in self.files for e in f.entries_for(name, authorities=authorities)]

    def describe_files(self) -> str:
        return ", ".join(str(f.path) for f in self.files) or "no known_hosts file (UserKnownHostsFile none)"


def host_key_policy(target: SSHTarget, *, override: str | None, accept_new: bool) -> HostKeyPolicy:
    strict = (target.strict_host_key_checking or "yes").lower()
    strict = {"off": "no", "false": "no", "true": "yes", "ask": "yes"}.get(strict, strict)
    if strict not in ("yes", "accept-new", "no"):
        raise TransportError(
            FailureKind.ERROR, f"StrictHostKeyChecking {strict!r} is not one of yes, accept-new, no"
        )
    if accept_new and strict == "yes":
        strict = "accept-new"
    # ``--known-hosts FILE``, when given, is the only file read and written.
    user: tuple[str, ...] | None = (override,) if override is not None else target.user_known_hosts
    global_: tuple[str, ...] | None = () if override is not None else target.global_known_hosts
    if user is None:
        user = tuple(os.path.expanduser(p) for p in DEFAULT_USER_KNOWN_HOSTS)
    if global_ is None:
        global_ = DEFAULT_GLOBAL_KNOWN_HOSTS
    return HostKeyPolicy(tuple(known_hosts_file(p) for p in user), tuple(known_hosts_file(p) for p in global_),
                         strict, target.check_host_ip, target.hash_known_hosts)


def check_host_key(policy: HostKeyPolicy, target: SSHTarget, key: paramiko.PKey, *, peer_ip: str | None = None
                   ) -> None:
    """Raise HOST_KEY_REFUSED unless ``key`` is one the known_hosts files of ``policy`` vouch for."""
    name = target.known_hosts_name()
    certificate = host_certificate(key)
    if certificate is not None:
        if _certificate_trusted(policy, target, name, certificate):
            return
        # As ssh: a certificate no trusted CA signed is checked as the plain key it certifies.
        key_type, key_b64 = certificate.key_type, certificate.key_base64
    else:
        key_type, key_b64 = key.get_name(), key.get_base64()
    fingerprint = sha256_fingerprint(base64.b64decode(key_b64))
    entries = policy.entries_for(name)
    _refuse_revoked(entries, (key_b64,), f"the host key {key_type} {fingerprint} of {name} is")
    plain = [(f, e) for f, e in entries if e.marker is None]
    if any(e.key_base64 == key_b64 for _, e in plain):
        _check_ip(policy, target, key_b64, peer_ip)
        return
    if plain:
        # Known under this name, but with other bytes (or another type we did not ask for):
        # exactly what a man-in-the-middle looks like. Never accepted automatically.
        file, recorded = plain[0]
        raise TransportError(
            FailureKind.HOST_KEY_REFUSED,
            f"HOST KEY CHANGED for {name} - possible man-in-the-middle attack! "
            f"It offered {key_type} {fingerprint}, but {file.path}:{recorded.line_no} records "
            f"{recorded.key_type} {recorded.fingerprint}. If the host was really reinstalled, "
            f"remove that line "
            f"(ssh-keygen -R '{name}' -f {file.path}) and verify the new key before connecting again.",
        )
    if policy.strict == "yes":
        cert_note = ""
        if certificate is not None:
            cert_note = (
                f" It presented a host certificate signed by CA {certificate.ca_type} "
                f"{sha256_fingerprint(certificate.ca_blob)}, which no @cert-authority line trusts for {name}."
            )
        raise TransportError(
            FailureKind.HOST_KEY_REFUSED,
            f"unknown host key for {name} ({key_type} {fingerprint}), not in "
            f"{policy.describe_files()}.{cert_note} Verify this fingerprint with the host's administrator "
            f"(on the host: ssh-keygen -lf /etc/ssh/ssh_host_{key_type.split('-')[-1]}_key.pub), then rerun "
            f"with --accept-new-host-keys to record it (or set StrictHostKeyChecking accept-new for it).",
        )
    if not policy.user_files:
        raise TransportError(
            FailureKind.HOST_KEY_REFUSED,
            f"unknown host key for {name} ({key_type} {fingerprint}) and no known_hosts file "
            f"to record it in (UserKnownHostsFile none)",
        )
    if policy.strict == "no":
        log.warning(
            "%s: StrictHostKeyChecking no: accepting the UNVERIFIED host key %s %s of %s without checking it; "
            "anyone on the path could be impersonating this host",
            target.name, key_type, fingerprint, name,
        )
    written = policy.user_files[0]
    written.add(_hashed_name(name) if policy.hash_new else name, key_type, key_b64)
    log.info("%s: recorded the host key %s %s of %s in %s", target.name, key_type, fingerprint, name, written.path)


def _refuse_revoked(entries: list[tuple[KnownHosts, KnownHostLine]], keys: tuple[str, ...], what: str) -> None:
    """Raise HOST_KEY_REFUSED when a known_hosts line marks one of ``keys`` @revoked: ``what`` is marked..."""
    for file, entry in entries:
        if entry.marker == "@revoked" and entry.key_base64 in keys:
            raise TransportError(FailureKind.HOST_KEY_REFUSED, f"{what} marked @revoked in {file.path}:{entry.line_no}")


def _certificate_trusted(policy: HostKeyPolicy, target: SSHTarget, name: str, cert: HostCertificate) -> bool:
    """True when a @cert-authority line for ``name`` signed this valid host certificate."""
    _refuse_revoked(policy.entries_for(name), (cert.ca_base64, cert.key_base64),
                    f"the host certificate of {name} uses a key")
    authorities = [(f, e) for f, e in policy.entries_for(name, authorities=True) if e.key_base64 == cert.ca_base64]
    if not authorities:
        return False
    principal = target.host_key_alias or target.hostname
    problem = cert.problem_for(principal)
    if problem is not None:
        file, entry = authorities[0]
        raise TransportError(
            FailureKind.HOST_KEY_REFUSED,
            f"the host certificate of {name} (key id {cert.key_id!r}) is signed by the CA in "
            f"{file.path}:{entry.line_no} but {problem}",
        )
    return True


def _check_ip(policy: HostKeyPolicy, target: SSHTarget, key_b64: str, peer_ip: str | None) -> None:
    """CheckHostIP: warn when the address the host answered on is recorded with another key."""
    if not policy.check_host_ip or not peer_ip or peer_ip == target.hostname:
        return
    ip_name = target.known_hosts_name(peer_ip)
    others = [e for _, e in policy.entries_for(ip_name) if e.marker is None and e.key_base64 != key_b64]
    if others:
        log.warning(
            "%s: the host key of %s differs from the key known_hosts records for its address %s "
            "(CheckHostIP): a reused address, or DNS pointing elsewhere",
            target.name, target.hostname, ip_name,
        )


def _hashed_name(name: str) -> str:
    salt = os.urandom(20)
    digest = hmac.new(salt, name.encode(), hashlib.sha1).digest()
    return f"|1|{base64.b64encode(salt).decode()}|{base64.b64encode(digest).decode()}"
