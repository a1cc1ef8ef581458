"""Opening one SSH connection: the TCP socket, the handshake, the host key check, then auth."""

from __future__ import annotations

import errno
import logging
import socket
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import paramiko
from paramiko.packet import Packetizer

from clusterctl.transport.base import FailureKind, TransportError
from clusterctl.transport.ssh.auth import Credentials, authenticate
from clusterctl.transport.ssh.certs import CERT_SUFFIX
from clusterctl.transport.ssh.config import SSHTarget, remaining
from clusterctl.transport.ssh.hostkeys import check_host_key, host_key_policy
from clusterctl.wording import seconds

# paramiko logs every failed handshake at ERROR with a traceback; without a handler Python
# would print those on stderr next to our own one-line failure. --debug still shows them
# (records propagate to the root logger it configures).
logging.getLogger("paramiko").addHandler(logging.NullHandler())


# GSSAPI is never tried (slow and needs a Kerberos setup); the rest of paramiko's defaults
# are fine. curve25519 comes first in paramiko's list already when available.
_DISABLED_ALGORITHMS: dict[str, list[str]] = {}

#: Asked for first: AES-GCM, an AEAD cipher of OpenSSH's default list, authenticates each packet
#: itself (in C, through cryptography). paramiko's first choice, aes128-ctr with hmac-sha2-256,
#: computes an HMAC per packet and compares it byte by byte in Python: a tenth of a short
#: command's client CPU. paramiko's other ciphers stay after these, for servers without GCM.
AEAD_CIPHERS = ("aes128-gcm@openssh.com", "aes256-gcm@openssh.com")


def prefer_aead(offered: Sequence[str]) -> tuple[str, ...]:
    """``offered`` with its AES-GCM ciphers moved to the front, nothing added or dropped."""
    first = tuple(c for c in AEAD_CIPHERS if c in offered)
    return first + tuple(c for c in offered if c not in first)


class _Packetizer(Packetizer):
    def start_handshake(self, timeout: float) -> None:
        """No timer thread: ``open_ssh`` bounds the handshake by its own deadline and closes the
        transport when it passes (paramiko starts a ``threading.Timer`` per connection for this)."""


class ReadAheadSocket:
    """A connected socket whose ``recv`` reads what has arrived, up to 64 KiB, and hands it out
    in the sizes asked for.

    paramiko reads each packet in two calls, its length then the rest, each one a ``poll`` and a
    ``recv`` (its socket has a timeout); a flight of several packets (a server's answer after
    key exchange, after login, a command's output with its exit status) is read here in one
    call instead. Only ``recv`` differs from the socket's own; the rest is the socket's.
    """

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        #: What the last read brought beyond what was asked for, from ``_at`` on (an offset, so
        #: that handing out many small packets copies only each packet, not the rest each time).
        self._held = b""
        self._at = 0

    def recv(self, n: int) -> bytes:
        held, at = self._held, self._at
        if at < len(held):
            self._at = at + n
            return held[at : at + n]
        data = self.sock.recv(max(n, READ_AHEAD))
        if len(data) <= n:
            self._held, self._at = b"", 0
            return data
        self._held, self._at = data, n
        return data[:n]

    @property
    def _closed(self) -> bool:
        return bool(getattr(self.sock, "_closed", False))

    def __getattr__(self, name: str) -> Any:
        return getattr(self.sock, name)


#: How much ``ReadAheadSocket`` asks the kernel for at once.
READ_AHEAD = 65536


class ClientTransport(paramiko.Transport):
    """paramiko's client transport with fewer per-host costs: its socket read ahead
    (``ReadAheadSocket``), and two things that buy nothing here left out.

    The handshake timer is ``open_ssh``'s deadline instead of a thread per connection
    (``_Packetizer``); the SSH_MSG_DEBUG that OpenSSH sends after each publickey login ("key
    options: ...") is only decoded when paramiko's logger would show it (``--debug``): paramiko
    formats it through ``safe_string``, byte by byte, for a log line nobody reads.
    """

    def __init__(self, sock: socket.socket | paramiko.Channel) -> None:
        # paramiko takes any socket-like object (its stubs name only the real kinds).
        wrapped: Any = ReadAheadSocket(sock) if isinstance(sock, socket.socket) else sock
        super().__init__(wrapped, disabled_algorithms=_DISABLED_ALGORITHMS, packetizer_class=_Packetizer)

    def _parse_debug(self, m: paramiko.Message) -> None:
        if self.logger.isEnabledFor(logging.DEBUG):
            super()._parse_debug(m)  # type: ignore[misc]


def open_socket(target: SSHTarget, timeout_s: float) -> socket.socket:
    """A TCP connection to the target, errors mapped to UNREACHABLE with the reason."""
    where = f"{target.hostname}:{target.port}"
    try:
        sock = socket.create_connection((target.hostname, target.port), timeout=timeout_s)
    except (socket.gaierror, UnicodeError) as exc:  # UnicodeError: a name IDNA cannot encode ('a..b', a long label)
        reason = getattr(exc, "strerror", "not a DNS name")
        raise TransportError(
            FailureKind.UNREACHABLE, f"cannot resolve host name {target.hostname!r} ({reason})"
        ) from exc
    except ConnectionRefusedError as exc:
        raise TransportError(
            FailureKind.UNREACHABLE, f"connection refused by {where} (no sshd listening?)"
        ) from exc
    except TimeoutError as exc:
        raise TransportError(
            FailureKind.UNREACHABLE, f"no TCP connection to {where} within {seconds(timeout_s)}"
        ) from exc
    except OSError as exc:
        reason = {
            errno.EHOSTUNREACH: "no route to host",
            errno.ENETUNREACH: "network unreachable",
        }.get(exc.errno or 0, exc.strerror or str(exc))
        raise TransportError(
            FailureKind.UNREACHABLE, f"cannot connect to {where}: {reason}"
        ) from exc
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


@dataclass
class ConnectSettings:
    #: ``--known-hosts``: when given, the only known_hosts file read and written.
    known_hosts_override: str | None
    accept_new_host_keys: bool
    config: paramiko.SSHConfig | None
    connect_timeout_s: float
    credentials: Credentials = field(default_factory=Credentials)


def open_ssh(
    target: SSHTarget,
    sock: socket.socket | paramiko.Channel,
    settings: ConnectSettings,
    deadline: float,
    on_transport: Callable[[paramiko.Transport], None] | None = None,
) -> paramiko.Transport:
    """Handshake, host key check and authentication on an open socket (or jump channel)."""
    client = ClientTransport(sock)
    if on_transport is not None:
        on_transport(client)
    try:
        budget = remaining(deadline, "the SSH handshake")
        client.banner_timeout = budget
        client.handshake_timeout = budget
        client.auth_timeout = budget
        policy = host_key_policy(
            target, override=settings.known_hosts_override, accept_new=settings.accept_new_host_keys
        )
        known_types = [e.key_type for _, e in policy.entries_for(target.known_hosts_name()) if not e.marker]
        options = client.get_security_options()
        options.ciphers = prefer_aead(options.ciphers)
        if known_types:
            # Ask for the key type we have on record first, as ssh does, so a host with several
            # keys is checked against the one we know instead of looking "changed".
            preferred = [t for t in options.key_types
                         if t in known_types or (t.startswith("rsa-sha2-") and "ssh-rsa" in known_types)]
            options.key_types = preferred + [t for t in options.key_types if t not in preferred]
        elif policy.entries_for(target.known_hosts_name(), authorities=True):
            # A CA vouches for this host: ask for its certificate first, as ssh does.
            # paramiko appends "<type>-cert-v01" variants after its plain list itself; listing
            # them first here puts them ahead (the doubled names it also derives match nothing).
            plain = [t for t in client.preferred_keys if not t.endswith(CERT_SUFFIX)]
            client._preferred_keys = tuple([t + CERT_SUFFIX for t in plain] + plain)  # type: ignore[attr-defined]
        done = threading.Event()
        client.start_client(event=done)
        if not done.wait(budget):
            if not getattr(client, "remote_version", ""):
                raise _handshake_error(None, target, budget, banner_missing=True)
            raise TransportError(
                FailureKind.TIMED_OUT,
                f"{target.hostname}:{target.port} accepted the TCP connection but the "
                f"SSH handshake did not finish within {seconds(budget)} (sshd hung or overloaded?)",
            )
        if not client.is_active():
            raise _handshake_error(client.get_exception(), target, budget)
        server_key = client.get_remote_server_key()
        peer = _peer_ip(sock)
        check_host_key(policy, target, server_key, peer_ip=peer)
        authenticate(client, target, deadline, settings.credentials)
    except BaseException:
        client.close()
        raise
    return client


def _peer_ip(sock: socket.socket | paramiko.Channel) -> str | None:
    try:
        return str(sock.getpeername()[0]) if isinstance(sock, socket.socket) else None
    except OSError:
        return None


def _handshake_error(
    exc: BaseException | None, target: SSHTarget, budget: float, *, banner_missing: bool = False
) -> TransportError:
    text = str(exc) if exc else "negotiation failed"
    if banner_missing or "banner" in text.lower():
        return TransportError(
            FailureKind.TIMED_OUT,
            f"{target.hostname}:{target.port} accepted the TCP connection but sent "
            f"no SSH banner within {seconds(budget)} (sshd hung, stopped or overloaded?)",
        )
    if isinstance(exc, (EOFError, ConnectionResetError)) or "eof" in text.lower():
        return TransportError(
            FailureKind.UNREACHABLE,
            f"{target.hostname}:{target.port} closed the connection during "
            "the SSH handshake" + (f" ({text})" if text else ""),
        )
    return TransportError(FailureKind.ERROR, f"SSH handshake failed: {text}")
