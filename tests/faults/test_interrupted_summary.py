"""An interrupted run says which hosts finished, which were running, which never started, which
were not part of the step that was stopped, and how to retry; with ``-o json`` stdout says it too."""

from __future__ import annotations

import json
import signal
import time
from pathlib import Path

import pytest
from clirun import start_clusterctl
from sshd_hosts import SSHDHosts

from clusterctl.cli.host_failures import print_interrupted
from clusterctl.fanout import FleetInterrupted, FleetResult, HostOutcome
from clusterctl.inventory.model import Host


def test_a_step_of_three_in_a_six_host_run_names_the_other_three(capsys: pytest.CaptureFixture[str]) -> None:
    a1, a2, a3 = Host("a1"), Host("a2"), Host("a3")
    exc = FleetInterrupted(FleetResult((HostOutcome(a1, None, None, 0.1),)), (a2,), (a3,), label="bootstrap: join",
                           run_hosts=("a1", "a2", "a3", "b1", "b2", "b3"))
    print_interrupted(exc, output="json")
    out, err = capsys.readouterr()
    assert "interrupted (SIGINT) during bootstrap: join" in err
    assert "finished: 1 of the 3 hosts in this step; ok: a1" in err
    assert "still running (stopped): a2" in err and "not started: a3" in err
    assert "not part of this step (6 hosts in the run): b[1-3]" in err
    assert "--limit @retry" in err
    record = json.loads(out)
    assert record["interrupted"] is True and record["still_running"] == ["a2"] and record["not_started"] == ["a3"]
    assert record["run_hosts"] == ["a1", "a2", "a3", "b1", "b2", "b3"]


@pytest.mark.sshd
def test_sigint_during_survey_over_hung_hosts_prints_json_and_a_retry_hint(
    sshd_hosts: SSHDHosts, tmp_path: Path
) -> None:
    hosts = sshd_hosts(3)
    inventory, known = sshd_hosts.write_client_files(tmp_path, hosts)
    hosts[1].pause()
    hosts[2].pause()
    proc = start_clusterctl(["-i", inventory, "--known-hosts", known, "--timeout", "60", "-o", "json", "survey"],
                            home=tmp_path / "home", XDG_STATE_HOME=str(tmp_path / "state"))
    try:
        # Interrupt once the fan-out is waiting on both hung hosts (the kernel accepts their TCP
        # connections while sshd is stopped), not after a fixed sleep: under load, start-up alone
        # can take longer than any sleep, and the signal would land before the run began.
        deadline = time.monotonic() + 90
        while not _connected_to({hosts[1].port, hosts[2].port}) and time.monotonic() < deadline:
            assert proc.poll() is None, proc.communicate()
            time.sleep(0.1)
        time.sleep(0.3)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=20)
    finally:
        if proc.poll() is None:
            proc.kill()
        hosts[1].resume()
        hosts[2].resume()
    assert proc.returncode == 130, err
    record = json.loads(out)
    assert record["interrupted"] is True
    stuck = set(record["still_running"]) | set(record["not_started"])
    assert {hosts[1].name, hosts[2].name} <= stuck
    assert "retry: run the same command with --limit @retry" in err


def _connected_to(ports: set[int]) -> bool:
    """Whether this machine has an established loopback TCP connection to every port in ``ports``."""
    seen: set[int] = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            rows = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            fields = row.split()
            if len(fields) > 3 and fields[3] == "01":  # 01: ESTABLISHED
                seen.add(int(fields[2].rsplit(":", 1)[1], 16))
    return ports <= seen
