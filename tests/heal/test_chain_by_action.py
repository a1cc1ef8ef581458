"""heal picks a host's chain from the action of every finding that keeps it out (the findings quarantine's
``counts_against`` reads), not from its Xids only: a pending row remap gets the GPU reset first, a card that is
not seated goes straight to "needs hardware" with nothing drained, reset or rebooted, and a finding the inventory
ignores picks nothing."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from pathlib import Path

import pytest
from clirun import clusterctl
from kube_sim import KubeSim
from local_daemons import free_port
from redfish_emulator import USERNAME, RedfishEmulator, available

from clusterctl.findings import Finding, Severity
from clusterctl.inventory.model import Host

REMAP = Finding(Severity.ERROR, "GPU_ROW_REMAP_PENDING", "a row remap is pending", subject="GPU 3",
                evidence={"action": "RESET_GPU", "evidence": "Remapped Rows / Pending : Yes"})
UNSEATED = Finding(Severity.ERROR, "PCIE_LINK_DOWN", "0000:4e:00.0: PCIe link down (x0), capable of x16",
                   subject="0000:4e:00.0", evidence={"action": "CHECK_MECHANICALS"})


def _sick(monkeypatch: pytest.MonkeyPatch, *findings: Finding) -> None:
    """The release gate (health and NCCL) finds ``findings`` on every host, every time."""

    def release_gate(_runner: object, hosts: Sequence[Host]) -> dict[str, list[Finding]]:
        return {h.name: list(findings) for h in hosts}

    monkeypatch.setattr("clusterctl.quarantine.release.health_and_nccl_checks", lambda *_: release_gate)


def _quarantined(tmp_path: Path, code: str, inventory: str = "") -> KubeSim:
    sim = KubeSim(tmp_path)
    if inventory:
        sim.inventory.write_text(sim.inventory.read_text() + inventory)
    sim.deploy("web", 3)
    assert [p for p in sim.pods_on("gpu-a2") if p.startswith("default/web-")]
    done = clusterctl("-i", sim.inventory, "quarantine", "gpu-a2", "--reason", "health", "--code", code, "--yes")
    assert done.exit_code == 0, done.output
    return sim


def test_a_pending_row_remap_takes_the_gpu_reset_first(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    sim = _quarantined(tmp_path, "GPU_ROW_REMAP_PENDING")
    _sick(monkeypatch, REMAP)
    done = clusterctl("-i", sim.inventory, "-o", "json", "heal", "gpu-a2", "--dry-run")
    (host,) = json.loads(done.stdout)["hosts"]
    assert host["chain"] == ["reset-gpu", "reboot", "power-cycle"], host
    assert host["chain_reason"] == "GPU_ROW_REMAP_PENDING: RESET_GPU"
    (reset,) = [s for s in host["steps"] if s["step"] == "reset-gpu"]
    assert "reset GPU 3 of gpu-a2" in reset["changes"]
    # gpu-a2 has no BMC: the plan's last step already fails, the plan with it (exit 1), each step still shown.
    assert done.exit_code == 1 and host["outcome"] == "failed", host
    assert host["detail"].startswith("power-cycle would fail: see its step; released after the first step"), host
    # Then the run, no step cured, ends 'needs hardware', with nvidia-bug-report.sh through the gate: planned too.
    assert host["notes"][-2:] == ["needs hardware: would collect nvidia-bug-report on gpu-a2",
                                  "needs hardware: would annotate node gpu-a2 (heal-history, heal-state)"], host
    last = host["steps"][-1]
    assert (last["step"], last["result"], last["detail"]) == ("power-cycle", "failed",
                                                              "gpu-a2 has no BMC in the inventory (bmc)"), host
    done = clusterctl("-i", sim.inventory, "heal", "gpu-a2", "--dry-run")
    assert "gpu-a2: chain: reset-gpu -> reboot -> power-cycle -> needs hardware" in done.stdout, done.output


def test_a_card_that_is_not_seated_needs_hardware_and_no_step_is_tried(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    sim = _quarantined(tmp_path, "PCIE_LINK_DOWN")
    _sick(monkeypatch, REMAP, UNSEATED)
    done = clusterctl("-i", sim.inventory, "-o", "json", "heal", "gpu-a2", "--yes")
    assert done.exit_code == 1, done.output
    (host,) = json.loads(done.stdout)["hosts"]
    assert host["outcome"] == "needs hardware" and host["chain"] == [] and host["steps"] == [], host
    assert host["chain_reason"] == "PCIE_LINK_DOWN: CHECK_MECHANICALS"
    assert "Remediation tried (chain none; PCIE_LINK_DOWN: CHECK_MECHANICALS):\n  nothing" in host["report"]
    # Nothing drained, reset or rebooted; the host stays out.
    assert [p for p in sim.pods_on("gpu-a2") if p.startswith("default/web-")]
    assert sim.state.host("gpu-a2").values().get("boots") is None
    assert not any(k.startswith("pm") for k in sim.state.host("gpu-a2").values())
    assert sim.node("gpu-a2")["spec"]["unschedulable"] is True


def test_a_finding_the_inventory_ignores_picks_no_step(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    sim = _quarantined(tmp_path, "GPU_ROW_REMAP_PENDING", "quarantine:\n  ignore_codes: [PCIE_LINK_DOWN]\n")
    _sick(monkeypatch, REMAP, UNSEATED)
    done = clusterctl("-i", sim.inventory, "-o", "json", "heal", "gpu-a2", "--dry-run")
    (host,) = json.loads(done.stdout)["hosts"]
    assert host["chain"] == ["reset-gpu", "reboot", "power-cycle"], host
    assert host["chain_reason"] == "GPU_ROW_REMAP_PENDING: RESET_GPU"
    assert done.exit_code == 1, done.output  # gpu-a2 has no BMC to power-cycle through


def test_a_dry_run_says_what_each_step_would_do_in_80_columns(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """heal --dry-run words each planned step as bootstrap's plan does ("would change", "nothing to change", and
    what it would wait for), never "changed" or "ok" as if the GPU reset and the reboot had happened; its lines
    wrap at the terminal's width under their host."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("COLUMNS", "80")
    sim = _quarantined(tmp_path, "GPU_ROW_REMAP_PENDING")
    _sick(monkeypatch, REMAP)
    done = clusterctl("-i", sim.inventory, "heal", "gpu-a2", "--dry-run")
    lines = done.stdout.splitlines()
    assert "gpu-a2: reset-gpu: would reset GPU 3 of gpu-a2" in lines and "gpu-a2: reset-gpu: would change" in lines
    assert any(line.startswith("gpu-a2: reboot: would change (wait: gpu-a2 back (a new boot id)") for line in lines)
    assert not [line for line in lines if re.match(r"gpu-a2: [\w-]+: (changed|ok)\b", line)], done.stdout
    assert lines[-1] == "dry run: nothing was changed"
    # gpu-a2 has no BMC: the plan's power cycle already fails, named, and so does the dry run, as the run would
    # end (before, it said 'PLANNED' and exited 0).
    assert done.exit_code == 1 and "gpu-a2: power-cycle: failed: gpu-a2 has no BMC in the inventory (bmc)" in lines
    # What the run, no step cured, then ends with: the bug report and 'needs hardware' on the node (left out).
    end = lines.index("gpu-a2: power-cycle: would annotate node gpu-a2 (heal-history)") + 1
    assert lines[end:end + 3] == ["gpu-a2: needs hardware: would collect nvidia-bug-report on gpu-a2",
                                  "gpu-a2: needs hardware: would annotate node gpu-a2 (heal-history, heal-state)",
                                  "gpu-a2: FAILED: power-cycle would fail: see its step; released after the first"
                                  ], done.stdout
    # Each step the run keeps on the node (heal-history, heal-state): would-be changes too, as its steps are.
    assert "gpu-a2: check: would annotate node gpu-a2 (heal-history, heal-state)" in lines, done.stdout
    assert "gpu-a2: reboot: would annotate node gpu-a2 (heal-history)" in lines, done.stdout
    assert all(len(line) <= 80 for line in lines), done.stdout
    assert "    (GPU_ROW_REMAP_PENDING: RESET_GPU)" in lines  # the chain line wrapped under its host


def test_a_dry_run_on_a_host_the_release_gate_passes_says_it_would_be_released_if_it_passes_as_the_run_checks(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The run releases a host the gate passes ``passes`` times in a row before any step: its dry run, which checks
    once, says that much and plans no step (it planned the drain, reboot and power cycle, and failed on gpu-a2's
    missing BMC while the run exits 0; then it said 'released at once' of a host the run's second check could
    still fail)."""
    monkeypatch.chdir(tmp_path)
    sim = _quarantined(tmp_path, "GPU_ROW_REMAP_PENDING")
    _sick(monkeypatch)  # healthy now
    before = sim.snapshot()
    done = clusterctl("-i", sim.inventory, "-o", "json", "heal", "gpu-a2", "--dry-run")
    (host,) = json.loads(done.stdout)["hosts"]
    assert done.exit_code == 0 and host["outcome"] == "planned" and host["steps"] == [], host
    assert host["detail"].startswith("the release gate passes now, once; if it passes 2 times in a row (2 s apart) "
                                     "as the run checks, it would be released at once (else the chain is tried): "
                                     "remove taint "), host
    assert "uncordon node gpu-a2" in host["detail"] and sim.snapshot() == before
    # The annotations the run writes on the node are would-be changes too (the dry run left them out).
    assert host["notes"] == ["check: would annotate node gpu-a2 (heal-history)",
                             "release: would annotate node gpu-a2 (heal-history, heal-state)"], host
    done = clusterctl("-i", sim.inventory, "-o", "json", "heal", "gpu-a2", "--yes")
    (host,) = json.loads(done.stdout)["hosts"]
    assert done.exit_code == 0 and host["outcome"] == "released" and host["steps"] == [], host


def test_a_dry_run_without_the_bmc_password_fails_as_the_run_would(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """A BMC whose password file is missing: the run's power cycle fails on it before asking the BMC, and so does
    the dry run (it said 'would power-cycle' and exited 0)."""
    monkeypatch.chdir(tmp_path)
    bmc = f"bmc:\n  gpu-*: {{address: 'https://127.0.0.1:9', username: admin, password_file: {tmp_path}/none}}\n"
    sim = _quarantined(tmp_path, "GPU_ROW_REMAP_PENDING", bmc)
    _sick(monkeypatch, REMAP)
    done = clusterctl("-i", sim.inventory, "-o", "json", "heal", "gpu-a2", "--dry-run")
    (host,) = json.loads(done.stdout)["hosts"]
    last = host["steps"][-1]
    assert done.exit_code == 1 and (last["step"], last["result"]) == ("power-cycle", "failed"), host
    assert "password" in last["detail"] and f"{tmp_path}/none" in last["detail"], last


@pytest.mark.skipif(not available(), reason="needs sushy-tools' sushy-emulator (.[test])")
def test_a_dry_run_reads_the_bmc_and_fails_where_it_does_not_answer_or_refuses_the_credentials(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """heal --dry-run reads the BMC's power state, as 'power cycle --dry-run' does: a BMC that does not answer or
    refuses the credentials fails the plan's power cycle as it would the run (it said 'would power-cycle' and
    exited 0, the BMC never asked)."""
    monkeypatch.chdir(tmp_path)
    password = tmp_path / "bmc-password"
    password.write_text("not-the-password\n")
    password.chmod(0o600)
    with RedfishEmulator(tmp_path / "bmc", ["gpu-a2"], mock_state=tmp_path / "state") as emulator:
        bmc = (f"bmc:\n  gpu-*: {{address: '{{address}}', username: {USERNAME}, password_file: {password}, "
               f"system: '{{host}}', ca_file: {emulator.ca_file}, timeout_s: 3}}\n")
        sim = _quarantined(tmp_path, "GPU_ROW_REMAP_PENDING", bmc.replace("{address}", emulator.url))
        _sick(monkeypatch, REMAP)
        for address, why in ((emulator.url, f"refused the credentials of user '{USERNAME}' (HTTP 401)"),
                             (f"https://127.0.0.1:{free_port()}", "does not answer (within 3 s)")):
            text = sim.inventory.read_text()
            sim.inventory.write_text(text[:text.index("bmc:\n")] + bmc.replace("{address}", address))
            done = clusterctl("-i", sim.inventory, "-o", "json", "heal", "gpu-a2", "--dry-run")
            (host,) = json.loads(done.stdout)["hosts"]
            last = host["steps"][-1]
            assert done.exit_code == 1 and (last["step"], last["result"]) == ("power-cycle", "failed"), host
            assert why in last["detail"] and "not-the-password" not in done.output, last
        assert emulator.notified == []


def test_a_dry_run_plans_each_annotation_with_its_step_and_the_needs_hardware_one_reading_the_node_once(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """heal --dry-run prints the annotation a step's note writes on the node under that step (all came after the
    last step, the check's too), plans the 'needs hardware' one a run that exhausts the chain writes (it was left
    out), and reads the node once for all of them (it read it again for each)."""
    from clusterctl.mock.transport import MockTransport
    from clusterctl.transport.base import CommandResult, RunRequest

    monkeypatch.chdir(tmp_path)
    sim = _quarantined(tmp_path, "GPU_ROW_REMAP_PENDING",
                       "quarantine:\n  heal:\n    chains: {GPU_ROW_REMAP_PENDING: [reset-gpu, reboot]}\n")
    _sick(monkeypatch, REMAP)
    reads: list[str] = []
    execute = MockTransport.execute

    def counting(transport: MockTransport, request: RunRequest) -> CommandResult:
        reads.extend(["node"] if re.search(r"kubectl .*get node gpu-a2 -o json", request.command) else [])
        return execute(transport, request)

    monkeypatch.setattr(MockTransport, "execute", counting)
    done = clusterctl("-i", sim.inventory, "heal", "gpu-a2", "--dry-run")
    assert done.exit_code == 0, done.output
    lines = done.stdout.splitlines()
    notes = [i for i, line in enumerate(lines) if ": would annotate node gpu-a2 (" in line]
    assert [lines[i - 1].split(": ")[1] + ": " + lines[i].split(": ", 1)[1] for i in notes] == [
        "chain: check: would annotate node gpu-a2 (heal-history, heal-state)",
        "drain: drain: would annotate node gpu-a2 (heal-history)",
        "reset-gpu: reset-gpu: would annotate node gpu-a2 (heal-history)",
        "reboot: reboot: would annotate node gpu-a2 (heal-history)",
        "needs hardware: needs hardware: would annotate node gpu-a2 (heal-history, heal-state)"], done.stdout
    assert lines[notes[-1] - 1] == "gpu-a2: needs hardware: would collect nvidia-bug-report on gpu-a2", done.stdout
    assert lines[notes[-1] + 1].startswith("gpu-a2: PLANNED: released after the first step"), done.stdout
    assert len(reads) == 2, reads  # heal's and the drain's (it read one more for each of the four notes)

    done = clusterctl("-i", sim.inventory, "-o", "json", "heal", "gpu-a2", "--dry-run")
    (host,) = json.loads(done.stdout)["hosts"]
    assert host["outcome"] == "planned" and host["notes"][-2:] == [
        "needs hardware: would collect nvidia-bug-report on gpu-a2",
        "needs hardware: would annotate node gpu-a2 (heal-history, heal-state)"], host
