"""``bench nccl --multi-node``: mpirun's hostfile is a temporary change through the gate, gone however the run ends."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from fixture_files import FIXTURES

from clusterctl.bench.nccl_tests import run_nccl_test
from clusterctl.changes import Gate
from clusterctl.fanout import Runner
from clusterctl.inventory.model import Host
from clusterctl.mock.profile import load_profile
from clusterctl.mock.transport import MockTransport

DEMO_PROFILE = Path(__file__).resolve().parents[2] / "inventories" / "demo" / "profiles" / "dgx-a100"
ANSWERS = {
    "ok": "    stdout: mpirun.txt\n",
    "fails": "    exit: 1\n    stderr_text: 'mpirun noticed that process rank 1 exited on signal 9\\n'\n",
    "hangs": "    fail: timed out\n",
}


class KeptHost(MockTransport):
    def close(self) -> None:  # one simulated host for the whole test
        pass


@pytest.mark.parametrize("answer", list(ANSWERS))
def test_the_hostfile_is_written_for_mpirun_and_removed_however_it_ends(tmp_path: Path, answer: str) -> None:
    profile = tmp_path / "profile"
    profile.mkdir()
    shutil.copy(FIXTURES / "nccl-tests" / "all_reduce-h100-2node-mpirun.txt", profile / "mpirun.txt")
    (profile / "profile.yaml").write_text(f"extends: {DEMO_PROFILE}\ncommands:\n  - regex: '^mpirun '\n"
                                          + ANSWERS[answer])
    hosts = [Host(name=n, address=f"10.0.0.{i}", transport="mock") for i, n in enumerate(("n1", "n2"), 1)]
    loaded = load_profile(str(profile))
    transports = {h.name: KeptHost(h, loaded, state_folder=tmp_path / "state") for h in hosts}
    gate = Gate(apply=True)
    with Runner(lambda host, _t: transports[host.name], parallel=2, timeout_s=30) as runner:
        run = run_nccl_test(runner, hosts, multi_node=True, gpus=4, gate=gate)
    records = gate.records
    assert [(r.change.summary, r.applied, r.temporary) for r in records] == [
        ("mpirun hostfile", True, True), ("remove the mpirun hostfile", True, True)]
    hostfile = records[0].change.path or ""
    assert records[0].change.content == b"10.0.0.1 slots=4\n10.0.0.2 slots=4\n"
    put, mpirun, remove = transports["n1"].history[-3:]
    assert put.startswith(f"# put {hostfile} ") and f"--hostfile {hostfile} " in mpirun
    assert remove == f"# remove {hostfile}"
    assert transports["n1"].get(hostfile) is None  # removed from the launcher
    assert (run.failed, run.median_busbw_gbs is not None) == (answer != "ok", answer == "ok")


def test_a_run_killed_while_mpirun_runs_leaves_a_journal_whose_undo_removes_the_hostfile(tmp_path: Path) -> None:
    """``bench nccl --multi-node`` killed (SIGKILL: no clean-up runs) while mpirun runs: the hostfile it wrote
    on the launcher is in an undo journal written before it was made, and ``clusterctl undo`` removes it
    (and nothing else)."""
    import json
    import signal
    import time

    from clirun import clusterctl, start_clusterctl

    from clusterctl.mock.state import MockCluster

    profile = tmp_path / "profile"
    profile.mkdir()
    (profile / "profile.yaml").write_text(f"extends: {DEMO_PROFILE}\ncommands:\n  - regex: '^mpirun '\n"
                                          "    delay: 3600\n")
    inventory = tmp_path / "inventory.yaml"
    inventory.write_text("cluster: benchsim\ndefaults: {transport: mock, mock_state: state, profile: profile}\n"
                         "hosts:\n  n1: {address: 10.0.0.1}\n  n2: {address: 10.0.0.2}\n")
    launcher = MockCluster(tmp_path / "state").host("n1").fs
    launcher.write("/tmp/keep-me", b"not clusterctl's\n")

    def hostfiles() -> list[str]:
        return [name for name in launcher.listdir("/tmp") if name.startswith("clusterctl-hostfile-")]

    proc = start_clusterctl(["-i", inventory, "bench", "nccl", "--multi-node", "--gpus", "4"], home=tmp_path,
                            CLUSTERCTL_STATE_DIR=str(tmp_path / "records"))
    try:
        deadline = time.monotonic() + 240  # start-up on a loaded machine; the hostfile is written before mpirun
        while not hostfiles() and time.monotonic() < deadline:
            assert proc.poll() is None, proc.communicate()
            time.sleep(0.1)
        assert hostfiles(), "the hostfile never appeared"
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.communicate(timeout=60)
    (journal,) = (tmp_path / "records" / "undo").iterdir()
    assert json.loads(journal.read_text().splitlines()[0])["cluster"] == "benchsim"
    done = clusterctl("-i", inventory, "undo", journal, "--yes")
    assert done.exit_code == 0, done.output
    assert hostfiles() == [] and launcher.read("/tmp/keep-me") == b"not clusterctl's\n"
