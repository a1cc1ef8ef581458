"""A run's changes, saved as a journal, can be reverted later: files from their backups, new files removed."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import pytest

from clusterctl.changes import Change, Gate, GateRecord
from clusterctl.errors import UsageError
from clusterctl.fanout import Runner
from clusterctl.inventory.model import Host
from clusterctl.transport.base import Transport
from clusterctl.transport.local import LocalTransport
from clusterctl.undo_journal import WriteAheadJournal, read_journal, undo_on_hosts

HOST = Host(name="here", transport="local")


def _local(host: Host, _timeout: float) -> Transport:
    return LocalTransport(host)


def save_journal(records: list[GateRecord], **where: Any) -> Path | None:
    """The journal a run of ``records`` leaves: each change written ahead, its outcome after (as the engine does)."""
    journal = WriteAheadJournal(**where)
    for record in records:
        journal.after(journal.before(record.change), record)
    return journal.finish(records)


def test_journal_survives_the_run_and_undo_restores_every_file(tmp_path: Path) -> None:
    replaced, created, same = tmp_path / "nccl.conf", tmp_path / "new.conf", tmp_path / "same.conf"
    replaced.write_text("NCCL_DEBUG=WARN\n")
    same.write_text("x\n")
    gate = Gate(apply=True)
    transport = LocalTransport(HOST)
    gate.submit(transport, Change.write_file("here", str(replaced), "NCCL_DEBUG=INFO\n",
                                             current=replaced.read_text(), sudo=False))
    gate.submit(transport, Change.write_file("here", str(created), "new\n", current=None, sudo=False))
    gate.submit(transport, Change.write_file("here", str(same), "x\n", current="x\n", sudo=False))
    journal = save_journal(gate.records, command="tune-nccl --push", folder=tmp_path / "undo")
    assert journal is not None and journal.name.startswith("tune-nccl-push-")
    assert len(json.loads(journal.read_text())["changes"]) == 2  # the unchanged file needs no undo

    records = read_journal(journal).records
    with Runner(_local) as runner:
        planned = undo_on_hosts(runner, [HOST], records, apply=False)
        assert [line.text for line in planned.outcomes[0].value or []] == [f"would remove {created} (it was new)",
                                             f"would restore {replaced} from {records[0].backup_path}"]
        assert replaced.read_text() == "NCCL_DEBUG=INFO\n" and created.exists()  # dry run touched nothing
        done = undo_on_hosts(runner, [HOST], records, apply=True)
    assert done.ok and not created.exists()
    assert replaced.read_text() == "NCCL_DEBUG=WARN\n"


def test_a_file_at_a_path_longer_than_a_text_field_is_undone(tmp_path: Path) -> None:
    """A path may be as long as the host's PATH_MAX (4,096), past the 2,000 characters of a text field:
    the journal of a write there is read back and undone, not refused as damaged."""
    folder = tmp_path.joinpath(*["d" * 200] * 11)
    folder.mkdir(parents=True)
    target = folder / "nccl.conf"
    target.write_text("NCCL_DEBUG=WARN\n")
    assert 2_000 < len(str(target)) < 4_096
    gate = Gate(apply=True)
    gate.submit(LocalTransport(HOST), Change.write_file("here", str(target), "NCCL_DEBUG=INFO\n",
                                                        current=target.read_text(), sudo=False))
    journal = save_journal(gate.records, command="copy", folder=tmp_path / "undo")
    assert journal is not None
    records = read_journal(journal).records
    assert records[0].change.path == str(target) and records[0].backup_path
    with Runner(_local) as runner:
        assert undo_on_hosts(runner, [HOST], records, apply=True).ok
    assert target.read_text() == "NCCL_DEBUG=WARN\n"


def test_nothing_changed_writes_no_journal(tmp_path: Path) -> None:
    gate = Gate(apply=False)
    gate.submit(LocalTransport(HOST), Change.write_file("here", str(tmp_path / "f"), "x\n", current=None))
    assert save_journal(gate.records, command="tune-nccl --push", folder=tmp_path) is None


def test_a_file_that_is_not_a_journal_is_a_usage_error(tmp_path: Path) -> None:
    bad = tmp_path / "survey.json"
    bad.write_text('{"kind": "clusterctl.survey"}')
    with pytest.raises(UsageError, match="not a clusterctl undo journal"):
        read_journal(bad)
    broken = tmp_path / "broken.json"
    broken.write_text('{"kind": "clusterctl.undo", "version": 1, "changes": [{"host": "h"}]}')
    with pytest.raises(UsageError, match=r"field 'changes\[0\]\.summary': not a clusterctl undo journal: missing"):
        read_journal(broken)


def test_two_runs_in_the_same_second_keep_two_journals(tmp_path: Path) -> None:
    gate = Gate(apply=True)
    target = tmp_path / "a.conf"
    gate.submit(LocalTransport(HOST), Change.write_file("here", str(target), "a\n", current=None, sudo=False))
    first = save_journal(gate.records, command="quarantine", folder=tmp_path / "undo", now=1_700_000_000)
    second = save_journal(gate.records, command="quarantine", folder=tmp_path / "undo", now=1_700_000_000)
    assert first is not None and second is not None and first != second
    assert first.exists() and second.exists() and second.name.endswith("-2.json")


def test_an_interrupted_journal_waits_for_a_write_on_its_way_and_keeps_its_backup(tmp_path: Path) -> None:
    """Ctrl-C while a write is on its way: the journal waits for its answer, so the backup that write
    kept is in the journal (a pending entry knows none) and undo restores the file."""
    import threading

    from clusterctl.undo_journal import WriteAheadJournal

    conf = tmp_path / "nccl.conf"
    conf.write_text("NCCL_DEBUG=WARN\n")
    journal = WriteAheadJournal(command="tune-nccl --push", folder=tmp_path / "undo")
    gate = Gate(apply=True, log=journal)
    transport = LocalTransport(HOST)
    on_its_way, go_on = threading.Event(), threading.Event()
    put = transport.put

    def slow_put(*args: object, **kwargs: object) -> object:
        written = put(*args, **kwargs)  # type: ignore[arg-type]
        on_its_way.set()
        go_on.wait(30)  # the answer is late: it comes while the journal is being finished
        return written

    transport.put = slow_put  # type: ignore[method-assign]
    change = Change.write_file("here", str(conf), "NCCL_DEBUG=INFO\n", current=conf.read_text(), sudo=False)
    worker = threading.Thread(target=gate.submit, args=(transport, change))
    worker.start()
    assert on_its_way.wait(30)
    threading.Timer(0.5, go_on.set).start()
    path = journal.finish([], interrupted="SIGINT")
    worker.join(30)
    assert path is not None
    (entry,) = json.loads(path.read_text())["changes"]
    assert entry["backup_path"] and "pending" not in entry
    with Runner(_local) as runner:
        assert undo_on_hosts(runner, [HOST], read_journal(path).records, apply=True).ok
    assert conf.read_text() == "NCCL_DEBUG=WARN\n"


def test_a_write_cut_off_before_it_reached_the_host_has_nothing_to_undo(tmp_path: Path) -> None:
    """A pending write whose file still holds what it held before: undo says so and exits ok, instead
    of refusing a file 'changed since clusterctl wrote it'."""
    from clusterctl.transport.base import FailureKind, TransportError
    from clusterctl.undo_journal import WriteAheadJournal

    conf = tmp_path / "nccl.conf"
    conf.write_text("NCCL_DEBUG=WARN\n")
    journal = WriteAheadJournal(command="tune-nccl --push", folder=tmp_path / "undo")
    transport = LocalTransport(HOST)

    def cut_off(*_: object, **__: object) -> object:
        raise TransportError(FailureKind.INTERRUPTED, "here: interrupted")

    transport.put = cut_off  # type: ignore[method-assign]
    change = Change.write_file("here", str(conf), "NCCL_DEBUG=INFO\n", current=conf.read_text(), sudo=False)
    with pytest.raises(TransportError):
        Gate(apply=True, log=journal).submit(transport, change)
    path = journal.finish([], interrupted="SIGINT")
    assert path is not None and json.loads(path.read_text())["changes"][0]["pending"] is True
    with Runner(_local) as runner:
        undone = undo_on_hosts(runner, [HOST], read_journal(path).records, apply=True)
    assert undone.ok and "nothing to undo" in (undone.outcomes[0].value or [])[0].text
    assert conf.read_text() == "NCCL_DEBUG=WARN\n"


def test_no_change_starts_once_the_journal_is_finished(tmp_path: Path) -> None:
    """A worker an interrupted run gave up on cannot start a change the finished journal would not hold."""
    from clusterctl.undo_journal import WriteAheadJournal

    journal = WriteAheadJournal(command="copy", folder=tmp_path / "undo")
    journal.finish([], interrupted="SIGINT")
    late = tmp_path / "late.conf"
    with pytest.raises(UsageError, match="journal is finished"):
        Gate(apply=True, log=journal).submit(LocalTransport(HOST), Change.write_file(
            "here", str(late), "x\n", current=None, sudo=False))
    assert not late.exists()


def _temporary_file(gate: Gate, marker: Path) -> Any:
    transport = LocalTransport(HOST)
    return gate.temporary(transport, [Change.write_file("here", str(marker), "x\n", current=None)],
                          [Change.remove_file("here", str(marker), sudo=False)])


def test_a_temporary_change_is_journaled_before_it_is_made_and_leaves_no_journal_once_cleaned(tmp_path: Path) -> None:
    marker = tmp_path / "hostfile"
    journal = WriteAheadJournal(command="bench", folder=tmp_path / "undo")
    gate = Gate(apply=True, log=journal)
    with _temporary_file(gate, marker):
        assert marker.exists()
        assert journal.path is not None and "temporary" in journal.path.read_text()  # in the log before it ended
    assert not marker.exists() and gate.left_over() == []
    # Cleaned up in a run that ended normally: nothing to undo, no journal.
    assert journal.finish([r for r in gate.records if not r.temporary]) is None


def test_a_temporary_change_left_by_an_interrupt_is_cleaned_up_after_on_a_fresh_connection(tmp_path: Path) -> None:
    marker = tmp_path / "hostfile"
    stopping = threading.Event()
    journal = WriteAheadJournal(command="bench", folder=tmp_path / "undo")
    gate = Gate(apply=True, log=journal, interrupted=stopping)
    with _temporary_file(gate, marker):
        stopping.set()  # Ctrl-C: the block's own connection is being closed, it cleans up nothing
    assert marker.exists() and [t.summary for t in gate.left_over("here")] == [f"write {marker}"]
    assert [line.text for line in gate.clean_up_left(LocalTransport(HOST))] == \
        [f"cleaned up the temporary write {marker}"]
    assert not marker.exists() and gate.left_over() == []
    path = journal.finish([], interrupted="SIGINT")
    assert path is not None  # an interrupted run names its journal: it says what was cleaned up
    (record,) = read_journal(path).records
    assert record.cleaned_up
    assert [line.text for line in Gate(apply=True).undo(LocalTransport(HOST), [record])] == \
        [f"'temporary: write {marker}': cleaned up by the run itself, nothing to undo"]


def test_a_temporary_change_nobody_cleaned_up_is_undone_from_the_journal(tmp_path: Path) -> None:
    marker = tmp_path / "hostfile"
    journal = WriteAheadJournal(command="bench", folder=tmp_path / "undo")
    killed = threading.Event()
    gate = Gate(apply=True, log=journal, interrupted=killed)
    with _temporary_file(gate, marker):
        killed.set()  # and the put-back never ran (a second Ctrl-C, a host gone)
    path = journal.finish([], interrupted="SIGTERM")
    assert path is not None and marker.exists()
    (record,) = read_journal(path).records
    assert record.change.undo_command == f"rm -f -- {marker}"
    Gate(apply=True).undo(LocalTransport(HOST), [record])
    assert not marker.exists()


def test_a_log_with_foreign_or_cut_lines_still_gives_its_changes(tmp_path: Path) -> None:
    """A line of the log that is not an event (another program's, or cut by the kill) used to end the
    undo in 'internal error: AttributeError'."""
    journal = WriteAheadJournal(command="tune-nccl --push", folder=tmp_path / "undo")
    target = tmp_path / "a.conf"
    Gate(apply=True, log=journal).submit(LocalTransport(HOST), Change.write_file("here", str(target), "a\n",
                                                                                current=None, sudo=False))
    assert journal.path is not None  # still the log: the run was killed before it finished its journal
    with journal.path.open("a") as log:
        log.write('[1]\n"done"\n{"entry": "x"}\n{"entry": 9, "pend')
    (record,) = read_journal(journal.path).records
    assert record.change.path == str(target) and record.change.current is None


def _command_entry(summary: str, **extra: Any) -> dict[str, Any]:
    return {"host": "gpu-a1", "summary": summary, "kind": "run command", "sudo": True, "undo_command": None, **extra}


RESTART = _command_entry("restart containerd", makes=["no-trace"])
EVICTION = _command_entry("evict pod default/trainer-0 from node gpu-a1", makes=["no-trace"],
                          cannot_undo="an evicted pod is recreated by its controller, not brought back")
RENEW = _command_entry("kubeadm certs renew all",
                       cannot_undo="kubeadm keeps no copy of the certificates it replaces: they stay renewed")
#: A journal written before changes gave their reasons.
NO_REASON = _command_entry("load br_netfilter now")


@pytest.mark.parametrize(("changes", "code", "said"), [
    ([RESTART, EVICTION], 0, ["gpu-a1: nothing to undo: 'evict pod default/trainer-0 from node gpu-a1': an evicted "
                              "pod is recreated by its controller, not brought back",
                              "gpu-a1: nothing to undo: 'restart containerd' leaves nothing behind"]),
    ([EVICTION, RENEW], 1, ["gpu-a1: cannot undo 'kubeadm certs renew all': kubeadm keeps no copy of the "
                            "certificates it replaces: they stay renewed",
                            "gpu-a1: nothing to undo: 'evict pod default/trainer-0 from node gpu-a1': an evicted "
                            "pod is recreated by its controller, not brought back"]),
    ([NO_REASON], 1, ["gpu-a1: cannot undo 'load br_netfilter now': no way back was recorded for it"]),
], ids=["nothing-left-behind", "certificates-stay-renewed", "old-journal-without-reason"])
def test_undo_names_why_each_change_stays_and_fails_when_one_leaves_its_host_changed(
        tmp_path: Path, changes: list[dict[str, Any]], code: int, said: list[str]) -> None:
    from clirun import DEMO, clusterctl

    journal = tmp_path / "undo" / "a-run.json"
    journal.parent.mkdir()
    journal.write_text(json.dumps({"kind": "clusterctl.undo", "version": 2, "command": "a run", "changes": changes}))
    undone = clusterctl("-i", DEMO, "undo", journal, "--yes")
    assert undone.exit_code == code, undone.output
    assert [line for line in undone.output.splitlines() if line.startswith("gpu-a1: ")] == said
