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
    assert lines and "restored" in lines[0].text


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


def test_a_failed_change_in_a_fan_out_is_named_in_words_not_as_a_python_class(local: LocalTransport) -> None:
    """'heal' printed "nvidia-bug-report: not made (error: ChangeFailed: collect ...)": a change that failed
    inside a fan-out task reached the user as the exception's class name."""
    from clusterctl.fanout.outcomes import failure_from

    change = Change.run("here", "echo 'nvidia-bug-report.sh: not found' >&2; exit 127", sudo=False,
                        summary="collect nvidia-bug-report on here")
    with pytest.raises(ChangeFailed) as caught:
        Gate(apply=True).submit(local, change)
    said = failure_from(caught.value).describe()
    assert said == "error: collect nvidia-bug-report on here: exit 127: nvidia-bug-report.sh: not found", said


def test_secret_is_masked_in_every_formatting() -> None:
    secret = Secret("s3cr3t-value", "password")
    assert str(secret) == MASK and f"{secret}" == MASK and "s3cr3t" not in repr(secret)
    assert secret.reveal() == "s3cr3t-value"
    assert mask_text("sudo -S <<< s3cr3t-value") == f"sudo -S <<< {MASK}"


@pytest.mark.parametrize("apply", [False, True])
def test_undo_and_its_dry_run_are_one_path_that_differ_only_in_touching_the_host(
        tmp_path: Path, local: LocalTransport, apply: bool) -> None:
    kept, gone, new = tmp_path / "kept.conf", tmp_path / "gone.conf", tmp_path / "new.conf"
    kept.write_text("old\n")
    gone.write_text("old\n")
    made = Gate(apply=True)
    records = [made.submit(local, Change.write_file("here", str(p), "new\n", current=p.read_text() if p.exists()
                                                    else None, sudo=False)) for p in (kept, gone, new)]
    Path(records[1].backup_path or "").unlink()  # someone cleaned up the backups
    undo = Gate(apply=apply)
    lines = [line.text for line in undo.undo(local, records)]
    would = "" if apply else "would "
    assert lines == [f"{would}remove {new} (it was new)" if not apply else f"removed {new} (it was new)",
                     f"cannot restore {gone}: backup {records[1].backup_path} is gone",
                     f"{would}restore {kept} from {records[0].backup_path}" if not apply
                     else f"restored {kept} from {records[0].backup_path}"]
    # The steps pass the gate in both modes: recorded in the dry run, applied otherwise.
    assert [(r.change.summary, r.applied) for r in undo.records] == [
        (f"remove {new} (it was new)", apply), (f"restore {kept} from {records[0].backup_path}", apply)]
    assert kept.read_text() == ("old\n" if apply else "new\n")
    assert new.exists() is not apply


@pytest.mark.parametrize("apply", [False, True])
def test_a_temporary_change_is_always_cleaned_up(tmp_path: Path, local: LocalTransport, apply: bool) -> None:
    probe = tmp_path / "hostfile"
    gate = Gate(apply=apply)
    make = Change.write_file("here", str(probe), "a slots=8\n", current=None, sudo=False)
    remove = Change.remove_file("here", str(probe), sudo=False)
    with pytest.raises(RuntimeError, match="mpirun died"), gate.temporary(local, [make], [remove]):
        assert probe.exists() is apply
        raise RuntimeError("mpirun died")
    assert not probe.exists()
    assert [(r.change.kind.value, r.applied, r.temporary) for r in gate.records] == [
        ("write file", apply, True), ("remove file", apply, True)]


def test_a_failed_setup_still_runs_the_clean_up_and_raises(tmp_path: Path, local: LocalTransport) -> None:
    marker = tmp_path / "cleaned"
    gate = Gate(apply=True)
    entered = False
    setup = [Change.run("here", "exit 3", summary="start the pod", sudo=False)]
    cleanup = [Change.run("here", f"touch {marker}", summary="delete the pod", sudo=False)]
    with pytest.raises(ChangeFailed, match="start the pod"), gate.temporary(local, setup, cleanup):
        entered = True
    assert not entered and marker.exists()


def test_a_failed_kubeadm_names_the_check_that_stopped_it(tmp_path: Path, local: LocalTransport) -> None:
    """Real kubeadm 1.37.2's preflight on a cgroup v1 node (tests/realnodes): the reason is an
    "[ERROR ...]" line well above the last lines, which only say that preflight failed."""
    stderr = tmp_path / "kubeadm.err"
    stderr.write_text(
        "\t[WARNING Service-kubelet]: kubelet service is not enabled, please run 'systemctl enable kubelet.service'\n"
        "[preflight] Some fatal errors occurred:\n"
        "\t[ERROR SystemVerification]: cgroups v1 support is deprecated and will be removed in a future release. "
        "Please migrate to cgroups v2.\n"
        "[preflight] If you know what you are doing, you can make a check non-fatal with "
        "`--ignore-preflight-errors=...`\n"
        "error: error execution phase preflight: preflight checks failed\n"
        "To see the stack trace of this error execute with --v=5 or higher\n")
    change = Change.run("here", f"cat {stderr} >&2; exit 1", sudo=False, summary="kubeadm init (first control plane)")
    with pytest.raises(ChangeFailed) as caught:
        Gate(apply=True).submit(local, change)
    message = str(caught.value)
    assert "[ERROR SystemVerification]: cgroups v1 support is deprecated" in message
    assert message.endswith("To see the stack trace of this error execute with --v=5 or higher")
    assert "WARNING" not in message
