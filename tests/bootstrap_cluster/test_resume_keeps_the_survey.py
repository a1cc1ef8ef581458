"""``bootstrap --resume`` after a run given ``--survey`` goes on with that survey (issue #33).

It used to fail on alert-rules: without the survey the phase read the NVLink rule an earlier run
installed as something this run would remove, and refused.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from clirun import clusterctl
from cluster_builders import FIXTURES

DEMO = Path(__file__).resolve().parents[2] / "inventories" / "demo.yaml"


def _bootstrapped_with_a_survey(tmp_path: Path) -> tuple[Path, Path]:
    survey = tmp_path / "survey.json"
    shutil.copy(FIXTURES / "demo-survey.json", survey)
    state = tmp_path / "state"
    done = clusterctl("-i", DEMO, "bootstrap", "--survey", survey, "--yes", "--state-dir", state)
    assert done.exit_code == 0, done.output
    return survey, state


def test_resume_after_a_run_with_a_survey_goes_on_with_it(tmp_path: Path) -> None:
    survey, state = _bootstrapped_with_a_survey(tmp_path)
    resumed = clusterctl("-i", DEMO, "bootstrap", "--resume", "--yes", "--state-dir", state)
    assert resumed.exit_code == 0, resumed.output
    assert "FAILED" not in resumed.output and "SURVEY_DATA_DROPPED" not in resumed.output
    assert f"resumed with the survey the earlier run was given: {survey}" in resumed.stdout
    assert "nothing changed" in resumed.stdout


def test_resume_whose_survey_is_gone_asks_for_one(tmp_path: Path) -> None:
    survey, state = _bootstrapped_with_a_survey(tmp_path)
    survey.unlink()
    resumed = clusterctl("-i", DEMO, "bootstrap", "--resume", "--yes", "--state-dir", state)
    assert resumed.exit_code == 2, resumed.output
    assert f"was given --survey {survey}, which is gone" in resumed.stderr
    assert "--without-survey" in resumed.stderr and resumed.stderr.count("error:") == 1
    # Choosing explicitly works either way.
    chosen = clusterctl("-i", DEMO, "bootstrap", "--resume", "--yes", "--state-dir", state, "--survey",
                        FIXTURES / "demo-survey.json")
    assert chosen.exit_code == 0, chosen.output
