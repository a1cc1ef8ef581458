"""SSHTransport: one host's commands over one SSH connection, opened on first use."""

from __future__ import annotations

import contextlib
import secrets
import select
import socket
import threading
import time
from functools import cached_property
from typing import TYPE_CHECKING, Any

import paramiko

from clusterctl.transport.base import CommandResult, FailureKind, RunRequest, Transport, TransportError
from clusterctl.transport.output import CappedOutput, OnLine, captures
from clusterctl.transport.ssh.auth import Credentials
from clusterctl.transport.ssh.config import SSHTarget, load_ssh_config, remaining, resolve_target, target_for_host
from clusterctl.transport.ssh.connect import ConnectSettings, open_socket, open_ssh
from clusterctl.transport.ssh.jump import direct_tcpip, jump_pool
from clusterctl.wording import seconds

if TYPE_CHECKING:
    from clusterctl.inventory.model import Host
    from clusterctl.secret import Secret


READ_CHUNK = 65536
#: How long close() waits for running commands to be stopped on the host before it cuts the connection.
CLOSE_GRACE_S = 3.0


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
        credentials: Credentials | None = None,
        sudo_password: Secret | None = None,
    ) -> None:
        super().__init__(host)
        self.credentials = credentials or Credentials()
        self.sudo_password = sudo_password
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
        #: Channels with a command running, so close() and stop_remote() can stop them.
        self._channels: set[paramiko.Channel] = set()
        self._lock_channels = threading.Lock()
        self._stop_requested = threading.Event()
        self._stop_kind = FailureKind.INTERRUPTED

    # -- connection ---------------------------------------------------------------------

    @cached_property
    def target(self) -> SSHTarget:
        return target_for_host(self.host, load_ssh_config(self.ssh_config_path), self.connect_timeout_s)

    def _connection(self, timeout: float | None) -> paramiko.Transport:
        with self._lock:
            if self._client is not None and self._client.is_active():
                return self._client
            target = self.target
            limit = target.connect_timeout_s or self.connect_timeout_s
            if timeout is not None:
                limit = min(limit, timeout)
            deadline = time.monotonic() + limit
            settings = ConnectSettings(
                known_hosts_override=self.known_hosts_path,
                accept_new_host_keys=self.accept_new_host_keys,
                config=load_ssh_config(self.ssh_config_path),
                connect_timeout_s=limit,
                credentials=self.credentials,
            )
            sock = self._open_path(target, settings, deadline)
            client = open_ssh(target, sock, settings, deadline, on_transport=self._pending.append)
            self._pending.clear()
            if self._closed:  # close() ran while we were connecting: do not leave a connection behind
                client.close()
                raise TransportError(FailureKind.TIMED_OUT, "connection closed while connecting")
            self._client = client
            return client

    def _open_path(
        self, target: SSHTarget, settings: ConnectSettings, deadline: float
    ) -> socket.socket | paramiko.Channel:
        """A socket to the target, directly or through its ProxyJump chain."""
        if not target.jump:
            sock = open_socket(target, remaining(deadline, "the TCP connection"))
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
                settings.known_hosts_override,
                settings.accept_new_host_keys,
            )
            parent = via

            def build(
                hop_target: SSHTarget = hop_target, parent: paramiko.Transport | None = parent
            ) -> paramiko.Transport:
                hop_sock: socket.socket | paramiko.Channel | None = (
                    None if parent is None else direct_tcpip(parent, hop_target, deadline))
                try:
                    if hop_sock is None:
                        hop_sock = open_socket(hop_target, remaining(deadline, "the TCP connection"))
                    return open_ssh(hop_target, hop_sock, settings, deadline)
                except TransportError as exc:  # the failed host's line names the target, this names the hop
                    raise TransportError(exc.kind, f"jump host {hop_target.name}: {exc.message}") from exc

            via = jump_pool.acquire(chain_key, build)
            self._jump_keys.append(chain_key)
        assert via is not None
        return direct_tcpip(via, target, deadline)

    def close(self) -> None:
        # Called from the fan-out's thread under a hung host: must not wait for the lock
        # that the hung call holds.
        with self._lock_channels:
            running = bool(self._channels)
        if running and not self._closed:
            # Commands still running are stopped on the host by their own run(), which sees
            # the request within POLL_S; closing at once would leave them running there
            # (sshd does not signal a session without a pty when its channel goes).
            self._stop_kind = FailureKind.TIMED_OUT
            self._stop_requested.set()
            grace_end = time.monotonic() + CLOSE_GRACE_S
            while time.monotonic() < grace_end:
                with self._lock_channels:
                    if not self._channels:
                        break
                time.sleep(0.02)
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
            jump_pool.release(key)

    # -- commands -----------------------------------------------------------------------

    def execute(self, request: RunRequest) -> CommandResult:
        command, sudo, timeout = request.command, request.sudo, request.timeout
        start = time.monotonic()
        line, feed = self.command_line(request, sudo=sudo)
        group = GroupMarker()
        self._raise_if_closed(command)
        client = self._connection(timeout)
        left = None if timeout is None else timeout - (time.monotonic() - start)
        if left is not None and left <= 0:
            raise TransportError(FailureKind.TIMED_OUT, f"no time left to run: {command}")
        try:
            channel = client.open_session(timeout=left)
        except (paramiko.SSHException, EOFError, OSError) as exc:
            self._raise_if_closed(command)
            raise TransportError(
                FailureKind.UNREACHABLE, f"cannot open a channel: {exc}"
            ) from exc
        with self._lock_channels:
            self._channels.add(channel)
        writer: threading.Thread | None = None
        deadline = None if left is None else time.monotonic() + left
        try:
            channel.exec_command(group.announce() + line)
            writer = _feed_stdin(channel, feed)
            out, err, code = self._collect(channel, group, command, deadline, timeout, request.on_line,
                                           request.max_output)
        except TransportError as exc:
            if exc.kind in (FailureKind.TIMED_OUT, FailureKind.INTERRUPTED) and not self._closed:
                self._stop_command(client, channel, group, sudo=sudo)
            raise
        except (paramiko.SSHException, EOFError, OSError) as exc:
            kind = FailureKind.TIMED_OUT if self._closed else FailureKind.UNREACHABLE
            raise TransportError(
                kind, f"connection lost while running {command}: {exc}"
            ) from exc
        finally:
            channel.close()
            with self._lock_channels:
                self._channels.discard(channel)
            if writer is not None:
                # The channel is closed: a writer still blocked on a full window returns now.
                writer.join(timeout=5.0)
        return self.finish(command, out, err, code, start, sudo=sudo)

    def stop_remote(self) -> None:
        """Make every running command stop: each ``run`` ends its command's process group and raises."""
        self._stop_kind = FailureKind.INTERRUPTED
        self._stop_requested.set()

    def _collect(
        self,
        channel: paramiko.Channel,
        group: GroupMarker,
        command: str,
        deadline: float | None,
        budget: float | None,
        on_line: OnLine | None = None,
        max_output: int | None = None,
    ) -> tuple[bytes, bytes, int]:
        """Read stdout and stderr together until both reach EOF, then the exit status.

        Both streams are read as data arrives, so one filling up never blocks the other;
        the exit status is only taken once the server said EOF (sshd may send the status
        before the last of the output), so no byte is lost. With ``on_line`` each line is also
        handed on as it arrives (stderr without the process-group marker).
        """
        out, err = captures(max_output, on_line)
        idle_since: float | None = None
        while True:
            if _drain(channel, out, err, group):
                idle_since = None
                continue
            if channel.eof_received or channel.closed:
                break
            if channel.status_event.is_set():
                # The command exited but something it started in the background still holds
                # its output open (ssh itself would wait for it): once nothing more arrives
                # for a moment, the output is complete.
                now = time.monotonic()
                idle_since = idle_since or now
                if now - idle_since >= EOF_GRACE_S:
                    break
            self._wait(channel, command, deadline, budget)
        # EOF covers both streams (SSH has one EOF per channel): what is buffered is all.
        _drain(channel, out, err, group)
        err.add(group.flush())
        out.flush()
        err.flush()
        # After EOF the channel's pipe stays readable: wait on the status event instead of select.
        # (paramiko sets it for an exit status and when the channel closes.)
        while not channel.status_event.is_set():
            self._wait(channel, command, deadline, budget, event=channel.status_event)
        self._raise_if_closed(command)
        transport = channel.get_transport()
        if channel.exit_status == -1 and (transport is None or not transport.is_active()):
            raise TransportError(
                FailureKind.UNREACHABLE, f"connection lost while running: {command}"
            )
        return out.value(), err.value(), channel.recv_exit_status()

    def _raise_if_closed(self, command: str) -> None:
        if self._closed:  # close() took the connection away (the fan-out's deadline): the command timed out
            raise TransportError(FailureKind.TIMED_OUT, f"connection closed: {command}")

    def _wait(
        self,
        channel: paramiko.Channel,
        command: str,
        deadline: float | None,
        budget: float | None,
        event: threading.Event | None = None,
    ) -> None:
        wait = POLL_S
        if deadline is not None:
            wait = min(wait, deadline - time.monotonic())
            if wait <= 0:
                raise TransportError(
                    FailureKind.TIMED_OUT,
                    f"no answer within {seconds(budget)} (the command was stopped): {command}",
                )
        self._raise_if_closed(command)
        if self._stop_requested.is_set():
            what = "interrupted" if self._stop_kind is FailureKind.INTERRUPTED else "connection closed"
            raise TransportError(self._stop_kind, f"{what} (the command was stopped): {command}")
        if event is not None:
            event.wait(wait)
        else:
            select.select([channel], [], [], wait)

    def _stop_command(
        self, client: paramiko.Transport, channel: paramiko.Channel, group: GroupMarker, *, sudo: bool
    ) -> None:
        """End the command's process group on the host: SIGTERM, a grace period, then SIGKILL.

        The command runs as the leader of its own process group (sshd starts every session
        with setsid), and its first words print that group's id on stderr (``GroupMarker``),
        so a second channel can signal the whole group: children, pipelines and background
        jobs included. A command under sudo gets SIGTERM through sudo, which relays it; the
        final SIGKILL is also tried with ``sudo -n``. The SSH "signal" request is not used:
        OpenSSH refuses it for root logins.
        """
        if group.pgid is None:
            # Its marker never arrived (the shell had not started, or a login script swallowed
            # stderr): ask sshd itself, which signals the session's process group where it
            # can (OpenSSH 7.9+, not for root logins).
            for sig, grace in (("TERM", STOP_GRACE_S / 2), ("KILL", 0.5)):
                if channel.status_event.is_set() or not _signal_request(channel, sig):
                    return
                channel.status_event.wait(grace)
            return
        grace_s = INTERRUPT_GRACE_S if self._stop_requested.is_set() else STOP_GRACE_S
        for sig, grace in (("TERM", grace_s), ("KILL", 1.0)):
            if channel.status_event.is_set() or channel.closed:
                return
            line = f"kill -s {sig} -- -{group.pgid} 2>/dev/null"
            if sudo and sig == "KILL":
                line += f"; sudo -n kill -s {sig} -- -{group.pgid} 2>/dev/null"
            _run_quietly(client, line + "; true")
            if channel.status_event.wait(grace):
                return


class GroupMarker:
    """Learns the process group of a command from a marker line it prints first on stderr.

    The marker carries a random token, so output of the command itself (or of a login
    script printing on stderr before it) can never be mistaken for it; the line is removed
    from the stderr the caller sees.
    """

    def __init__(self) -> None:
        self.token = secrets.token_hex(6)
        self.prefix = f"clusterctl-pgid-{self.token}:".encode()
        self.pgid: int | None = None
        self._held = b""
        self._done = False

    def announce(self) -> str:
        return f"printf 'clusterctl-pgid-{self.token}:%s\\n' $$ >&2; "

    def filter(self, chunk: bytes) -> bytes:
        if self._done:
            return chunk
        data = self._held + chunk
        at = data.find(self.prefix)
        if at >= 0:
            end = data.find(b"\n", at)
            if end < 0:
                self._held = data
                return b""
            value = data[at + len(self.prefix) : end]
            if value.isdigit():
                self.pgid = int(value)
            self._done = True
            self._held = b""
            return data[:at] + data[end + 1 :]
        if len(data) > MARKER_SEARCH_BYTES:
            self._done = True
            self._held = b""
            return data
        # Keep a possible partial marker at the end; pass the rest on.
        keep = len(self.prefix) + 24
        self._held = data[-keep:]
        return data[:-keep]

    def flush(self) -> bytes:
        held, self._held = self._held, b""
        self._done = True
        return held


def _drain(channel: paramiko.Channel, out: CappedOutput, err: CappedOutput, group: GroupMarker) -> bool:
    """Take what has arrived on stdout and stderr (the process-group marker left out); whether anything had."""
    progressed = False
    while channel.recv_ready():
        out.add(channel.recv(READ_CHUNK))
        progressed = True
    while channel.recv_stderr_ready():
        err.add(group.filter(channel.recv_stderr(READ_CHUNK)))
        progressed = True
    return progressed


def _signal_request(channel: paramiko.Channel, name: str) -> bool:
    """An SSH "signal" channel request (RFC 4254 6.9); paramiko has no public call for it."""
    message = paramiko.Message()
    message.add_byte(paramiko.common.cMSG_CHANNEL_REQUEST)
    message.add_int(channel.remote_chanid)
    message.add_string("signal")
    message.add_boolean(False)
    message.add_string(name)
    try:
        channel.transport._send_user_message(message)  # type: ignore[union-attr]
    except (paramiko.SSHException, EOFError, OSError, AttributeError):
        return False
    return True


def _run_quietly(client: paramiko.Transport, line: str) -> None:
    """Run a short helper command on another channel of the same connection, ignoring failures."""
    try:
        helper = client.open_session(timeout=5.0)
    except (paramiko.SSHException, EOFError, OSError):
        return
    with contextlib.closing(helper), contextlib.suppress(paramiko.SSHException, EOFError, OSError):
        helper.exec_command(line)
        helper.shutdown_write()
        helper.status_event.wait(5.0)


#: Seconds a timed-out command gets between SIGTERM and SIGKILL.
STOP_GRACE_S = 2.0
#: The same when the run is interrupted (Ctrl-C): the user is waiting.
INTERRUPT_GRACE_S = 0.5
#: How often a waiting command checks its deadline and stop requests.
POLL_S = 0.2
#: After the exit status, how long output may pause before it counts as complete without EOF.
EOF_GRACE_S = 1.0
#: How far into stderr the process-group marker is looked for (login scripts may print first).
MARKER_SEARCH_BYTES = 65536


def _feed_stdin(channel: paramiko.Channel, data: bytes | None) -> threading.Thread | None:
    """Write stdin from a thread so a command that answers while reading cannot deadlock us."""
    if data is None:
        channel.shutdown_write()
        return None

    def feed() -> None:
        with contextlib.suppress(OSError, paramiko.SSHException, EOFError):
            channel.sendall(data)
        with contextlib.suppress(OSError, paramiko.SSHException, EOFError):
            channel.shutdown_write()

    thread = threading.Thread(target=feed, daemon=True, name="clusterctl-ssh-stdin")
    thread.start()
    return thread
