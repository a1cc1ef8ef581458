"""``clusterctl undo --last [KIND]`` and ``--list``: the state folder's journals without pasting a path;
the newest is the one whose journal records the latest UTC time (reset's order), not the newest file."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from clirun import DEMO, clusterctl

from clusterctl.changes import Change
from clusterctl.undo_journal import WriteAheadJournal, read_journal


def _copy(host: str, dest: str, state: Path) -> Path:
    done = clusterctl("-i", DEMO, "-l", host, "copy", "README.md", dest, "--yes", "--state-dir", state)
    assert done.exit_code == 0, done.stderr
    return next(Path(p) for p in sorted((state / "undo").glob("copy-*.json")) if host in p.read_text())


def test_last_reverts_the_newest_journal_of_its_kind_by_recorded_time(tmp_path: Path) -> None:
    state = tmp_path / "state"
    older = _copy("gpu-a1", "/tmp/older.md", state)
    newer = _copy("gpu-a2", "/tmp/newer.md", state)
    # Names and file times that say the opposite of what the journals record: neither decides.
    for journal, created in ((older, "2026-01-01T10:00:00Z"), (newer, "2026-01-01T12:00:00+01:00")):
        journal.write_text(json.dumps({**json.loads(journal.read_text()), "created": created}))
    newer = newer.rename(newer.with_name("copy-20000101-000000.json"))
    os.utime(older, (2**31, 2**31))

    listed = clusterctl("-o", "json", "undo", "--list", "--state-dir", state).json()
    assert [j["journal"] for j in listed["journals"]] == [str(older), str(newer)]
    assert [j["hosts"] for j in listed["journals"]] == [["gpu-a1"], ["gpu-a2"]]

    planned = clusterctl("-i", DEMO, "undo", "--last", "copy", "--dry-run", "--state-dir", state)
    assert planned.exit_code == 0, planned.stderr
    assert "gpu-a2: would remove /tmp/newer.md (it was new)" in planned.stdout
    assert "gpu-a1" not in planned.stdout and str(newer) in planned.stderr
    undone = clusterctl("-i", DEMO, "undo", "--last", "--yes", "--state-dir", state)
    assert undone.exit_code == 0 and "gpu-a2: removed /tmp/newer.md" in undone.stdout, undone.stderr
    assert list(read_journal(newer).used) == ["gpu-a2"] and read_journal(older).used == {}

    *_, first, second = clusterctl("undo", "--list", "--state-dir", state).stdout.splitlines()
    assert first.split() == [older.name, "gpu-a1", "-"] and second.split() == [newer.name, "gpu-a2", "gpu-a2"]


def test_last_of_a_kind_nothing_ran_and_no_journal_at_all_are_usage_errors(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CLUSTERCTL_STATE_DIR", str(tmp_path))
    _copy("gpu-a1", "/tmp/one.md", tmp_path)
    none = clusterctl("-i", DEMO, "undo", "--last", "quarantine", "--yes")
    assert none.exit_code == 2 and none.stdout == ""
    assert f"--last: no 'quarantine' undo journal in {tmp_path / 'undo'} (kinds there: copy)" in \
        " ".join(none.stderr.split())
    unknown = clusterctl("-i", DEMO, "undo", "--last", "nothing", "--yes")  # once "no nothing undo journal in ..."
    assert unknown.exit_code == 2 and "no 'nothing' undo journal" in unknown.stderr
    assert "(kinds there: copy)" in " ".join(unknown.stderr.split())
    bare = clusterctl("-i", DEMO, "undo", "--yes")
    assert bare.exit_code == 2 and "--last" in bare.stderr and "--list" in bare.stderr
    assert "no undo journal in" in clusterctl("undo", "--list", "--state-dir", tmp_path / "empty").stdout


def test_a_damaged_journal_is_named_by_the_listing(tmp_path: Path) -> None:
    (tmp_path / "undo").mkdir()
    (tmp_path / "undo" / "copy-20260101-000000.json").write_text("{not json")
    listed = clusterctl("undo", "--list", "--state-dir", tmp_path)
    assert listed.exit_code == 0 and "copy-20260101-000000.json: not read:" in " ".join(listed.stderr.split())


def test_a_journal_left_as_a_log_records_when_its_run_began(tmp_path: Path) -> None:
    """A run killed before it finished its journal leaves the log: --last must still know its time."""
    journal = WriteAheadJournal(command="copy", folder=tmp_path, now=1_800_000_000)
    journal.before(Change.run("gpu-a1", "true", undo="true"))
    assert journal.path is not None and json.loads(journal.path.read_text().splitlines()[0])["partial"]
    assert read_journal(journal.path).created == "2027-01-15T08:00:00Z"


def test_the_undo_line_pastes_as_one_argument_where_the_state_folder_has_a_space(tmp_path: Path) -> None:
    import shlex

    state = tmp_path / "state of the fleet"
    done = clusterctl("-i", DEMO, "-l", "gpu-a1", "copy", "README.md", "/tmp/spaced.md", "--yes", "--state-dir", state)
    assert done.exit_code == 0, done.stderr
    line = next(line for line in (done.stdout + done.stderr).splitlines() if line.startswith("undo with: "))
    argv = shlex.split(line.removeprefix("undo with: "))
    assert argv[:2] == ["clusterctl", "undo"] and len(argv) == 3 and Path(argv[2]).is_file(), line
    undone = clusterctl("-i", DEMO, "undo", argv[2], "--dry-run")
    assert undone.exit_code == 0 and "would remove /tmp/spaced.md" in undone.stdout, undone.stderr


def test_last_given_a_file_and_list_given_a_journal_are_usage_errors(tmp_path: Path) -> None:
    state = tmp_path / "state"
    journal = _copy("gpu-a1", "/tmp/mixed.md", state)
    wrong = clusterctl("-i", DEMO, "undo", "--last", str(journal), "--dry-run", "--state-dir", state)
    assert wrong.exit_code == 2 and "not a file" in wrong.stderr and f"clusterctl undo {journal}" in wrong.stderr
    listed = clusterctl("undo", "--list", str(journal), "--state-dir", state)
    assert listed.exit_code == 2 and "takes no JOURNAL" in listed.stderr, listed.stdout


def test_a_journal_that_is_not_there_names_the_state_folder_in_use(tmp_path: Path) -> None:
    """Not the default folder when --state-dir names another: where 'undo --list' looks."""
    missing = clusterctl("-i", DEMO, "undo", tmp_path / "gone.json", "--state-dir", tmp_path / "state")
    assert missing.exit_code == 2 and missing.stdout == "", missing.output
    assert f"no such undo journal. Journals are kept in {tmp_path / 'state' / 'undo'} (" in missing.stderr


def test_a_journal_of_another_cluster_is_refused_and_last_passes_it_over(tmp_path: Path) -> None:
    """A journal the same state folder keeps for another cluster would revert its changes on this one's
    hosts of the same names: refused without --force, and never taken by --last."""
    state = tmp_path / "state"
    mine = _copy("gpu-a1", "/tmp/mine.md", state)
    theirs = mine.with_name("copy-20990101-000000.json")
    theirs.write_text(json.dumps({**json.loads(mine.read_text()), "cluster": "staging",
                                  "created": "2099-01-01T00:00:00Z"}))
    refused = clusterctl("-i", DEMO, "undo", theirs, "--dry-run", "--state-dir", state)
    assert refused.exit_code == 2 and refused.stdout == "", refused.output
    said = " ".join(refused.stderr.split())
    assert "written for the cluster 'staging', not 'demo'" in said and "--force" in said, said
    assert clusterctl("-i", DEMO, "undo", theirs, "--dry-run", "--force", "--state-dir", state).exit_code == 0
    last = clusterctl("-i", DEMO, "undo", "--last", "--dry-run", "--state-dir", state)
    assert last.exit_code == 0 and str(mine) in last.stderr and str(theirs) not in last.stderr, last.output


def test_a_damaged_or_missing_journal_names_the_state_folder_in_use(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    # The damaged journal's hint said '~/.local/state/clusterctl/undo/' while the missing one's named the folder.
    monkeypatch.setenv("CLUSTERCTL_STATE_DIR", str(tmp_path / "state"))
    (tmp_path / "bad.json").write_text("{not json")
    for given in (tmp_path / "bad.json", tmp_path / "gone.json"):
        refused = clusterctl("-i", DEMO, "undo", given, "--dry-run")
        said = " ".join(refused.stderr.split())
        assert refused.exit_code == 2 and f"kept in {tmp_path / 'state' / 'undo'}" in said, said
        assert "~/.local" not in said, said


def test_a_journal_of_hosts_the_inventory_lacks_says_so_not_that_none_is_selected(tmp_path: Path) -> None:
    # No -l was given, yet undo said "none of them is selected".
    state = tmp_path / "state"
    journal = _copy("gpu-a1", "/tmp/elsewhere.md", state)
    data = json.loads(journal.read_text())
    journal.write_text(json.dumps({**data, "changes": [{**c, "host": "gpu-zz"} for c in data["changes"]]}))
    refused = clusterctl("-i", DEMO, "undo", journal, "--dry-run", "--state-dir", state)
    assert refused.exit_code == 2 and refused.stdout == "", refused.output
    said = " ".join(refused.stderr.split())
    assert "the journal changed gpu-zz; none is in the inventory" in said and "selected" not in said, said
