"""``clusterctl bootstrap`` and ``clusterctl reset`` end to end on simulated hosts, as a user runs them."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from clirun import clusterctl as run_cli
from sim_cluster import DEMO_SURVEY, PROFILE

from clusterctl import secret
from clusterctl.mock.state import MockCluster

HOSTS = ("gpu-a1", "gpu-a2", "gpu-b1")


def node_phases() -> str:
    from clusterctl.bootstrap.registry import all_phases

    return ",".join(p.name for p in all_phases() if not p.uses_cluster_settings)


def write_inventory(root: Path) -> Path:
    (root / "profile").mkdir(parents=True, exist_ok=True)
    (root / "profile" / "profile.yaml").write_text(PROFILE)
    lines = ["cluster: sim", "defaults:", "  transport: mock", "  profile: profile", "  mock_state: state",
             '  stack: {kubernetes: "1.36.2", containerd: "1.7.24"}', "hosts:"]
    for index, name in enumerate(HOSTS):
        roles = "[control-plane, worker]" if index == 0 else "[worker]"
        lines.append(f"  {name}: {{address: 10.0.{index}.1, rack: {name[4]}, roles: {roles}}}")
    path = root / "inventory.yaml"
    path.write_text("\n".join(lines) + "\n")
    return path


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    done = run_cli(*argv)
    return done.exit_code, done.stdout, done.stderr


def test_bootstrap_works_then_a_broken_gpu_pod_fails_verify_then_reset_twice(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    inventory = str(write_inventory(tmp_path))
    state = tmp_path / "state"
    skip = ["--skip-phases", node_phases()] if node_phases() else []
    env = ["-i", inventory]
    with secret._registry_lock:
        before = set(secret._registry)
    code, out, err = run(capsys, *env, "--debug", "bootstrap", "--survey", str(DEMO_SURVEY),
                         "--state-dir", str(tmp_path / "progress"), *skip)
    assert code == 0, out + err
    assert "works: 3 node(s) Ready, 24 GPU(s) allocatable" in out
    transcript = out + err

    code, out, err = run(capsys, *env, "-o", "json", "bootstrap", "--survey", str(DEMO_SURVEY),
                         "--state-dir", str(tmp_path / "progress"), *skip)
    assert code == 0 and json.loads(out)["changed"] is False
    transcript += out + err

    with MockCluster(state).host("gpu-b1").edit() as data:
        data.setdefault("values", {})["gpu-pod"] = "fail"
    code, out, err = run(capsys, *env, "bootstrap", "phase", "verify", "--survey", str(DEMO_SURVEY),
                         "--state-dir", str(tmp_path / "progress"))
    assert code == 1
    assert re.search(r"FAILED gpu-a1: phase verify: verify failed: gpu-b1: the pod asking for one GPU", err)
    transcript += out + err

    code, out, err = run(capsys, *env, "reset", "--yes", "--state-dir", str(tmp_path / "progress"))
    assert code == 0, out + err
    code, out, err = run(capsys, *env, "reset", "--yes", "--state-dir", str(tmp_path / "progress"))
    assert code == 0 and "nothing changed" in out

    made = {v for v in set(secret._registry) - before if re.fullmatch(r"[a-z0-9]{6}\.[a-z0-9]{16}|[0-9a-f]{64}", v)}
    assert made
    files = [p for p in tmp_path.rglob("*") if p.is_file()]
    leaks = [str(p) for p in files for v in made if v.encode() in p.read_bytes()]
    leaks += ["output" for v in made if v in transcript]
    assert not leaks
