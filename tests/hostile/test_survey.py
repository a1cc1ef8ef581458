"""Output people read: the survey table at 100 columns, cells never split, durations in words."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from clusterctl.wording import plural, seconds

from .conftest import DEMO


def test_the_survey_table_fits_100_columns_without_splitting_a_cell(  # type: ignore[no-untyped-def]
    cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "100")
    ran = cli("-i", DEMO, "survey")
    assert ran.code == 1  # the demo's two broken hosts
    table = ran.out.split("\n\n", 1)[0].splitlines()
    assert max(len(line.rstrip()) for line in table) <= 100
    rows = [line for line in table if line.startswith("│")]
    assert len(rows) == 6  # one line per host: no cell folded onto a second line
    assert "1 error, 1 warning" in next(r for r in rows if "gpu-a3" in r)
    assert "left out to fit 100 columns" in ran.out and "-o json has every field" in ran.out


def test_a_wide_console_shows_every_column(cli, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("COLUMNS", "200")
    ran = cli("-i", DEMO, "survey")
    header = next(line for line in ran.out.splitlines() if line.startswith("┃"))
    for column in ("host", "rack", "GPUs", "model", "shape", "NVLink domains", "NICs", "driver", "CUDA", "NCCL"):
        assert column in header
    assert "left out" not in ran.out


def test_counts_and_durations_read_naturally() -> None:
    assert (plural(1, "host"), plural(2, "host"), plural(0, "error")) == ("1 host", "2 hosts", "0 errors")
    assert (seconds(60.0), seconds(4.900001), seconds(0.25)) == ("60 s", "4.9 s", "0.25 s")


def test_layout_advice_says_why_a_host_that_fits_holds_no_rank(cli) -> None:  # type: ignore[no-untyped-def]
    ran = cli("-i", DEMO, "-o", "json", "survey", "--tp", "8", "--pp", "2")
    advice = json.loads(ran.out)["advice"]
    placed = {p["host"] for p in advice["placements"]}
    spare = [h["host"] for h in advice["hosts"] if h["fit"] != "does-not-fit" and h["host"] not in placed]
    assert spare == ["gpu-b3"]
    assert any(line.startswith("gpu-b3 fits but holds no rank") and "spare" in line for line in advice["explanation"])


def test_the_graph_draws_what_the_findings_name_in_red(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    cli("-i", DEMO, "survey", "--graph", str(tmp_path))
    a3 = (tmp_path / "gpu-a3.dot").read_text()
    assert '"GPU3" [shape=box, fillcolor=salmon' in a3  # the GPU that lost its NVLinks
    assert '"GPU0" -- "GPU3" [label="no NV12", color=red' in a3  # and the links it lost
    assert "salmon" not in a3.replace('"GPU3" [shape=box, fillcolor=salmon', "")
    b3 = (tmp_path / "gpu-b3.dot").read_text()
    assert 'fillcolor=salmon, color=red, penwidth=2, label="mlx5_2"' in b3  # the NIC trained at 10 Gb/s
    assert "salmon" not in (tmp_path / "gpu-a1.dot").read_text()


HOSTILE = "[/][bold]x"  # Rich markup in remote text: it printed as markup, and '[/]' crashed the command


def test_nic_names_from_a_pasted_matrix_print_as_themselves(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    fixture = Path(__file__).resolve().parents[1] / "fixtures" / "topo" / "hgx-h100-8gpu-8nic.txt"
    pasted = tmp_path / "topo.txt"
    pasted.write_text(fixture.read_text().replace("NIC0: mlx5_0", f"NIC0: mlx5_{HOSTILE}"))
    ran = cli("topo", "show", str(pasted), "--tp", "8")
    assert ran.code == 0 and "internal error" not in ran.err
    assert f"mlx5_{HOSTILE}: NUMA" in ran.out and f"nearest NIC mlx5_{HOSTILE} " in ran.out


def test_a_gpu_model_from_a_host_prints_as_itself(cli, tmp_path: Path,  # type: ignore[no-untyped-def]
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    demo = Path(DEMO).parent / "demo" / "profiles" / "dgx-a100"
    query = next(line for line in (demo / "profile.yaml").read_text().splitlines() if "--query-gpu=" in line)
    (tmp_path / "q.csv").write_text((demo / "nvidia-smi-query-gpu.csv").read_text().replace(
        "A100-SXM4-80GB", f"A100 {HOSTILE}"))
    (tmp_path / "profile.yaml").write_text(f"extends: {demo}\ncommands:\n{query}\n    stdout: q.csv\n")
    inventory = tmp_path / "inventory.yaml"
    inventory.write_text(f"cluster: hostile\nhosts:\n  h1:\n    transport: mock\n    profile: {tmp_path}\n")
    monkeypatch.setenv("COLUMNS", "200")
    ran = cli("-i", str(inventory), "survey")
    assert "internal error" not in ran.err and f"A100 {HOSTILE}" in ran.out
