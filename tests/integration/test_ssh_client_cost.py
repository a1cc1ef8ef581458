"""What clusterctl's SSH client leaves out per host and per run, and that leaving it out changes
nothing a user sees: paramiko's ``invoke`` is imported only for ``Match exec``, no timer thread
per handshake (the connect deadline bounds it), the server's SSH_MSG_DEBUG decoded only for a
debug log. Speed itself is measured in benchmarks/fanout, not here."""

from __future__ import annotations

import logging
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import paramiko
import pytest
from sshd_hosts import SSHDHosts

from clusterctl.inventory.model import Host
from clusterctl.transport.base import FailureKind, TransportError
from clusterctl.transport.ssh import SSHTransport

REPO = Path(__file__).resolve().parents[2]


def _python(code: str) -> str:
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=REPO)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_importing_the_ssh_transport_does_not_import_invoke() -> None:
    out = _python(
        "import sys, clusterctl.transport.ssh, paramiko\n"
        "print(type(sys.modules.get('invoke')).__name__, 'invoke.tasks' in sys.modules)"
    )
    assert out == "DeferredModule False"


def test_match_exec_in_ssh_config_still_runs_its_command_from_many_threads() -> None:
    out = _python(
        "import threading, clusterctl.transport.ssh, paramiko\n"
        "config = paramiko.SSHConfig.from_text('Match exec \"test %h = yes\"\\n  User matched\\n')\n"
        "found = []\n"
        "def look(name):\n"
        "    found.append((name, config.lookup(name).get('user')))\n"
        "threads = [threading.Thread(target=look, args=(n,)) for n in ['yes', 'no'] * 4]\n"
        "[t.start() for t in threads]; [t.join() for t in threads]\n"
        "print(sorted(set(found)))"
    )
    assert out == "[('no', None), ('yes', 'matched')]"


@pytest.mark.sshd
def test_no_timer_thread_and_the_debug_message_only_for_a_debug_log(
    sshd_hosts: SSHDHosts, tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    (host,) = sshd_hosts(1)
    known = sshd_hosts.write_known_hosts(tmp_path / "known_hosts", [host])
    decoded: list[bytes] = []
    real_safe_string = paramiko.util.safe_string

    def counting_safe_string(text: bytes) -> bytes:
        decoded.append(text)
        return real_safe_string(text)

    monkeypatch.setattr(paramiko.util, "safe_string", counting_safe_string)
    timers: list[object] = []
    real_timer_init = threading.Timer.__init__

    def counting_timer(self: threading.Timer, *args: object, **kwargs: object) -> None:
        timers.append(self)
        real_timer_init(self, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(threading.Timer, "__init__", counting_timer)
    caplog.set_level(logging.WARNING, logger="paramiko")
    with sshd_hosts.transport(known, tmp_path) as transport:
        assert transport.run("hostname", timeout=30).stdout == f"{host.name}\n"
    assert decoded == [] and timers == []
    # With a debug log (--debug), the server's message is shown as paramiko shows it.
    caplog.set_level(logging.DEBUG, logger="paramiko")
    with sshd_hosts.transport(known, tmp_path) as transport:
        assert transport.run("hostname", timeout=30).stdout == f"{host.name}\n"
    assert decoded and "Debug msg:" in caplog.text


def test_a_handshake_that_stalls_after_the_banner_times_out_without_paramikos_timer(
    tmp_path: Path,
) -> None:
    config = tmp_path / "ssh_config"
    config.write_text("")
    accepted: list[socket.socket] = []
    before = set(threading.enumerate())
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(5)

        def serve() -> None:
            conn, _ = listener.accept()
            accepted.append(conn)
            conn.sendall(b"SSH-2.0-OpenSSH_9.2 stalls after its banner\r\n")  # then never a KEXINIT

        server = threading.Thread(target=serve, daemon=True)
        server.start()
        host = Host(name="stalls", address="127.0.0.1", port=listener.getsockname()[1])
        start = time.monotonic()
        transport = SSHTransport(host, known_hosts_path=str(tmp_path / "kh"), ssh_config_path=str(config))
        with transport, pytest.raises(TransportError) as err:
            transport.run("true", timeout=1.0)
        server.join(timeout=10)
    for conn in accepted:
        conn.close()
    assert err.value.kind is FailureKind.TIMED_OUT
    assert "handshake did not finish" in err.value.message
    assert time.monotonic() - start < 10
    # The transport's own thread ends with it.
    deadline = time.monotonic() + 10
    while any(isinstance(t, paramiko.Transport) and t.is_alive() for t in set(threading.enumerate()) - before):
        assert time.monotonic() < deadline, "a paramiko transport thread outlived its closed connection"
        time.sleep(0.05)


def test_read_ahead_hands_out_a_flight_of_packets_in_the_sizes_asked_for() -> None:
    from clusterctl.transport.ssh.connect import ReadAheadSocket

    ours, theirs = socket.socketpair()
    with ours, theirs:
        reader = ReadAheadSocket(ours)
        reader.settimeout(0.2)
        theirs.sendall(b"abcd" + b"x" * 10 + b"efgh" + b"y" * 3)  # two "packets" in one write
        got = [reader.recv(4), reader.recv(10), reader.recv(4), reader.recv(100)]
        assert got == [b"abcd", b"x" * 10, b"efgh", b"yyy"]
        with pytest.raises(TimeoutError):  # nothing held and nothing sent: the socket's timeout
            reader.recv(4)
        big = bytes(range(256)) * 1024  # more than one read ahead
        sender = threading.Thread(target=theirs.sendall, args=(big,), daemon=True)
        sender.start()
        received = b""
        while len(received) < len(big):
            received += reader.recv(7)
        sender.join(timeout=10)
        assert received == big
        assert reader.getpeername() == ours.getpeername() and not reader._closed
        theirs.close()
        assert reader.recv(4) == b""  # end of file
    assert reader._closed
