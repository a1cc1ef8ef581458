"""The receiver's HTTP side: who may call it, TLS, and a bound on every connection.

Authentication is what Alertmanager's ``webhook_configs`` ``http_config`` sends: a bearer token
(``authorization: {credentials_file: ...}``; the receiver reads the same token from its own
file and compares in constant time) and, optionally, a client certificate signed by the CA
given with ``client_ca`` (``tls_config: {cert_file, key_file}``: mutual TLS). TLS is the
standard library's ``ssl`` with its server defaults (TLS 1.2 or newer).

Listening on anything but loopback is refused unless callers are authenticated and the
connection is encrypted (``check_exposure``): a bearer token sent in clear text is anyone's who
can see the network.

Bounds: at most ``Limits.connections`` connections at once (more are closed at once), each
socket read waits at most ``idle_s``, and a request must be read whole, TLS handshake
included, within ``request_s`` (a watchdog closes the connection otherwise: a client that
trickles one byte a second is cut off too). Bodies are at most ``body_bytes``. Every connection
that fails is one log line, never a traceback.
"""

from __future__ import annotations

import contextlib
import hmac
import json
import os
import socket
import ssl
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from clusterctl.errors import UsageError
from clusterctl.inventory import values
from clusterctl.inventory.cluster_sections import by_rule
from clusterctl.quarantine.webhook_payload import clip
from clusterctl.secret import read_secret_file, register_secret

PATHS = ("/", "/webhook")
WRONG_PATH = {"error": "POST Alertmanager webhooks to " + " or ".join(PATHS)}
#: ``handle(body, caller) -> (HTTP status, JSON answer)``.
Handle = Callable[[bytes, str], "tuple[int, dict[str, Any]]"]
Say = Callable[..., None]


@dataclass(frozen=True)
class ListenAddress:
    host: str
    port: int

    @property
    def loopback(self) -> bool:
        # A name other than localhost is not: whatever it resolves to may be reachable from elsewhere.
        ip = values.ip_literal(self.host)
        return self.host == "localhost" or (ip is not None and ip.is_loopback)

    def url(self, port: int, *, tls: bool = False) -> str:
        """The webhook's URL on ``port`` (the one bound: ``--listen :0`` asks for any)."""
        return f"{'https' if tls else 'http'}://{values.join_host_port(self.host, port)}/webhook"


def parse_listen(text: str) -> ListenAddress:
    """``HOST:PORT``, ``[IPV6]:PORT`` or ``:PORT`` (loopback)."""
    host, sep, port = text.strip().rpartition(":")
    if not sep or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise UsageError(f"--listen takes HOST:PORT such as 127.0.0.1:9095 or [::1]:9095, got {text!r}",
                         field="--listen")
    if ":" in host and not (host.startswith("[") and host.endswith("]")):
        raise UsageError(f"--listen: write an IPv6 address in brackets, as [{host}]:{port}", field="--listen")
    return ListenAddress(by_rule(values.host_port, host, "--listen")[0] if host else "127.0.0.1", int(port))


class TokenFile:
    """The bearer token callers must send, read from a file (never from an option: it would show in ``ps``).

    Re-read when the file changes, so a rotated token takes effect without a restart (Alertmanager
    re-reads its ``credentials_file`` for each request too). The file must not be readable by
    others (mode 0600 or 0640).
    """

    def __init__(self, path: str) -> None:
        self.path = path
        self._seen: tuple[int, int, int] | None = None
        self._token = b""
        self._lock = threading.Lock()
        self._read()

    def _read(self) -> None:
        where = f"--token-file {self.path}"
        value, info = read_secret_file(self.path, "receiver's token", where, group_may_read=True,
                                       field="--token-file")
        token = value.encode()
        if any(c < 0x21 or c > 0x7E for c in token):
            raise UsageError(f"{where}: must hold one token (printable ASCII, no spaces), as Alertmanager's "
                             "credentials_file does", field="--token-file")
        if len(token) < 16:
            raise UsageError(f"{where}: the token has {len(token)} characters; use at least 16 (for example "
                             f"openssl rand -hex 32 > {self.path})", field="--token-file")
        register_secret(token.decode())
        self._token = token
        self._seen = (info.st_ino, info.st_mtime_ns, info.st_size)

    def _current(self) -> bytes:
        with self._lock:
            try:
                info = os.stat(self.path)
                if (info.st_ino, info.st_mtime_ns, info.st_size) != self._seen:
                    self._read()
            except (OSError, UsageError):
                pass  # a half-written or removed file: the last good token stays
            return self._token

    def admits(self, authorization: str | None) -> bool:
        """Whether an ``Authorization`` header carries the token (compared in constant time)."""
        scheme, _, credentials = (authorization or "").strip().partition(" ")
        if scheme.lower() != "bearer":
            return False
        return hmac.compare_digest(credentials.strip().encode("utf-8", "replace"), self._current())


def tls_context(cert: str, key: str, client_ca: str | None = None) -> ssl.SSLContext:
    """A server context (the standard library's defaults: TLS 1.2 or newer), requiring a client
    certificate signed by ``client_ca`` when given."""
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    try:
        context.load_cert_chain(cert, key)
    except (OSError, ssl.SSLError) as exc:
        raise UsageError(f"--tls-cert {cert} / --tls-key {key}: cannot load the certificate and key: "
                         f"{getattr(exc, 'strerror', None) or exc}", field="--tls-cert") from None
    if client_ca is not None:
        try:
            context.load_verify_locations(cafile=client_ca)
        except (OSError, ssl.SSLError) as exc:
            raise UsageError(f"--client-ca {client_ca}: cannot load the CA certificates: "
                             f"{getattr(exc, 'strerror', None) or exc}", field="--client-ca") from None
        context.verify_mode = ssl.CERT_REQUIRED
    return context


@dataclass(frozen=True)
class Security:
    token: TokenFile | None = None
    tls: ssl.SSLContext | None = None
    #: Client certificates are required (mutual TLS).
    mutual: bool = False

    @property
    def authenticates(self) -> bool:
        return self.token is not None or self.mutual


def check_exposure(address: ListenAddress, security: Security) -> None:
    """Refuse (exit 2) to listen beyond loopback without authenticated, encrypted callers."""
    if address.loopback or (security.authenticates and security.tls is not None):
        return
    missing = "authentication and TLS" if not security.authenticates and security.tls is None else \
        "authentication" if not security.authenticates else "TLS (the token would cross the network in clear text)"
    raise UsageError(
        f"refusing to listen on {address.host}:{address.port} without {missing}: anyone who reaches that "
        "address could quarantine and drain the cluster's nodes. Give --tls-cert and --tls-key, and "
        "--token-file FILE (the bearer token Alertmanager sends with http_config.authorization."
        "credentials_file) or --client-ca FILE (mutual TLS); or listen on loopback (127.0.0.1:9095 or "
        "[::1]:9095).", field="--listen")


@dataclass(frozen=True)
class Limits:
    body_bytes: int = 1 << 20
    #: The whole request read (TLS handshake, headers, body) within this.
    request_s: float = 10.0
    #: Each socket read within this.
    idle_s: float = 5.0
    connections: int = 64
    #: Log lines about callers turned away (401, cut off, refused) per minute; the rest are counted.
    noise_per_minute: int = 30


class NoiseLimit:
    """At most ``per_minute`` log lines a minute about callers turned away, so that a flood of bad requests
    cannot fill the log's disk; the lines left out are counted and said in one line when the next minute
    begins."""

    def __init__(self, say: Say, per_minute: int, clock: Callable[[], float] = time.monotonic) -> None:
        self.say, self.per_minute, self.clock = say, per_minute, clock
        self._lock = threading.Lock()
        self._started = clock()
        self._said = self._left_out = 0

    def __call__(self, **entry: object) -> None:
        with self._lock:
            now = self.clock()
            summary = None
            if now - self._started >= 60:
                if self._left_out:
                    summary = f"{self._left_out} more line(s) about callers turned away were left out in a minute"
                self._started, self._said, self._left_out = now, 0, 0
            if self._said >= self.per_minute:
                self._left_out += 1
                return
            self._said += 1
        if summary:
            self.say(decision="left out", why=summary)
        self.say(**entry)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 64

    def __init__(self, address: ListenAddress, security: Security, limits: Limits, say: Say,
                 handler: type[BaseHTTPRequestHandler]) -> None:
        self.address_family = socket.AF_INET6 if ":" in address.host else socket.AF_INET  # an IPv6 address
        self.security, self.limits, self.say = security, limits, say
        #: Lines about callers turned away go through this.
        self.noise = NoiseLimit(say, limits.noise_per_minute)
        self._slots = threading.BoundedSemaphore(limits.connections)
        super().__init__((address.host, address.port), handler)

    def get_request(self) -> tuple[socket.socket, Any]:
        sock, peer = self.socket.accept()
        if self.security.tls is not None:
            # The handshake happens in the connection's own thread, under its timeouts: a client that
            # never finishes one holds nothing but its thread.
            sock = self.security.tls.wrap_socket(sock, server_side=True, do_handshake_on_connect=False)
        return sock, peer

    def process_request(self, request: Any, client_address: Any) -> None:
        if not self._slots.acquire(blocking=False):
            self.noise(decision="refused", caller=_peer(client_address),
                     why=f"{self.limits.connections} connections open already: closed")
            self.shutdown_request(request)
            return
        try:
            super().process_request(request, client_address)
        except BaseException:
            self._slots.release()
            raise

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._slots.release()

    def handle_error(self, request: Any, client_address: Any) -> None:
        exc = sys.exc_info()[1]
        self.noise(decision="connection closed", caller=_peer(client_address),
                 why=f"{type(exc).__name__}: {exc}" if exc else "error")


def _peer(address: Any) -> str:
    try:
        host, port = address[0], address[1]
    except (TypeError, IndexError):
        return str(address)
    return values.join_host_port(str(host), port)


def _subject(sock: Any) -> str:
    cert: Any = sock.getpeercert() if isinstance(sock, ssl.SSLSocket) else None
    for rdn in (cert or {}).get("subject", ()):
        for pair in rdn:
            if pair[0] == "commonName":
                return f" (CN={clip(str(pair[1]), 64)})"
    return ""


def serve(handle: Handle, address: ListenAddress, security: Security, say: Say, *,
          limits: Limits | None = None, ready: Callable[[int], None] | None = None) -> None:
    """Answer webhooks on ``address`` until interrupted; ``ready`` is told the port once it is bound."""
    bounds = limits or Limits()

    class Handler(BaseHTTPRequestHandler):
        server_version = "clusterctl-remediate"
        sys_version = ""
        timeout = bounds.idle_s
        server: _Server

        def log_message(self, format: str, *args: Any) -> None:
            return  # every decision is one JSON line of the decision log instead

        def setup(self) -> None:
            super().setup()
            self._done = threading.Event()
            self._watchdog = threading.Timer(bounds.request_s, self._cut)
            self._watchdog.daemon = True
            self._watchdog.start()

        def _cut(self) -> None:
            if self._done.is_set():
                return
            self.server.noise(decision="connection closed", caller=_peer(self.client_address),
                              why=f"the request was not read whole within {bounds.request_s:g} s")
            with contextlib.suppress(OSError):
                self.connection.shutdown(socket.SHUT_RDWR)

        def _read_done(self) -> None:
            self._done.set()
            self._watchdog.cancel()

        def finish(self) -> None:
            self._read_done()
            with contextlib.suppress(OSError):
                super().finish()

        def handle(self) -> None:
            if isinstance(self.connection, ssl.SSLSocket):
                try:
                    self.connection.do_handshake()
                except (OSError, ssl.SSLError) as exc:
                    self._read_done()
                    self.server.noise(decision="connection closed", caller=_peer(self.client_address),
                                      why=f"TLS handshake failed: {exc}")
                    return
            super().handle()

        def _answer(self, status: int, payload: dict[str, Any], headers: dict[str, str] | None = None) -> None:
            self._read_done()  # answered: whatever is left unread is not waited for
            data = (json.dumps(payload) + "\n").encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            for key, value in (headers or {}).items():
                self.send_header(key, value)
            self.end_headers()
            self.wfile.write(data)

        def caller(self) -> str:
            return _peer(self.client_address) + _subject(self.connection)

        def do_GET(self) -> None:
            if self.path == "/healthz":
                self._answer(200, {"status": "ok"})
            else:
                self._answer(404, WRONG_PATH)

        def do_POST(self) -> None:
            token = self.server.security.token
            if token is not None and not token.admits(self.headers.get("Authorization")):
                why = "no bearer token" if not self.headers.get("Authorization") else "wrong bearer token"
                self.server.noise(decision="unauthorized", caller=self.caller(), why=f"{why}: nothing done")
                self._answer(401, {"error": "a bearer token is required (Authorization: Bearer ...)"},
                             {"WWW-Authenticate": 'Bearer realm="clusterctl-remediate"'})
                return
            if self.path not in PATHS:
                self._answer(404, WRONG_PATH)
                return
            text = self.headers.get("Content-Length", "")
            length = int(text) if text.isdigit() and len(text) < 16 else -1
            if length < 0:
                self._answer(411, {"error": "Content-Length required"})
                return
            if length > bounds.body_bytes:
                self.server.say(decision="rejected", caller=self.caller(),
                                why=f"body of {length} bytes, over {bounds.body_bytes}")
                self._answer(413, {"error": f"body over {bounds.body_bytes} bytes"})
                return
            body = self.rfile.read(length)
            self._read_done()
            if len(body) < length:
                return  # the caller went away (or was cut off): nothing to answer, nothing done
            status, answer = handle(body, self.caller())
            self._answer(status, answer)

        def _not_allowed(self) -> None:
            self._answer(405, {"error": "POST or GET only"}, {"Allow": "GET, POST"})

        do_PUT = do_PATCH = do_DELETE = _not_allowed

    server = _Server(address, security, bounds, say, Handler)
    try:
        if ready is not None:
            ready(server.server_address[1])
        server.serve_forever(poll_interval=0.2)
    finally:
        server.server_close()

