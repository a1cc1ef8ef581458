"""The one gate: record mode touches nothing, apply mode writes with a backup, undo restores."""

from __future__ import annotations

from pathlib import Path

import pytest

from clusterctl.changes import Change, ChangeFailed, Gate
from clusterctl.inventory.model import Host
from clusterctl.secret import MASK, Secret, mask_text
from clusterctl.transport.local import LocalTransport


@pytest.fixture
def local() -> LocalTransport:
    return LocalTransport(Host(name="here", transport="local"))


def test_record_mode_changes_nothing_and_shows_a_diff(tmp_path: Path, local: LocalTransport) -> None:
    target = tmp_path / "nccl.conf"
    target.write_text("NCCL_DEBUG=INFO\n")
    change = Change.write_file("here", str(target), "NCCL_DEBUG=WARN\n", current=target.read_text())
    record = Gate(apply=False).submit(local, change)
    assert not record.applied and record.changed
    assert target.read_text() == "NCCL_DEBUG=INFO\n"
    assert "-NCCL_DEBUG=INFO" in change.diff() and "+NCCL_DEBUG=WARN" in change.diff()


def test_apply_keeps_a_backup_and_undo_restores_it(tmp_path: Path, local: LocalTransport) -> None:
    target = tmp_path / "config.toml"
    target.write_text("old\n")
    gate = Gate(apply=True)
    record = gate.submit(local, Change.write_file("here", str(target), "new\n", current="old\n", sudo=False))
    assert record.applied and record.changed and record.backup_path
    assert target.read_text() == "new\n"
    lines = gate.undo(local, [record])
    assert target.read_text() == "old\n"
    assert lines and "restored" in lines[0]


def test_identical_content_is_a_noop(tmp_path: Path, local: LocalTransport) -> None:
    target = tmp_path / "same"
    target.write_text("x\n")
    record = Gate(apply=True).submit(local, Change.write_file("here", str(target), "x\n", current="x\n"))
    assert not record.changed and not record.applied


def test_undo_of_a_new_file_removes_it(tmp_path: Path, local: LocalTransport) -> None:
    target = tmp_path / "new.conf"
    gate = Gate(apply=True)
    record = gate.submit(local, Change.write_file("here", str(target), "x\n", current=None, sudo=False))
    assert target.exists()
    gate.undo(local, [record])
    assert not target.exists()


def test_failed_command_raises_with_the_record_and_masks_secrets(local: LocalTransport) -> None:
    token = Secret("abcdef.0123456789abcdef", "join token")
    change = Change.run("here", "cat >/dev/null; echo 'abcdef.0123456789abcdef' >&2; exit 4", sudo=False,
                        stdin_secret=token, summary="join")
    with pytest.raises(ChangeFailed) as caught:
        Gate(apply=True).submit(local, change)
    assert caught.value.record.result is not None and caught.value.record.result.exit_code == 4
    assert "abcdef.0123456789abcdef" not in str(caught.value)
    assert MASK in str(caught.value)


def test_secret_is_masked_in_every_formatting() -> None:
    secret = Secret("s3cr3t-value", "password")
    assert str(secret) == MASK and f"{secret}" == MASK and "s3cr3t" not in repr(secret)
    assert secret.reveal() == "s3cr3t-value"
    assert mask_text("sudo -S <<< s3cr3t-value") == f"sudo -S <<< {MASK}"
