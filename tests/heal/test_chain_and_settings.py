"""Which steps a code gets (the Xid catalogue's actions, alerts, the inventory's chains) and the quarantine.heal
settings with their errors (file, line, field)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from refusals import inventory_refusal

from clusterctl.bootstrap.cluster.alerts import render_rules
from clusterctl.findings import Finding, Severity
from clusterctl.heal.chain import ALERT_ACTIONS, DEFAULT_CHAIN, FIRST_STEP, chain_for
from clusterctl.health.xid_catalog import HOST_DOWN
from clusterctl.inventory.cluster_sections import AlertSettings
from clusterctl.inventory.loader import load_inventory
from clusterctl.quarantine import receiver


def _finding(code: str, action: str | None = None, **more: object) -> Finding:
    return Finding(Severity.ERROR, code, code, host="h", evidence={"action": action, **more} if action else more)


def test_xid_79_takes_a_power_cycle_and_other_xids_their_catalogue_action() -> None:
    assert chain_for(["GPUFellOffTheBus"])[0] == ("power-cycle",)
    assert chain_for(["GPU_XID"], [_finding("GPU_XID", "RESTART_BM", xid=79)])[0] == ("power-cycle",)
    steps, why = chain_for(["GPU_XID"], [_finding("GPU_XID", "WORKFLOW_XID_48", xid=48)])
    assert steps == ("reset-gpu", "reboot", "power-cycle") and "WORKFLOW_XID_48" in why
    assert chain_for(["GPU_XID"], [_finding("GPU_XID", "RESTART_APP", xid=13)])[0][0] == "restart-app"
    assert chain_for(["GPU_XID"], [_finding("GPU_XID", "RESTART_BM", xid=95)])[0] == ("reboot", "power-cycle")
    # NVIDIA says contact support: straight to "needs hardware".
    assert chain_for(["GPU_XID"], [_finding("GPU_XID", "CONTACT_SUPPORT", xid=119)])[0] == ()
    assert chain_for(["SOMETHING_ELSE"]) == (DEFAULT_CHAIN, "no chain for these codes: the default")
    # Several codes: every step any of them takes, in escalation order; the inventory's chain wins.
    assert chain_for(["GPUFellOffTheBus", "NVLinkCRCErrors"])[0] == ("reset-gpu", "reboot", "power-cycle")
    assert chain_for(["GPUFellOffTheBus"], overrides={"GPUFellOffTheBus": ("reboot",)})[0] == ("reboot",)


def test_the_alert_names_heal_and_the_receiver_act_on_are_bootstraps_rules() -> None:
    """Both tables name bootstrap's alert rules by hand: a rule renamed in templates/bootstrap/alerts would lose
    its chain (heal's default instead of a power cycle for GPUFellOffTheBus) and its drain (the receiver's
    'report'); a new rule gets no receiver action until it is given one here."""
    rules = yaml.safe_load(render_rules(AlertSettings(), ["gpu-a1"]))
    names = {rule["alert"] for group in rules["groups"] for rule in group["rules"]}
    assert set(receiver.ALERT_ACTIONS) == names
    assert set(ALERT_ACTIONS) <= names and set(ALERT_ACTIONS.values()) <= set(FIRST_STEP)


@pytest.mark.parametrize(("finding", "chain"), [
    # Findings other than an Xid, by their action: the GPU reset first where NVIDIA asks for one.
    (_finding("GPU_ROW_REMAP_PENDING", "RESET_GPU"), ("reset-gpu", "reboot", "power-cycle")),
    (_finding("GPU_REPAIR_PENDING", "RESET_GPU"), ("reset-gpu", "reboot", "power-cycle")),
    (_finding("NVLINK_DOWN", "RESET_GPU"), ("reset-gpu", "reboot", "power-cycle")),
    (_finding("DCGM_DIAG_FAILED", "RESET_GPU"), ("reset-gpu", "reboot", "power-cycle")),
    (_finding("GPU_FABRIC_UNHEALTHY", "WORKFLOW_NVLINK5_ERR"), ("reset-gpu", "reboot", "power-cycle")),
    (_finding("GPU_RESET_REQUIRED", "DRAIN_P2P"), ("restart-app", "reset-gpu", "reboot", "power-cycle")),
    (_finding("GPU_MISSING", "RESTART_BM"), ("reboot", "power-cycle")),
    # The driver's own "fallen off the bus" line, no Xid 79 beside it: the power cycle, as for the Xid.
    (_finding("GPU_FELL_OFF_BUS", "RESTART_BM"), ("power-cycle",)),
    # Hands, not software: a card that is not seated, a part to replace, its cooling.
    (_finding("PCIE_LINK_DOWN", "CHECK_MECHANICALS"), ()),
    (_finding("GPU_ROW_REMAP_FAILURE", "RMA"), ()),
    (_finding("GPU_TEMPERATURE_HIGH", "CHECK_COOLING"), ()),
    # An error with no action: the default.
    (_finding("IB_PORT_DOWN"), DEFAULT_CHAIN),
])
def test_every_finding_picks_the_chain_by_its_action(finding: Finding, chain: tuple[str, ...]) -> None:
    steps, why = chain_for([finding.code], [finding])
    assert steps == chain, why
    assert str(finding.evidence.get("action", "the default")) in why or "off the bus" in why


def test_every_action_that_takes_the_host_down_has_its_first_step() -> None:
    # The one action rule (xid_catalog.HOST_DOWN: what quarantine drains for) and heal's table stay in step: no
    # such action falls to the default chain.
    assert set(HOST_DOWN) <= set(FIRST_STEP), set(HOST_DOWN) - set(FIRST_STEP)


def test_a_finding_that_needs_hands_ends_the_chain_and_the_inventory_overrides_by_code() -> None:
    reset, unseated = _finding("GPU_ROW_REMAP_PENDING", "RESET_GPU"), _finding("PCIE_LINK_DOWN", "CHECK_MECHANICALS")
    # No step makes the release gate pass while the card is not seated: none is tried.
    assert chain_for(["GPU_ROW_REMAP_PENDING"], [reset, unseated]) == ((), "PCIE_LINK_DOWN: CHECK_MECHANICALS")
    steps, why = chain_for([], [reset, unseated], {"PCIE_LINK_DOWN": ("reboot",)})
    assert steps == ("reset-gpu", "reboot", "power-cycle")
    assert why == "GPU_ROW_REMAP_PENDING: RESET_GPU; PCIE_LINK_DOWN: the inventory's quarantine.heal.chains"
    # The inventory's chain for a finding with no action of its own.
    assert chain_for([], [_finding("IB_PORT_DOWN")], {"IB_PORT_DOWN": ("reboot",)})[0] == ("reboot",)
    # An alert's code and the findings of the gate together: every step any of them takes.
    assert chain_for(["GPUFellOffTheBus"], [_finding("GPU_MISSING", "RESTART_BM")])[0] == ("reboot", "power-cycle")


def test_heal_settings_are_read_with_their_defaults(tmp_path: Path) -> None:
    path = tmp_path / "inv.yaml"
    path.write_text("hosts: {a: {}}\nquarantine:\n  heal:\n    passes: 3\n    flapping: {count: 2, window_h: 6}\n"
                    "    chains: {GPUFellOffTheBus: [reboot, power-cycle]}\n    timeouts: {reboot: 120}\n")
    heal = load_inventory(path).quarantine.heal
    assert heal.passes == 3 and heal.flap_count == 2 and heal.flap_window_s == 6 * 3600
    assert heal.chains == {"GPUFellOffTheBus": ("reboot", "power-cycle")} and heal.timeouts == {"reboot": 120}
    assert heal.level == 1 and heal.pass_interval_s == 2.0
    path.write_text("hosts: {a: {}}\n")
    assert load_inventory(path).quarantine.heal.passes == 2


@pytest.mark.parametrize(("heal", "line", "field", "words"), [
    ("    passes: 0\n", 4, "quarantine.heal.passes", "at least 1"),
    ("    chains: {GPU_XID: [reboot, replace-gpu]}\n", 4, "quarantine.heal.chains", "'replace-gpu' is not a step"),
    ("    timeouts: {rebot: 60}\n", 4, "quarantine.heal.timeouts", "Did you mean 'reboot'?"),
    ("    flapping: {count: 1}\n", 4, "quarantine.heal.flapping", "at least 2"),
    ("    level: 5\n", 4, "quarantine.heal.level", "0 to 3"),
    ("    pases: 2\n", 4, "quarantine.heal.pases", "Did you mean 'passes'?"),
])
def test_heal_setting_errors_name_file_line_and_field(tmp_path: Path, heal: str, line: int, field: str,
                                                      words: str) -> None:
    path = tmp_path / "inv.yaml"
    path.write_text("hosts: {a: {}}\nquarantine:\n  heal:\n" + heal)
    error = inventory_refusal(path)
    assert (error.line, error.field) == (line, field), str(error)
    assert words in str(error)


def test_heal_asks_first_and_refuses_off_a_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    from clirun import DEMO, clusterctl

    monkeypatch.delenv("CLUSTERCTL_YES")
    done = clusterctl("-i", DEMO, "heal", "gpu-a3")
    assert done.exit_code == 2, done.output
    assert "refusing without a terminal" in done.output and "clusterctl heal gpu-a3 --dry-run" in done.output
    assert clusterctl("-i", DEMO, "heal", "gpu-z9", "--yes").exit_code == 2  # not in the inventory
