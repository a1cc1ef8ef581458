"""Day 2's plans and refusals at an 80-column terminal (``COLUMNS=80``): each step's words wrap under
the step, a refusal under itself; the commands (``$ ...``) stay whole on their own lines, to be copied."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from clirun import clusterctl
from day2_helpers import DEMO


@pytest.fixture
def eighty(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "80")


def _prose(text: str) -> list[str]:
    """The lines that are not a command printed to be copied (``$ ...``, or a quoted clusterctl command alone)."""
    return [line for line in text.splitlines() if not line.lstrip().startswith("$ ")
            and not (line.lstrip().startswith("'clusterctl ") and line.rstrip().endswith("'"))]


def _too_wide(lines: list[str]) -> str:
    """The lines wider than 80 columns but for one word (a path) that alone is wider."""
    return "\n".join(line for line in lines if len(line) > 80 and len(line.split()) > 1)


def test_upgrade_plan_wraps_each_step_under_its_number(bootstrapped_demo: Path, eighty: None) -> None:
    run = clusterctl("-i", DEMO, "upgrade", "plan", "--to", "1.36.3")
    assert run.exit_code == 0, run.output
    lines = _prose(run.stdout)
    assert not _too_wide(lines), _too_wide(lines)
    first = lines.index("   1. kubeadm: kubeadm at the target, from the target minor's apt repository")
    assert lines[first + 1] == "      (unhold, install, hold)"
    assert any(f"'clusterctl -i {DEMO} upgrade apply --to 1.36.3'" in line for line in run.stdout.splitlines()[-2:]), \
        run.stdout
    # A command is never folded: it is one line, as long as it is.
    assert any(line.startswith("      $ apt-mark unhold kubeadm && ") and len(line) > 80
               for line in run.stdout.splitlines())


def test_remove_node_plan_wraps_each_step_under_its_number(bootstrapped_demo: Path, eighty: None) -> None:
    run = clusterctl("-i", DEMO, "remove-node", "gpu-b3", "--dry-run")
    assert run.exit_code == 0, run.output
    lines = _prose(run.stdout)
    assert not _too_wide(lines), _too_wide(lines)
    second = next(i for i, line in enumerate(lines) if line.startswith("  2. reset: kubeadm reset"))
    assert lines[second + 1].startswith("     ") and lines[second + 1].rstrip().endswith("(on gpu-b3)")


def _quarantine_journal() -> str:
    """gpu-a3 quarantined (its NVLink is down in the demo: release's checks refuse it); the run's undo journal."""
    done = clusterctl("-i", DEMO, "-o", "json", "quarantine", "gpu-a3", "--reason", "nvlink", "--yes")
    assert done.exit_code == 0, done.output
    return str(json.loads(done.stdout)["undo_journal"])


def test_undo_refusing_a_return_from_quarantine_wraps_the_reasons(bootstrapped_demo: Path, eighty: None) -> None:
    refused = clusterctl("-i", DEMO, "undo", "--yes", _quarantine_journal())
    assert refused.exit_code == 1, refused.output
    lines = refused.stderr.splitlines()
    assert not _too_wide(lines), refused.stderr
    start = next(i for i, line in enumerate(lines) if line.startswith("REFUSED gpu-a3: stays quarantined: NVLINK"))
    assert lines[start + 1].startswith("  ") and "CRC Errors" in " ".join(lines[start:start + 5]), refused.stderr


def test_undo_dry_run_prints_each_command_whole_to_be_copied(bootstrapped_demo: Path, eighty: None) -> None:
    plan = clusterctl("-i", DEMO, "undo", "--dry-run", _quarantine_journal())
    assert plan.exit_code == 0, plan.output
    lines = plan.stdout.splitlines()
    assert not _too_wide(_prose(plan.stdout)), plan.stdout
    # Each command whole on its line after its node's "would run:" (it was folded at 80 columns; kubectl runs on
    # the control plane gpu-a1, the line names the node it changes).
    commands = [line.strip()[2:] for line in lines if line.startswith("  $ ")]
    assert "kubectl --kubeconfig /etc/kubernetes/admin.conf uncordon gpu-a3" in commands, plan.stdout
    assert len(commands) == 3 and all(lines[lines.index(f"  $ {c}") - 1] == "gpu-a3: would run:" for c in commands)
    assert lines[-1] == "dry run: nothing was changed"
