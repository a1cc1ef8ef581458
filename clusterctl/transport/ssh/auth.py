"""Authentication as OpenSSH does it: the agent's keys, then key files, then a password.

Order: keys held by the agent (``IdentityAgent``, else ``$SSH_AUTH_SOCK``; with
``IdentitiesOnly yes`` only agent keys matching a configured ``IdentityFile``), then the
identity files the agent does not hold, then the password (when one was given and
``PasswordAuthentication`` is not ``no``). An encrypted key file whose passphrase was not
given is skipped (the agent may hold it); if nothing works, the error lists every key tried
or skipped and why. Keys and the agent's list are loaded once per process.
"""

from __future__ import annotations

import os
import socket
import threading
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import paramiko

from clusterctl.secret import Secret
from clusterctl.transport.base import FailureKind, TransportError
from clusterctl.transport.ssh.config import SSHTarget, once_per_process, remaining
from clusterctl.transport.ssh.hostkeys import sha256_fingerprint


@dataclass(frozen=True)
class Credentials:
    """Secrets the user gave for logging in (never logged, never in argv)."""

    #: ``--ask-key-passphrase`` / ``CLUSTERCTL_KEY_PASSPHRASE``: for encrypted key files.
    key_passphrase: Secret | None = None
    #: ``--ask-pass`` / ``CLUSTERCTL_SSH_PASS``: password authentication.
    password: Secret | None = None


@dataclass
class KeyAttempt:
    """A key we could offer, or a note on why a configured key could not be used."""

    label: str
    key: paramiko.PKey | None = None
    problem: str | None = None


_key_lock = threading.Lock()
_key_cache: dict[tuple[str, bool], KeyAttempt] = {}


def load_private_key(path: str, passphrase: Secret | None = None) -> KeyAttempt:
    """A private key file, loaded once per process (decoding is the slow part of auth)."""
    return once_per_process(_key_lock, _key_cache, (path, passphrase is not None),
                            partial(_load_private_key_uncached, path, passphrase))


def _load_private_key_uncached(path: str, passphrase: Secret | None) -> KeyAttempt:
    if not os.path.exists(path):
        return KeyAttempt(path, problem="no such file")
    try:
        key = paramiko.PKey.from_path(path, password=passphrase.reveal().encode() if passphrase else None)  # type: ignore[arg-type]
    except paramiko.PasswordRequiredException:
        return KeyAttempt(path, problem=_ENCRYPTED)
    except TypeError as exc:
        # cryptography's own words for an encrypted key without a passphrase.
        if "password" in str(exc).lower():
            return KeyAttempt(path, problem=_ENCRYPTED)
        return KeyAttempt(path, problem=f"unreadable: {exc}")
    except (paramiko.SSHException, OSError, ValueError) as exc:
        if passphrase is not None and _load_private_key_uncached(path, None).problem == _ENCRYPTED:
            return KeyAttempt(path, problem="encrypted, and the passphrase given does not open it")
        return KeyAttempt(path, problem=f"unreadable: {exc}")
    return KeyAttempt(f"{path} ({key.get_name()} {sha256_fingerprint(key.asbytes())})", key=key)


_ENCRYPTED = (
    "encrypted and no passphrase given (load it into ssh-agent, or use --ask-key-passphrase "
    "or CLUSTERCTL_KEY_PASSPHRASE)"
)


def public_blob_of(path: str) -> bytes | None:
    """The public key next to a key file (``PATH.pub``), to match an agent key without decrypting."""
    import base64

    try:
        fields = Path(path + ".pub").read_text(encoding="utf-8").split()
        return base64.b64decode(fields[1]) if len(fields) >= 2 else None
    except (OSError, ValueError):  # none there, or not a public key's text
        return None


_agent_lock = threading.Lock()
_agent_cache: dict[str, list[KeyAttempt]] = {}
# One agent connection is shared; its socket protocol is request/response, so signing
# requests from many hosts at once must take turns.
_agent_sign_lock = threading.Lock()


def agent_keys(socket_path: str | None = None) -> list[KeyAttempt]:
    """The keys an ssh-agent holds (``socket_path``, else ``$SSH_AUTH_SOCK``), asked once per process."""
    path = socket_path or os.environ.get("SSH_AUTH_SOCK", "")

    def ask() -> list[KeyAttempt]:
        found: list[KeyAttempt] = []
        if path:
            try:
                for key in _agent_at(path).get_keys():
                    _serialise_signing(key)
                    found.append(KeyAttempt(f"agent key {sha256_fingerprint(key.asbytes())}", key=key))
            except (paramiko.SSHException, OSError):
                found = []
        return found

    return once_per_process(_agent_lock, _agent_cache, path, ask)


def _agent_at(path: str) -> paramiko.Agent:
    agent = paramiko.Agent.__new__(paramiko.Agent)
    paramiko.agent.AgentSSH.__init__(agent)
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    conn.connect(os.path.expanduser(path))
    agent._connect(conn)  # type: ignore[attr-defined]
    return agent


def _serialise_signing(key: paramiko.PKey) -> None:
    sign: Callable[..., Any] = key.sign_ssh_data

    def locked_sign(*args: Any, **kwargs: Any) -> Any:
        with _agent_sign_lock:
            return sign(*args, **kwargs)

    key.sign_ssh_data = locked_sign  # type: ignore[method-assign]


def keys_to_offer(target: SSHTarget, credentials: Credentials | None = None) -> list[KeyAttempt]:
    """The agent's keys, then identity files the agent does not hold, in OpenSSH's order."""
    passphrase = credentials.key_passphrase if credentials else None
    offered: list[KeyAttempt] = []
    agent = agent_keys(target.identity_agent) if target.use_agent else []
    if target.identities_only:
        # Only agent keys that match a configured identity (by its .pub, no decryption needed).
        wanted = {blob for blob in (public_blob_of(p) for p in target.key_files) if blob}
        agent = [a for a in agent if a.key is not None and a.key.asbytes() in wanted]
    offered.extend(agent)
    in_agent = {a.key.asbytes() for a in agent if a.key is not None}
    for path in target.key_files:
        blob = public_blob_of(path)
        if blob is not None and blob in in_agent:
            continue  # the agent holds it: already offered, no need to decrypt the file
        attempt = load_private_key(path, passphrase)
        if attempt.key is not None and attempt.key.asbytes() in in_agent:
            continue
        # ssh's default key names are only tried when they exist; a key the user named is
        # reported even when missing, so a typo in key_file shows up in the error.
        if attempt.key is None and not target.explicit_keys and attempt.problem == "no such file":
            continue
        offered.append(attempt)
    return offered


def _try_method(
    client: paramiko.Transport, target: SSHTarget, tried: list[str], label: str, call: Callable[[], object]
) -> list[str] | None:
    """Make one authentication attempt and note its outcome in ``tried``.

    Returns the methods the server allows when it rejected this method outright, else ``None``.
    A dropped connection is not a refusal: it raises, so the next method is not tried on a
    dead transport.
    """
    tried.append(label)
    try:
        call()
    except paramiko.BadAuthenticationType as exc:
        return list(exc.allowed_types)
    except paramiko.AuthenticationException:
        tried[-1] += " (refused)"
    except paramiko.SSHException as exc:
        if not client.is_active():
            raise TransportError(
                FailureKind.UNREACHABLE, f"connection lost during authentication: {exc}"
            ) from exc
        tried[-1] += f" ({exc})"
    return None


def authenticate(
    client: paramiko.Transport, target: SSHTarget, deadline: float, credentials: Credentials | None = None
) -> None:
    offered = keys_to_offer(target, credentials)
    tried: list[str] = []
    skipped: list[str] = []
    allowed: list[str] | None = None
    for attempt in offered:
        if attempt.key is None:
            skipped.append(f"{attempt.label} ({attempt.problem})")
            continue
        if allowed is not None and "publickey" not in allowed:
            break
        remaining(deadline, "authentication")
        offer_key = partial(client.auth_publickey, target.user, attempt.key)
        rejected = _try_method(client, target, tried, attempt.label, offer_key)
        if rejected is not None:
            allowed = rejected
            tried[-1] += " (the server takes no public keys)"
        elif client.is_authenticated():
            return
    password = credentials.password if credentials else None
    if password is not None and target.password_authentication:
        remaining(deadline, "authentication")
        # Revealed only inside the call: no object holds the plain text between attempts.
        rejected = _try_method(client, target, tried, "password",
                               lambda: client.auth_password(target.user, password.reveal()))
        if rejected is not None:
            tried[-1] += f" (not accepted; the server allows: {', '.join(rejected)})"
        elif client.is_authenticated():
            return
    what = "; ".join(tried) if tried else "no usable key"
    extra = f"; could not use: {'; '.join(skipped)}" if skipped else ""
    agent_note = ""
    if target.use_agent and not agent_keys(target.identity_agent):
        agent_note = "; no ssh-agent keys" + ("" if os.environ.get("SSH_AUTH_SOCK") or target.identity_agent
                                             else " (SSH_AUTH_SOCK is not set)")
    allowed_note = f"; the server allows: {', '.join(allowed)}" if allowed else ""
    raise TransportError(
        FailureKind.AUTH_FAILED,
        f"{target.label} refused user {target.user!r}; tried: {what}{extra}{agent_note}"
        f"{allowed_note}",
    )
