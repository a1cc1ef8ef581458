"""Ctrl-C and SIGTERM while bootstrap's verify has its GPU test pod on the demo mock cluster: the pod is a
temporary change the engine knows. It is in the undo journal before it is made, the engine cleans it up
after the interrupt (on a fresh connection, once every host has stopped), and where that cannot be done
``clusterctl undo`` removes it. A journal every time; never a ``clusterctl-gpu-verify-*`` pod left behind."""

from __future__ import annotations

import json
import signal
import threading
from pathlib import Path

import pytest
from clirun import CliRun, clusterctl
from day2_helpers import DEMO, DEMO_SURVEY, mock_cluster_folder
from interrupts import Cut, at_every, every_signal, exit_status, install, interrupted

from clusterctl.bootstrap.cluster.addons import render_test_pod
from clusterctl.changes import Change, Gate
from clusterctl.facts.kube import kubectl
from clusterctl.inventory.loader import load_inventory
from clusterctl.mock.transport import MockTransport
from clusterctl.transport.base import CommandResult, RunRequest, Transport
from clusterctl.undo_journal import WriteAheadJournal

#: Points at which the pod exists: just made, while verify waits for it, once its logs were read.
POD_STEPS = [Cut("pod made", "apply -f -"), Cut("pod waited for", "wait --for=jsonpath"),
             Cut("pod logs read", " logs -n ")]


def _test_pods(state: Path) -> list[str]:
    cluster = json.loads((mock_cluster_folder(state) / "cluster.json").read_text())
    pods = (cluster.get("kubernetes") or {}).get("pods") or {}
    return sorted(k for k in pods if "clusterctl-gpu-verify-" in k)


_VERIFY = ("-i", DEMO, "bootstrap", "phase", "verify", "--yes", "--survey", DEMO_SURVEY)


def _verify(state_dir: Path) -> CliRun:
    return clusterctl(*_VERIFY, "--state-dir", state_dir)


def _journals(state_dir: Path) -> list[Path]:
    return sorted((state_dir / "undo").glob("bootstrap*.json"))


@every_signal
@at_every(POD_STEPS)
def test_verify_interrupted_with_its_gpu_pod_cleans_it_up_and_keeps_a_journal(
        cut: Cut, sig: signal.Signals, bootstrapped_demo: Path, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    state_dir = tmp_path / "state"
    cut_short = interrupted(monkeypatch, cut, sig, *_VERIFY, "--state-dir", state_dir)
    assert _test_pods(bootstrapped_demo) == [], cut_short.output
    assert "cleaned up the temporary GPU test pod on gpu-a1" in cut_short.stderr
    (journal,) = _journals(state_dir)
    assert f"clusterctl undo {journal}" in cut_short.stderr
    # gpu-a1's pod, named as cleaned up; no other node's pod was started once the run was stopping.
    (entry,) = json.loads(journal.read_text())["changes"]
    assert entry["summary"] == "temporary: GPU test pod on gpu-a1", entry
    assert entry["temporary"] and entry["cleaned"] and "delete pod" in entry["undo_command"], entry
    undone = clusterctl("-i", DEMO, "undo", str(journal), "--yes")
    assert undone.exit_code == 0, undone.output
    assert "cleaned up by the run itself, nothing to undo" in undone.output
    again = _verify(state_dir)  # the cluster still works, and verify leaves no pod either
    assert again.exit_code == 0, again.output
    assert _test_pods(bootstrapped_demo) == []


@every_signal
def test_a_gpu_pod_the_interrupt_could_not_clean_up_is_removed_by_undo(
        sig: signal.Signals, bootstrapped_demo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The control plane stops answering deletes as the run is stopped: the pod stays, named in the
    journal as not cleaned up, and ``clusterctl undo`` removes it."""
    state_dir = tmp_path / "state"
    cut = POD_STEPS[1]
    with monkeypatch.context() as patched:
        sent = install(patched, cut, sig)
        execute = MockTransport.execute

        def refuse_deletes(self: Transport, request: RunRequest) -> CommandResult:
            if sent.is_set() and "delete pod" in request.command:
                return CommandResult(request.command, "", "Unable to connect to the server", 1, 0.0)
            return execute(self, request)  # type: ignore[arg-type]

        patched.setattr(MockTransport, "execute", refuse_deletes)
        cut_short = _verify(state_dir)
    assert sent.is_set()
    assert cut_short.exit_code == exit_status(sig), cut_short.output
    assert _test_pods(bootstrapped_demo) == ["default/clusterctl-gpu-verify-gpu-a1"]
    assert "failed to clean up the temporary GPU test pod on gpu-a1" in cut_short.stderr
    (journal,) = _journals(state_dir)
    assert f"clusterctl undo {journal}" in cut_short.stderr
    (entry,) = json.loads(journal.read_text())["changes"]
    assert entry["summary"] == "temporary: GPU test pod on gpu-a1" and not entry.get("cleaned"), entry
    undone = clusterctl("-i", DEMO, "undo", str(journal), "--yes")
    assert undone.exit_code == 0, undone.output
    assert _test_pods(bootstrapped_demo) == []


def test_a_run_killed_with_its_gpu_pod_up_leaves_a_log_undo_completes(
        bootstrapped_demo: Path, tmp_path: Path) -> None:
    """A run killed outright (no handler runs) leaves its journal's log: the pod is in it before it was
    made, so ``clusterctl undo`` of the log removes it."""
    inventory = load_inventory(DEMO)
    host = inventory.host("gpu-a1")
    journal = WriteAheadJournal(command="bootstrap phase verify", folder=tmp_path / "undo")
    killed = threading.Event()
    gate = Gate(apply=True, log=journal, interrupted=killed)
    pod = "-n default clusterctl-gpu-verify-gpu-a1"
    transport = MockTransport(host)
    block = gate.temporary(transport, [Change.run("gpu-a1", kubectl("apply -f -"), summary="GPU test pod on gpu-a1",
                                                  stdin=render_test_pod("gpu-a1", runtime_class=True).encode())],
                           [Change.run("gpu-a1", kubectl(f"delete pod {pod} --ignore-not-found --wait=false"))])
    block.__enter__()  # and never left: the process is gone
    killed.set()  # (so that this process, going on, does not clean it up when the block is collected)
    assert _test_pods(bootstrapped_demo) == ["default/clusterctl-gpu-verify-gpu-a1"]
    assert journal.path is not None
    undone = clusterctl("-i", DEMO, "undo", str(journal.path), "--yes")
    assert undone.exit_code == 0, undone.output
    assert _test_pods(bootstrapped_demo) == []
