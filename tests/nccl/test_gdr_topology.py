"""NCCL_NET_GDR_LEVEL judged against the surveyed GPU-to-NIC distances (lint --survey)."""

from __future__ import annotations

from pathlib import Path

from clirun import clusterctl

from clusterctl.nccl.lint import lint_settings
from clusterctl.nccl.sources import Setting

DEMO = str(Path(__file__).resolve().parents[2] / "inventories" / "demo.yaml")


def gdr(value: str) -> list[Setting]:
    return [Setting("NCCL_NET_GDR_LEVEL", value, "job.env", 3)]


def test_forcing_gdr_across_sockets_is_harmful_where_gpus_lack_a_near_nic() -> None:
    # A dual-socket PCIe box: half the GPUs reach the only NIC across the CPU interconnect.
    links = ["PIX", "PIX", "NODE", "NODE", "SYS", "SYS", "SYS", "SYS"]
    (finding,) = lint_settings(gdr("SYS"), gpu_nic_links=links)
    assert (finding.code, finding.severity, finding.line) == ("HARMFUL", "warning", 3)
    assert "forces GPUDirect RDMA for 6 of the 8 surveyed GPUs" in finding.message
    assert "PHB/SYS" in finding.message
    # The legacy integer form means the same (5 = SYS), with a note that the names read better.
    assert [f.code for f in lint_settings(gdr("5"), gpu_nic_links=links)] == ["HARMFUL", "LEGACY_VALUE"]
    # PHB allows only the NODE/PHB ones.
    (phb,) = lint_settings(gdr("PHB"), gpu_nic_links=links)
    assert "for 2 of the 8" in phb.message


def test_a_wide_level_is_harmless_when_every_gpu_has_a_nic_on_its_switch() -> None:
    assert lint_settings(gdr("SYS"), gpu_nic_links=["PXB"] * 8) == []


def test_turning_gdr_off_on_a_rail_optimised_host_is_harmful() -> None:
    (finding,) = lint_settings(gdr("LOC"), gpu_nic_links=["PIX"] * 8)
    assert finding.code == "HARMFUL" and "turns GPUDirect RDMA off, although 8 of the 8" in finding.message


def test_without_a_survey_the_level_is_only_checked_for_validity() -> None:
    assert lint_settings(gdr("SYS")) == []


def test_lint_takes_the_distances_from_a_saved_survey(tmp_path: Path) -> None:
    saved = tmp_path / "survey.json"
    clusterctl("-i", DEMO, "survey", "-o", "json", "--save", saved)
    env = tmp_path / "job.env"
    env.write_text("NCCL_NET_GDR_LEVEL=LOC\n")
    lint = clusterctl("nccl", "lint", env, "--survey", saved, "-o", "json")
    findings = lint.json()["findings"]
    assert lint.exit_code == 0  # a warning, not an error, without --strict
    assert [(f["subject"], f["code"]) for f in findings] == [("NCCL_NET_GDR_LEVEL", "HARMFUL")]
    # The demo's 6 hosts x 8 GPUs all have a NIC behind their PCIe switch (PXB).
    assert "48 of the 48" in findings[0]["message"]
