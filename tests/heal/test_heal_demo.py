"""The issue's done-when on the demo after bootstrap, the Redfish emulator running: an Xid 79 ends, with no person
acting, in the host drained, power-cycled, proven healthy and back in service; a fault that persists ends "needs
hardware" and stays out; a host that keeps coming back (flapping) stays out."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from demo_heal import DemoHeal, payload
from redfish_emulator import PASSWORD, available

from clusterctl.findings import Finding, Severity

pytestmark = pytest.mark.skipif(not available(), reason="needs sushy-tools' sushy-emulator (.[test])")
TAINT = {"key": "clusterctl.dev/unhealthy", "value": "GPUFellOffTheBus", "effect": "NoSchedule"}


def alert(demo: DemoHeal, host: str) -> list[dict[str, str]]:
    """Alertmanager's POST for GPUFellOffTheBus on ``host`` to 'remediate serve --heal'; its decisions."""
    log = io.StringIO()
    receiver = demo.receiver(log)
    status, _ = receiver.handle(payload("GPUFellOffTheBus", host))
    assert status == 200
    assert receiver.settle(600)
    return [json.loads(line) for line in log.getvalue().splitlines()]


def test_xid_79_heals_by_power_cycle_a_persisting_fault_needs_hardware_and_a_flapping_host_stays_out(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("CLUSTERCTL_STATE_DIR", str(tmp_path / "state"))
    with DemoHeal(tmp_path / "demo") as demo:
        assert demo.emulator is not None
        assert any(p.startswith("default/trainer-") for p in demo.pods_on("gpu-a2"))
        # The dry run prints the whole chain and changes nothing.
        assert demo.cli("-l", "gpu-a2", "mock", "set", "fault=xid-79")[0] == 0
        assert demo.cli("quarantine", "gpu-a2", "--reason", "xid 79", "--code", "GPUFellOffTheBus", "--yes")[0] == 0
        code, out = demo.cli("heal", "gpu-a2", "--dry-run")
        assert code == 0, out
        # The alert's code and the Xid 79 the release gate finds pick the same chain.
        assert ("chain: power-cycle -> needs hardware (GPUFellOffTheBus: the alert's chain; GPU_XID: GPU off the "
                "bus)") in out
        assert "would power-cycle gpu-a2 through its BMC" in out and "dry run: nothing was changed" in out
        assert "gpu-a2: needs hardware: would annotate node gpu-a2 (heal-history, heal-state)" in out, out
        # What the run would do when nothing cures it, the command it runs on the host included.
        assert "gpu-a2: needs hardware: would collect nvidia-bug-report on gpu-a2" in out, out
        assert demo.emulator.notified == []
        assert demo.cli("release", "gpu-a2", "--skip-checks", "--yes")[0] == 0

        # 1. An Xid 79: drained, power-cycled through the BMC, healthy twice, released, by itself.
        decisions = alert(demo, "gpu-a2")
        said = "\n".join(f"{d.get('decision')}: {d.get('why', '')}" for d in decisions)
        assert any(d["decision"] == "drain" for d in decisions), said
        assert any(d["decision"] == "released" for d in decisions), said
        states = [s for _, name, s in demo.emulator.notified if name == "gpu-a2"]
        assert "Off" in states and states[-1] == "On", states
        assert demo.host_state("gpu-a2").values().get("boots") == "1"
        node = demo.node("gpu-a2")
        assert TAINT not in node["spec"].get("taints", []) and not node["spec"].get("unschedulable")
        code, out = demo.cli("status", "gpu-a2")
        assert code == 0 and "gpu-a2: in service (Ready)" in out, out
        assert "power-cycle: changed: healthy 2 times in a row after it" in out and "release: released" in out
        assert "quarantined 2 time(s)" in out

        # 2. The part stays broken: the power cycle does not cure it; "needs hardware", out of service.
        assert demo.cli("-l", "gpu-a2", "mock", "set", "fault=xid-79", "hardware_fault=xid-79")[0] == 0
        decisions = alert(demo, "gpu-a2")
        said = "\n".join(f"{d.get('decision')}: {d.get('why', '')}" for d in decisions)
        final = [d for d in decisions if d["decision"] == "needs hardware"]
        assert final, said
        report_file = Path(final[0]["why"].rsplit("paste into a ticket: ", 1)[1])
        report = report_file.read_text()
        assert report_file.stat().st_mode & 0o077 == 0
        assert "Hardware repair needed: gpu-a2" in report and "GPU_XID: Xid 79" in report, report
        assert "power-cycle: failed" in report and "nvidia-bug-report:" in report
        assert demo.host_state("gpu-a2").values().get("boots") == "2"
        node = demo.node("gpu-a2")
        assert node["spec"].get("unschedulable") and TAINT in node["spec"]["taints"]
        code, out = demo.cli("status", "gpu-a2")
        assert "healing: needs hardware" in out, out

        # A BMC that refuses the credentials: the power cycle fails at once, named; the host stays out.
        demo.password_file.write_text("not-the-bmc-password\n")
        cycles = len(demo.emulator.notified)
        code, out = demo.cli("heal", "gpu-a2", "--yes")
        assert code == 1, out
        assert "power-cycle: failed: the BMC" in out and "refused the credentials" in out and "(HTTP 401)" in out
        assert "NEEDS HARDWARE" in out and "Hardware repair needed: gpu-a2" in out
        assert len(demo.emulator.notified) == cycles and "not-the-bmc-password" not in out
        assert demo.node("gpu-a2")["spec"].get("unschedulable")
        demo.password_file.write_text(PASSWORD + "\n")
        code, out = demo.cli("heal", "gpu-a1", "--yes")
        assert code == 0 and "NOT QUARANTINED" in out, out

        # 3. Repaired by a person and released; it fails again: its fourth quarantine in a day (flapping.count) is
        # flapping.
        assert demo.cli("-l", "gpu-a2", "mock", "set", "fault=", "hardware_fault=")[0] == 0
        assert demo.cli("release", "gpu-a2", "--skip-checks", "--yes")[0] == 0
        assert demo.cli("-l", "gpu-a2", "mock", "set", "fault=xid-79")[0] == 0
        cycles = len(demo.emulator.notified)
        decisions = alert(demo, "gpu-a2")
        said = "\n".join(f"{d.get('decision')}: {d.get('why', '')}" for d in decisions)
        assert any(d["decision"] == "flapping" and "stays out for a person" in d["why"] for d in decisions), said
        assert len(demo.emulator.notified) == cycles  # nothing was tried
        assert demo.node("gpu-a2")["spec"].get("unschedulable")
        code, out = demo.cli("-o", "json", "status", "gpu-a2")
        (host,) = json.loads(out)["hosts"]
        assert host["heal_state"] == "flapping" and len(host["quarantine_history"]) == 4
        journals = [*(tmp_path / "state" / "undo").glob("*.json"), *(tmp_path / "demo" / "undo").glob("*.json")]
        assert journals and not any(PASSWORD in journal.read_text() for journal in journals)


def test_the_chain_escalates_past_a_failed_gpu_reset_to_a_reboot_over_ssh(tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    chain = "chains: {GPUFellOffTheBus: [reset-gpu, reboot, power-cycle]}"
    with DemoHeal(tmp_path / "demo", heal=f"passes: 2, pass_interval_s: 0.5, {chain}") as demo:
        assert demo.emulator is not None
        assert demo.cli("quarantine", "gpu-a2", "--reason", "xid 79", "--code", "GPUFellOffTheBus", "--yes")[0] == 0
        # The dry run, the release gate failing with no GPU named by a finding: every GPU's reset, persistence mode
        # (Enabled on these GPUs, which makes nvidia-smi refuse the reset) turned off on each first and back on
        # after; none made. (A host the gate passes would be released at once: no step planned.)
        unnamed = Finding(Severity.ERROR, "GPU_XID", "Xid 79 on a GPU not named yet")
        with monkeypatch.context() as sick:
            sick.setattr("clusterctl.quarantine.release.health_and_nccl_checks",
                         lambda *_: lambda _runner, hosts: {h.name: [unnamed] for h in hosts})
            code, out = demo.cli("-o", "json", "heal", "gpu-a2", "--dry-run")
        assert code == 0, out
        (planned,) = json.loads(out)["hosts"]
        (reset,) = [s for s in planned["steps"] if s["step"] == "reset-gpu"]
        assert reset["changes"] == [
            *(f"turn persistence mode off on GPU {i} of gpu-a2 for its reset" for i in range(8)),
            "reset the GPUs of gpu-a2", *(f"turn persistence mode back on on GPU {i} of gpu-a2" for i in range(8))]
        assert not any(k.startswith("pm") for k in demo.host_state("gpu-a2").values())
        assert demo.cli("-l", "gpu-a2", "mock", "set", "fault=xid-79")[0] == 0
        assert any(p.startswith("default/trainer-") for p in demo.pods_on("gpu-a2"))  # quarantined, not drained
        # Another run (a bootstrap) holds the host's lock: nothing disruptive starts; the host stays out, named.
        from clusterctl.engine.lock import DEFAULT_LOCK_PATH, LockInfo

        other = LockInfo.mine("another-run")
        demo.host_state("gpu-a2").fs.write(DEFAULT_LOCK_PATH, other.to_bytes())
        code, out = demo.cli("heal", "gpu-a2", "--yes")
        assert code == 1 and "reset-gpu could not start: the host's lock" in out and "locked by" in out, out
        assert demo.node("gpu-a2")["spec"].get("unschedulable")
        assert demo.host_state("gpu-a2").values().get("boots") is None
        assert demo.host_state("gpu-a2").fs.read(DEFAULT_LOCK_PATH) == other.to_bytes()
        demo.host_state("gpu-a2").fs.remove(DEFAULT_LOCK_PATH)
        code, out = demo.cli("-o", "json", "heal", "gpu-a2", "--yes")
        assert code == 0, out
        (host,) = json.loads(out)["hosts"]
        steps = {s["step"]: s for s in host["steps"]}
        assert host["chain"] == ["reset-gpu", "reboot", "power-cycle"] and host["outcome"] == "released"
        # The node was drained before the GPU reset; GPU 3 fell off the bus, so nvidia-smi can neither say its
        # persistence mode (left as it is) nor reset it (exit 15, "GPU is lost. Reboot the system"): the step
        # fails, named, and the chain goes on to the reboot.
        assert not any(p.startswith("default/trainer-") for p in demo.pods_on("gpu-a2"))
        assert steps["reset-gpu"]["result"] == "failed" and "reset GPU 3 of gpu-a2" in steps["reset-gpu"]["detail"]
        assert "GPU is lost" in steps["reset-gpu"]["detail"], steps["reset-gpu"]
        assert steps["reset-gpu"]["changes"] == ["reset GPU 3 of gpu-a2"]
        assert steps["reboot"]["result"] == "changed" and steps["reboot"]["changes"] == ["reboot gpu-a2"]
        assert "power-cycle" not in steps and demo.emulator.notified == []  # the reboot cured it: no power cycle
        assert demo.host_state("gpu-a2").values().get("boots") == "1"
        assert not demo.node("gpu-a2")["spec"].get("unschedulable")
        assert demo.host_state("gpu-a2").fs.read(DEFAULT_LOCK_PATH) is None  # the chain gave the lock back
        code, out = demo.cli("status", "gpu-a2")
        assert "reset-gpu: failed" in out and "reboot: changed" in out and "release: released" in out, out
