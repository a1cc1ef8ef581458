"""Every plan and dry run leaves the hosts byte for byte as they were (the gate records, nothing else).

One parametrized case per command that changes hosts. A new command that changes hosts adds its
dry run here: a ``DryRun`` with the command line and, when the dry run only means something on
a host that already holds changes, a ``before`` that makes them (an apply, a journal to undo).
``heal`` and ``power`` need a BMC: their dry runs are one test below, on tests/heal's bootstrapped
demo with sushy-tools' Redfish emulator (``DemoHeal``), where the emulator's power is checked too.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from clirun import DEMO, REPO_ROOT, clusterctl
from host_state import assert_hosts_unchanged, differences, seed_mock_hosts, snapshot

# tests/heal's demo with a BMC per host (DemoHeal) and tests/bmc's emulator, shared rather than copied.
sys.path[:0] = [str(REPO_ROOT / "tests" / "heal"), str(REPO_ROOT / "tests" / "bmc")]
from demo_heal import HOSTS, DemoHeal  # noqa: E402
from redfish_emulator import available  # noqa: E402

SURVEY = REPO_ROOT / "tests" / "bootstrap_cluster" / "fixtures" / "demo-survey.json"
BOOTSTRAP = ("bootstrap", "--survey", str(SURVEY))


@dataclass(frozen=True)
class DryRun:
    name: str
    #: The dry-run command line (after ``-i INVENTORY``); ``{journal}`` and ``{tmp}`` are filled in.
    args: tuple[str, ...]
    #: Commands that bring the hosts into a state worth planning from (they do change hosts).
    before: tuple[tuple[str, ...], ...] = ()
    #: Exit codes that mean the dry run worked (a plan that finds errors exits 1).
    exit_codes: tuple[int, ...] = (0,)
    #: Extra set-up on this machine (a source file for copy).
    prepare: Callable[[Path], None] = field(default=lambda _: None)


def _source(tmp: Path) -> None:
    (tmp / "nccl.conf").write_text("NCCL_DEBUG=WARN\n")


DRY_RUNS = [
    DryRun("bootstrap plan", ("bootstrap", "plan", "--survey", str(SURVEY)), exit_codes=(0, 1)),
    DryRun("bootstrap --dry-run after kernel", ("bootstrap", "--dry-run", "--survey", str(SURVEY)),
           before=(("bootstrap", "phase", "kernel"),), exit_codes=(0, 1)),
    DryRun("bootstrap phase --dry-run", ("bootstrap", "phase", "kernel", "--dry-run")),
    DryRun("reset --dry-run", ("reset", "--dry-run", "--restore-containerd"),
           before=(("bootstrap", "phase", "kernel"),)),
    DryRun("tune-nccl --push --dry-run", ("tune-nccl", "--survey", str(SURVEY), "--push", "--dry-run")),
    # On hosts that hold a pushed file and site lines beside it: the plan reads them, takes no lock.
    DryRun("tune-nccl --push --dry-run after a push", ("tune-nccl", "--survey", str(SURVEY), "--push", "--dry-run"),
           before=(("exec", "--sudo", "--", "printf 'NCCL_DEBUG=WARN\\n' > /etc/nccl.conf"),
                   ("tune-nccl", "--survey", str(SURVEY), "--push", "--yes"))),
    DryRun("copy --dry-run", ("copy", "{tmp}/nccl.conf", "/etc/nccl.conf", "--dry-run"), prepare=_source),
    # The kernel phase's modules loaded now stay loaded: its undo, dry run included, exits 1 ("cannot undo").
    DryRun("undo --dry-run", ("undo", "{journal}", "--dry-run"), before=(("bootstrap", "phase", "kernel"),),
           exit_codes=(1,)),
    DryRun("bench ib --dry-run", ("bench", "ib", "--dry-run")),
    # Level 0 only reads; a host it finds unhealthy exits 1.
    DryRun("health", ("health",), exit_codes=(0, 1)),
    # Day 2, on the two hosts bootstrapped first (gpu-a1 the control plane, gpu-b1 a worker).
    DryRun("certs renew --dry-run", ("certs", "renew", "--dry-run"), before=(BOOTSTRAP,)),
    DryRun("upgrade plan", ("upgrade", "plan", "--to", "1.36.3"), before=(BOOTSTRAP,)),
    DryRun("upgrade apply --dry-run", ("upgrade", "apply", "--to", "1.36.3", "--dry-run"), before=(BOOTSTRAP,)),
    DryRun("upgrade phase --dry-run", ("upgrade", "phase", "drain", "--to", "1.36.3", "--dry-run"),
           before=(BOOTSTRAP,)),
    DryRun("remove-node --dry-run", ("remove-node", "gpu-b1", "--dry-run"), before=(BOOTSTRAP,)),
    DryRun("quarantine --drain --dry-run", ("quarantine", "gpu-b1", "--reason", "nvlink", "--drain", "--dry-run"),
           before=(BOOTSTRAP,)),
    # Release runs its checks (reads) first; a host that fails them exits 1.
    DryRun("release --dry-run", ("release", "gpu-b1", "--dry-run"),
           before=(BOOTSTRAP, ("quarantine", "gpu-b1", "--reason", "nvlink", "--yes")), exit_codes=(0, 1)),
    DryRun("health --quarantine --dry-run", ("health", "--quarantine", "--dry-run"), before=(BOOTSTRAP,),
           exit_codes=(0, 1)),
    DryRun("undo of a quarantine --dry-run", ("undo", "{journal}", "--dry-run"),
           before=(BOOTSTRAP, ("quarantine", "gpu-b1", "--reason", "nvlink", "--yes"))),
]


@pytest.mark.parametrize("case", DRY_RUNS, ids=[c.name for c in DRY_RUNS])
def test_a_dry_run_leaves_every_host_byte_for_byte_as_it_was(
        case: DryRun, tmp_path: Path, _private_mock_state: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CLUSTERCTL_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.chdir(tmp_path)
    case.prepare(tmp_path)
    base = ("-i", str(DEMO), "-l", "gpu-a1,gpu-b1")
    seed_mock_hosts(DEMO)
    journal = ""
    for step in case.before:
        done = clusterctl(*base, "-o", "json", *step)
        assert done.exit_code == 0, done.output
        journal = done.json().get("undo_journal") or journal
    args = [a.format(journal=journal, tmp=tmp_path) for a in case.args]
    with assert_hosts_unchanged(_private_mock_state):
        ran = clusterctl(*base, *args)
    assert ran.exit_code in case.exit_codes, ran.output


def test_the_check_catches_a_change(tmp_path: Path, _private_mock_state: Path) -> None:
    """The helper itself: a command that does change a host is caught, naming the file."""
    seed_mock_hosts(DEMO)
    before = snapshot(_private_mock_state)
    ran = clusterctl("-i", str(DEMO), "-l", "gpu-a1", "exec", "--sudo", "touch /etc/sneaky.conf")
    assert ran.exit_code == 0, ran.output
    (line,) = differences(before, snapshot(_private_mock_state))
    assert line.startswith("new: ") and line.endswith("/hosts/gpu-a1/fs/etc/sneaky.conf")
    with pytest.raises(AssertionError, match=r"changed: .*/hosts/gpu-a1/fs/etc/sneaky\.conf"), \
            assert_hosts_unchanged(_private_mock_state):
        clusterctl("-i", str(DEMO), "-l", "gpu-a1", "exec", "--sudo", "echo again > /etc/sneaky.conf")


def test_the_receiver_in_dry_run_changes_nothing(tmp_path: Path, _private_mock_state: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """``remediate serve --dry-run``: an alert that asks for a drain is decided and logged, nothing more."""
    import io
    import json

    from clusterctl.fanout import Runner
    from clusterctl.inventory.loader import load_inventory
    from clusterctl.quarantine.receiver import Remediator
    from clusterctl.transport.factory import ConnectOptions, make_connector

    monkeypatch.setenv("CLUSTERCTL_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.chdir(tmp_path)
    seed_mock_hosts(DEMO)
    done = clusterctl("-i", str(DEMO), "-l", "gpu-a1,gpu-b1", *BOOTSTRAP)
    assert done.exit_code == 0, done.output
    log = io.StringIO()
    connect = make_connector(ConnectOptions())
    receiver = Remediator(load_inventory(str(DEMO)), lambda: Runner(connect, parallel=4, timeout_s=60), log,
                          dry_run=True, state_dir=str(tmp_path))
    alert = {"version": "4", "status": "firing", "alerts": [
        {"status": "firing", "labels": {"alertname": "GPUFellOffTheBus", "Hostname": "gpu-b1"}}]}
    with assert_hosts_unchanged(_private_mock_state):
        status, _ = receiver.handle(json.dumps(alert).encode())
        assert status == 200 and receiver.settle(120)
    decided = [json.loads(line) for line in log.getvalue().splitlines()]
    assert any(d.get("host") == "gpu-b1" and d["decision"] == "would drain" for d in decided), decided
    assert not (tmp_path / "undo").exists()


def _power(demo: DemoHeal) -> dict[str, str]:
    """Each host's power as its BMC (the emulator) reports it."""
    code, out = demo.cli("-o", "json", "power", "status", *HOSTS)
    assert code == 0, out
    return {h["host"]: h["before"] for h in json.loads(out)["hosts"]}


@pytest.mark.skipif(not available(), reason="needs sushy-tools' sushy-emulator (.[test])")
def test_heal_and_power_dry_runs_change_no_host_and_no_bmc(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``heal --dry-run`` on a quarantined host whose findings make heal act, and ``power on|off|cycle
    --dry-run``: the mock hosts (files, node taints and cordon of the simulated cluster) are byte for
    byte as they were, the emulator applied no power change and reports the same power for every host."""
    monkeypatch.chdir(tmp_path)
    with DemoHeal(tmp_path / "demo") as demo:
        assert demo.emulator is not None
        assert demo.cli("-l", "gpu-a2", "mock", "set", "fault=xid-79")[0] == 0
        code, out = demo.cli("quarantine", "gpu-a2", "--reason", "xid 79", "--code", "GPUFellOffTheBus", "--yes")
        assert code == 0, out
        assert demo.cli("power", "off", "gpu-a3", "--yes")[0] == 0  # one host off, for 'power on' to plan
        demo.emulator.notified.clear()
        power = _power(demo)
        assert power["gpu-a3"] == "Off" and power["gpu-a2"] == "On", power
        cases = [
            (("heal", "gpu-a2", "--dry-run"), "would power-cycle gpu-a2 through its BMC"),
            (("power", "cycle", "gpu-a2", "--dry-run"), "would power-cycle gpu-a2 through its BMC"),
            (("power", "off", "gpu-a1", "--dry-run"), "would switch off gpu-a1 through its BMC"),
            (("power", "on", "gpu-a3", "--dry-run"), "would switch on gpu-a3 through its BMC"),
        ]
        for args, planned in cases:
            with assert_hosts_unchanged(demo.state):
                code, out = demo.cli(*args)
            assert code == 0, out
            assert planned in out and "dry run: nothing was changed" in out, out
            assert demo.emulator.notified == [], (args, demo.emulator.notified)
            assert _power(demo) == power, args
