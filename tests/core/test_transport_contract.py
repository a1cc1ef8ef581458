"""What every transport (ssh, local, mock) promises the commands built on it.

``run``: a command's output and exit status, a failing command is data (not an exception),
environment values arrive verbatim. ``put``: the file is replaced atomically (no temporary
file left beside it), identical content is not rewritten, the previous content is kept as a
backup. ``get``: the bytes, or ``None`` for a missing file. The ssh case runs against a real
sshd mock host and is skipped, with the reason, where sshd cannot run.
"""

from __future__ import annotations

import shlex
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from sshd_hosts import SSHDHosts

from clusterctl.inventory.model import Host, SSHOptions
from clusterctl.mock.transport import MockTransport
from clusterctl.transport.base import Transport
from clusterctl.transport.local import LocalTransport

#: The mock answers from its recorded profile: these are the run() cases below, as recorded.
MOCK_PROFILE = """
commands:
  - match: "printf '%s' hello"
    stdout_text: hello
  - match: "echo oops >&2; exit 3"
    stderr_text: "oops\\n"
    exit: 3
  - match: "recorded-build"
    stdout_text: "first\\nsecond\\npartial"
    stderr_text: "warning: slow\\n"
"""


@dataclass
class Subject:
    transport: Transport
    folder: str
    #: Files live on a real file system (local, ssh): their inode and folder can be inspected.
    real_files: bool


def _ssh(request: pytest.FixtureRequest, tmp_path: Path) -> Transport:
    farm: SSHDHosts = request.getfixturevalue("sshd_hosts")
    (h,) = farm(1)
    from clusterctl.transport.ssh import SSHTransport

    config = tmp_path / "ssh_config"
    config.write_text("")
    host = Host(name=h.name, address=h.address, port=h.port, user=farm.user,
                ssh=SSHOptions(key_file=str(farm.client_key)))
    known = farm.write_known_hosts(tmp_path / "known_hosts", [h])
    return SSHTransport(host, known_hosts_path=str(known), ssh_config_path=str(config))


@pytest.fixture(params=["local", "mock", pytest.param("ssh", marks=pytest.mark.sshd)])
def subject(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Subject]:
    folder = tmp_path / "etc"
    folder.mkdir()
    kind = request.param
    where = str(folder)
    if kind == "local":
        transport: Transport = LocalTransport(Host(name="here", transport="local"))
    elif kind == "mock":
        profile = tmp_path / "profile"
        profile.mkdir()
        (profile / "profile.yaml").write_text(MOCK_PROFILE)
        transport = MockTransport(Host(name="mock-1", transport="mock", profile=str(profile),
                                       mock_state=str(tmp_path / "mock-state")))
        # The mock host has a file system of its own (kept in its state folder).
        where = "/etc/contract"
        assert transport.run(f"mkdir -p {where}").ok
    else:
        transport = _ssh(request, tmp_path)
    with transport:
        yield Subject(transport, where, real_files=kind != "mock")


def _listing(subject: Subject) -> list[str]:
    return sorted(p.name for p in Path(subject.folder).iterdir())


def test_run_returns_output_and_status_and_passes_env_verbatim(subject: Subject) -> None:
    t = subject.transport
    hello = t.run("printf '%s' hello")
    assert (hello.ok, hello.stdout, hello.exit_code) == (True, "hello", 0)
    failed = t.run("echo oops >&2; exit 3")
    assert (failed.ok, failed.exit_code, failed.stderr.strip()) == (False, 3, "oops")
    if isinstance(t, MockTransport):
        # A tool the recording does not know is missing on the host, as a shell would say.
        missing = t.run("ib_write_bw --version")
        assert (missing.exit_code, missing.stderr) == (127, "sh: 1: ib_write_bw: not found\n")
        return
    tricky = "$(touch /tmp/never) `id` 'q' \"d\""
    assert t.run('printf %s "$V"', env={"V": tricky}).stdout == tricky
    assert t.run("cat", stdin=b"through stdin\n").stdout == "through stdin\n"


def test_output_lines_arrive_while_the_command_still_runs(subject: Subject, tmp_path: Path) -> None:
    """``on_line`` sees each line as it comes (``exec --stream``); the result still holds it all."""
    seen: list[tuple[float, str, str]] = []
    lock = threading.Lock()
    go_on = tmp_path / "first-line-seen"

    def on_line(stream: str, line: str) -> None:
        with lock:
            seen.append((time.monotonic(), stream, line))
        if line == "first":
            go_on.touch()  # the command waits for this: only a line seen while it runs lets it finish

    t = subject.transport
    if isinstance(t, MockTransport):
        # The mock answers from its recording at once: it hands the recorded lines on in order.
        result = t.run("recorded-build", on_line=on_line)
        assert [(s, line) for _, s, line in seen] == [
            ("stdout", "first"), ("stdout", "second"), ("stdout", "partial"), ("stderr", "warning: slow")
        ]
        assert (result.stdout, result.stderr) == ("first\nsecond\npartial", "warning: slow\n")
        return
    wait = f"i=0; while [ ! -e {go_on} ] && [ $i -lt 200 ]; do sleep 0.05; i=$((i+1)); done"
    result = t.run(
        f"echo first; echo 'warning: slow' >&2; {wait}; [ -e {go_on} ] || exit 9; "
        "sleep 1; echo second; printf partial",
        on_line=on_line,
        timeout=30,
    )
    assert result.exit_code == 0, "the first line was not handed on while the command ran"
    times = {line: at for at, _, line in seen}
    # "second" is printed a second after "first" was seen: it cannot have come in the same read.
    assert times["first"] < times["second"] <= times["partial"]
    assert [line for _, s, line in seen if s == "stdout"] == ["first", "second", "partial"]
    assert [line for _, s, line in seen if s == "stderr"] == ["warning: slow"]
    assert (result.stdout, result.stderr) == ("first\nsecond\npartial", "warning: slow\n")


def test_output_lines_never_show_a_secret(subject: Subject) -> None:
    from clusterctl.secret import Secret

    token = Secret("s3cr3t-streamed-value")
    seen: list[str] = []
    t = subject.transport
    t.run(f"echo token={token.reveal()}", on_line=lambda stream, line: seen.append(line))
    assert seen and all(token.reveal() not in line for line in seen)
    assert seen == ["token=" + str(token)]


def test_put_is_atomic_keeps_a_backup_and_leaves_equal_content_alone(subject: Subject) -> None:
    t, path = subject.transport, f"{subject.folder}/nccl.conf"
    assert t.get(path) is None

    first = t.put(path, b"NCCL_DEBUG=WARN\n")
    assert first.changed and first.backup_path is None  # nothing to back up
    assert t.get(path) == b"NCCL_DEBUG=WARN\n"

    inode = Path(path).stat().st_ino if subject.real_files else None
    same = t.put(path, b"NCCL_DEBUG=WARN\n")
    assert not same.changed and same.backup_path is None
    if inode is not None:
        assert Path(path).stat().st_ino == inode  # not rewritten, not even with equal bytes

    second = t.put(path, b"NCCL_DEBUG=INFO\n")
    assert second.changed and second.backup_path
    assert t.get(path) == b"NCCL_DEBUG=INFO\n"
    assert t.get(second.backup_path) == b"NCCL_DEBUG=WARN\n"
    if subject.real_files:
        # Replaced by rename: the new content is a new file, and no temporary file is left.
        assert Path(path).stat().st_ino != inode
        assert _listing(subject) == sorted(["nccl.conf", Path(second.backup_path).name])


def test_get_reads_bytes_back_and_none_for_a_missing_file(subject: Subject) -> None:
    t = subject.transport
    data = "line one\nzwei – drei\n".encode()
    t.put(f"{subject.folder}/text", data)
    assert t.get(f"{subject.folder}/text") == data
    assert t.get(f"{subject.folder}/{shlex.quote('no such file')}") is None
