"""Reading ahead: every phase's first read of a host in one round trip, and never a stale one."""

from __future__ import annotations

import shlex
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar

from clusterctl.bootstrap.phase import Phase, PhaseContext
from clusterctl.bootstrap.run import converged_hosts, run_bootstrap
from clusterctl.changes import Change
from clusterctl.engine.progress import ProgressStore
from clusterctl.engine.read_ahead import MARKER, batch_command, split_batch
from clusterctl.engine.run import RunSettings, SkipReason, Status
from clusterctl.fanout import Runner
from clusterctl.inventory.model import Host, Inventory
from clusterctl.mock.profile import load_profile
from clusterctl.mock.transport import MockTransport
from clusterctl.transport.base import CommandResult, RunRequest


def test_a_batch_gives_back_each_output_and_status_exactly_even_without_a_final_newline() -> None:
    commands = ["printf 'no newline'; true", "echo one; echo two", "true", "printf 'x\\n\\n'; false",
                # An output that looks like a marker, with another token, is only output.
                f"echo '{MARKER} 0123 1'; echo '{MARKER} 0123 1 exit 0'"]
    line = batch_command(commands, "feedface")
    out = subprocess.run(["sh", "-c", line], capture_output=True, text=True, check=True).stdout
    assert split_batch(out, len(commands), "feedface") == [
        ("no newline", 0), ("one\ntwo\n", 0), ("", 0), ("x\n\n", 1),
        (f"{MARKER} 0123 1\n{MARKER} 0123 1 exit 0\n", 0)]
    # Cut short (the connection dropped, the output cap was hit): not used at all.
    assert split_batch(out[: len(out) // 2], len(commands), "feedface") is None
    assert split_batch(out, len(commands), "otherrun") is None


class _Counting(MockTransport):
    """A mock host that keeps its files across runs and counts the commands it is sent."""

    def __init__(self, host: Host, profile: Any) -> None:
        super().__init__(host, profile)
        self.commands: list[str] = []

    def execute(self, request: RunRequest) -> CommandResult:
        self.commands.append(request.command)
        return super().execute(request)

    def close(self) -> None:
        pass


class ReadsFile(Phase[str]):
    """Reads files with one probe (as the real phases do) and writes ``path`` when it is not as wanted.

    What it wants may depend on another file (``source``): written by an earlier phase of the same
    run, it must be read after that phase's change, never from before it."""

    description: ClassVar[str] = "test phase"

    def __init__(self, name: str, path: str, source: str | None = None) -> None:
        self.name = name  # type: ignore[misc]
        self.path, self.source = path, source

    def probe(self) -> str:
        files = [self.path] + ([self.source] if self.source else [])
        return "; ".join(f"echo '### {f}'; cat {shlex.quote(f)} 2>/dev/null" for f in files) + "; true"

    def reads(self, ctx: PhaseContext) -> list[tuple[str, bool]]:
        return [(self.probe(), True)]

    def check(self, ctx: PhaseContext) -> str:
        return ctx.reader.run(self.probe(), sudo=True).stdout

    def wanted(self, state: str) -> str:
        if self.source is None:
            return f"{self.name}\n"
        seen = state.split(f"### {self.source}\n", 1)[1].strip() or "nothing"
        return f"{self.name} saw {seen}\n"

    def plan(self, ctx: PhaseContext, state: str) -> list[Change]:
        current = state.split(f"### {self.path}\n", 1)[1].split("### ", 1)[0]
        return [Change.write_file(ctx.host.name, self.path, self.wanted(state), current=current or None)]


class Fleet:
    def __init__(self, tmp_path: Path, names: Sequence[str]) -> None:
        profile = tmp_path / "profile"
        profile.mkdir()
        (profile / "profile.yaml").write_text("commands: []\n")
        loaded = load_profile(str(profile))
        self.hosts = tuple(Host(name=n, transport="mock", profile=str(profile)) for n in names)
        self.inventory = Inventory(name="lab", hosts=self.hosts)
        self.transports = {h.name: _Counting(h, loaded) for h in self.hosts}

    def run(self, phases: Sequence[Phase[Any]], *, apply: bool, read_ahead: bool, tmp_path: Path) -> Any:
        for t in self.transports.values():
            t.commands.clear()
        store = ProgressStore(tmp_path / "progress.json", "lab") if apply else None
        names = frozenset(h.name for h in self.hosts) if read_ahead else frozenset()
        with Runner(lambda host, _t: self.transports[host.name], parallel=4, timeout_s=30) as runner:
            return run_bootstrap(self.inventory, self.hosts, runner, phases,
                                 RunSettings(apply=apply, progress=store, read_ahead=names))

    def reads(self, host: str) -> list[str]:
        """The commands that read (the lock and the gate's own file writes left out)."""
        return [c for c in self.transports[host].commands if "bootstrap.lock" not in c and "cat > " not in c]


def test_a_plan_reads_each_host_once_for_all_its_phases_and_plans_the_same(tmp_path: Path) -> None:
    fleet = Fleet(tmp_path, ["n1", "n2"])
    phases = [ReadsFile("first", "/etc/first.conf"), ReadsFile("second", "/etc/second.conf")]
    one_by_one = fleet.run(phases, apply=False, read_ahead=False, tmp_path=tmp_path)
    assert len(fleet.reads("n1")) == 2
    ahead = fleet.run(phases, apply=False, read_ahead=True, tmp_path=tmp_path)
    assert len(fleet.reads("n1")) == 1 and len(fleet.reads("n2")) == 1
    assert MARKER in fleet.reads("n1")[0]

    def planned(report: Any) -> list[tuple[str, str, str | None, bytes | None]]:
        return [(r.host, r.phase, c.path, c.content) for r in report.results for c in r.changes]

    assert planned(ahead) == planned(one_by_one) and len(planned(ahead)) == 4


def test_after_a_change_later_phases_read_the_host_again(tmp_path: Path) -> None:
    fleet = Fleet(tmp_path, ["n1"])
    # "second" wants what "first" wrote: read ahead, it would see the host from before the change.
    phases = [ReadsFile("first", "/etc/first.conf"), ReadsFile("second", "/etc/second.conf", "/etc/first.conf")]
    report = fleet.run(phases, apply=True, read_ahead=True, tmp_path=tmp_path)
    assert report.ok and [r.status for r in report.results] == [Status.CHANGED, Status.CHANGED]
    assert fleet.transports["n1"].get("/etc/second.conf") == b"second saw first\n"
    # The batch, then "second" on its own after "first" changed the host (and each verify's read).
    assert len([c for c in fleet.reads("n1") if MARKER in c]) == 1
    # Nothing left to do: one batched read serves both checks, and their verifies replay them.
    again = fleet.run(phases, apply=True, read_ahead=True, tmp_path=tmp_path)
    assert again.ok and not again.changed
    assert len(fleet.reads("n1")) == 1


def test_hosts_whose_previous_run_finished_every_phase_are_the_ones_read_ahead(tmp_path: Path) -> None:
    store = ProgressStore(tmp_path / "progress.json", "lab")
    phases = [ReadsFile("first", "/a"), ReadsFile("second", "/b")]
    hosts = [Host(name=n) for n in ("done", "failed", "new", "not-mine")]
    for name in ("done", "failed", "not-mine"):
        store.record(name, "first", "ok", 1.0)
    store.record("done", "second", "changed", 1.0)
    store.record("failed", "second", "failed", 1.0, "verify failed")
    store.record("not-mine", "second", "skipped", 0.0, SkipReason.NOT_THIS_HOST.value, SkipReason.NOT_THIS_HOST.name)
    # A resumed run that found both phases done before (its host confirming) left the host as finished.
    for phase in ("first", "second"):
        store.record("resumed", phase, "skipped", 0.0, SkipReason.DONE_BEFORE.value, SkipReason.DONE_BEFORE.name)
    store.save()
    fresh = ProgressStore(store.path, "lab")  # what a new (not resumed) run starts with
    assert converged_hosts(fresh, phases, [*hosts, Host(name="resumed")]) == {"done", "not-mine", "resumed"}
    assert converged_hosts(None, phases, hosts) == frozenset()


def test_the_lock_and_the_reads_after_it_go_in_one_round_trip(tmp_path: Path) -> None:
    from clusterctl.transport.local import LocalTransport

    class Counted(LocalTransport):
        calls = 0

        def execute(self, request: RunRequest) -> CommandResult:
            Counted.calls += 1
            return super().execute(request)

    lock = str(tmp_path / "locks" / "bootstrap.lock")
    host = Counted(Host(name="here", transport="local"))
    held, result, made_folder = host.create_exclusive_then(lock, b"mine\n", "echo read; printf x >&2; exit 5")
    assert held is None and made_folder and Counted.calls == 1
    assert result is not None and (result.stdout, result.stderr, result.exit_code) == ("read\n", "x", 5)
    assert Path(lock).read_bytes() == b"mine\n"
    # Someone holds it: the reads do not run, the holder's lock is what comes back.
    held, result, made_folder = host.create_exclusive_then(lock, b"other\n",
                                                           "touch " + shlex.quote(str(tmp_path / "ran")))
    assert held == b"mine\n" and result is None and not made_folder and not (tmp_path / "ran").exists()
    assert host.create_exclusive(lock, b"again\n") == b"mine\n"


def test_the_lock_folder_goes_with_the_lock_of_the_run_that_made_it(tmp_path: Path) -> None:
    """The lock makes its folder outside the gate (no journal, no reset): the run whose lock made it removes
    it as it gives the lock back, once empty, in sh as a host runs it. A folder that was there (an earlier
    clusterctl's, the user's) stays; so does one where another run is taking its lock."""
    from clusterctl.engine.lock import LockInfo, acquire_then, release
    from clusterctl.transport.local import LocalTransport

    host = LocalTransport(Host(name="here", transport="local"))
    lock = tmp_path / "var-lib-clusterctl" / "bootstrap.lock"
    mine = LockInfo("alice", "laptop", 1, "2026-01-01T00:00:00+00:00", "run-a")
    taken = acquire_then(host, mine, None, path=str(lock))
    assert taken == ("", None, True) and lock.read_bytes() == mine.to_bytes()
    release(host, mine, path=str(lock), made_folder=taken.made_folder)
    assert not lock.parent.exists()

    taken = acquire_then(host, mine, "echo read", path=str(lock))
    assert taken.made_folder and taken.result is not None and taken.result.stdout == "read\n"
    another = lock.parent / ".clusterctl-new.AbCdEf"  # another run taking the lock the moment this one leaves
    another.write_bytes(b"theirs\n")
    release(host, mine, path=str(lock), made_folder=True)
    assert not lock.exists() and another.read_bytes() == b"theirs\n"
    another.unlink()

    taken = acquire_then(host, mine, None, path=str(lock))  # the folder is there: not this run's to remove
    assert taken.made_folder is False
    release(host, mine, path=str(lock), made_folder=taken.made_folder)
    assert lock.parent.is_dir() and not lock.exists()


def test_a_read_that_failed_in_the_batch_is_asked_again_by_its_phase() -> None:
    from clusterctl.engine.read_ahead import ReadAhead, batches
    from clusterctl.transport.local import LocalTransport

    answers = ReadAhead()
    host = LocalTransport(Host(name="here", transport="local"))
    failing = "ls /nonexistent-clusterctl-read"
    reads = [("echo fine", False), (failing, False), ("echo also fine", False)]
    assert answers.fill(host, batches(reads)) == 2
    fine = answers.take("echo fine", False)
    assert fine is not None and (fine.stdout, fine.exit_code) == ("fine\n", 0)
    assert answers.take(failing, False) is None  # run by the phase itself, which then sees why
    assert answers.take("echo fine", False) is None  # each answer is given once
    assert answers.take("echo also fine", False) is not None
    # A read that would end the shell (or span lines) runs in a shell of its own: the batch stays whole.
    whole = ReadAhead()
    assert whole.fill(host, batches([("echo a", False), ("exit 3", False), ("echo b\necho c", False),
                                      ("echo d", False)])) == 3
    assert [(r.stdout, r.exit_code) for r in (whole.take("echo a", False), whole.take("echo b\necho c", False),
                                               whole.take("echo d", False)) if r is not None] == [
        ("a\n", 0), ("b\nc\n", 0), ("d\n", 0)]
    assert whole.take("exit 3", False) is None  # it failed (exit 3): its phase runs it itself


def test_a_plan_with_answers_read_before_it_and_nothing_to_batch_sends_no_empty_read_task(
        tmp_path: Path, monkeypatch: Any) -> None:
    """upgrade plan hands each host's package read on (``answered``) and reads nothing ahead: no task that
    connects to every host only to send nothing."""
    fleet = Fleet(tmp_path, ["n1", "n2"])
    phases = [ReadsFile("first", "/etc/first.conf")]
    answered = {h.name: {("dpkg-query -W", False): CommandResult("dpkg-query -W", "", "", 0, 0.1)}
                for h in fleet.hosts}
    labels: list[str] = []
    run_task = Runner.run_task

    def recorded(self: Runner, hosts: Any, task: Any, **kwargs: Any) -> Any:
        labels.append(kwargs.get("label", ""))
        return run_task(self, hosts, task, **kwargs)

    monkeypatch.setattr(Runner, "run_task", recorded)
    with Runner(lambda host, _t: fleet.transports[host.name], parallel=4, timeout_s=30) as runner:
        report = run_bootstrap(fleet.inventory, fleet.hosts, runner, phases,
                               RunSettings(apply=False, answered=answered))
    assert report.ok and "read" not in labels, labels
    assert len(fleet.reads("n1")) == 1


def test_in_a_plan_a_read_two_phases_make_is_made_once(tmp_path: Path) -> None:
    """A plan changes no host: the second phase that reads what the first read is given that answer."""
    fleet = Fleet(tmp_path, ["n1", "n2"])
    phases = [ReadsFile("first", "/etc/shared.conf"), ReadsFile("second", "/etc/shared.conf")]
    report = fleet.run(phases, apply=False, read_ahead=False, tmp_path=tmp_path)
    assert report.ok and len([c for r in report.results for c in r.changes]) == 4
    assert len(fleet.reads("n1")) == 1 and len(fleet.reads("n2")) == 1
    applied = fleet.run(phases, apply=True, read_ahead=False, tmp_path=tmp_path)
    assert applied.ok and len(fleet.reads("n1")) == 2  # a run that changes the host: each phase reads it
