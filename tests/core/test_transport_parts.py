"""The transport's small parts: capped output, the process-group marker, sudo wrapping, credentials."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from clusterctl.cli.credentials import read_secret
from clusterctl.errors import UsageError
from clusterctl.inventory.model import Host
from clusterctl.secret import MASK, Secret
from clusterctl.transport.base import CommandResult, FailureKind, TransportError, sudo_refusal, wrap_command
from clusterctl.transport.local import LocalTransport
from clusterctl.transport.output import CappedOutput
from clusterctl.transport.ssh.transport import GroupMarker


def test_capped_output_keeps_head_and_tail_and_says_what_it_dropped() -> None:
    out = CappedOutput(cap=1000)
    out.add(b"HEAD")
    for _ in range(1000):
        out.add(b"x" * 97)
    out.add(b"TAIL")
    value = out.value()
    assert value.startswith(b"HEAD") and value.endswith(b"TAIL")
    assert b"dropped" in value and str(out.dropped).encode() in value
    assert len(value) < 1200
    small = CappedOutput(cap=1000)
    small.add(b"all of it")
    assert small.value() == b"all of it"


def test_group_marker_is_found_across_chunks_and_removed_from_stderr() -> None:
    marker = GroupMarker()
    line = f"clusterctl-pgid-{marker.token}:4242\n".encode()
    stream = b"a login script said hello\n" + line + b"real stderr\n"
    kept = b"".join(marker.filter(stream[i : i + 7]) for i in range(0, len(stream), 7)) + marker.flush()
    assert marker.pgid == 4242
    assert kept == b"a login script said hello\nreal stderr\n"
    # A command's own output that merely looks similar (another token) is left alone.
    other = GroupMarker()
    text = line + b"more\n"
    assert other.filter(text) + other.flush() == text and other.pgid is None


def test_sudo_password_wrapper_keeps_the_password_out_of_the_command_line() -> None:
    line = wrap_command("cat > /etc/x", sudo=True, sudo_password=True)
    assert "read -r" in line and "sudo -S -v" in line and "sudo -n sh -c" in line
    assert wrap_command("id -u", sudo=True) == "export LC_ALL=C; sudo -n sh -c 'export LC_ALL=C; id -u'"


def test_sudo_refusals_name_the_fix() -> None:
    needs = CommandResult("id", "", "sudo: a password is required\n", 1, 0.1)
    refusal = sudo_refusal(needs, had_password=False)
    assert refusal is not None and refusal.kind is FailureKind.AUTH_FAILED
    assert "--ask-sudo-pass" in refusal.message
    assert sudo_refusal(CommandResult("id", "", "id: bad\n", 1, 0.1), had_password=False) is None


def test_results_and_errors_never_show_a_secret() -> None:
    token = Secret("tok-5f1e2d3c4b", "token")
    result = CommandResult(f"kubeadm join --token {token.reveal()}", "", "", 0, 0.1)
    assert token.reveal() not in result.command and MASK in result.command
    error = TransportError(FailureKind.COMMAND_FAILED, f"failed: echo {token.reveal()}")
    assert token.reveal() not in str(error)


def test_local_timeout_stops_the_whole_process_group(tmp_path: Path) -> None:
    marker = tmp_path / "late"
    t = LocalTransport(Host(name="local", transport="local"))
    with pytest.raises(TransportError) as err:
        t.run(f"(sleep 1.5; touch {marker}.bg) & sleep 1.5; touch {marker}", timeout=0.3)
    assert err.value.kind is FailureKind.TIMED_OUT
    time.sleep(2.0)
    assert not marker.exists() and not Path(f"{marker}.bg").exists()


def test_secret_files_must_be_private(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "pw"
    path.write_text("s3cret-sudo\n")
    path.chmod(0o644)
    monkeypatch.delenv("CLUSTERCTL_SUDO_PASS", raising=False)
    monkeypatch.setenv("CLUSTERCTL_SUDO_PASS_FILE", str(path))
    with pytest.raises(UsageError) as err:
        read_secret("sudo password", "CLUSTERCTL_SUDO_PASS", ask=False)
    assert "0600" in str(err.value)
    os.chmod(path, 0o600)
    secret = read_secret("sudo password", "CLUSTERCTL_SUDO_PASS", ask=False)
    assert secret is not None and secret.reveal() == "s3cret-sudo" and str(secret) == MASK


def test_get_returns_every_byte(tmp_path: Path) -> None:
    data = bytes(range(256)) * 3 + b"\xff\xfe not utf-8 \x00"
    path = tmp_path / "blob"
    path.write_bytes(data)
    t = LocalTransport(Host(name="local", transport="local"))
    assert t.get(str(path)) == data
    assert t.get(str(tmp_path / "absent")) is None


def test_line_splitter_hands_on_whole_masked_lines_and_bounds_a_line_without_newline() -> None:
    from clusterctl.transport.output import LineSplitter

    token = Secret("pa55-in-a-split-line")
    seen: list[tuple[str, str]] = []
    lines = LineSplitter("stderr", lambda stream, line: seen.append((stream, line)))
    # A line split across reads (the secret too) is handed on once, whole and masked.
    for chunk in (b"one\ntw", b"o " + token.reveal()[:6].encode(), token.reveal()[6:].encode() + b"\n", b"tail"):
        lines.add(chunk)
    assert seen == [("stderr", "one"), ("stderr", f"two {MASK}")]
    lines.flush()
    assert seen[-1] == ("stderr", "tail")
    # A runaway line with no newline is handed on in bounded pieces, nothing lost.
    seen.clear()
    lines.add(b"x" * (LineSplitter.MAX_LINE_BYTES * 2 + 10))
    lines.flush()
    assert [len(line) for _, line in seen] == [LineSplitter.MAX_LINE_BYTES, LineSplitter.MAX_LINE_BYTES, 10]


def test_a_failing_line_callback_stops_the_lines_not_the_reading() -> None:
    from clusterctl.transport.output import LineSplitter

    calls: list[str] = []

    def broken(stream: str, line: str) -> None:
        calls.append(line)
        raise BrokenPipeError("stdout closed")

    lines = LineSplitter("stdout", broken)
    lines.add(b"a\nb\nc\n")
    lines.flush()
    assert calls == ["a"]


@pytest.mark.parametrize("size", ["abc", "16Q", "-5M", "1.5G"])
def test_a_max_output_that_is_no_size_is_refused_before_any_host(size: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # It was ignored without a word: the user believed the cap they set was in force.
    from clirun import DEMO, clusterctl

    monkeypatch.setenv("CLUSTERCTL_MAX_OUTPUT", size)
    done = clusterctl("-i", DEMO, "exec", "true")
    assert (done.exit_code, done.stdout) == (2, ""), done.output
    assert f"CLUSTERCTL_MAX_OUTPUT={size!r}" in " ".join(done.stderr.split()), done.stderr
