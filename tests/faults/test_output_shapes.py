"""What a user reads: --help examples and file previews copy-paste whole at any width, the topology
matrix reads below 140 columns, and the heat map's subtitle fits and says what its colours mean."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from clirun import clusterctl

REPO = Path(__file__).resolve().parents[2]
DEMO = str(REPO / "inventories" / "demo.yaml")


def _run(columns: int, *argv: str) -> str:
    env = {k: v for k, v in os.environ.items() if k != "CLUSTERCTL_INVENTORY"}
    env.update(COLUMNS=str(columns), NO_COLOR="1", PYTHONPATH=str(REPO))
    done = subprocess.run([sys.executable, "-m", "clusterctl", *argv], capture_output=True, text=True, env=env,
                          cwd=REPO, timeout=120)
    return done.stdout


def _source_examples(command: str) -> list[str]:
    from clusterctl.cli.app import load_command

    help_text = load_command(command).help or ""
    return [line.strip() for line in help_text.splitlines() if line.startswith("  ") and line.strip()]


@pytest.mark.parametrize("command", ["undo", "exec", "copy", "tune-nccl", "bootstrap", "reset"])
def test_help_examples_stay_on_one_line_at_70_columns(command: str) -> None:
    wanted = _source_examples(command)
    assert wanted
    shown = {line.strip() for line in _run(70, command, "--help").splitlines()}
    assert [line for line in wanted if line not in shown] == []


def test_the_nccl_conf_preview_keeps_each_line_whole_at_60_columns() -> None:
    text = _run(60, "-i", DEMO, "tune-nccl")
    comment = next(line for line in text.splitlines() if line.startswith("# 8 active IB ports"))
    assert comment.endswith("(not a fabric HCA in the inventory)")


def test_survey_matrix_reads_at_100_columns() -> None:
    text = _run(100, "-i", DEMO, "-l", "gpu-a3", "survey", "--matrix")
    rows = [line for line in text.splitlines() if re.match(r"^G\d ", line)]
    assert len(rows) == 8, text
    assert "…" not in "\n".join(rows)
    assert all(len(line.rstrip()) <= 100 for line in rows)
    assert rows[3].split()[1:5] == ["SYS", "SYS", "PXB", "X"]  # GPU3 has no NVLink
    assert "key: N0=mlx5_0" in text


def test_the_heat_map_has_room_for_its_subtitle_and_a_colour_legend(tmp_path: Path) -> None:
    plot = tmp_path / "ib.svg"
    done = clusterctl("-i", DEMO, "bench", "ib", "--plot", plot, "--results-dir", tmp_path / "res")
    assert done.exit_code in (0, 1), done.stderr
    svg = plot.read_text()
    width = int(re.search(r'<svg [^>]*width="(\d+)"', svg).group(1))  # type: ignore[union-attr]
    subtitle = re.findall(r'<text x="10" y="34"[^>]*>(.*?)</text>', svg)[0]
    assert width >= 10 + len(subtitle.replace("&#x27;", "'")) * 6
    assert "colour:" in svg and "higher is better" in svg and ">failed<" in svg and ">not tested<" in svg
