"""Ctrl-C during a fleet run over real sshd hosts: prompt, clean, and nothing left running on the hosts."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from clirun import clusterctl_env
from sshd_hosts import SSHDHost, SSHDHosts, descendants

from clusterctl.fanout import FleetInterrupted, Runner
from clusterctl.transport.factory import ConnectOptions, make_connector

pytestmark = pytest.mark.sshd


@pytest.fixture(params=["sigint-default", "sigint-ignored"])
def sigint_as_started(request: pytest.FixtureRequest) -> Iterator[str]:
    """The tests pass however their runner was started: in a terminal, or as a background job
    (``nohup pytest &``), where SIGINT starts ignored and every child inherits that."""
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN if request.param == "sigint-ignored"
                             else signal.default_int_handler)
    try:
        yield str(request.param)
    finally:
        signal.signal(signal.SIGINT, previous)


def _sigint_default() -> None:
    """In the child, before exec: Ctrl-C acts as in a terminal, whatever this runner inherited."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _sleepers(hosts: list[SSHDHost], word: str) -> list[int]:
    found = []
    for h in hosts:
        for pid in descendants(h.pid):
            try:
                cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
            except OSError:
                continue
            if cmdline.startswith("sleep") and word in cmdline:
                found.append(pid)
    return found


def _wait_for(check: object, timeout_s: float) -> bool:
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        if check():  # type: ignore[operator]
            return True
        time.sleep(0.1)
    return False


def test_sigint_during_a_fanout_over_hung_hosts_exits_promptly_and_stops_remote_work(
    sshd_hosts: SSHDHosts, tmp_path: Path, sigint_as_started: str
) -> None:
    hosts = sshd_hosts(3)
    inventory, known = sshd_hosts.write_client_files(tmp_path, hosts)
    config = tmp_path / "ssh_config"
    config.write_text("")
    home = tmp_path / "home"
    home.mkdir()
    env = clusterctl_env(home)
    marker = tmp_path / "should-never-appear"
    proc = subprocess.Popen(
        [sys.executable, "-m", "clusterctl", "-i", str(inventory), "--known-hosts", str(known),
         "--ssh-config", str(config), "exec", "--", f"sleep 41; touch {marker}"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=str(home),
        preexec_fn=_sigint_default,
    )
    try:
        assert _wait_for(lambda: len(_sleepers(hosts, "41")) == 3, 20), "the command never started on every host"
        sent = time.monotonic()
        proc.send_signal(signal.SIGINT)
        _out, err = proc.communicate(timeout=15)
        took = time.monotonic() - sent
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err
    assert took < 8, f"took {took:.1f}s to stop"
    assert "Traceback" not in err
    assert "interrupted" in err and "h[1-3]" in err  # the hosts that were still running are named
    assert _wait_for(lambda: not _sleepers(hosts, "41"), 5), "remote commands still running after Ctrl-C"
    assert not marker.exists()


def test_runner_reports_finished_and_running_hosts_on_interrupt(sshd_hosts: SSHDHosts, tmp_path: Path,
                                                               sigint_as_started: str) -> None:
    import yaml

    from clusterctl.inventory.loader import load_inventory

    hosts = sshd_hosts(3)
    inventory_path, known = sshd_hosts.write_client_files(tmp_path, hosts)
    config = tmp_path / "ssh_config"
    config.write_text("")
    assert yaml.safe_load(inventory_path.read_text())
    inventory = load_inventory(inventory_path)
    inv_hosts = list(inventory.hosts)
    before = {t.ident for t in threading.enumerate()}

    def task(transport):  # type: ignore[no-untyped-def]
        seconds = "0" if transport.host.name == "h1" else "42"
        return transport.run(f"sleep {seconds}; echo done")

    # The interrupt arrives in the main thread, as Ctrl-C does, and raises KeyboardInterrupt as it
    # does in a terminal, also where this runner started with SIGINT ignored.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    timer = threading.Timer(1.5, lambda: os.kill(os.getpid(), signal.SIGINT))
    options = ConnectOptions(ssh_config=str(config), known_hosts=str(known))
    with Runner(make_connector(options), timeout_s=60) as runner:
        timer.start()
        with pytest.raises(FleetInterrupted) as caught:
            runner.run_task(inv_hosts, task)
    interrupted = caught.value
    assert [o.host.name for o in interrupted.finished.outcomes] == ["h1"]
    assert interrupted.finished.outcomes[0].ok
    assert sorted(h.name for h in interrupted.running) == ["h2", "h3"]
    assert interrupted.waiting == ()
    assert _wait_for(lambda: not _sleepers(hosts, "42"), 5)
    leftover = [t for t in threading.enumerate() if t.ident not in before and t.is_alive()]
    assert not [t.name for t in leftover if t.name.startswith("clusterctl")]
