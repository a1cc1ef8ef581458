"""One form for the moments clusterctl records (``clusterctl.utc``): UTC with ``Z`` in undo journals, progress
files, locks and reports, whatever the control machine's time zone; and what earlier releases wrote (an undo
journal's local time with its offset, ``+00:00`` elsewhere) is still read as the moment it stands for."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from clusterctl.bootstrap.reset_journals import bootstrap_journals
from clusterctl.changes import Change, GateRecord
from clusterctl.engine.lock import LockInfo
from clusterctl.engine.progress import ProgressStore
from clusterctl.undo_journal import WriteAheadJournal, read_journal
from clusterctl.utc import epoch, utc_stamp

STAMP = r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$"


@pytest.fixture
def far_east(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The control machine's clock set to a zone nine hours ahead of UTC."""
    monkeypatch.setenv("TZ", "Asia/Tokyo")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


def _journal(folder: Path, now: float) -> Path:
    change = Change.write_file("node1", "/etc/x.conf", "x\n", current=None)
    record = GateRecord(change, applied=True, changed=True)
    journal = WriteAheadJournal(command="bootstrap", folder=folder, now=now, cluster="demo", fleet="abc")
    journal.after(journal.before(change), record)
    path = journal.finish([record])
    assert path is not None
    return path


def test_journals_locks_and_progress_say_utc(tmp_path: Path, far_east: None) -> None:
    journal = _journal(tmp_path / "undo", 1_700_000_000)
    assert read_journal(journal).created == "2023-11-14T22:13:20Z"
    assert journal.name == "bootstrap-20231114-221320.json"
    store = ProgressStore(tmp_path / "progress.json", "demo")
    store.record("node1", "containerd", "ok", 1.0)
    store.save()
    saved = json.loads((tmp_path / "progress.json").read_text())
    assert re.match(STAMP, saved["updated"]) and re.match(STAMP, saved["hosts"]["node1"]["containerd"]["finished"])
    assert re.match(STAMP, LockInfo.mine("run").started)


def test_what_the_previous_release_wrote_is_read_as_its_moment(tmp_path: Path) -> None:
    forms = ["2023-11-15T07:13:20+0900", "2023-11-14T22:13:20+00:00", "2023-11-14T22:13:20Z"]
    assert {epoch(form) for form in forms} == {1_700_000_000.0} and utc_stamp(1_700_000_000) == forms[2]
    assert epoch("yesterday") is None
    # reset takes bootstrap's journals oldest first: one the previous release wrote in local time (Tokyo) and
    # one written an hour later in UTC, whose stamp sorts first as text.
    folder = tmp_path / "undo"
    older = _journal(folder, 1_700_000_000)
    data = json.loads(older.read_text())
    data["created"] = forms[0]
    older.write_text(json.dumps(data))
    newer = _journal(folder, 1_700_003_600)
    found = bootstrap_journals(folder, cluster="demo", fleet="abc")
    assert [j.path for j in found.hosts["node1"]] == [str(older), str(newer)]
    # A lock the previous release took (``+00:00``) is aged as before.
    assert "ago" in (LockInfo("bob", "old-laptop", 1, "2020-01-01T00:00:00+00:00", "dead-run").stale_reason() or "")
