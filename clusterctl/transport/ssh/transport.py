"""SSHTransport: one host's commands over one SSH connection, opened on first use."""

from __future__ import annotations

import contextlib
import select
import socket
import threading
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import paramiko

from clusterctl.transport.base import CommandResult, FailureKind, Transport, TransportError
from clusterctl.transport.output import CappedOutput
from clusterctl.transport.ssh.config import SSHTarget, load_ssh_config, resolve_target, target_for_host
from clusterctl.transport.ssh.connect import ConnectSettings, open_socket, open_ssh
from clusterctl.transport.ssh.deadline import remaining
from clusterctl.transport.ssh.hostkeys import known_hosts_file
from clusterctl.transport.ssh.jump import direct_tcpip, jump_pool

if TYPE_CHECKING:
    from clusterctl.inventory.model import Host


READ_CHUNK = 65536
#: What a command still running when its connection is closed gets between SIGTERM and SIGKILL.
CLOSE_GRACE_S = 0.3


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
        #: Channels with a command running, so close() and stop_remote() can stop them.
        self._channels: set[paramiko.Channel] = set()
        self._lock_channels = threading.Lock()

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
            sock = open_socket(target, remaining(deadline, "the TCP connection", target))
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
                        hop_target, remaining(deadline, "the TCP connection", hop_target)
                    )
                else:
                    hop_sock = direct_tcpip(parent, hop_target, target, deadline)
                return open_ssh(hop_target, hop_sock, settings, deadline)

            via = jump_pool.acquire(chain_key, build)
            self._jump_keys.append(chain_key)
        assert via is not None
        return direct_tcpip(via, target, target, deadline)

    def close(self) -> None:
        # Called from the fan-out's thread under a hung host: must not wait for the lock
        # that the hung call holds.
        self._closed = True
        with self._lock_channels:
            running = list(self._channels)
        # Commands still running are ended on the host before the connection goes: closing
        # alone would leave them running there (sshd does not signal a pty-less session).
        if running:
            for channel in running:
                send_signal(channel, "TERM")
            # A short grace for all of them together (close() may run for many hosts in turn).
            grace_end = time.monotonic() + CLOSE_GRACE_S
            for channel in running:
                if not channel.status_event.wait(max(0.0, grace_end - time.monotonic())):
                    send_signal(channel, "KILL")
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
        line, feed = self.command_line(command, sudo=sudo, env=env, stdin=stdin)
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
        with self._lock_channels:
            self._channels.add(channel)
        writer: threading.Thread | None = None
        deadline = None if left is None else time.monotonic() + left
        try:
            channel.exec_command(line)
            writer = _feed_stdin(channel, feed)
            out, err, code = self._collect(channel, command, deadline, timeout)
        except TransportError as exc:
            if exc.kind is FailureKind.TIMED_OUT and not self._closed:
                stop_channel(channel)
            raise
        except (paramiko.SSHException, EOFError, OSError) as exc:
            kind = FailureKind.TIMED_OUT if self._closed else FailureKind.UNREACHABLE
            raise TransportError(
                kind, f"{self.host.name}: connection lost while running {command}: {exc}"
            ) from exc
        finally:
            channel.close()
            with self._lock_channels:
                self._channels.discard(channel)
            if writer is not None:
                # The channel is closed: a writer still blocked on a full window returns now.
                writer.join(timeout=5.0)
        result = CommandResult(
            command,
            out.decode(errors="replace"),
            err.decode(errors="replace"),
            code,
            round(time.monotonic() - start, 4),
        )
        return self.check_sudo(result, sudo=sudo)

    def stop_remote(self) -> None:
        with self._lock_channels:
            channels = list(self._channels)
        for channel in channels:
            send_signal(channel, "TERM")

    def _collect(
        self, channel: paramiko.Channel, command: str, deadline: float | None, budget: float | None
    ) -> tuple[bytes, bytes, int]:
        """Read stdout and stderr together until both reach EOF, then the exit status.

        Both streams are read as data arrives, so one filling up never blocks the other;
        the exit status is only taken once the server said EOF (sshd may send the status
        before the last of the output), so no byte is lost.
        """
        out = CappedOutput()
        err = CappedOutput()
        while True:
            progressed = False
            while channel.recv_ready():
                out.add(channel.recv(READ_CHUNK))
                progressed = True
            while channel.recv_stderr_ready():
                err.add(channel.recv_stderr(READ_CHUNK))
                progressed = True
            if progressed:
                continue
            if channel.eof_received or channel.closed:
                break
            self._wait(channel, command, deadline, budget)
        # EOF covers both streams (SSH has one EOF per channel): what is buffered is all.
        while channel.recv_ready():
            out.add(channel.recv(READ_CHUNK))
        while channel.recv_stderr_ready():
            err.add(channel.recv_stderr(READ_CHUNK))
        # exit_status_ready() is also true for a closed channel: the event says a status came.
        while not channel.status_event.is_set() and not channel.closed:
            self._wait(channel, command, deadline, budget)
        if self._closed:
            raise TransportError(FailureKind.TIMED_OUT, f"{self.host.name}: connection closed: {command}")
        if not channel.status_event.is_set():
            raise TransportError(
                FailureKind.UNREACHABLE, f"{self.host.name}: connection lost while running: {command}"
            )
        return out.value(), err.value(), channel.recv_exit_status()

    def _wait(self, channel: paramiko.Channel, command: str, deadline: float | None, budget: float | None) -> None:
        wait = 0.5
        if deadline is not None:
            wait = min(wait, deadline - time.monotonic())
            if wait <= 0:
                raise TransportError(
                    FailureKind.TIMED_OUT,
                    f"{self.host.name}: no answer within {budget:g}s (the command was stopped): {command}",
                )
        if self._closed:
            raise TransportError(FailureKind.TIMED_OUT, f"{self.host.name}: connection closed: {command}")
        select.select([channel], [], [], wait)


def send_signal(channel: paramiko.Channel, name: str) -> bool:
    """Send an SSH ``signal`` request (RFC 4254 6.9): sshd signals the command's process group.

    OpenSSH's sshd (7.9 and later) answers it with ``killpg`` on the session's process group,
    which the command's shell leads, so its children are stopped too. paramiko has no public
    call for it, so the request is built here; no reply is asked for (sshd sends none).
    """
    if channel.closed or channel.exit_status_ready():
        return False
    message = paramiko.Message()
    message.add_byte(paramiko.common.cMSG_CHANNEL_REQUEST)
    message.add_int(channel.remote_chanid)
    message.add_string("signal")
    message.add_boolean(False)
    message.add_string(name)
    try:
        channel.transport._send_user_message(message)  # type: ignore[union-attr]
    except (paramiko.SSHException, EOFError, OSError):
        return False
    return True


#: How long a command gets to end on SIGTERM before SIGKILL.
STOP_GRACE_S = 2.0


def stop_channel(channel: paramiko.Channel, grace_s: float = STOP_GRACE_S) -> None:
    """Stop a channel's command on the host: SIGTERM, a grace period, then SIGKILL."""
    for name, wait in (("TERM", grace_s), ("KILL", 1.0)):
        if not send_signal(channel, name):
            return
        if channel.status_event.wait(wait):
            return


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
