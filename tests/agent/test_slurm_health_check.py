"""``clusterctl health --slurm`` on a Slurm node: NHC's line and exit code, drains marked as clusterctl's,
resumes only what clusterctl drained.

Mock hosts replaying the demo's DGX A100 recordings, with slurmd and the simulated ``scontrol``;
where a test says "recorded", the node's ``scontrol -o show node`` is answered by a real recording
(tests/fixtures/scontrol/) instead of the simulator.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from clirun import REPO_ROOT, clusterctl
from fixture_files import fixture_dir

from clusterctl.agent.run import check_host
from clusterctl.health.model import HealthOptions
from clusterctl.inventory.loader import load_inventory
from clusterctl.mock.state import MockCluster
from clusterctl.mock.transport import MockTransport

DGX = REPO_ROOT / "inventories" / "demo" / "profiles" / "dgx-a100"


def _inventory(tmp_path: Path, recording: str | None = None) -> Path:
    rules = ""
    if recording:
        rules = (f"commands:\n  - match: \"scontrol -o show node gpu010\"\n"
                 f"    stdout: {fixture_dir('scontrol') / recording}\n")
    (tmp_path / "profile").mkdir(exist_ok=True)
    (tmp_path / "profile" / "profile.yaml").write_text(
        f"extends: {DGX}\nsimulate: true\n{rules}machine:\n  packages:\n    installed:\n"
        f"      slurm-client: \"23.02.6-1\"\n  services:\n    slurmd: {{active: true, enabled: true}}\n")
    inventory = tmp_path / "inventory.yaml"
    inventory.write_text("cluster: slurmsim\ndefaults: {transport: mock, mock_state: state, profile: profile}\n"
                         "hosts:\n  gpu010: {roles: [worker]}\n")
    return inventory


def _check(inventory: Path, *args: str) -> tuple[int, dict[str, Any], str]:
    run = clusterctl("-i", inventory, "-o", "json", "health", "--slurm", *args)
    (check,) = run.json()["checks"]
    return run.exit_code, check, run.stderr


def _slurm_state(tmp_path: Path) -> dict[str, Any]:
    nodes = (MockCluster(tmp_path / "state").cluster.read().get("slurm") or {}).get("nodes") or {}
    return dict(nodes.get("gpu010") or {})


def _fault(inventory: Path, value: str) -> None:
    assert clusterctl("-i", inventory, "mock", "set", f"fault={value}").exit_code == 0


def test_a_failing_node_is_drained_as_clusterctls_and_resumed_when_healthy(tmp_path: Path) -> None:
    inventory = _inventory(tmp_path)
    code, check, _ = _check(inventory)
    assert code == 0 and check["verdict"] == "healthy" and check["action"] == "none"

    _fault(inventory, "xid-79")
    run = clusterctl("-i", inventory, "health", "--slurm")
    assert run.exit_code == 1
    assert run.stderr.startswith("ERROR: clusterctl: Health check failed: GPU_XID: GPU 3: Xid 79"), run.stderr
    state = _slurm_state(tmp_path)
    assert state["state"] == "IDLE+DRAIN" and state["reason"].startswith("clusterctl: GPU_XID: GPU 3: Xid 79")
    code, check, _ = _check(inventory)  # again: nothing more to do, still failing
    assert code == 1 and check["action"] == "already drained"

    _fault(inventory, "")
    code, check, _ = _check(inventory)
    assert code == 0 and check["action"] == "resumed" and _slurm_state(tmp_path)["state"] == "IDLE"


def test_a_node_a_person_drained_is_never_resumed(tmp_path: Path) -> None:
    inventory = _inventory(tmp_path)
    run = clusterctl("-i", inventory, "exec", "--sudo", "scontrol update nodename=gpu010 state=drain "
                     "reason='bad DIMM, ticket 4711'")
    assert run.exit_code == 0, run.output
    code, check, _ = _check(inventory)
    assert code == 0 and check["action"] == "left drained"
    assert "drained by someone else (bad DIMM, ticket 4711)" in check["message"]
    _fault(inventory, "xid-79")
    code, check, _ = _check(inventory)
    assert code == 1 and check["action"] == "already drained"  # their reason stays
    assert _slurm_state(tmp_path)["reason"] == "bad DIMM, ticket 4711"


def test_a_failing_node_that_is_only_down_is_drained(tmp_path: Path) -> None:
    """DOWN alone is no drain: Slurm returns the node to service when its slurmd registers again."""
    inventory = _inventory(tmp_path)
    run = clusterctl("-i", inventory, "exec", "--sudo", "scontrol update nodename=gpu010 state=down "
                     "reason='Not responding'")
    assert run.exit_code == 0, run.output
    _fault(inventory, "xid-79")
    code, check, _ = _check(inventory)
    assert code == 1 and check["action"] == "drained"
    assert _slurm_state(tmp_path)["reason"].startswith("clusterctl: GPU_XID")


def test_recorded_site_health_drain_is_left_alone(tmp_path: Path) -> None:
    """gpu010 as Slurm 25.11 showed it, drained by the site's own health check (health_ps___blocked)."""
    inventory = _inventory(tmp_path, "unige-bamboo-show-node-oneliner.txt")
    code, check, _ = _check(inventory)
    assert code == 0 and check["action"] == "left drained"
    assert check["slurm"]["reason"] == "health_ps___blocked" and check["slurm"]["reason_user"] == "root"
    assert _slurm_state(tmp_path) == {}  # no scontrol update was sent


def test_recorded_clusterctl_drain_is_resumed_when_healthy(tmp_path: Path) -> None:
    inventory = _inventory(tmp_path, "unige-bamboo-show-node-clusterctl-drained.txt")
    code, check, out = _check(inventory)
    assert code == 0 and check["action"] == "resumed", out
    assert _slurm_state(tmp_path)["state"] == "IDLE"  # 'scontrol update nodename=gpu010 state=resume' went out


def test_a_check_that_hangs_past_the_deadline_drains(tmp_path: Path) -> None:
    inventory = _inventory(tmp_path)
    profile = tmp_path / "profile" / "profile.yaml"
    profile.write_text(profile.read_text().replace(
        "machine:", "commands:\n  - match: \"nvidia-smi -q\"\n    delay: 600\n    stdout_text: \"\"\nmachine:"))
    run = clusterctl("-i", inventory, "-o", "json", "health", "--slurm", "--deadline", "10")
    assert run.exit_code == 1
    (check,) = run.json()["checks"]
    assert check["action"] == "drained" and "PROBE_HUNG" in check["reason"]
    assert _slurm_state(tmp_path)["reason"].startswith("clusterctl: PROBE_HUNG")


@pytest.mark.parametrize("fail", ["unreachable", "command failed"])
def test_a_check_that_cannot_run_says_why_not_that_it_hung(tmp_path: Path, fail: str) -> None:
    # It was PROBE_HUNG "did not finish in time" whatever went wrong: a refused connection is not a hang.
    inventory = _with_rule(tmp_path, f"  - match: \"nvidia-smi -q\"\n    fail: \"{fail}\"\n")
    code, check, out = _check(inventory)
    assert code == 1 and check["action"] == "drained", out
    assert check["reason"].startswith(f"could not be checked: {fail}") and "PROBE_HUNG" not in check["reason"]
    assert [f["code"] for f in check["findings"]] == ["HOST_UNREACHABLE"]


@pytest.mark.parametrize("args", [("--quarantine",), ("--save", "x.json")])
def test_slurm_mode_refuses_options_of_the_fleet_run(tmp_path: Path, args: tuple[str, ...]) -> None:
    run = clusterctl("-i", _inventory(tmp_path), "health", "--slurm", *args)
    assert run.exit_code == 2 and "--slurm" in run.stderr


def test_the_json_names_the_node_and_its_findings(tmp_path: Path) -> None:
    inventory = _inventory(tmp_path)
    _fault(inventory, "xid-79")
    run = clusterctl("-i", inventory, "-o", "json", "health", "--slurm")
    data = json.loads(run.stdout)
    assert data["checks"][0]["node"] == "gpu010" and data["checks"][0]["exit_code"] == 1
    assert any(f["code"] == "GPU_XID" for f in data["checks"][0]["findings"])


def _with_rule(tmp_path: Path, rule: str) -> Path:
    """The Slurm node of ``_inventory`` whose profile answers one more command as ``rule`` says."""
    inventory = _inventory(tmp_path)
    profile = tmp_path / "profile" / "profile.yaml"
    profile.write_text(profile.read_text().replace("machine:", f"commands:\n{rule}machine:", 1))
    return inventory


def test_the_slurm_check_and_the_agent_leave_out_the_same_old_xid(tmp_path: Path) -> None:
    # GPU 3's recorded Xid 79, replayed as if recorded two hours after it: outside a 30 min window. The
    # mock answers 'journalctl -k --since' with the whole recording, as a log source that ignores the window.
    inventory = _with_rule(tmp_path, f"  - regex: \"^journalctl -k \"\n    stdout: {DGX / 'journalctl-k-xid79.txt'}\n"
                                     "    recorded_at: \"2025-01-02T17:23:40+08:00\"\n")
    code, check, out = _check(inventory, "--since", "30m")
    assert code == 0 and check["verdict"] == "healthy" and check["action"] == "none", out
    assert "KERNEL_LOG_BEFORE_WINDOW" in {f["code"] for f in check["findings"]}
    assert _slurm_state(tmp_path) == {}  # not drained for an Xid older than the window

    host = load_inventory(inventory).host("gpu010")
    agent = check_host(MockTransport(host), "gpu010", HealthOptions(since="30m"), host.fabric)
    assert (agent.verdict.value, agent.reason) == (check["verdict"], check["reason"])

    code, check, out = _check(inventory, "--since", "3h")  # inside the window it is judged, by both
    assert code == 1 and check["action"] == "drained" and check["reason"].startswith("GPU_XID: GPU 3: Xid 79"), out
    agent = check_host(MockTransport(host), "gpu010", HealthOptions(since="3h"), host.fabric)
    assert (agent.verdict.value, agent.reason) == (check["verdict"], check["reason"])


def test_the_slurm_checks_window_is_1h_unless_since_is_typed_even_as_24h(tmp_path: Path) -> None:
    # The same two-hour-old Xid: outside Slurm's default hour; inside a '--since 24h' the user typed (it was
    # taken for health's own default and made 1h).
    inventory = _with_rule(tmp_path, f"  - regex: \"^journalctl -k \"\n    stdout: {DGX / 'journalctl-k-xid79.txt'}\n"
                                     "    recorded_at: \"2025-01-02T17:23:40+08:00\"\n")
    code, check, out = _check(inventory)
    assert code == 0 and check["action"] == "none", out
    code, check, out = _check(inventory, "--since", "24h")
    assert code == 1 and check["action"] == "drained" and check["reason"].startswith("GPU_XID: GPU 3: Xid 79"), out


def test_a_probe_printing_more_than_a_probe_keeps_is_cut_and_said(tmp_path: Path) -> None:
    flood = tmp_path / "lspci-flood.txt"
    flood.write_text("00:00.0 Host bridge: a line a debug loop prints again and again\n" * 80_000)  # ~5 MiB
    inventory = _with_rule(tmp_path, f"  - match: \"lspci -vvv\"\n    stdout: {flood}\n")
    code, check, out = _check(inventory)
    cut = [f for f in check["findings"] if f["code"] == "PROBE_OUTPUT_CUT"]
    assert code == 0 and check["verdict"] == "degraded" and check["action"] == "none", out
    assert [f["subject"] for f in cut] == ["lspci"] and "were not" in cut[0]["message"]
