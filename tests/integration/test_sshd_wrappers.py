"""The sshd mock hosts' tool wrappers: the replay answers every call a profile rule could match,
the machine's own program the rest (without a Python start: a real host's ``cat`` costs none)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from sshd_hosts import replay_filter

from clusterctl.mock.profile import load_profile, normalise

DEMO = Path(__file__).resolve().parents[2] / "inventories" / "demo" / "profiles" / "dgx-a100"

#: Calls of the demo profile's programs: some answered by its rules, some not.
CALLS = [
    "cat /etc/os-release", "cat /tmp/clusterctl-bench-r1-mlx5_2-gpu-b3.log", "cat /tmp/clusterctl-bench-x.log",
    "ls -1 /usr/lib/x86_64-linux-gnu/libnccl.so.2.18.3", "ls -1 /usr/bin", "ls",
    "rm -f /tmp/clusterctl-hostfile-abc", "rm -f /tmp/other", "nvidia-smi topo -m", "nvidia-smi -L",
    "ibv_devinfo -v", "ibv_devinfo", "nvcc --version", "nvcc -V", "journalctl -k --since today",
    "journalctl -u kubelet", "hostname",
]


def route(profile_dir: Path, call: str) -> str:
    """Where a wrapper sends ``call``: "replay", or "machine" (its own program, here ``echo``)."""
    tool, *args = call.split()
    script = replay_filter(tool, load_profile(str(profile_dir)), "/bin/echo") + "echo replay\n"
    out = subprocess.run(["sh", "-c", script, tool, *args], capture_output=True, text=True, check=True).stdout
    return "replay" if out == "replay\n" else "machine"


@pytest.mark.parametrize("call", CALLS)
def test_every_call_a_rule_answers_reaches_the_replay(call: str) -> None:
    profile = load_profile(str(DEMO))
    answered = any(rule.matches_command(call, normalise(call)) for rule in profile.rules)
    where = route(DEMO, call)
    if answered:
        assert where == "replay"
    # What no rule answers may still go to the replay (the filter errs that way), but the common
    # file reads must not: each would cost a Python start on every host.
    if call in ("cat /etc/os-release", "ls -1 /usr/bin", "rm -f /tmp/other", "hostname"):
        assert where == "machine"


def test_simulated_tools_always_reach_the_replay(tmp_path: Path) -> None:
    profile = load_profile(str(DEMO))
    assert profile.simulate
    assert replay_filter("apt-get", profile, "/usr/bin/apt-get") == ""
    assert replay_filter("systemctl", profile, "/usr/bin/systemctl") == ""


def test_a_rule_the_filter_cannot_read_sends_every_call_to_the_replay(tmp_path: Path) -> None:
    (tmp_path / "profile.yaml").write_text("commands:\n  - regex: 'c.t /etc'\n    stdout_text: 'x'\n")
    assert route(tmp_path, "cat /etc/os-release") == "replay"
    assert route(tmp_path, "cat /var/log/syslog") == "replay"
