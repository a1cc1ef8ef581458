"""Hostile cases for ``tune-nccl``: bad versions, pushes nobody confirmed, site settings in
/etc/nccl.conf, one host's facts in every host's file, and its own lint failing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from clirun import clusterctl

from clusterctl.findings import Finding, Severity
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
                        lambda files, tuning: [Finding(Severity.ERROR, "IB_HCA_UNKNOWN", "NCCL_IB_HCA names no HCA",
                                                       file="nccl.conf", line=4)])
    ran = cli("-i", DEMO, "tune-nccl", "--survey", saved_survey)
    assert ran.code == 1
    assert "NCCL_IB_HCA names no HCA" in ran.err


# --- a saved sweep (tune-nccl --bench DIR) is untrusted input like any other file ----------------


def _sweep() -> dict:  # type: ignore[type-arg]
    """What ``tune-nccl --sweep --out DIR`` writes to DIR/sweep.json, cut to one winning size range."""
    return {
        "budget": 120, "runs_used": 34, "full_grid_runs": 18, "candidates_tried": 2, "candidates_total": 2,
        "ranges": [{"range": "small", "baseline_gbps": 0.09, "noise": 0.0162,
                    "best_label": "NCCL_ALGO=Tree NCCL_PROTO=LL", "best_gbps": 0.12, "significant": True,
                    "best_runs": 10, "collective": "allreduce", "gain": 0.2542, "ci_low": 0.2411,
                    "ci_high": 0.2675, "baseline_moved": -0.0108, "verdict": ""}],
        "settings": [{"name": "NCCL_BUFFSIZE", "value": "8388608", "reason": "faster on every size measured",
                      "source": "sweep"}],
        "tuner_rows": [["allreduce", "small", "tree", "ll"]],
        "notes": ["allreduce medium messages: NCCL's defaults are best"],
        "table": [["defaults", {"small": 0.09, "medium": 25.8}, 3]],
        "confidence": 0.991667,
    }


def test_a_saved_sweep_is_reused_by_bench(cli, saved_survey: str, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    (tmp_path / "sweep.json").write_text(json.dumps(_sweep()))
    ran = cli("-i", DEMO, "tune-nccl", "--survey", saved_survey, "--bench", str(tmp_path), "--format", "tuner",
              "--out", str(tmp_path / "out"))
    assert ran.code == 0, ran.err
    assert "allreduce,0,65535,tree,ll" in (tmp_path / "out" / "nccl_tuner.conf").read_text()


def _broken(change: str) -> dict:  # type: ignore[type-arg]
    data = _sweep()
    if change == "control character in a setting name":
        data["settings"][0]["name"] = "NCCL_BUFFSIZE\x1b]0;owned\x07"
    elif change == "newline in a setting value":
        data["settings"][0]["value"] = "1\nNCCL_NET_PLUGIN=/tmp/evil.so"
    elif change == "text where a number belongs":
        data["budget"] = "lots"
    elif change == "unknown size range":
        data["tuner_rows"][0][1] = "huge"
    elif change == "object where a list belongs":
        data["notes"] = {"a": 1}
    elif change == "infinite bandwidth":
        data["ranges"][0]["best_gbps"] = 1e999
    elif change == "too many entries":
        data["notes"] = ["x"] * 10_001
    return data


@pytest.mark.parametrize(("change", "field"), [
    ("control character in a setting name", "settings[0].name"),
    ("newline in a setting value", "settings[0].value"),
    ("text where a number belongs", "budget"),
    ("unknown size range", "tuner_rows[0].range"),
    ("object where a list belongs", "notes"),
    ("infinite bandwidth", "ranges[0].best_gbps"),
    ("too many entries", "notes"),
])
def test_a_saved_sweep_with_a_wrong_field_is_refused_naming_the_field(  # type: ignore[no-untyped-def]
    cli, saved_survey: str, tmp_path: Path, change: str, field: str
) -> None:
    (tmp_path / "sweep.json").write_text(json.dumps(_broken(change)))
    ran = cli("-i", DEMO, "tune-nccl", "--survey", saved_survey, "--bench", str(tmp_path), "--out",
              str(tmp_path / "out"))
    assert ran.code == 2, ran.err
    assert f"{tmp_path / 'sweep.json'}: field '{field}': not a saved sweep" in ran.err
    assert "Traceback" not in ran.err and "\x1b" not in ran.err and "evil" not in ran.err
    assert not (tmp_path / "out").exists()  # nothing rendered from it


@pytest.mark.parametrize(("content", "expected"), [
    ('{"budget": 120,\n  "runs_used": }\n', "sweep.json:2: not a saved sweep: not JSON"),
    ("[" * 200_000 + "]" * 200_000, "nested too deep"),
    ("\0\0\0", "binary data"),
    ("[1, 2, 3]", "not a saved sweep: a list where an object belongs"),
])
def test_a_saved_sweep_that_is_not_one_is_a_usage_error(  # type: ignore[no-untyped-def]
    cli, saved_survey: str, tmp_path: Path, content: str, expected: str
) -> None:
    (tmp_path / "sweep.json").write_text(content)
    ran = cli("-i", DEMO, "tune-nccl", "--survey", saved_survey, "--bench", str(tmp_path))
    assert ran.code == 2 and expected in ran.err and "Traceback" not in ran.err, ran.err


def test_a_huge_saved_sweep_is_refused_before_it_is_read(cli, saved_survey: str, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    with (tmp_path / "sweep.json").open("wb") as handle:
        handle.truncate(4 * 1024**3)  # 4 GiB, sparse: reading it would take that much memory
    ran = cli("-i", DEMO, "tune-nccl", "--survey", saved_survey, "--bench", str(tmp_path))
    assert ran.code == 2 and "larger than the 16 MiB limit" in ran.err and "sweep.json" in ran.err


def test_bench_on_a_folder_without_a_sweep_says_what_it_wants(cli, saved_survey: str, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    ran = cli("-i", DEMO, "tune-nccl", "--survey", saved_survey, "--bench", str(tmp_path))
    assert ran.code == 2 and "no saved sweep in this folder" in ran.err and "--out folder of a --sweep" in ran.err
