"""The SSH transport is exact: all output, commands stopped at their deadline, writes that keep what was there."""

from __future__ import annotations

import os
import stat
import threading
import time
from pathlib import Path

import pytest
from sshd_hosts import SSHDHost, SSHDHosts, descendants

from clusterctl.inventory.model import Host, SSHOptions
from clusterctl.transport.base import FailureKind, TransportError
from clusterctl.transport.ssh import SSHTransport

pytestmark = pytest.mark.sshd


def _transport(farm: SSHDHosts, h: SSHDHost, tmp_path: Path) -> SSHTransport:
    known = farm.write_known_hosts(tmp_path / "known_hosts", [h])
    config = tmp_path / "ssh_config"
    config.write_text("")
    host = Host(name=h.name, address=h.address, port=h.port, user=farm.user,
                ssh=SSHOptions(key_file=str(farm.client_key)))
    return SSHTransport(host, known_hosts_path=str(known), ssh_config_path=str(config))


def test_megabytes_on_both_streams_arrive_whole_twenty_times(sshd_hosts: SSHDHosts, tmp_path: Path) -> None:
    (h,) = sshd_hosts(1)
    # Written at once on both streams, the last bytes just before exit: a reader that stops
    # at the exit status, or reads one stream at a time, loses the tail or stalls.
    command = (
        "head -c 3000000 /dev/zero | tr '\\0' o & head -c 3000000 /dev/zero | tr '\\0' e >&2; wait; "
        "printf END; printf END >&2"
    )
    with _transport(sshd_hosts, h, tmp_path) as t:
        for attempt in range(20):
            result = t.run(command, timeout=60)
            assert result.ok, attempt
            assert len(result.stdout) == 3_000_003, attempt
            assert len(result.stderr) == 3_000_003, attempt
            assert result.stdout.endswith("END") and result.stderr.endswith("END"), attempt
            assert set(result.stdout[:-3]) == {"o"} and set(result.stderr[:-3]) == {"e"}, attempt


def test_runaway_output_is_capped_with_the_middle_marked(
    sshd_hosts: SSHDHosts, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (h,) = sshd_hosts(1)
    monkeypatch.setenv("CLUSTERCTL_MAX_OUTPUT", "64K")
    with _transport(sshd_hosts, h, tmp_path) as t:
        result = t.run("printf START; head -c 5000000 /dev/zero | tr '\\0' x; printf FINISH", timeout=60)
    assert result.ok
    assert result.stdout.startswith("START") and result.stdout.endswith("FINISH")
    assert "clusterctl dropped" in result.stdout
    assert len(result.stdout) < 70_000


def _remote_processes(h: SSHDHost, word: str) -> list[int]:
    found = []
    for pid in descendants(h.pid):
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if word in cmdline:
            found.append(pid)
    return found


def test_a_command_past_its_timeout_is_stopped_on_the_host(sshd_hosts: SSHDHosts, tmp_path: Path) -> None:
    (h,) = sshd_hosts(1)
    marker = tmp_path / "late-marker"
    before = {t.name for t in threading.enumerate()}
    with _transport(sshd_hosts, h, tmp_path) as t:
        assert t.run("true", timeout=10).ok
        with pytest.raises(TransportError) as err:
            # A child in the background and one in the foreground: the whole group must go.
            t.run(f"(sleep 2.5; touch {marker}.bg) & sleep 2.5; touch {marker}", timeout=0.8)
        assert err.value.kind is FailureKind.TIMED_OUT
        assert "stopped" in err.value.message
        # The connection is still good for the next command.
        assert t.run("echo next", timeout=10).stdout == "next\n"
        assert _remote_processes(h, "sleep 2.5") == []
    time.sleep(3.0)
    assert not marker.exists()
    assert not Path(f"{marker}.bg").exists()
    assert _remote_processes(h, "sleep") == []
    leftover = {t.name for t in threading.enumerate()} - before
    assert not [name for name in leftover if name.startswith("clusterctl")]


def test_put_keeps_mode_and_owner_and_writes_through_symlinks(sshd_hosts: SSHDHosts, tmp_path: Path) -> None:
    (h,) = sshd_hosts(1)
    target = h.home / "real.conf"
    target.write_text("old\n")
    target.chmod(0o640)
    os.chown(target, 1234, 2345)
    link = h.home / "link.conf"
    link.symlink_to(target)
    with _transport(sshd_hosts, h, tmp_path) as t:
        result = t.put(str(link), b"new\n")
        assert result.changed
        assert link.is_symlink() and link.resolve() == target.resolve()
        assert target.read_text() == "new\n"
        info = target.stat()
        assert stat.S_IMODE(info.st_mode) == 0o640
        assert (info.st_uid, info.st_gid) == (1234, 2345)
        assert result.backup_path is not None
        backup = Path(result.backup_path)
        assert backup.read_text() == "old\n"
        assert stat.S_IMODE(backup.stat().st_mode) == 0o640
        # What the caller asks for wins over what was there.
        t.put(str(target), b"newer\n", mode=0o600, owner="4321:4321")
        info = target.stat()
        assert stat.S_IMODE(info.st_mode) == 0o600 and (info.st_uid, info.st_gid) == (4321, 4321)
        # A new file gets 0644.
        t.put(str(h.home / "fresh.conf"), b"x\n")
        assert stat.S_IMODE((h.home / "fresh.conf").stat().st_mode) == 0o644
    assert not [p for p in os.listdir(h.home) if "clusterctl-tmp" in p]


def test_two_concurrent_writers_each_keep_their_own_backup(sshd_hosts: SSHDHosts, tmp_path: Path) -> None:
    (h,) = sshd_hosts(1)
    target = h.home / "shared.conf"
    target.write_text("original\n")
    results = {}

    def write(label: str) -> None:
        with _transport(sshd_hosts, h, tmp_path / label) as t:
            results[label] = t.put(str(target), f"from {label}\n".encode())

    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    workers = [threading.Thread(target=write, args=(label,)) for label in ("a", "b")]
    for w in workers:
        w.start()
    for w in workers:
        w.join(timeout=30)
    backups = [r.backup_path for r in results.values()]
    assert len(backups) == 2 and None not in backups
    assert backups[0] != backups[1]
    contents = sorted(Path(b).read_text() for b in backups if b)
    # Serialised: one backed up the original, the other what the first wrote.
    assert "original\n" in contents
    assert contents[1 - contents.index("original\n")] in ("from a\n", "from b\n")
    assert target.read_text() in ("from a\n", "from b\n")


def test_a_failed_write_leaves_no_temporary_file(sshd_hosts: SSHDHosts, tmp_path: Path) -> None:
    import subprocess

    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs to fill needs root")
    (h,) = sshd_hosts(1)
    small = tmp_path / "small-disk"
    small.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(small)], capture_output=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.decode().strip()}")
    try:
        target = small / "big.conf"
        target.write_text("before\n")
        with _transport(sshd_hosts, h, tmp_path) as t, pytest.raises(TransportError) as err:
            t.put(str(target), b"x" * 200_000)
        assert err.value.kind is FailureKind.COMMAND_FAILED
        assert "big.conf" in err.value.message
        assert target.read_text() == "before\n"
        assert sorted(os.listdir(small)) == ["big.conf"]
    finally:
        subprocess.run(["umount", str(small)], check=False)


def test_a_background_child_holding_the_output_open_does_not_hang_the_command(
    sshd_hosts: SSHDHosts, tmp_path: Path
) -> None:
    (h,) = sshd_hosts(1)
    with _transport(sshd_hosts, h, tmp_path) as t:
        start = time.monotonic()
        result = t.run("sleep 4 & echo started", timeout=30)
        took = time.monotonic() - start
    assert result.ok and result.stdout == "started\n"
    assert took < 3.5
