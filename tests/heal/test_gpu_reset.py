"""heal's GPU reset on a host whose GPUs run with persistence mode Enabled (the demo's DGX A100, as on
most DGX hosts): nvidia-smi refuses ``-r`` while persistence mode holds the GPU, so the reset turns it off
on that GPU first (through the gate, journaled before it is made) and back on however the reset ends."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from clusterctl.changes import ChangeFailed, Gate
from clusterctl.findings import Finding, Severity
from clusterctl.heal.run import ResetGpus, apply_gpu_reset, gpu_reset, read_persistence
from clusterctl.inventory.loader import load_inventory
from clusterctl.inventory.model import Host
from clusterctl.mock.admin import set_values
from clusterctl.mock.transport import MockTransport
from clusterctl.transport.base import CommandResult
from clusterctl.undo_journal import WriteAheadJournal, read_journal

REPO = Path(__file__).resolve().parents[2]
DEMO = REPO / "inventories" / "demo.yaml"


@pytest.fixture
def host(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Host:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))  # this test's own mock hosts
    return load_inventory(DEMO).host("gpu-a2")


def _commands(host: Host, gate: Gate) -> list[str]:
    return [r.change.command or "" for r in gate.records_for(host.name)]


def test_a_reset_turns_persistence_mode_off_first_and_back_on_after(host: Host, tmp_path: Path) -> None:
    transport = MockTransport(host)
    assert read_persistence(transport, 2) == {2: True}
    refused = transport.run("nvidia-smi -r -i 2", sudo=True)  # what heal used to run: refused
    assert refused.exit_code == 255 and "In use by another client" in refused.stderr
    reset = gpu_reset(host.name, 2, read_persistence(transport, 2), 180)
    journal = WriteAheadJournal(command="heal", folder=tmp_path / "undo")
    gate = Gate(apply=True, log=journal)
    record = apply_gpu_reset(transport, gate, reset)
    assert record.result is not None and "GPU 00000000:47:00.0  was successfully reset." in record.result.stdout
    assert _commands(host, gate) == ["nvidia-smi -pm 0 -i 2", "nvidia-smi -r -i 2", "nvidia-smi -pm 1 -i 2"]
    assert read_persistence(MockTransport(host), 2) == {2: True}  # back on
    assert gate.left_over(host.name) == []
    # The persistence-mode change was journaled before it was made, and its clean-up marked: the finished
    # journal keeps the reset alone (nothing undoes a reset), no persistence-mode change to undo.
    assert journal.path is not None and '"nvidia-smi -pm 1 -i 2"' in journal.path.read_text()
    path = journal.finish(gate.records)
    assert path is not None
    assert [r.change.summary for r in read_journal(path).records] == ["reset GPU 2 of gpu-a2"]


def test_a_gpu_whose_persistence_mode_is_off_is_reset_without_touching_it(host: Host) -> None:
    transport = MockTransport(host)
    assert transport.run("nvidia-smi -pm 0 -i 5", sudo=True).ok
    reset = gpu_reset(host.name, 5, read_persistence(transport, 5), 180)
    gate = Gate(apply=True)
    apply_gpu_reset(transport, gate, reset)
    assert _commands(host, gate) == ["nvidia-smi -r -i 5"]
    assert read_persistence(transport, 5) == {5: False}  # as it was


def test_a_failed_reset_still_turns_persistence_mode_back_on(host: Host, tmp_path: Path) -> None:
    transport = MockTransport(host)
    reset = gpu_reset(host.name, 3, read_persistence(transport, 3), 180)
    # A job started on GPU 3 after heal looked ('mock set busy=gpu3'): it holds the GPU, persistence mode or not.
    assert set_values([host], {"busy": "gpu3"}) == [host.name]
    journal = WriteAheadJournal(command="heal", folder=tmp_path / "undo")
    gate = Gate(apply=True, log=journal)
    with pytest.raises(ChangeFailed, match="reset GPU 3 of gpu-a2: exit 255") as failed:
        apply_gpu_reset(MockTransport(host), gate, reset)
    result = failed.value.record.result
    assert result is not None and "GPU 00000000:4E:00.0: In use by another client" in result.stderr
    assert _commands(host, gate) == ["nvidia-smi -pm 0 -i 3", "nvidia-smi -r -i 3", "nvidia-smi -pm 1 -i 3"]
    assert read_persistence(MockTransport(host), 3) == {3: True}
    assert journal.finish([r for r in gate.records if not r.failed]) is None


class _CutOff(MockTransport):
    """Ctrl-C comes as the reset runs, and again as the clean-up starts: persistence mode is left off."""

    def run(self, command: str, **kwargs: object) -> CommandResult:
        if command.startswith("nvidia-smi -r") or command.startswith("nvidia-smi -pm 1"):
            raise KeyboardInterrupt
        return super().run(command, **kwargs)


def test_an_interrupted_reset_leaves_a_journal_whose_undo_turns_persistence_mode_back_on(
    host: Host, tmp_path: Path
) -> None:
    reset = gpu_reset(host.name, 2, read_persistence(MockTransport(host), 2), 180)
    journal = WriteAheadJournal(command="heal", folder=tmp_path / "undo")
    gate = Gate(apply=True, log=journal)
    with pytest.raises(KeyboardInterrupt):
        apply_gpu_reset(_CutOff(host), gate, reset)
    assert read_persistence(MockTransport(host), 2) == {2: False}  # left off by the interrupt
    path = journal.finish([r for r in gate.records if not r.failed], interrupted="SIGINT")
    assert path is not None
    lines = Gate(apply=True).undo(MockTransport(host), read_journal(path).records)
    assert any("turn persistence mode off on GPU 2 of gpu-a2" in line.text for line in lines), lines
    assert read_persistence(MockTransport(host), 2) == {2: True}


def test_a_dry_run_shows_the_persistence_mode_changes_and_makes_none(host: Host) -> None:
    transport = MockTransport(host)
    reset = gpu_reset(host.name, 1, read_persistence(transport, 1), 180)
    gate = Gate(apply=False)
    apply_gpu_reset(transport, gate, reset)
    assert [r.change.summary for r in gate.records] == [
        "turn persistence mode off on GPU 1 of gpu-a2 for its reset", "reset GPU 1 of gpu-a2",
        "turn persistence mode back on on GPU 1 of gpu-a2"]
    assert not any(r.applied for r in gate.records)
    assert read_persistence(transport, 1) == {1: True}
    assert transport.run("nvidia-smi -r -i 1", sudo=True).exit_code == 255  # persistence mode still holds it


def test_a_gpu_that_fell_off_the_bus_is_not_touched_and_its_reset_fails_as_lost(host: Host) -> None:
    assert set_values([host], {"fault": "xid-79"}) == [host.name]  # 'mock set fault=xid-79': GPU 3 is lost
    transport = MockTransport(host)
    assert read_persistence(transport, 3) == {}  # nvidia-smi cannot say: "GPU is lost"
    reset = gpu_reset(host.name, 3, read_persistence(transport, 3), 180)
    gate = Gate(apply=True)
    with pytest.raises(ChangeFailed, match=r"exit 15.*GPU is lost"):
        apply_gpu_reset(transport, gate, reset)
    assert _commands(host, gate) == ["nvidia-smi -r -i 3"]


def test_every_gpu_reset_turns_off_persistence_mode_on_each(host: Host) -> None:
    transport = MockTransport(host)
    modes = read_persistence(transport, None)
    assert modes == dict.fromkeys(range(8), True)
    reset = gpu_reset(host.name, None, modes, 180)
    gate = Gate(apply=True)
    record = apply_gpu_reset(transport, gate, reset)
    assert record.result is not None and record.result.stdout.count("was successfully reset") == 8
    assert _commands(host, gate)[8] == "nvidia-smi -r" and len(_commands(host, gate)) == 17
    assert all(read_persistence(transport, i) == {i: True} for i in range(8))


@pytest.mark.parametrize(("subjects", "reset"), [
    (["GPU 2"], [2]), (["GPU 00000000:47:00.0"], [2]), (["GPU 3", "GPU 00000000:47:00.0"], [3, 2]),
    (["GPU 00000000:C1:00.0"], [None]), (["GPU 2", "GPU 00000000:C1:00.0"], [None]), (["GPU 2", None], [2])])
def test_the_reset_takes_the_gpu_a_finding_names_by_index_or_bus_id_else_every_gpu(
        host: Host, subjects: list[str | None], reset: list[int | None]) -> None:
    """A GPU named by its bus id (nvidia-smi's, where the index is unknown) reset every GPU; the host's GPU list
    (the survey's nvidia-smi --query-gpu, 00000000:47:00.0 is GPU 2) now gives its index. A bus id the list does
    not hold still resets every GPU, beside one named by index too; a finding about no GPU changes nothing."""
    healer: Any = SimpleNamespace(findings=[Finding(Severity.ERROR, "GPU_ROW_REMAP_PENDING", "a row remap is pending",
                                                    host=host.name, subject=subject) for subject in subjects],
                                  config=SimpleNamespace(timeouts={}))
    resets, busy = ResetGpus(healer).check(SimpleNamespace(host=host, reader=MockTransport(host)))
    assert [r.gpu for r in resets] == reset and busy == []
