"""``clusterctl copy SRC DEST``: pdcp's habit, through the transport's atomic put and the gate."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from .conftest import DEMO, local_inventory


def test_copy_writes_the_file_whole_with_its_mode_and_leaves_an_unchanged_file_alone(  # type: ignore[no-untyped-def]
    cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    inv = local_inventory(tmp_path, "n1")
    src = tmp_path / "blob.bin"
    src.write_bytes(bytes(range(256)) * 64)  # binary, NULs included
    dest = tmp_path / "remote" / "blob.bin"
    dest.parent.mkdir()
    ran = cli("-i", inv, "-o", "json", "copy", str(src), str(dest.parent) + "/", "--mode", "600")
    assert ran.code == 0, ran.err
    assert dest.read_bytes() == src.read_bytes()
    assert dest.stat().st_mode & 0o777 == 0o600
    [host] = json.loads(ran.out)["hosts"]
    assert host["applied"] and host["changed"]
    again = cli("-i", inv, "-o", "json", "copy", str(src), str(dest), "--mode", "600")
    assert json.loads(again.out)["hosts"][0]["changed"] is False


def test_copy_dry_run_writes_nothing(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    inv = local_inventory(tmp_path, "n1")
    src = tmp_path / "nccl.conf"
    src.write_text("NCCL_DEBUG=WARN\n")
    dest = tmp_path / "out.conf"
    ran = cli("-i", inv, "copy", str(src), str(dest), "--dry-run")
    assert ran.code == 0, ran.err
    assert "+NCCL_DEBUG=WARN" in ran.out
    assert not dest.exists()


@pytest.mark.parametrize(("source", "dest", "message"), [
    ("missing.conf", "/etc/x", "cannot read"),
    (".", "/etc/x", "is a folder"),
    ("nccl.conf", "etc/x", "must be an absolute path"),
])
def test_bad_sources_and_destinations_stop_before_any_host(  # type: ignore[no-untyped-def]
    cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, source: str, dest: str, message: str
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "nccl.conf").write_text("NCCL_DEBUG=WARN\n")
    ran = cli("-i", "unreachable-[1-3]", "copy", source, dest)
    assert ran.code == 2 and message in ran.err


@pytest.mark.parametrize("how", ["CLUSTERCTL_STATE_DIR", "--state-dir"])
def test_copy_keeps_its_undo_journal_in_the_state_folder_where_undo_takes_it(  # type: ignore[no-untyped-def]
    cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, how: str
) -> None:
    monkeypatch.chdir(tmp_path)  # no journal in ./clusterctl-results/undo
    inv = local_inventory(tmp_path, "n1")
    (tmp_path / "app.conf").write_text("from clusterctl\n")
    dest = tmp_path / "remote.conf"
    dest.write_text("original\n")
    state = tmp_path / "state"
    if how == "CLUSTERCTL_STATE_DIR":
        monkeypatch.setenv(how, str(state))
    ran = cli("-i", inv, "-o", "json", "copy", "app.conf", str(dest), "--yes",
              *(["--state-dir", str(state)] if how == "--state-dir" else []))
    assert ran.code == 0, ran.err
    journal = json.loads(ran.out)["undo_journal"]
    assert Path(journal).parent == state / "undo", journal  # as bootstrap's, upgrade's and reset's
    assert not (tmp_path / "clusterctl-results").exists()
    undone = cli("-i", inv, "undo", journal, "--yes")
    assert undone.code == 0, undone.err
    assert dest.read_text() == "original\n"


@pytest.mark.parametrize("dry_run", [True, False])
def test_a_missing_destination_folder_fails_that_host_alike_in_the_dry_run_and_the_copy(  # type: ignore[no-untyped-def]
    cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, dry_run: bool
) -> None:
    # The dry run once read only the file and showed a clean diff where the copy then failed.
    monkeypatch.chdir(tmp_path)
    (tmp_path / "site.conf").write_text("NCCL_DEBUG=WARN\n")
    assert cli("-i", DEMO, "-l", "gpu-a1", "exec", "--sudo", "--", "mkdir", "/opt/site").code == 0
    ran = cli("-i", DEMO, "-l", "gpu-a1,gpu-a2", "-o", "json", "copy", "site.conf", "/opt/site/nccl.conf", "--sudo",
              "--dry-run" if dry_run else "--yes")
    assert ran.code == 1, ran.err
    shown, failed = json.loads(ran.out)["hosts"]  # the other host still shown
    assert (shown["host"], shown["ok"], shown["applied"]) == ("gpu-a1", True, not dry_run)
    assert (failed["host"], failed["ok"]) == ("gpu-a2", False)
    assert "the folder /opt/site does not exist" in failed["error"]
    assert "FAILED gpu-a2" in ran.err and "/opt/site does not exist" in ran.err
    written = cli("-i", DEMO, "-l", "gpu-a1,gpu-a2", "exec", "--sudo", "--", "cat", "/opt/site/nccl.conf")
    assert written.out.count("NCCL_DEBUG=WARN") == (0 if dry_run else 1)


def test_a_file_in_the_way_of_the_destination_folder_is_named_by_the_dry_run(  # type: ignore[no-untyped-def]
    cli, tmp_path: Path
) -> None:
    inv = local_inventory(tmp_path, "n1")
    (tmp_path / "nccl.conf").write_text("NCCL_DEBUG=WARN\n")
    (tmp_path / "blocker").write_text("a file, not a folder\n")
    ran = cli("-i", inv, "copy", str(tmp_path / "nccl.conf"), str(tmp_path / "blocker" / "nccl.conf"), "--dry-run")
    assert ran.code == 1
    assert "n1" in ran.err and f"the folder {tmp_path / 'blocker'} does not exist or is not a folder" in ran.err
