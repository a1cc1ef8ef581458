"""The quarantine policy: who goes, who drains, who waits, and the inventory's quarantine: section."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import cast

import pytest

from clusterctl.errors import InventoryError, UsageError
from clusterctl.fanout import Runner
from clusterctl.findings import Finding, Severity
from clusterctl.health.model import HealthReport, HostHealth
from clusterctl.health.model import Verdict as HealthVerdict
from clusterctl.inventory.loader import load_inventory
from clusterctl.inventory.model import Host, QuarantineConfig
from clusterctl.quarantine.policy import Action, Wanted, cap, decide, health_wanted
from clusterctl.quarantine.release import health_and_nccl_checks, health_findings, refusals


@dataclass(frozen=True)
class Verdict:
    host: str
    reason: str
    findings: tuple[Finding, ...]


def error(host: str, code: str, action: str | None = None) -> Finding:
    return Finding(Severity.ERROR, code, f"{code} on {host}", host=host,
                   evidence={"action": action} if action else {})


def fleet() -> list[Verdict]:
    return [Verdict("gpu-1", "GPU_XID: Xid 79", (error("gpu-1", "GPU_XID", "RESTART_BM"),)),
            Verdict("gpu-2", "NVLINK_DOWN", (error("gpu-2", "NVLINK_DOWN", "RESET_GPU"),)),
            Verdict("gpu-3", "THROTTLED", (Finding(Severity.WARNING, "GPU_THROTTLED", "hot", host="gpu-3"),)),
            Verdict("gpu-4", "ECC", (error("gpu-4", "ECC_UNCORRECTABLE"),)),
            Verdict("gpu-5", "all checks passed", ())]


def test_unhealthy_hosts_go_down_ones_needing_a_reset_drain_degraded_ones_are_reported() -> None:
    decided = {d.host: d.action for d in decide(health_wanted(fleet(), QuarantineConfig()), out_of_service=(),
                                                limit=cap("5", 10))}
    assert decided == {"gpu-1": "drain", "gpu-2": "drain", "gpu-3": "report", "gpu-4": "quarantine",
                       "gpu-5": "report"}


def test_the_cap_counts_hosts_already_out_and_holds_the_rest() -> None:
    decided = decide(health_wanted(fleet(), QuarantineConfig()), out_of_service=["gpu-9"],
                     limit=cap(None, 20))  # 10% of 20 = 2
    assert [(d.host, d.action) for d in decided if d.action != "report"] == \
        [("gpu-1", "drain"), ("gpu-2", "held"), ("gpu-4", "held")]
    assert "most --max-unavailable allows (2)" in next(d.reason for d in decided if d.host == "gpu-2")


def test_codes_from_the_inventory_narrow_and_ignore() -> None:
    config = QuarantineConfig(quarantine_codes=frozenset({"GPU_XID", "ECC_UNCORRECTABLE"}),
                              drain_codes=frozenset({"ECC_UNCORRECTABLE"}), ignore_codes=frozenset({"GPU_XID"}))
    decided = {d.host: d.action for d in decide(health_wanted(fleet(), config), out_of_service=(), limit=10)}
    assert decided["gpu-1"] == "report" and decided["gpu-2"] == "report" and decided["gpu-4"] == "drain"


def test_one_decision_for_alerts_and_health_alike() -> None:
    """The receiver's asks go through the same function: a host asked twice is decided once, on the
    stronger ask; one out of service already is not acted on again; the cap holds the rest."""
    asks = [Wanted("gpu-1", False, ("GPUXidError",), "alert"), Wanted("gpu-1", True, ("GPUFellOffTheBus",), "alert"),
            Wanted("gpu-2", True, ("GPUFellOffTheBus",)), Wanted("gpu-3", False), Wanted("gpu-4", None)]
    decided = decide(asks, out_of_service={"gpu-2"}, limit=2)
    assert [(d.host, d.action, d.codes) for d in decided] == [
        ("gpu-1", Action.DRAIN, ("GPUXidError", "GPUFellOffTheBus")),
        ("gpu-2", Action.ALREADY_OUT, ("GPUFellOffTheBus",)), ("gpu-3", Action.HELD, ()), ("gpu-4", Action.REPORT, ())]
    assert [d.to_json()["action"] for d in decided] == ["drain", "already", "held", "report"]


def test_a_code_the_inventory_ignores_neither_takes_a_host_out_nor_keeps_it_out() -> None:
    # One rule (policy.counts_against) for health --quarantine, release's gate and heal's: a host
    # whose only error is ignored is not quarantined, so release must not refuse it for that error.
    config = QuarantineConfig(ignore_codes=frozenset({"PCIE_ACS_ENABLED"}))
    acs, xid = error("gpu-1", "PCIE_ACS_ENABLED"), error("gpu-1", "GPU_XID", "RESTART_BM")
    assert health_wanted([Verdict("gpu-1", "ACS", (acs,))], config)[0].codes == ()
    assert refusals([acs], config) == []
    assert refusals([acs, xid], config) == ["GPU_XID: GPU_XID on gpu-1"]


def test_a_host_whose_only_error_is_ignored_is_still_nccl_tested_before_release(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # Its ignored error does not keep it out, so release's gate must not skip the NCCL test on it as
    # "broken": it would be released with no NCCL run at all.
    import clusterctl.quarantine.release as gate_checks

    config = QuarantineConfig(ignore_codes=frozenset({"PCIE_ACS_ENABLED"}))
    nccl_error = error("gpu-1", "NCCL_FAILED")
    monkeypatch.setattr(gate_checks, "health_findings",
                        lambda runner, hosts, *_: {"gpu-1": [error("gpu-1", "PCIE_ACS_ENABLED")]})
    monkeypatch.setattr(gate_checks, "nccl_findings", lambda runner, hosts: {h.name: [nccl_error] for h in hosts})
    found = health_and_nccl_checks(1, (), config)(cast(Runner, None), [Host("gpu-1")])
    assert refusals(found["gpu-1"], config) == ["NCCL_FAILED: NCCL_FAILED on gpu-1"]


def test_a_host_health_could_not_check_is_never_released_even_with_host_unreachable_ignored(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # Not known healthy is not healthy: ignoring HOST_UNREACHABLE (never quarantine for a blip) must not
    # let release return a host nobody could check.
    import clusterctl.health.run as health_run

    config = QuarantineConfig(ignore_codes=frozenset({"HOST_UNREACHABLE"}))
    unreachable = error("gpu-1", "HOST_UNREACHABLE")
    monkeypatch.setattr(health_run, "run_health", lambda *_, **__: HealthReport(
        (HostHealth("gpu-1", HealthVerdict.UNKNOWN, "could not be checked: timed out", (unreachable,),
                    failure="timed out"),), generated_at="", level=1, since=""))
    found = health_findings(cast(Runner, None), [Host("gpu-1")], 1, (), config)
    assert [f.split(":")[0] for f in refusals(found["gpu-1"], config)] == ["HEALTH_UNKNOWN"]


@pytest.mark.parametrize("value, size, expected", [(None, 100, 10), (None, 5, 1), ("3", 100, 3), ("25%", 10, 2)])
def test_cap_values(value: str | None, size: int, expected: int) -> None:
    assert cap(value, size) == expected


# "2.5%": --max-unavailable takes what the inventory's quarantine.max_unavailable takes, a whole percentage.
@pytest.mark.parametrize("value", ["0", "-1", "110%", "lots", "2.5%"])
def test_bad_caps_are_usage_errors(value: str) -> None:
    with pytest.raises(UsageError, match="--max-unavailable must be a host count"):
        cap(value, 10)


def test_the_inventory_section_is_read_and_checked(tmp_path: Path) -> None:
    path = tmp_path / "inv.yaml"
    path.write_text("hosts: {a: {}, b: {}}\nquarantine:\n  max_unavailable: 20%\n  drain_codes: [GPU_XID]\n"
                    "  alerts: {GPUTemperatureHigh: quarantine}\n")
    config = load_inventory(str(path)).quarantine
    assert config.max_unavailable == "20%" and config.drain_codes == frozenset({"GPU_XID"})
    assert config.alerts == {"GPUTemperatureHigh": "quarantine"} and config.quarantine_codes is None
    path.write_text("hosts: {a: {}}\nquarantine:\n  max_unavailabel: 2\n")
    with pytest.raises(InventoryError) as caught:
        load_inventory(str(path))
    assert "quarantine.max_unavailabel" in str(caught.value.render()) and "max_unavailable" in caught.value.render()
    path.write_text("hosts: {a: {}}\nquarantine:\n  alerts: {GPUXidError: reboot}\n")
    with pytest.raises(InventoryError) as caught:
        load_inventory(str(path))
    assert ":3:" in caught.value.render() or "line 3" in caught.value.render()


def test_the_policy_quarantines_through_the_cluster_and_a_plan_changes_nothing(tmp_path: Path) -> None:
    from kube_sim import KubeSim

    from clusterctl.fanout import Runner
    from clusterctl.quarantine.auto import run_policy
    from clusterctl.transport.factory import ConnectOptions, make_connector

    sim = KubeSim(tmp_path, names=["gpu-1", "gpu-2", "gpu-3", "gpu-4", "gpu-5"])
    sim.deploy("web", 5)
    inventory = load_inventory(str(sim.inventory))
    before = sim.snapshot()
    with Runner(make_connector(ConnectOptions()), parallel=8, timeout_s=60) as runner:
        plan, journal = run_policy(runner, inventory, fleet(), apply=False, max_unavailable="2",
                                   state_dir=str(tmp_path))
        assert journal is None
        assert sim.snapshot() == before
        assert [(d.host, d.action) for d in plan.decisions
                if d.action in (Action.DRAIN, Action.QUARANTINE)] == [("gpu-1", "drain"), ("gpu-2", "drain")]
        done, journal = run_policy(runner, inventory, fleet(), apply=True, max_unavailable="2",
                                   state_dir=str(tmp_path))
        assert journal is not None
    assert all(r.ok for r in done.results) and len(done.results) == 2
    taint = sim.node("gpu-1")["spec"]["taints"][0]
    assert taint == {"key": "clusterctl.dev/unhealthy", "value": "GPU_XID", "effect": "NoSchedule"}
    assert not any(p.startswith("default/web-") for p in sim.pods_on("gpu-2"))
    assert "unschedulable" not in sim.node("gpu-4")["spec"]  # held by the cap of 2
