"""Hostile cases for ``tune-nccl``: bad versions, pushes nobody confirmed, site settings in
/etc/nccl.conf, one host's facts in every host's file, and its own lint failing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from clirun import clusterctl

from clusterctl.nccl.tune.managed_block import BEGIN, END, merge_managed_block

from .conftest import DEMO


@pytest.fixture(scope="module")
def saved_survey(tmp_path_factory: pytest.TempPathFactory) -> str:
    path = tmp_path_factory.mktemp("survey") / "survey.json"
    clusterctl("-i", DEMO, "survey", "-o", "json", "--save", path)
    return str(path)


def test_an_nccl_version_that_is_not_one_is_a_usage_error_as_in_lint(cli, saved_survey: str) -> None:  # type: ignore[no-untyped-def]
    ran = cli("-i", DEMO, "tune-nccl", "--survey", saved_survey, "--nccl-version", "banana")
    assert ran.code == 2 and "not an NCCL version: 'banana'" in ran.err
    conf = Path(saved_survey).with_name("nccl.conf")
    conf.write_text("NCCL_DEBUG=WARN\n")
    assert cli("nccl", "lint", str(conf), "--nccl-version", "banana").code == 2


def test_push_off_a_terminal_needs_yes_and_touches_nothing_without_it(  # type: ignore[no-untyped-def]
    cli, saved_survey: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("CLUSTERCTL_YES")
    ran = cli("-i", DEMO, "-l", "gpu-a1", "tune-nccl", "--survey", saved_survey, "--push")
    assert ran.code == 2
    assert "Pass --yes" in ran.err and "gpu-a1" in ran.err
    assert not (tmp_path / "clusterctl-results").exists()  # no undo journal: nothing was pushed
    pushed = cli("-i", DEMO, "-l", "gpu-a1", "-o", "json", "tune-nccl", "--survey", saved_survey, "--push", "--yes")
    assert pushed.code == 0, pushed.err
    assert json.loads(pushed.out)["push"][0]["applied"] is True


def test_the_managed_block_keeps_site_settings_and_names_the_ones_it_overrides() -> None:
    site = "# site settings\nNCCL_DEBUG=WARN\nNCCL_IB_HCA=mlx5_0\n"
    block = "# tuned\nNCCL_IB_HCA==mlx5_0:1,mlx5_1:1\nNCCL_SOCKET_IFNAME==eth0\n"
    first, conflicts = merge_managed_block(site, block)
    assert first.startswith(BEGIN + "\n# tuned\nNCCL_IB_HCA==mlx5_0:1,mlx5_1:1\n")
    assert first.endswith("\n" + site)  # every site line kept, after the block (NCCL keeps the first value)
    assert [(c.line, c.name, c.site_value, c.block_value) for c in conflicts] == [
        (3, "NCCL_IB_HCA", "mlx5_0", "=mlx5_0:1,mlx5_1:1")]
    # The next push replaces only the block; an admin's edit outside it survives.
    edited = first + "NCCL_NET_GDR_LEVEL=PHB\n"
    second, _ = merge_managed_block(edited, "NCCL_SOCKET_IFNAME==eth1\n")
    assert second.count(BEGIN) == 1 and second.count(END) == 1
    assert "NCCL_SOCKET_IFNAME==eth1" in second and "==eth0" not in second
    assert second.endswith(site + "NCCL_NET_GDR_LEVEL=PHB\n")
    assert merge_managed_block(second, "NCCL_SOCKET_IFNAME==eth1\n")[0] == second  # idempotent


def test_each_hosts_file_names_no_other_hosts_address(cli, saved_survey: str) -> None:  # type: ignore[no-untyped-def]
    ran = cli("-i", DEMO, "-l", "gpu-a1,gpu-b2", "-o", "json", "tune-nccl", "--survey", saved_survey,
              "--push", "--dry-run")
    assert ran.code == 0, ran.err
    diffs = {p["host"]: p["diff"] for p in json.loads(ran.out)["push"]}
    assert "10.0.0.11" not in diffs["gpu-b2"]  # gpu-a1's address
    assert BEGIN in diffs["gpu-b2"]


def test_tune_nccl_exits_1_when_its_own_lint_of_the_rendered_files_finds_an_error(  # type: ignore[no-untyped-def]
    cli, saved_survey: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("clusterctl.nccl.tune.run.lint_rendered",
                        lambda files, tuning: ["nccl.conf:4: error: NCCL_IB_HCA names no HCA"])
    ran = cli("-i", DEMO, "tune-nccl", "--survey", saved_survey)
    assert ran.code == 1
    assert "NCCL_IB_HCA names no HCA" in ran.err
