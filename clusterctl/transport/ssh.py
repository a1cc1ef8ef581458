"""Reaching a host over SSH with paramiko, the way OpenSSH's ``ssh`` would.

What it honours, in order of precedence: the inventory entry (address, port, user,
``ssh.key_file``, ``ssh.jump_host``, ``ssh.options``), then the user's ssh_config
(``HostName``, ``User``, ``Port``, ``IdentityFile``, ``ProxyJump``, ``ConnectTimeout``,
``HostKeyAlias``, ``IdentitiesOnly``), then ssh's defaults (current user, port 22,
``~/.ssh/id_ed25519``/``id_ecdsa``/``id_rsa``).

Host keys are checked against known_hosts like ``StrictHostKeyChecking yes`` (or
``accept-new`` with ``--accept-new-host-keys``); a changed key is always refused.

Everything that does not depend on the host (ssh_config and known_hosts parsing, loaded
private keys, the agent's key list, jump-host connections) is done once per process and
shared by every host, so a fan-out over hundreds of hosts pays for it once.
"""

from __future__ import annotations

import base64
import contextlib
import errno
import fcntl
import getpass
import hashlib
import hmac
import logging
import os
import select
import socket
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from fnmatch import fnmatch
from pathlib import Path
from typing import TYPE_CHECKING, Any

import paramiko

from clusterctl.transport.base import CommandResult, FailureKind, Transport, TransportError, wrap_command

if TYPE_CHECKING:
    from clusterctl.inventory.model import Host

# paramiko logs every failed handshake at ERROR with a traceback; without a handler Python
# would print those on stderr next to our own one-line failure. --debug still shows them
# (records propagate to the root logger it configures).
logging.getLogger("paramiko").addHandler(logging.NullHandler())

DEFAULT_PORT = 22
DEFAULT_KEY_NAMES = ("id_ed25519", "id_ecdsa", "id_rsa")
READ_CHUNK = 65536

# GSSAPI is never tried (slow and needs a Kerberos setup); the rest of paramiko's defaults
# are fine. curve25519 comes first in paramiko's list already when available.
_DISABLED_ALGORITHMS: dict[str, list[str]] = {}


def user_home() -> Path:
    return Path(os.path.expanduser("~"))


# -- settings resolution ------------------------------------------------------------------


@dataclass(frozen=True)
class JumpHop:
    """One ``[user@]host[:port]`` element of a ProxyJump chain."""

    host: str
    user: str | None = None
    port: int | None = None

    @classmethod
    def parse(cls, spec: str) -> JumpHop:
        text = spec.strip()
        if text.startswith("ssh://"):
            text = text[len("ssh://") :]
        user = None
        if "@" in text:
            user, text = text.rsplit("@", 1)
        port = None
        if text.startswith("["):  # [v6addr]:port
            addr, _, rest = text[1:].partition("]")
            text = addr
            if rest.startswith(":"):
                port = _parse_port(rest[1:], spec)
        elif text.count(":") == 1:
            text, port_text = text.split(":")
            port = _parse_port(port_text, spec)
        if not text:
            raise TransportError(FailureKind.ERROR, f"bad jump host {spec!r}: no host name")
        return cls(host=text, user=user or None, port=port)


def _parse_port(text: str, where: str) -> int:
    try:
        port = int(text)
    except ValueError:
        raise TransportError(FailureKind.ERROR, f"bad port {text!r} in {where!r}") from None
    if not 0 < port < 65536:
        raise TransportError(FailureKind.ERROR, f"port {port} out of range in {where!r}")
    return port


def parse_jump_chain(spec: str | None) -> tuple[JumpHop, ...]:
    if not spec or spec.strip().lower() == "none":
        return ()
    return tuple(JumpHop.parse(part) for part in spec.split(",") if part.strip())


@dataclass(frozen=True)
class SSHTarget:
    """Where and how to connect, after inventory, ssh_config and defaults were merged."""

    #: The name the user knows the host by (inventory name), for messages.
    name: str
    hostname: str
    port: int
    user: str
    key_files: tuple[str, ...]
    #: True when ``key_files`` came from the user (inventory or ssh_config), not ssh's defaults.
    explicit_keys: bool
    identities_only: bool
    jump: tuple[JumpHop, ...]
    connect_timeout_s: float | None
    #: Name the host key is stored under in known_hosts (HostKeyAlias), else the hostname.
    host_key_alias: str | None = None
    use_agent: bool = True

    @property
    def known_hosts_name(self) -> str:
        name = self.host_key_alias or self.hostname
        return name if self.port == DEFAULT_PORT else f"[{name}]:{self.port}"

    @property
    def label(self) -> str:
        return f"{self.user}@{self.hostname}:{self.port}"


_config_lock = threading.Lock()
_config_cache: dict[str, paramiko.SSHConfig | None] = {}


def load_ssh_config(path: str | None) -> paramiko.SSHConfig | None:
    """The parsed ssh_config (``~/.ssh/config`` when ``path`` is None), parsed once per process."""
    explicit = path is not None
    file = Path(path).expanduser() if path else user_home() / ".ssh" / "config"
    key = str(file)
    with _config_lock:
        if key in _config_cache:
            return _config_cache[key]
        config: paramiko.SSHConfig | None = None
        if file.is_file():
            try:
                config = paramiko.SSHConfig.from_path(key)
            except (OSError, paramiko.ssh_exception.ConfigParseError) as exc:
                raise TransportError(FailureKind.ERROR, f"cannot read ssh_config {file}: {exc}") from exc
        elif explicit:
            raise TransportError(FailureKind.ERROR, f"ssh_config file {file} does not exist")
        _config_cache[key] = config
        return config


def _lookup(config: paramiko.SSHConfig | None, name: str) -> dict[str, Any]:
    if config is None:
        return {}
    try:
        found = dict(config.lookup(name))
    except Exception as exc:  # paramiko raises several kinds for odd configs
        raise TransportError(FailureKind.ERROR, f"ssh_config lookup for {name!r} failed: {exc}") from exc
    # paramiko fills 'hostname' with the looked-up name itself when nothing matched.
    if found.get("hostname") == name:
        found.pop("hostname")
    return found


def _first(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, list):
        return str(value[0]) if value else None
    return str(value)


def _yes(value: Any) -> bool:
    return str(_first(value) or "").lower() in ("yes", "true", "1")


def resolve_target(
    *,
    name: str,
    address: str | None = None,
    port: int | None = None,
    user: str | None = None,
    key_file: str | None = None,
    jump_host: str | None = None,
    options: Sequence[tuple[str, str]] = (),
    config: paramiko.SSHConfig | None = None,
    default_connect_timeout_s: float | None = None,
) -> SSHTarget:
    """Merge inventory values (win), ssh_config values, then ssh's defaults.

    ssh_config is looked up by the inventory name (users write ``Host gpu-*``); values that
    the name's lookup leaves unset are also looked up by the address, as ssh would if it
    had been given the address.
    """
    found = _lookup(config, name)
    if address and address != name:
        for k, v in _lookup(config, address).items():
            found.setdefault(k, v)
    # Inventory ``ssh.options`` are ssh_config-style settings that win over the file.
    for k, v in options:
        found[k.lower()] = v

    hostname = address or _first(found.get("hostname")) or name
    resolved_port = port or (
        _parse_port(str(_first(found["port"])), f"Port for {name}") if found.get("port") else None
    )
    resolved_user = user or _first(found.get("user")) or getpass.getuser()

    identity_files = found.get("identityfile") or []
    if isinstance(identity_files, str):
        identity_files = [identity_files]
    explicit_keys = bool(key_file) or bool(identity_files)
    if key_file:
        keys: tuple[str, ...] = (key_file,)
    elif identity_files:
        keys = tuple(str(p) for p in identity_files)
    else:
        keys = tuple(str(user_home() / ".ssh" / n) for n in DEFAULT_KEY_NAMES)
    keys = tuple(os.path.expanduser(k) for k in keys)

    jump_spec = jump_host if jump_host is not None else _first(found.get("proxyjump"))

    timeout = default_connect_timeout_s
    if found.get("connecttimeout"):
        try:
            configured = float(str(_first(found["connecttimeout"])))
        except ValueError:
            raise TransportError(FailureKind.ERROR, f"bad ConnectTimeout for {name}") from None
        timeout = configured if timeout is None else min(timeout, configured)

    agent_setting = str(_first(found.get("identityagent")) or "").lower()
    return SSHTarget(
        name=name,
        hostname=hostname,
        port=resolved_port or DEFAULT_PORT,
        user=resolved_user,
        key_files=keys,
        explicit_keys=explicit_keys,
        identities_only=_yes(found.get("identitiesonly")),
        jump=parse_jump_chain(jump_spec),
        connect_timeout_s=timeout,
        host_key_alias=_first(found.get("hostkeyalias")),
        use_agent=agent_setting != "none",
    )


def target_for_host(
    host: Host, config: paramiko.SSHConfig | None, connect_timeout_s: float | None
) -> SSHTarget:
    return resolve_target(
        name=host.name,
        address=host.address,
        port=host.port,
        user=host.user,
        key_file=host.ssh.key_file,
        jump_host=host.ssh.jump_host,
        options=host.ssh.options,
        config=config,
        default_connect_timeout_s=connect_timeout_s,
    )


# -- known_hosts ------------------------------------------------------------------------


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


# -- client keys --------------------------------------------------------------------------


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


# -- connecting ---------------------------------------------------------------------------


def open_socket(target: SSHTarget, timeout_s: float) -> socket.socket:
    """A TCP connection to the target, errors mapped to UNREACHABLE with the reason."""
    where = f"{target.hostname}:{target.port}"
    try:
        sock = socket.create_connection((target.hostname, target.port), timeout=timeout_s)
    except socket.gaierror as exc:
        raise TransportError(
            FailureKind.UNREACHABLE,
            f"{target.name}: cannot resolve host name {target.hostname!r} ({exc.strerror})",
        ) from exc
    except ConnectionRefusedError as exc:
        raise TransportError(
            FailureKind.UNREACHABLE, f"{target.name}: connection refused by {where} (no sshd listening?)"
        ) from exc
    except TimeoutError as exc:
        raise TransportError(
            FailureKind.UNREACHABLE, f"{target.name}: no TCP connection to {where} within {timeout_s:g}s"
        ) from exc
    except OSError as exc:
        reason = {
            errno.EHOSTUNREACH: "no route to host",
            errno.ENETUNREACH: "network unreachable",
        }.get(exc.errno or 0, exc.strerror or str(exc))
        raise TransportError(
            FailureKind.UNREACHABLE, f"{target.name}: cannot connect to {where}: {reason}"
        ) from exc
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


@dataclass
class ConnectSettings:
    known_hosts: KnownHosts
    accept_new_host_keys: bool
    config: paramiko.SSHConfig | None
    connect_timeout_s: float


def _remaining(deadline: float, what: str, target: SSHTarget) -> float:
    left = deadline - time.monotonic()
    if left <= 0:
        raise TransportError(FailureKind.TIMED_OUT, f"{target.name}: {what} did not finish in time")
    return left


def open_ssh(
    target: SSHTarget,
    sock: socket.socket | paramiko.Channel,
    settings: ConnectSettings,
    deadline: float,
    on_transport: Callable[[paramiko.Transport], None] | None = None,
) -> paramiko.Transport:
    """Handshake, host key check and authentication on an open socket (or jump channel)."""
    client = paramiko.Transport(sock, disabled_algorithms=_DISABLED_ALGORITHMS)
    if on_transport is not None:
        on_transport(client)
    try:
        budget = _remaining(deadline, "the SSH handshake", target)
        client.banner_timeout = budget
        client.handshake_timeout = budget
        client.auth_timeout = budget
        known_types = [
            e.key_type for e in settings.known_hosts.entries_for(target.known_hosts_name) if not e.marker
        ]
        if known_types:
            # Ask for the key type we have on record first, as ssh does, so a host with several
            # keys is checked against the one we know instead of looking "changed".
            options = client.get_security_options()
            preferred = [t for t in options.key_types if t in known_types or _rsa_family(t, known_types)]
            options.key_types = preferred + [t for t in options.key_types if t not in preferred]
        done = threading.Event()
        client.start_client(event=done)
        if not done.wait(budget):
            if not getattr(client, "remote_version", ""):
                raise _handshake_error(None, target, budget, banner_missing=True)
            raise TransportError(
                FailureKind.TIMED_OUT,
                f"{target.name}: {target.hostname}:{target.port} accepted the TCP connection but the "
                f"SSH handshake did not finish within {budget:g}s (sshd hung or overloaded?)",
            )
        if not client.is_active():
            raise _handshake_error(client.get_exception(), target, budget)
        server_key = client.get_remote_server_key()
        check_host_key(settings.known_hosts, target, server_key, accept_new=settings.accept_new_host_keys)
        authenticate(client, target, deadline)
    except BaseException:
        client.close()
        raise
    return client


def _rsa_family(key_type: str, known: list[str]) -> bool:
    return key_type.startswith("rsa-sha2-") and "ssh-rsa" in known


def _handshake_error(
    exc: BaseException | None, target: SSHTarget, budget: float, *, banner_missing: bool = False
) -> TransportError:
    text = str(exc) if exc else "negotiation failed"
    if banner_missing or "banner" in text.lower():
        return TransportError(
            FailureKind.TIMED_OUT,
            f"{target.name}: {target.hostname}:{target.port} accepted the TCP connection but sent "
            f"no SSH banner within {budget:g}s (sshd hung, stopped or overloaded?)",
        )
    if isinstance(exc, (EOFError, ConnectionResetError)) or "eof" in text.lower():
        return TransportError(
            FailureKind.UNREACHABLE,
            f"{target.name}: {target.hostname}:{target.port} closed the connection during "
            f"the SSH handshake ({text or type(exc).__name__})",
        )
    return TransportError(FailureKind.ERROR, f"{target.name}: SSH handshake failed: {text}")


def authenticate(client: paramiko.Transport, target: SSHTarget, deadline: float) -> None:
    offered = keys_to_offer(target)
    tried: list[str] = []
    skipped: list[str] = []
    for attempt in offered:
        if attempt.key is None:
            skipped.append(f"{attempt.label} ({attempt.problem})")
            continue
        _remaining(deadline, "authentication", target)
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


class _JumpPool:
    """Connections to jump hosts, shared by every host behind them and closed with the last one."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._conns: dict[tuple[Any, ...], tuple[paramiko.Transport, int]] = {}
        self._building: dict[tuple[Any, ...], threading.Lock] = {}

    def acquire(self, key: tuple[Any, ...], build: Callable[[], paramiko.Transport]) -> paramiko.Transport:
        with self._lock:
            gate = self._building.setdefault(key, threading.Lock())
        with gate:  # one thread builds a jump connection; the others wait and share it
            with self._lock:
                held = self._conns.get(key)
                if held is not None and held[0].is_active():
                    self._conns[key] = (held[0], held[1] + 1)
                    return held[0]
            transport = build()
            with self._lock:
                self._conns[key] = (transport, 1)
            return transport

    def release(self, key: tuple[Any, ...]) -> None:
        to_close = None
        with self._lock:
            held = self._conns.get(key)
            if held is None:
                return
            if held[1] <= 1:
                del self._conns[key]
                to_close = held[0]
            else:
                self._conns[key] = (held[0], held[1] - 1)
        if to_close is not None:
            to_close.close()


_jumps = _JumpPool()


# -- the transport ------------------------------------------------------------------------


class SSHTransport(Transport):
    """Runs commands on one host over one SSH connection, opened on first use and reused."""

    def __init__(
        self,
        host: Host,
        *,
        accept_new_host_keys: bool = False,
        ssh_config_path: str | None = None,
        known_hosts_path: str | None = None,
        connect_timeout_s: float = 30.0,
    ) -> None:
        super().__init__(host)
        self.accept_new_host_keys = accept_new_host_keys
        self.ssh_config_path = ssh_config_path
        self.known_hosts_path = known_hosts_path
        self.connect_timeout_s = connect_timeout_s
        self._lock = threading.Lock()
        self._client: paramiko.Transport | None = None
        self._pending: list[paramiko.Transport] = []
        self._sock: socket.socket | None = None
        self._jump_keys: list[tuple[Any, ...]] = []
        self._closed = False
        self._target: SSHTarget | None = None

    # -- connection ---------------------------------------------------------------------

    @property
    def target(self) -> SSHTarget:
        if self._target is None:
            config = load_ssh_config(self.ssh_config_path)
            self._target = target_for_host(self.host, config, self.connect_timeout_s)
        return self._target

    def _connection(self, timeout: float | None) -> paramiko.Transport:
        with self._lock:
            if self._closed:
                raise TransportError(FailureKind.ERROR, f"{self.host.name}: connection closed")
            if self._client is not None and self._client.is_active():
                return self._client
            target = self.target
            limit = target.connect_timeout_s or self.connect_timeout_s
            if timeout is not None:
                limit = min(limit, timeout)
            deadline = time.monotonic() + limit
            settings = ConnectSettings(
                known_hosts=known_hosts_file(self.known_hosts_path),
                accept_new_host_keys=self.accept_new_host_keys,
                config=load_ssh_config(self.ssh_config_path),
                connect_timeout_s=limit,
            )
            sock = self._open_path(target, settings, deadline)
            client = open_ssh(target, sock, settings, deadline, on_transport=self._pending.append)
            self._pending.clear()
            if self._closed:  # close() ran while we were connecting: do not leave a connection behind
                client.close()
                raise TransportError(FailureKind.TIMED_OUT, f"{self.host.name}: connection closed while connecting")
            self._client = client
            return client

    def _open_path(
        self, target: SSHTarget, settings: ConnectSettings, deadline: float
    ) -> socket.socket | paramiko.Channel:
        """A socket to the target, directly or through its ProxyJump chain."""
        if not target.jump:
            sock = open_socket(target, _remaining(deadline, "the TCP connection", target))
            self._sock = sock
            return sock
        via: paramiko.Transport | None = None
        chain_key: tuple[Any, ...] = ()
        for hop in target.jump:
            hop_target = resolve_target(
                name=hop.host,
                port=hop.port,
                user=hop.user,
                jump_host="none",
                config=settings.config,
                default_connect_timeout_s=settings.connect_timeout_s,
            )
            chain_key = (
                *chain_key,
                hop_target.label,
                settings.known_hosts.path,
                settings.accept_new_host_keys,
            )
            parent = via

            def build(
                hop_target: SSHTarget = hop_target, parent: paramiko.Transport | None = parent
            ) -> paramiko.Transport:
                if parent is None:
                    hop_sock: socket.socket | paramiko.Channel = open_socket(
                        hop_target, _remaining(deadline, "the TCP connection", hop_target)
                    )
                else:
                    hop_sock = _direct_tcpip(parent, hop_target, target, deadline)
                return open_ssh(hop_target, hop_sock, settings, deadline)

            via = _jumps.acquire(chain_key, build)
            self._jump_keys.append(chain_key)
        assert via is not None
        return _direct_tcpip(via, target, target, deadline)

    def close(self) -> None:
        # Called from the fan-out's thread under a hung host: must not wait for the lock
        # that the hung call holds.
        self._closed = True
        client, self._client = self._client, None
        pending, self._pending = list(self._pending), []
        sock, self._sock = self._sock, None
        for t in [*pending, *([client] if client else [])]:
            with contextlib.suppress(Exception):  # best effort while tearing down
                t.close()
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.close()
        keys, self._jump_keys = self._jump_keys, []
        for key in keys:
            _jumps.release(key)

    # -- commands -----------------------------------------------------------------------

    def run(
        self,
        command: str,
        *,
        sudo: bool = False,
        timeout: float | None = None,
        env: Mapping[str, str] | None = None,
        stdin: bytes | None = None,
    ) -> CommandResult:
        start = time.monotonic()
        line = wrap_command(command, sudo=sudo, env=env)
        client = self._connection(timeout)
        left = None if timeout is None else timeout - (time.monotonic() - start)
        if left is not None and left <= 0:
            raise TransportError(FailureKind.TIMED_OUT, f"{self.host.name}: no time left to run: {command}")
        try:
            channel = client.open_session(timeout=left)
        except (paramiko.SSHException, EOFError, OSError) as exc:
            if self._closed:
                raise TransportError(
                    FailureKind.TIMED_OUT, f"{self.host.name}: connection closed: {command}"
                ) from exc
            raise TransportError(
                FailureKind.UNREACHABLE, f"{self.host.name}: cannot open a channel: {exc}"
            ) from exc
        try:
            channel.exec_command(line)
            writer = _feed_stdin(channel, stdin)
            out, err, code = self._collect(channel, command, None if left is None else timeout)
            if writer is not None:
                writer.join(timeout=1.0)
        except TransportError:
            channel.close()
            raise
        except (paramiko.SSHException, EOFError, OSError) as exc:
            channel.close()
            kind = FailureKind.TIMED_OUT if self._closed else FailureKind.UNREACHABLE
            raise TransportError(
                kind, f"{self.host.name}: connection lost while running {command}: {exc}"
            ) from exc
        channel.close()
        return CommandResult(
            command,
            out.decode(errors="replace"),
            err.decode(errors="replace"),
            code,
            round(time.monotonic() - start, 4),
        )

    def _collect(
        self, channel: paramiko.Channel, command: str, budget: float | None
    ) -> tuple[bytes, bytes, int]:
        """Read stdout and stderr together until exit: one stream filling up never blocks the other."""
        deadline = None if budget is None else time.monotonic() + budget
        out: list[bytes] = []
        err: list[bytes] = []
        while True:
            progressed = False
            while channel.recv_ready():
                out.append(channel.recv(READ_CHUNK))
                progressed = True
            while channel.recv_stderr_ready():
                err.append(channel.recv_stderr(READ_CHUNK))
                progressed = True
            if progressed:
                continue
            if channel.exit_status_ready() or channel.closed:
                # Data sent before the exit status is already buffered; drain it once more.
                while channel.recv_ready():
                    out.append(channel.recv(READ_CHUNK))
                while channel.recv_stderr_ready():
                    err.append(channel.recv_stderr(READ_CHUNK))
                if self._closed:
                    raise TransportError(
                        FailureKind.TIMED_OUT, f"{self.host.name}: connection closed: {command}"
                    )
                if not channel.exit_status_ready():
                    raise TransportError(
                        FailureKind.UNREACHABLE, f"{self.host.name}: connection lost while running: {command}"
                    )
                return b"".join(out), b"".join(err), channel.recv_exit_status()
            wait = 0.5
            if deadline is not None:
                wait = min(wait, deadline - time.monotonic())
                if wait <= 0:
                    raise TransportError(
                        FailureKind.TIMED_OUT, f"{self.host.name}: no answer within {budget:g}s: {command}"
                    )
            select.select([channel], [], [], wait)


def _direct_tcpip(
    via: paramiko.Transport, dest: SSHTarget, final: SSHTarget, deadline: float
) -> paramiko.Channel:
    try:
        return via.open_channel(
            "direct-tcpip",
            (dest.hostname, dest.port),
            ("127.0.0.1", 0),
            timeout=_remaining(deadline, "the jump host's forwarding", final),
        )
    except paramiko.ChannelException as exc:
        raise TransportError(
            FailureKind.UNREACHABLE,
            f"{final.name}: the jump host could not connect to {dest.hostname}:{dest.port}: {exc.text}",
        ) from exc
    except (paramiko.SSHException, EOFError, OSError) as exc:
        raise TransportError(
            FailureKind.UNREACHABLE, f"{final.name}: forwarding through the jump host failed: {exc}"
        ) from exc


def _feed_stdin(channel: paramiko.Channel, data: bytes | None) -> threading.Thread | None:
    """Write stdin from a thread so a command that answers while reading cannot deadlock us."""
    if data is None:
        channel.shutdown_write()
        return None

    def feed() -> None:
        try:
            channel.sendall(data)
        except (OSError, paramiko.SSHException, EOFError):
            pass
        finally:
            with contextlib.suppress(OSError, paramiko.SSHException, EOFError):
                channel.shutdown_write()

    thread = threading.Thread(target=feed, daemon=True, name="clusterctl-ssh-stdin")
    thread.start()
    return thread


__all__ = [
    "JumpHop",
    "KnownHosts",
    "SSHTarget",
    "SSHTransport",
    "check_host_key",
    "known_hosts_file",
    "load_ssh_config",
    "parse_jump_chain",
    "resolve_target",
    "sha256_fingerprint",
]
