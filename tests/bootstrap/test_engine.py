"""The phase engine on in-process mock hosts: plan vs apply, re-runs, failures, resume, lock, secrets."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar

import pytest

from clusterctl.bootstrap.phase import Phase, PhaseContext
from clusterctl.bootstrap.run import run_bootstrap
from clusterctl.changes import Change, ChangeFailed, GateRecord, HostGate
from clusterctl.engine.lock import LockInfo
from clusterctl.engine.progress import ProgressStore
from clusterctl.engine.run import RunSettings, Status
from clusterctl.fanout import Runner
from clusterctl.findings import Finding, Severity
from clusterctl.inventory.model import Host, Inventory
from clusterctl.mock.profile import load_profile
from clusterctl.mock.transport import MockTransport
from clusterctl.secret import Secret
from clusterctl.transport.base import CommandResult, FailureKind, RunRequest, Transport, TransportError

LOCK = "/var/lib/clusterctl/bootstrap.lock"
TOKEN = "abcdef.0123456789abcdef"


class Fleet:
    """Mock hosts that keep their files across runs (one transport per host for the whole test)."""

    def __init__(self, tmp_path: Path, names: Sequence[str]) -> None:
        profile = tmp_path / "profile"
        profile.mkdir()
        (profile / "profile.yaml").write_text(
            "commands:\n"
            "  - regex: '^fail-on-purpose'\n    exit: 4\n    stderr_text: 'E: injected failure\\n'\n"
            "  - regex: '^(apt-get|systemctl|sysctl)'\n"
        )
        self.hosts = tuple(Host(name=n, transport="mock", profile=str(profile)) for n in names)
        self.inventory = Inventory(name="lab", hosts=self.hosts)
        loaded = load_profile(str(profile))
        self.transports = {h.name: _Persistent(h, loaded) for h in self.hosts}

    def runner(self) -> Runner:
        return Runner(lambda host, _t: self.transports[host.name], parallel=8, timeout_s=10)

    def file(self, host: str, path: str) -> bytes | None:
        return self.transports[host].get(path)


class _Persistent(MockTransport):
    def close(self) -> None:  # the same "host" serves every run of a test
        pass


class WriteConf(Phase[bytes | None]):
    """Writes one file; a host named in ``failing`` fails its command."""

    name: ClassVar[str] = "write-conf"
    description: ClassVar[str] = "test phase"

    def __init__(self, failing: Sequence[str] = ()) -> None:
        self.failing = set(failing)
        self.checks = 0

    def check(self, ctx: PhaseContext) -> bytes | None:
        self.checks += 1
        return ctx.reader.get("/etc/demo.conf")

    def plan(self, ctx: PhaseContext, state: bytes | None) -> list[Change]:
        changes = [Change.write_file(ctx.host.name, "/etc/demo.conf", "wanted = true\n", current=state)]
        if ctx.host.name in self.failing:
            changes.append(Change.run(ctx.host.name, "fail-on-purpose", summary="install things"))
        return changes


class Later(Phase[bool]):
    name: ClassVar[str] = "later"
    description: ClassVar[str] = "runs after write-conf"

    def check(self, ctx: PhaseContext) -> bool:
        return ctx.reader.get("/etc/later") is not None

    def plan(self, ctx: PhaseContext, state: bool) -> list[Change]:
        return [] if state else [Change.write_file(ctx.host.name, "/etc/later", "x\n", current=None)]


def settings(tmp_path: Path, *, apply: bool = True, resume: bool = False, store: ProgressStore | None = None,
             **kw: Any) -> RunSettings:
    if store is None and apply:
        store = (ProgressStore.load if resume else ProgressStore)(tmp_path / "state.json", "lab")
    return RunSettings(apply=apply, resume=resume, progress=store, **kw)


def run(fleet: Fleet, phases: Sequence[Phase[Any]], st: RunSettings) -> Any:
    with fleet.runner() as runner:
        return run_bootstrap(fleet.inventory, fleet.hosts, runner, phases, st)


@pytest.fixture
def fleet(tmp_path: Path) -> Fleet:
    return Fleet(tmp_path, ["n1", "n2", "n3"])


class _ChecksNothing(Phase[None]):
    """A test phase with nothing to read from its host before it plans."""

    def check(self, ctx: PhaseContext) -> None:
        return None


def remedy(phase_name: str, cures: Sequence[str], cannot: Sequence[str] = ()) -> Phase[None]:
    """A remedy (heal's steps) that writes its file and cures the hosts in ``cures`` (its verify passes there);
    on the hosts in ``cannot`` its check finds an error (a power cycle with no BMC)."""

    class Remedy(_ChecksNothing):
        name: ClassVar[str] = phase_name
        description: ClassVar[str] = "a remedy"
        remedy: ClassVar[bool] = True

        def findings(self, ctx: PhaseContext, state: None) -> list[Finding]:
            return [Finding(Severity.ERROR, "NO_BMC", "no BMC", host=ctx.host.name)] if ctx.host.name in cannot else []

        def plan(self, ctx: PhaseContext, state: None) -> list[Change]:
            return [Change.write_file(ctx.host.name, f"/etc/{phase_name}", "x\n", current=None)]

        def verify(self, ctx: PhaseContext) -> list[Finding]:
            return [] if ctx.host.name in cures else [Finding(Severity.ERROR, "SICK", "still sick", host=ctx.host.name)]

    return Remedy()


def test_remedies_are_tried_in_turn_until_one_cures_the_host(fleet: Fleet, tmp_path: Path) -> None:
    """A remedy that fails hands the host on to the next one; the first that cures it ends its run; a host
    that none cures fails the run."""
    phases = [remedy("first", ()), remedy("second", ("n1",)), remedy("third", ("n1", "n2"))]
    report = run(fleet, phases, settings(tmp_path))
    by = {(r.host, r.phase): r.status for r in report.results}
    assert [by["n1", p] for p in ("first", "second", "third")] == [Status.FAILED, Status.CHANGED, Status.SKIPPED]
    assert [by["n2", p] for p in ("first", "second", "third")] == [Status.FAILED, Status.FAILED, Status.CHANGED]
    assert fleet.file("n1", "/etc/third") is None and fleet.file("n1", "/etc/second") == b"x\n"
    assert report.cured == {"n1": "second", "n2": "third"}
    assert report.failed_hosts == {"n3": "no remedy cured it"} and not report.ok
    # A plan shows every remedy: nothing is cured before anything is applied.
    planned = run(fleet, phases, settings(tmp_path, apply=False))
    assert {r.status for r in planned.results if r.host == "n3"} == {Status.CHANGED} and planned.ok


def test_a_plan_whose_remedy_already_fails_fails_its_host_and_still_plans_the_rest(fleet: Fleet,
                                                                                     tmp_path: Path) -> None:
    """A remedy's plan that finds an error fails its host, as any phase's plan does (a plan cures nothing); the
    remedies after it are still planned there, as the applying run would still try them."""
    phases = [remedy("first", (), cannot=("n2",)), remedy("second", ())]
    planned = run(fleet, phases, settings(tmp_path, apply=False))
    by = {(r.host, r.phase): r.status for r in planned.results}
    assert [by["n2", p] for p in ("first", "second")] == [Status.FAILED, Status.CHANGED]
    assert planned.failed_hosts == {"n2": "phase first: no BMC"} and not planned.ok


def test_plan_touches_nothing_and_shows_the_diff(fleet: Fleet, tmp_path: Path) -> None:
    report = run(fleet, [WriteConf()], settings(tmp_path, apply=False))
    assert fleet.file("n1", "/etc/demo.conf") is None
    assert fleet.file("n1", LOCK) is None  # plan takes no lock
    result = report.results[0]
    assert result.status is Status.CHANGED
    assert "+wanted = true" in result.changes[0].diff()
    assert not (tmp_path / "state.json").exists()


def test_apply_then_second_apply_changes_nothing(fleet: Fleet, tmp_path: Path) -> None:
    first = run(fleet, [WriteConf(), Later()], settings(tmp_path))
    assert first.ok and first.changed
    assert fleet.file("n2", "/etc/demo.conf") == b"wanted = true\n"
    second = run(fleet, [WriteConf(), Later()], settings(tmp_path))
    assert second.ok and not second.changed
    assert {r.status for r in second.results} == {Status.OK}
    assert [p.counts[Status.OK] for p in second.recap] == [3, 3]
    assert fleet.file("n1", LOCK) is None  # released at the end


def test_failed_host_is_left_out_of_later_phases_and_rolled_back(fleet: Fleet, tmp_path: Path) -> None:
    report = run(fleet, [WriteConf(failing=["n2"]), Later()], settings(tmp_path))
    assert not report.ok and list(report.failed_hosts) == ["n2"]
    assert "injected failure" in report.failed_hosts["n2"]
    by = {(r.host, r.phase): r for r in report.results}
    assert by[("n2", "write-conf")].status is Status.FAILED
    assert any("removed /etc/demo.conf" in line for line in by[("n2", "write-conf")].rollback)
    assert fleet.file("n2", "/etc/demo.conf") is None  # rolled back
    assert by[("n2", "later")].status is Status.SKIPPED
    assert by[("n1", "later")].status is Status.CHANGED and by[("n3", "later")].status is Status.CHANGED
    assert report.recap[0].counts == {Status.OK: 0, Status.CHANGED: 2, Status.FAILED: 1, Status.SKIPPED: 0}


def test_resume_skips_what_is_done_and_verified(fleet: Fleet, tmp_path: Path) -> None:
    run(fleet, [WriteConf(failing=["n2"]), Later()], settings(tmp_path))
    progress = json.loads((tmp_path / "state.json").read_text())
    assert progress["hosts"]["n2"]["write-conf"]["status"] == "failed"
    phase = WriteConf()
    report = run(fleet, [phase, Later()], settings(tmp_path, resume=True))
    assert report.ok
    by = {(r.host, r.phase): r for r in report.results}
    assert by[("n1", "write-conf")].status is Status.SKIPPED
    assert "earlier run" in by[("n1", "write-conf")].message
    assert by[("n2", "write-conf")].status is Status.CHANGED
    assert by[("n2", "later")].status is Status.CHANGED
    # Every host is read again: the record is a hint. n1 is skipped because its check finds nothing
    # to do and its verify (which reads through check) passes; n2 runs: three reads in all.
    assert phase.checks == 3


class UpgradeNode(_ChecksNothing):
    """Leaves nothing to read back (as ``kubeadm upgrade node``): a resumed run trusts the progress file."""

    name: ClassVar[str] = "upgrade-node"
    description: ClassVar[str] = "test phase"
    done_when_recorded: ClassVar[bool] = True

    def plan(self, ctx: PhaseContext, state: None) -> list[Change]:
        return [Change.run(ctx.host.name, "apt-get install -y upgraded", summary="upgrade", cannot_undo="a test")]


def test_a_second_resume_does_not_run_again_what_the_first_found_done(fleet: Fleet, tmp_path: Path) -> None:
    # The first resume skips what the interrupted run did ("done in an earlier run"); a second one (the
    # first was cut off too, or failed elsewhere) used to take that skip for not done, and upgrade again.
    run(fleet, [UpgradeNode(), WriteConf(failing=["n2"])], settings(tmp_path))
    for _ in range(2):
        report = run(fleet, [UpgradeNode(), WriteConf()], settings(tmp_path, resume=True))
        assert report.ok and all(r.status is Status.SKIPPED for r in report.results if r.phase == "upgrade-node")
    assert [sum("upgraded" in c for c in fleet.transports[h].history) for h in ("n1", "n2", "n3")] == [1, 1, 1]


def test_a_second_concurrent_run_is_refused_by_the_lock(fleet: Fleet, tmp_path: Path) -> None:
    other = LockInfo("alice", "elsewhere.example", 4242, "2099-01-01T00:00:00+00:00", "other-run")
    fleet.transports["n1"].machine.host.fs.write(LOCK, other.to_bytes())
    report = run(fleet, [WriteConf()], settings(tmp_path))
    assert "locked by alice@elsewhere.example (pid 4242" in report.failed_hosts["n1"]
    assert fleet.file("n1", "/etc/demo.conf") is None
    assert fleet.file("n2", "/etc/demo.conf") == b"wanted = true\n"
    assert fleet.file("n1", LOCK) == other.to_bytes()  # never removes someone else's lock


def test_stale_lock_is_reported_and_force_unlock_clears_it(fleet: Fleet, tmp_path: Path) -> None:
    stale = LockInfo("bob", "old-laptop", 1, "2020-01-01T00:00:00+00:00", "dead-run")
    fleet.transports["n1"].machine.host.fs.write(LOCK, stale.to_bytes())
    report = run(fleet, [WriteConf()], settings(tmp_path))
    assert "looks stale" in report.failed_hosts["n1"] and "--force-unlock" in report.failed_hosts["n1"]
    forced = run(fleet, [WriteConf()], settings(tmp_path, force_unlock=True))
    assert forced.ok
    assert any("cleared the lock held by bob@old-laptop" in note for note in forced.notes)


class InitOnce(Phase[None]):
    name: ClassVar[str] = "init-once"
    description: ClassVar[str] = "once per cluster, shares a token"
    once_per_cluster: ClassVar[bool] = True

    def check(self, ctx: PhaseContext) -> None:
        ctx.shared.join.token = Secret(TOKEN, "join token")

    def plan(self, ctx: PhaseContext, state: None) -> list[Change]:
        return [Change.run(ctx.host.name, "systemctl start init", summary="init the cluster")]


class Join(_ChecksNothing):
    name: ClassVar[str] = "join"
    description: ClassVar[str] = "uses the token"

    def applies_to(self, ctx: PhaseContext) -> bool:
        return ctx.host.name != "n1"

    def plan(self, ctx: PhaseContext, state: None) -> list[Change]:
        token = ctx.shared.join.token
        assert token is not None
        return [Change.run(ctx.host.name, "apt-get join --token-file /dev/stdin", stdin_secret=token,
                           summary=f"join with token {token}")]


def test_once_per_cluster_subsets_and_shared_secrets_never_leak(fleet: Fleet, tmp_path: Path) -> None:
    report = run(fleet, [InitOnce(), Join()], settings(tmp_path))
    assert report.ok
    by = {(r.host, r.phase): r.status for r in report.results}
    assert by[("n1", "init-once")] is Status.CHANGED
    assert by[("n2", "init-once")] is Status.SKIPPED and by[("n1", "join")] is Status.SKIPPED
    assert by[("n2", "join")] is Status.CHANGED
    text = json.dumps(report.to_json()) + (tmp_path / "state.json").read_text()
    assert TOKEN not in text and "join with token ********" in text
    assert all(TOKEN not in line for t in fleet.transports.values() for line in t.history)


class Broken(Phase[None]):
    name: ClassVar[str] = "broken"
    description: ClassVar[str] = "check raises"

    def check(self, ctx: PhaseContext) -> None:
        raise RuntimeError("cannot read the host")

    def plan(self, ctx: PhaseContext, state: None) -> list[Change]:
        return []


def test_an_exception_in_one_phase_fails_the_host_not_the_run(fleet: Fleet, tmp_path: Path) -> None:
    report = run(fleet, [Broken(), Later()], settings(tmp_path))
    assert set(report.failed_hosts) == {"n1", "n2", "n3"}
    assert "cannot read the host" in report.failed_hosts["n1"]
    assert all(r.status is Status.SKIPPED for r in report.results if r.phase == "later")


class ReadOnly(_ChecksNothing):
    name: ClassVar[str] = "read-only"
    description: ClassVar[str] = "reads only"
    read_only: ClassVar[bool] = True

    def plan(self, ctx: PhaseContext, state: None) -> list[Change]:
        return []


def test_a_read_only_run_takes_no_lock_and_runs_beside_another(fleet: Fleet, tmp_path: Path) -> None:
    other = LockInfo("alice", "elsewhere.example", 4242, "2099-01-01T00:00:00+00:00", "other-run")
    fleet.transports["n1"].machine.host.fs.write(LOCK, other.to_bytes())
    report = run(fleet, [ReadOnly()], settings(tmp_path))
    assert report.ok and fleet.file("n2", LOCK) is None


class WritesFromPlan(_ChecksNothing):
    """A buggy phase: it writes to the host itself instead of returning a Change."""

    name: ClassVar[str] = "writes-from-plan"
    description: ClassVar[str] = "bypasses the gate"

    def plan(self, ctx: PhaseContext, state: None) -> list[Change]:
        ctx.reader.put("/etc/sneaky.conf", b"x\n")
        return []


@pytest.mark.parametrize("apply", [False, True])
def test_a_phase_that_writes_from_plan_fails_and_writes_nothing(fleet: Fleet, tmp_path: Path, apply: bool) -> None:
    report = run(fleet, [WritesFromPlan(), Later()], settings(tmp_path, apply=apply))
    assert set(report.failed_hosts) == {"n1", "n2", "n3"}
    assert "bug in phase writes-from-plan: phase writes-from-plan may not write /etc/sneaky.conf on n1" in \
        report.failed_hosts["n1"] and "Change.write_file" in report.failed_hosts["n1"]
    assert fleet.file("n1", "/etc/sneaky.conf") is None and fleet.file("n1", "/etc/later") is None


class ProbesWithAFile(Phase[bool]):
    """verify needs a file on the host for a moment (as bootstrap's GPU test pod): a temporary change."""

    name: ClassVar[str] = "probe-file"
    description: ClassVar[str] = "temporary change in verify"
    PROBE = "/tmp/probe.txt"

    def __init__(self) -> None:
        self.seen: list[bytes | None] = []

    def check(self, ctx: PhaseContext) -> bool:
        return ctx.reader.get("/etc/demo.conf") == b"wanted = true\n"

    def plan(self, ctx: PhaseContext, state: bool) -> list[Change]:
        return [] if state else [Change.write_file(ctx.host.name, "/etc/demo.conf", "wanted = true\n", current=None)]

    def verify(self, ctx: PhaseContext) -> list[Finding]:
        host = ctx.host.name
        with ctx.temporary([Change.write_file(host, self.PROBE, "probe\n", current=None)],
                           [Change.remove_file(host, self.PROBE)]):
            self.seen.append(ctx.reader.get(self.PROBE))
            if host == "n2":
                raise RuntimeError("verify broke half-way")
        return []


def test_a_temporary_change_is_cleaned_up_however_verify_ends_and_is_not_journaled(
        fleet: Fleet, tmp_path: Path) -> None:
    phase = ProbesWithAFile()
    report = run(fleet, [phase], settings(tmp_path))
    assert phase.seen == [b"probe\n"] * 3  # there while verify ran...
    assert all(fleet.file(h, ProbesWithAFile.PROBE) is None for h in ("n1", "n2", "n3"))  # ...and gone after
    assert list(report.failed_hosts) == ["n2"] and "verify broke half-way" in report.failed_hosts["n2"]
    kept = report.kept_records()
    assert [(r.change.host, r.change.path) for r in kept] == [("n1", "/etc/demo.conf"), ("n3", "/etc/demo.conf")]


class TemporaryInCheck(ProbesWithAFile):
    name: ClassVar[str] = "temporary-in-check"

    def check(self, ctx: PhaseContext) -> bool:
        with ctx.temporary([Change.write_file(ctx.host.name, self.PROBE, "probe\n", current=None)], []):
            return True


def test_check_may_not_make_even_a_temporary_change(fleet: Fleet, tmp_path: Path) -> None:
    report = run(fleet, [TemporaryInCheck()], settings(tmp_path))
    assert "may not make temporary changes on n1: only verify of an applying run can" in report.failed_hosts["n1"]
    assert fleet.file("n1", ProbesWithAFile.PROBE) is None


def test_the_journal_keeps_what_stayed_changed_and_leaves_rolled_back_hosts_out(fleet: Fleet, tmp_path: Path) -> None:
    report = run(fleet, [WriteConf(failing=["n2"]), Later()], settings(tmp_path))
    kept = [(r.change.host, r.change.path) for r in report.kept_records()]
    assert kept == [("n1", "/etc/demo.conf"), ("n3", "/etc/demo.conf"), ("n1", "/etc/later"), ("n3", "/etc/later")]


def test_skip_reason_is_the_one_answer_in_the_order_a_user_reads_it() -> None:
    from clusterctl.engine.run import SkipReason, skip_reason
    from clusterctl.host_reader import HostReader

    hosts = [Host(name="n1"), Host(name="n2")]  # the test Join applies to every host but n1
    inventory = Inventory(name="lab", hosts=tuple(hosts))

    def ctx(host: Host) -> PhaseContext:
        return PhaseContext(host, HostReader(Transport(host)), inventory)  # asked before connecting

    once = InitOnce()
    assert skip_reason(once, ctx(hosts[0]), failed_earlier=False, first_target="n1", done_before=False) is None
    assert skip_reason(once, ctx(hosts[1]), failed_earlier=False, first_target="n1",
                       done_before=False) is SkipReason.OTHER_HOST
    assert skip_reason(Join(), ctx(hosts[0]), failed_earlier=False, first_target=None,
                       done_before=True) is SkipReason.NOT_THIS_HOST
    assert skip_reason(Join(), ctx(hosts[1]), failed_earlier=True, first_target=None,
                       done_before=True) is SkipReason.EARLIER_FAILURE
    assert skip_reason(Join(), ctx(hosts[1]), failed_earlier=False, first_target=None,
                       done_before=True) is SkipReason.DONE_BEFORE


class RunsAChangeFromPlan(_ChecksNothing):
    """A buggy phase: its plan runs a changing command through the read-only view."""

    name: ClassVar[str] = "runs-a-change"
    description: ClassVar[str] = "changes the host from plan"

    def __init__(self, command: str) -> None:
        self.command = command

    def plan(self, ctx: PhaseContext, state: None) -> list[Change]:
        ctx.reader.run(self.command, sudo=True)
        return []


@pytest.mark.parametrize(("command", "refused"), [
    ("echo x > /etc/sneaky.conf", "write /etc/sneaky.conf"),
    ("rm -f /etc/keep.conf", "run rm"),
    ("sh -c 'mkdir -p /etc/new.d'", "run mkdir"),
    ("cat /etc/keep.conf > /etc/keep.conf.copy", "write /etc/keep.conf.copy"),
])
def test_a_simulated_host_refuses_a_change_asked_read_only(fleet: Fleet, tmp_path: Path, command: str,
                                                           refused: str) -> None:
    fleet.transports["n1"].machine.host.fs.write("/etc/keep.conf", b"keep\n")
    report = run(fleet, [RunsAChangeFromPlan(command)], settings(tmp_path, apply=False))
    assert f"a read-only command would {refused}" in report.failed_hosts["n1"]
    assert fleet.file("n1", "/etc/keep.conf") == b"keep\n"
    assert all(fleet.file("n1", p) is None for p in ("/etc/sneaky.conf", "/etc/new.d", "/etc/keep.conf.copy"))


class ProbedPhase(Phase[str]):
    """Reads a file with one command in check; verify reads it again, polling up to three times
    until it says ``ready`` (as a phase waiting for a node does)."""

    name: ClassVar[str] = "probed"
    description: ClassVar[str] = "test phase that reads with commands"

    def check(self, ctx: PhaseContext) -> str:
        return ctx.reader.run("cat /etc/probed.conf").stdout

    def plan(self, ctx: PhaseContext, state: str) -> list[Change]:
        wanted = "ready\n"
        return [] if state == wanted else [Change.write_file(ctx.host.name, "/etc/probed.conf", wanted,
                                                             current=state.encode() or None)]

    def verify(self, ctx: PhaseContext) -> list[Finding]:
        for _ in range(3):
            if ctx.reader.run("cat /etc/probed.conf").stdout == "ready\n":
                return []
        return [Finding(Severity.ERROR, "NOT_READY", "never ready", host=ctx.host.name)]


def _reads(fleet: Fleet, host: str) -> int:
    return sum(1 for line in fleet.transports[host].history if line.startswith("cat /etc/probed.conf"))


def test_a_no_op_phase_reads_each_host_once_and_a_changed_one_is_verified_afresh(fleet: Fleet,
                                                                                  tmp_path: Path) -> None:
    first = run(fleet, [ProbedPhase()], settings(tmp_path))
    assert first.ok and first.changed
    assert _reads(fleet, "n1") == 2  # check, then verify after the write: a fresh read
    second = run(fleet, [ProbedPhase()], settings(tmp_path))
    assert second.ok and not second.changed
    assert _reads(fleet, "n1") == 3  # the no-op's verify got check's answer, no second round trip


def test_a_polling_verify_still_reaches_the_host_after_the_first_replayed_answer(fleet: Fleet,
                                                                                  tmp_path: Path) -> None:
    fleet.transports["n1"].machine.host.fs.write("/etc/probed.conf", b"starting\n")

    class Waits(ProbedPhase):
        """Changes nothing itself; the service it waits for comes up right after check."""

        def check(self, ctx: PhaseContext) -> str:
            text = super().check(ctx)
            fleet.transports[ctx.host.name].machine.host.fs.write("/etc/probed.conf", b"ready\n")
            return text

        def plan(self, ctx: PhaseContext, state: str) -> list[Change]:
            return []

    report = run(fleet, [Waits()], settings(tmp_path))
    assert "n1" not in report.failed_hosts
    # check, then verify: its first poll is check's answer ("starting"), its second reaches the host.
    assert _reads(fleet, "n1") == 2


def test_release_leaves_a_lock_another_run_took_over(fleet: Fleet, tmp_path: Path) -> None:
    from clusterctl.engine.lock import acquire_then, release

    transport = fleet.transports["n1"]
    mine = LockInfo("alice", "laptop", 1, "2026-01-01T00:00:00+00:00", "run-a")
    theirs = LockInfo("bob", "desk", 2, "2026-01-01T00:00:01+00:00", "run-b")
    assert acquire_then(transport, mine, None)[:2] == ("", None)
    transport.machine.host.fs.write(LOCK, theirs.to_bytes())  # bob forced the lock open and took it
    release(transport, mine)
    assert fleet.file("n1", LOCK) == theirs.to_bytes()
    release(transport, theirs)
    assert fleet.file("n1", LOCK) is None


class _StoppedLate(_Persistent):
    """A host whose second step is cut off by Ctrl-C, and whose connection still answers after the
    fan-out asked it to stop (the race a real connection sometimes loses): every command it is given
    after ``stop_remote`` is kept in ``after_stop``."""

    def __init__(self, *args: Any, **kw: Any) -> None:
        super().__init__(*args, **kw)
        self.stopped = threading.Event()
        self.after_stop: list[str] = []

    def stop_remote(self) -> None:
        self.stopped.set()

    def execute(self, request: RunRequest) -> CommandResult:
        command = request.command
        if self.stopped.is_set():
            self.after_stop.append(command)
        if command == "slow-step":
            os.kill(os.getpid(), signal.SIGUSR1)  # Ctrl-C, as the CLI's handler turns it into Interrupted
            assert self.stopped.wait(20), "the run never stopped the host's command"
            raise TransportError(FailureKind.INTERRUPTED, f"{self.host.name}: interrupted: {command}")
        if command in ("mark-node", "unmark-node"):
            return CommandResult(command, "", "", 0, 0.0)
        return super().execute(request)


class MarkThenSlow(_ChecksNothing):
    name: ClassVar[str] = "mark-then-slow"
    description: ClassVar[str] = "a change undo can revert, then a step Ctrl-C cuts off"

    def plan(self, ctx: PhaseContext, state: None) -> list[Change]:
        return [Change.run(ctx.host.name, "mark-node", undo="unmark-node", summary="mark the node"),
                Change.run(ctx.host.name, "slow-step", summary="a slow step")]


def _cut_by_ctrl_c(tmp_path: Path, phase: Phase[Any], kind: type[_StoppedLate] = _StoppedLate
                   ) -> tuple[_StoppedLate, Any, Any]:
    """``phase`` run on one host of ``kind`` until its "slow-step" Ctrl-C cuts off: the host, the run's
    journal, and the ``Interrupted`` the run raised."""
    from clusterctl.errors import Interrupted
    from clusterctl.undo_journal import WriteAheadJournal

    profile = tmp_path / "profile"
    profile.mkdir()
    (profile / "profile.yaml").write_text("commands: []\n")
    host = Host(name="n1", transport="mock", profile=str(profile))
    transport = kind(host, load_profile(str(profile)))

    def interrupt(signum: int, frame: object) -> None:
        raise Interrupted("SIGINT")

    previous = signal.signal(signal.SIGUSR1, interrupt)
    journal = WriteAheadJournal(command="test", folder=tmp_path / "undo")
    try:
        with Runner(lambda h, _t: transport, timeout_s=30) as runner, pytest.raises(Interrupted) as caught:
            run_bootstrap(Inventory(name="lab", hosts=(host,)), [host], runner, [phase],
                          settings(tmp_path, journal=journal))
    finally:
        signal.signal(signal.SIGUSR1, previous)
    return transport, journal, caught.value


def test_a_step_cut_off_by_ctrl_c_is_left_to_the_journal_not_rolled_back_over_its_closing_connection(
        tmp_path: Path) -> None:
    """The engine never undoes an interrupted step on the connection the fan-out is stopping: that undo
    would happen or not by chance. What the step applied stays in place and in the journal, every time."""
    from clusterctl.undo_journal import read_journal

    transport, journal, interrupted = _cut_by_ctrl_c(tmp_path, MarkThenSlow())
    assert "unmark-node" not in transport.after_stop  # no rollback raced the stop
    assert journal.path is not None and f"clusterctl undo {journal.path}" in (interrupted.retry_hint or "")
    kept = [r.change.summary for r in read_journal(journal.path).records]
    assert kept == ["mark the node", "a slow step"]  # the step cut off on its way: it may have happened
    assert transport.get(LOCK) is None  # the lock given back on a fresh step all the same


class RefusedThenSlow(_ChecksNothing):
    name: ClassVar[str] = "refused-then-slow"
    description: ClassVar[str] = "a change refused, passed over as a drain passes over a refused eviction, then a step"

    def plan(self, ctx: PhaseContext, state: None) -> list[Change]:
        return [Change.run(ctx.host.name, "refused-step", summary="a refused step"),
                Change.run(ctx.host.name, "slow-step", summary="a slow step")]

    def apply(self, ctx: PhaseContext, gate: HostGate, changes: Sequence[Change]) -> list[GateRecord]:
        with contextlib.suppress(ChangeFailed):  # a budget refused the eviction: the drain goes on
            gate.submit(changes[0])
        return [gate.submit(changes[1])]


class _Refuses(_StoppedLate):
    def execute(self, request: RunRequest) -> CommandResult:
        if request.command == "refused-step":
            return CommandResult(request.command, "", "Error from server (TooManyRequests): refused", 1, 0.0)
        return super().execute(request)


def test_a_change_that_failed_before_ctrl_c_is_not_in_the_journal(tmp_path: Path) -> None:
    """A change whose command failed did not happen: the journal of a run Ctrl-C stopped in that phase
    listed it, and 'clusterctl undo' then said it cannot undo it (exit 1) or undid what was never made."""
    from clusterctl.undo_journal import read_journal

    _, journal, _ = _cut_by_ctrl_c(tmp_path, RefusedThenSlow(), _Refuses)
    assert journal.path is not None
    assert [r.change.summary for r in read_journal(journal.path).records] == ["a slow step"]
