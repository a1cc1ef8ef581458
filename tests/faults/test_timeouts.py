"""A user-given --timeout bounds every remote step of bootstrap over real sshd hosts: a host that
stopped (SIGSTOP) and one whose probe hangs fail alone, named, while the others finish."""

from __future__ import annotations

from pathlib import Path

import pytest
from clirun import run_clusterctl
from sshd_hosts import SSHDHosts

from clusterctl.fanout import Runner
from clusterctl.fanout.time_budget import TimeBoxedTransport
from clusterctl.inventory.model import Host
from clusterctl.transport.base import CommandResult, RunRequest, Transport

REPO = Path(__file__).resolve().parents[2]
PROFILE = REPO / "inventories" / "demo" / "profiles" / "dgx-a100"


class Recording(Transport):
    """Answers every command at once and remembers the time limit it was given."""

    def __init__(self, host: Host) -> None:
        super().__init__(host)
        self.limits: list[float | None] = []

    def execute(self, request: RunRequest) -> CommandResult:
        self.limits.append(request.timeout)
        out = "eA==\n" if "base64" in request.command else "changed\n"  # get reads base64; put says "changed"
        return CommandResult(request.command, out, "", 0, 0.0)


def test_file_calls_of_a_shell_transport_get_the_step_bound_too() -> None:
    inner = Recording(Host("h1"))
    boxed = TimeBoxedTransport(inner, deadline=10**9, step_s=7.0)
    boxed.run("true", timeout=600)
    boxed.get("/etc/hostname")
    boxed.put("/tmp/x", b"data")
    assert inner.limits and all(limit is not None and limit <= 7.0 for limit in inner.limits)


def test_the_runner_says_what_it_still_waits_for() -> None:
    import threading

    notices: list[tuple[str, list[str]]] = []
    release = threading.Event()

    class Slow(Recording):
        def execute(self, request: RunRequest) -> CommandResult:
            release.wait(5)
            return super().execute(request)

    import clusterctl.fanout.scheduler as scheduler

    saved = scheduler.WAIT_NOTICE_S
    scheduler.WAIT_NOTICE_S = 0.2
    try:
        with Runner(lambda host, _t: Slow(host), parallel=2, timeout_s=30,
                    on_wait=lambda label, hosts, _s: (notices.append((label, hosts)), release.set())) as runner:
            runner.run_command([Host("h1"), Host("h2")], "sleep", label="network")
    finally:
        scheduler.WAIT_NOTICE_S = saved
    assert notices and notices[0] == ("network", ["h1", "h2"])


@pytest.mark.sshd
def test_a_stopped_host_and_a_hung_probe_fail_alone_at_the_timeout(sshd_hosts: SSHDHosts, tmp_path: Path) -> None:
    hung_profile = tmp_path / "hung"
    hung_profile.mkdir()
    (hung_profile / "profile.yaml").write_text(f"extends: {PROFILE}\ncommands:\n  - regex: '.'\n    delay: 700\n")
    ok = sshd_hosts(1, profile=PROFILE, names=["ok1"])
    stopped = sshd_hosts(1, profile=PROFILE, names=["stopped1"])
    hung = sshd_hosts(1, profile=hung_profile, names=["hung1"])
    hosts = ok + stopped + hung
    extra = {h.name: {"roles": ["worker"], "stack": {"kubernetes": "1.36.2", "containerd": "2.2.7"}} for h in hosts}
    inventory, known = sshd_hosts.write_client_files(tmp_path, hosts, extra)
    stopped[0].pause()
    try:
        run = run_clusterctl(["-i", str(inventory), "--known-hosts", str(known), "--timeout", "20", "-o", "json",
                              "bootstrap", "phase", "preflight", "--state-dir", str(tmp_path / "state")],
                             home=tmp_path / "home", timeout_s=240)
    finally:
        stopped[0].resume()
    assert run.exit_code == 1, run.output
    failed = run.json()["failed_hosts"]
    assert set(failed) == {"stopped1", "hung1"}, failed
    assert all("timed out" in why or "within 20" in why or "banner" in why for why in failed.values()), failed
    assert run.elapsed_s < 150  # bounded by the 20 s steps, not the phase's own 600 s
