"""Public-key authentication: the agent's keys and key files, each loaded once per process."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import paramiko

from clusterctl.transport.base import FailureKind, TransportError
from clusterctl.transport.ssh.config import SSHTarget
from clusterctl.transport.ssh.deadline import remaining
from clusterctl.transport.ssh.hostkeys import sha256_fingerprint


@dataclass
class KeyAttempt:
    """A key we could offer, or a note on why a configured key could not be used."""

    label: str
    key: paramiko.PKey | None = None
    problem: str | None = None


_key_lock = threading.Lock()
_key_cache: dict[str, KeyAttempt] = {}


def load_private_key(path: str) -> KeyAttempt:
    """A private key file, loaded once per process (decoding is the slow part of auth)."""
    with _key_lock:
        cached = _key_cache.get(path)
        if cached is not None:
            return cached
        attempt = _load_private_key_uncached(path)
        _key_cache[path] = attempt
        return attempt


def _load_private_key_uncached(path: str) -> KeyAttempt:
    if not os.path.exists(path):
        return KeyAttempt(path, problem="no such file")
    try:
        key = paramiko.PKey.from_path(path)
    except paramiko.PasswordRequiredException:
        return KeyAttempt(path, problem="encrypted; load it into ssh-agent")
    except (paramiko.SSHException, OSError, ValueError) as exc:
        return KeyAttempt(path, problem=f"unreadable: {exc}")
    return KeyAttempt(f"{path} ({key.get_name()} {sha256_fingerprint(key.asbytes())})", key=key)


_agent_lock = threading.Lock()
_agent_keys: list[KeyAttempt] | None = None
# One agent connection is shared; its socket protocol is request/response, so signing
# requests from many hosts at once must take turns.
_agent_sign_lock = threading.Lock()


def agent_keys() -> list[KeyAttempt]:
    global _agent_keys
    with _agent_lock:
        if _agent_keys is not None:
            return _agent_keys
        found: list[KeyAttempt] = []
        if os.environ.get("SSH_AUTH_SOCK"):
            try:
                agent = paramiko.Agent()
                for key in agent.get_keys():
                    _serialise_signing(key)
                    found.append(KeyAttempt(f"agent key {sha256_fingerprint(key.asbytes())}", key=key))
            except (paramiko.SSHException, OSError):
                found = []
        _agent_keys = found
        return found


def _serialise_signing(key: paramiko.PKey) -> None:
    sign: Callable[..., Any] = key.sign_ssh_data

    def locked_sign(*args: Any, **kwargs: Any) -> Any:
        with _agent_sign_lock:
            return sign(*args, **kwargs)

    key.sign_ssh_data = locked_sign  # type: ignore[method-assign]


def keys_to_offer(target: SSHTarget) -> list[KeyAttempt]:
    offered: list[KeyAttempt] = []
    if target.use_agent and not target.identities_only:
        offered.extend(agent_keys())
    for path in target.key_files:
        attempt = load_private_key(path)
        # ssh's default key names are only tried when they exist; a key the user named is
        # reported even when missing, so a typo in key_file shows up in the error.
        if attempt.key is None and not target.explicit_keys:
            continue
        offered.append(attempt)
    return offered


def authenticate(client: paramiko.Transport, target: SSHTarget, deadline: float) -> None:
    offered = keys_to_offer(target)
    tried: list[str] = []
    skipped: list[str] = []
    for attempt in offered:
        if attempt.key is None:
            skipped.append(f"{attempt.label} ({attempt.problem})")
            continue
        remaining(deadline, "authentication", target)
        tried.append(attempt.label)
        try:
            client.auth_publickey(target.user, attempt.key)
        except paramiko.BadAuthenticationType as exc:
            raise TransportError(
                FailureKind.AUTH_FAILED,
                f"{target.name}: {target.label} does not accept public keys "
                f"(allowed: {', '.join(exc.allowed_types)})",
            ) from exc
        except paramiko.AuthenticationException:
            continue
        except paramiko.SSHException as exc:
            if not client.is_active():
                raise TransportError(
                    FailureKind.UNREACHABLE, f"{target.name}: connection lost during authentication: {exc}"
                ) from exc
            continue
        if client.is_authenticated():
            return
    what = "; ".join(tried) if tried else "no usable key"
    extra = f"; could not use: {'; '.join(skipped)}" if skipped else ""
    raise TransportError(
        FailureKind.AUTH_FAILED,
        f"{target.name}: {target.label} refused user {target.user!r}; keys tried: {what}{extra}",
    )
