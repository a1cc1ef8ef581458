"""Where ``remediate serve`` keeps the alerts it accepted and has not acted on (``--pending-file``).

The file is what lets a restarted receiver act on an alert Alertmanager will not send again for
hours, so it must be the same file whatever folder the receiver is started from: by default it
is in clusterctl's state folder (``$CLUSTERCTL_STATE_DIR``, else ``$XDG_STATE_HOME/clusterctl``),
one per fleet; a relative ``--pending-file`` is from the folder it was started in, made absolute
at start; an unwritable one is refused before the receiver listens.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from clirun import clusterctl
from receiver_start import serve_from

from clusterctl.quarantine.pending_work import KIND


def kept_in(stderr: str) -> Path:
    (line,) = [line for line in stderr.splitlines() if line.startswith("accepted alerts are kept in ")]
    return Path(line.removeprefix("accepted alerts are kept in ").removesuffix(" until acted on"))


def test_the_default_is_in_the_state_folder_the_same_from_every_folder(
    started: list[Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("CLUSTERCTL_STATE_DIR", raising=False)
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    (tmp_path / "here").mkdir()
    code, err = serve_from(tmp_path / "here", monkeypatch)
    assert code == 0, err
    pending = kept_in(err)
    assert pending.parent == tmp_path / "state" / "clusterctl" / "remediate"
    assert pending.name.startswith("demo-") and pending.name.endswith("-pending.json")
    # An alert accepted before a restart (by a receiver started elsewhere: a service unit starts in /),
    # for a host no longer in the inventory: the next receiver reads it, says so, and takes it out.
    pending.write_text(json.dumps({"kind": KIND, "version": 1, "hosts": {"gpu-gone": {
        "action": "drain", "alerts": ["GPUFellOffTheBus"], "caller": "127.0.0.1", "seq": 1}}}))
    code, err = serve_from(tmp_path, monkeypatch)
    assert code == 0 and kept_in(err) == pending, err
    decisions = [json.loads(line) for line in err.splitlines() if line.startswith("{")]
    assert [(d["host"], d["decision"]) for d in decisions] == [("gpu-gone", "ignored")], err
    assert json.loads(pending.read_text())["hosts"] == {}
    assert pending.stat().st_mode & 0o777 == 0o600
    assert not (tmp_path / "here" / "clusterctl-results").exists() and not (tmp_path / "clusterctl-results").exists()


def test_clusterctl_state_dir_moves_it_as_it_moves_every_run_record(
    started: list[Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CLUSTERCTL_STATE_DIR", str(tmp_path / "records"))
    code, err = serve_from(tmp_path, monkeypatch)
    assert code == 0 and kept_in(err).parent == tmp_path / "records" / "remediate", err


def test_a_relative_pending_file_is_from_the_folder_it_started_in(
    started: list[Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    code, err = serve_from(tmp_path, monkeypatch, "--pending-file", "pending.json")
    assert code == 0 and kept_in(err) == tmp_path / "pending.json", err
    assert started[0].pending_file == str(tmp_path / "pending.json")  # absolute: a later chdir changes nothing


def test_a_file_of_the_start_folder_is_not_taken_for_alerts_of_an_earlier_release(
    started: list[Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No release kept accepted alerts in the start folder's clusterctl-results (the default moved to the state
    folder before the first): a file there is the user's, neither read nor pointed out."""
    monkeypatch.delenv("CLUSTERCTL_STATE_DIR", raising=False)
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    there = tmp_path / "clusterctl-results" / "remediate-pending.json"
    there.parent.mkdir()
    there.write_text(json.dumps({"kind": KIND, "version": 1, "hosts": {}}))
    code, err = serve_from(tmp_path, monkeypatch)
    assert code == 0 and kept_in(err).parent == tmp_path / "state" / "clusterctl" / "remediate", err
    assert "remediate-pending.json" not in err and "note:" not in err, err
    assert json.loads(there.read_text())["hosts"] == {}  # left as it was


@pytest.mark.parametrize(("where", "expected"), [
    ("missing/pending.json", "the folder"),
    (".", "is a folder"),
])
def test_a_pending_file_that_cannot_be_written_is_refused_before_it_listens(
    started: list[Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, where: str, expected: str
) -> None:
    code, err = serve_from(tmp_path, monkeypatch, "--pending-file", where)
    assert code == 2 and "--pending-file" in err and expected in err and "Traceback" not in err, err
    assert started == []  # never listened


def test_a_default_pending_file_in_the_way_is_named_as_the_state_folders_not_as_an_option_not_given(
    started: list[Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CLUSTERCTL_STATE_DIR", str(tmp_path / "records"))
    code, err = serve_from(tmp_path, monkeypatch)
    pending = kept_in(err)
    pending.unlink(missing_ok=True)
    pending.mkdir()
    code, err = serve_from(tmp_path, monkeypatch)
    said = " ".join(err.split())
    # CLUSTERCTL_STATE_DIR is --state-dir's variable: the option the user can mend it with.
    assert code == 2 and f"--state-dir: the pending alerts' file {pending}: is a folder" in said, err
    assert "--pending-file" not in said, err


def test_help_says_where_the_default_is_and_what_a_relative_path_means() -> None:
    ran = clusterctl("remediate", "serve", "--help")
    text = " ".join(ran.stdout.split())
    assert "~/.local/state/clusterctl" in text and "remediate/<cluster>-<fleet>-pending.json" in text
    assert "A relative FILE is from the current folder" in text
