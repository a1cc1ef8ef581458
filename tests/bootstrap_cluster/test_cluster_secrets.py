"""No join token or certificate key anywhere: output, plans, --out files, logs (debug), progress, host state."""

from __future__ import annotations

import json
import logging
import re
from pathlib import Path

import pytest
from sim_cluster import SimCluster

from clusterctl import secret
from clusterctl.bootstrap.run import write_plan_files

TOKEN = re.compile(r"^[a-z0-9]{6}\.[a-z0-9]{16}$")
KEY = re.compile(r"^[0-9a-f]{64}$")


def _secrets_made_since(before: set[str]) -> set[str]:
    with secret._registry_lock:
        made = set(secret._registry) - before
    return {v for v in made if TOKEN.match(v) or KEY.match(v)}


def test_tokens_and_certificate_keys_never_leave_the_run(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    with secret._registry_lock:
        before = set(secret._registry)
    sim = SimCluster(tmp_path / "sim", ["gpu-a1", "gpu-a2", "gpu-a3", "gpu-b1"], control_planes=2)
    plan = sim.run(apply=False)
    written = write_plan_files(plan, str(tmp_path / "out"))
    first = sim.run()
    sim.add_host("gpu-b2")
    second = sim.run()  # an existing cluster: a fresh token is made for gpu-b2
    assert first.ok and second.ok, (first.failed_hosts, second.failed_hosts)
    made = _secrets_made_since(before)
    tokens = {v for v in made if TOKEN.match(v)}
    keys = {v for v in made if KEY.match(v)}
    assert len(tokens) >= 3 and len(keys) >= 2  # plan, first run, second run

    places: dict[str, str] = {
        "plan report": json.dumps(plan.to_json()),
        "first report": json.dumps(first.to_json()),
        "second report": json.dumps(second.to_json()),
        "logs": "\n".join(r.getMessage() for r in caplog.records),
    }
    for report in (plan, first, second):
        for result in report.results:
            for change in result.changes:
                places[f"{result.host} {change.summary}"] = change.describe() + change.diff() + change.summary
    for path in written:
        places[str(path)] = path.read_text()
    for path in (tmp_path / "sim").rglob("*"):
        if path.is_file():
            places[str(path)] = path.read_bytes().decode(errors="replace")
    leaks = [(where, value[:6]) for where, text in places.items() for value in made if value in text]
    assert not leaks
    # The checks can fail: the config kubeadm read on stdin held them.
    assert any(t in (c.stdin_secret.reveal() if c.stdin_secret else "")
               for r in first.results for c in r.changes for t in tokens)
