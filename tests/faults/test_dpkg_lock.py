"""A dpkg lock held by another process (unattended-upgrades after boot) is waited for with a bound
(apt's DPkg::Lock::Timeout), and an install that never happened gets no "cannot undo" line."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from clusterctl.bootstrap.registry import all_phases
from clusterctl.bootstrap.run import run_bootstrap
from clusterctl.engine.run import RunReport, RunSettings, Status
from clusterctl.fanout import Runner
from clusterctl.inventory.loader import load_inventory
from clusterctl.inventory.model import Inventory
from clusterctl.mock.transport import MockTransport

REPO = Path(__file__).resolve().parents[2]
DEMO = REPO / "inventories" / "demo.yaml"
LOCK_HELD = ("E: Could not get lock /var/lib/dpkg/lock-frontend. It is held by process 2262 (unattended-upgr)\\n"
             "N: Be aware that removing the lock file is not a solution and may break your system.\\n"
             "E: Unable to acquire the dpkg frontend lock (/var/lib/dpkg/lock-frontend), is another process "
             "using it?\\n")


def _run(tmp_path: Path, rule: str) -> RunReport:
    demo = load_inventory(str(DEMO))
    host = next(h for h in demo.hosts if h.name == "gpu-a1")
    folder = tmp_path / "profile"
    folder.mkdir()
    (folder / "profile.yaml").write_text(f"extends: {host.profile}\ncommands:\n{rule}")
    host = dataclasses.replace(host, profile=str(folder))
    inventory = Inventory(name="lab", hosts=(host,), bootstrap=demo.bootstrap)
    phases = [p for p in all_phases() if p.name in ("kernel", "packages")]
    with Runner(lambda h, _t: MockTransport(h), parallel=2, timeout_s=60) as runner:
        return run_bootstrap(inventory, (host,), runner, phases, RunSettings(apply=True))


def test_a_lock_released_within_the_wait_does_not_fail_the_install(tmp_path: Path) -> None:
    # apt without a lock timeout fails at once while the lock is held; with one it waits it out.
    report = _run(tmp_path, "  - regex: '^apt-get install (?!.*DPkg::Lock::Timeout=)'\n    exit: 100\n"
                            f"    stderr_text: \"{LOCK_HELD}\"\n")
    assert report.ok, report.failed_hosts
    packages = next(r for r in report.results if r.phase == "packages")
    assert packages.status is Status.CHANGED


def test_a_lock_held_past_the_wait_fails_without_a_bogus_rollback_line(tmp_path: Path) -> None:
    report = _run(tmp_path, "  - regex: '^apt-get install '\n    exit: 100\n"
                            f"    stderr_text: \"{LOCK_HELD}\"\n")
    packages = next(r for r in report.results if r.phase == "packages")
    assert packages.status is Status.FAILED and "Could not get lock" in packages.message
    assert not any("install" in line and "cannot undo" in line for line in packages.rollback), packages.rollback
