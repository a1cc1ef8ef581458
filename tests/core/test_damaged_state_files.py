"""A damaged or foreign state file (progress file, undo journal): one paragraph naming the file and
what to do, exit 2; never "internal error: UnicodeDecodeError" (issue 37)."""

from __future__ import annotations

import json
import random
import re
from pathlib import Path

import pytest
from clirun import DEMO, CliRun, clusterctl

RANDOM = bytes(random.Random(37).getrandbits(8) for _ in range(4096))
#: Damaged (random bytes, cut JSON) and foreign (JSON of another shape, of another program).
CONTENTS = {
    "random-bytes": RANDOM,
    "cut-json": b'{"hosts": {"gpu-a1": {"kernel": {"status": "ok"',
    "json-list": b"[1, 2, 3]",
    "foreign-shape": json.dumps({"hosts": {"gpu-a1": {"kernel": "done"}}, "changes": 5, "target": 7}).encode(),
}


def assert_one_paragraph(run: CliRun, path: Path, remedy: str) -> None:
    assert run.exit_code == 2, run.output
    assert "internal error" not in run.output and "Traceback" not in run.output
    (line,) = run.stderr.strip().splitlines()
    assert re.match(rf"error: {re.escape(str(path))}(:\d+)?: (field '[^']+': )?not a clusterctl", line), line
    assert remedy in line, line


@pytest.mark.parametrize("content", CONTENTS.values(), ids=CONTENTS.keys())
def test_undo_with_a_damaged_or_foreign_journal(tmp_path: Path, content: bytes) -> None:
    journal = tmp_path / "quarantine-20260101.json"
    journal.write_bytes(content)
    run = clusterctl("-i", DEMO, "undo", journal)
    assert_one_paragraph(run, journal, "Give 'clusterctl undo' the file a command named after 'undo with:'")


@pytest.mark.parametrize("content", CONTENTS.values(), ids=CONTENTS.keys())
def test_bootstrap_resume_with_a_damaged_or_foreign_progress_file(tmp_path: Path, content: bytes) -> None:
    state = tmp_path / "state"
    # The file a run left (its name carries a digest of the fleet), then damaged.
    ran = clusterctl("-i", DEMO, "-l", "gpu-a1", "bootstrap", "phase", "kernel", "--state-dir", state)
    assert ran.exit_code == 0, ran.output
    (path,) = (p for p in (state / "bootstrap").glob("*.json") if not p.name.endswith(".confirmed.json"))
    assert path.name.startswith("demo-")
    path.write_bytes(content)
    run = clusterctl("-i", DEMO, "-l", "gpu-a1", "bootstrap", "phase", "kernel", "--resume", "--state-dir", state)
    assert_one_paragraph(run, path, f"remove {path} and run bootstrap without --resume")


@pytest.mark.parametrize("content", CONTENTS.values(), ids=CONTENTS.keys())
def test_upgrade_resume_with_a_damaged_or_foreign_progress_file(tmp_path: Path, content: bytes) -> None:
    state = tmp_path / "state"
    state.mkdir()
    from clusterctl.engine.progress import RunPlace
    from clusterctl.inventory.loader import load_inventory

    path = RunPlace.of(load_inventory(str(DEMO)), "upgrade", str(state)).progress_path
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(content)
    run = clusterctl("-i", DEMO, "upgrade", "apply", "--resume", "--yes", "--state-dir", state)
    assert_one_paragraph(run, path, "without --resume")
