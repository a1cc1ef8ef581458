"""``clusterctl health`` against real sshd mock hosts: a hung probe and a missing tool are reported,
the other hosts complete, and nothing is written to any host at level 0."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
from clirun import REPO_ROOT, run_clusterctl
from sshd_hosts import SSHDHosts

pytestmark = pytest.mark.sshd

DGX = REPO_ROOT / "inventories" / "demo" / "profiles" / "dgx-a100"


def _profile(folder: Path, text: str) -> Path:
    folder.mkdir(parents=True)
    (folder / "profile.yaml").write_text(text)
    return folder


def _digest(root: Path) -> str:
    """Every file under ``root`` (names and contents): what a host holds. The simulator's own
    bookkeeping of which recorded answer it gave last (``answers``, ``rule_hits``) is not the host's."""
    digest = hashlib.sha256()
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        data = path.read_bytes()
        if path.name == "host.json":
            document = json.loads(data)
            document.pop("answers", None)
            document.pop("rule_hits", None)
            data = json.dumps(document, sort_keys=True).encode()
        digest.update(str(path.relative_to(root)).encode() + b"\0" + data)
    return digest.hexdigest()


def test_hung_probe_and_missing_tool_are_reported_and_the_rest_complete(sshd_hosts: SSHDHosts,
                                                                        tmp_path: Path) -> None:
    hung = _profile(tmp_path / "hung", f"""extends: {DGX}
commands:
  - match: "nvidia-smi -q"
    stdout_text: ""
    delay: 60
""")
    bare = _profile(tmp_path / "bare", """commands:
  - regex: "^journalctl -k "
    stdout_text: ""
""")
    healthy = sshd_hosts(2, profile=DGX, names=["ok1", "ok2"])
    (slow,) = sshd_hosts(1, profile=hung, names=["slow"])
    (nogpu,) = sshd_hosts(1, profile=bare, names=["nosmi"])
    hosts = [*healthy, slow, nogpu]
    inventory, known = sshd_hosts.write_client_files(tmp_path, hosts)
    argv = ["-i", str(inventory), "--known-hosts", str(known), "-o", "json", "health", "--probe-timeout", "2"]

    run = run_clusterctl(argv, home=tmp_path / "home", timeout_s=120)

    assert run.exit_code == 1, run.stderr
    hosts_json = {h["host"]: h for h in run.json()["hosts"]}
    assert hosts_json["ok1"]["verdict"] == hosts_json["ok2"]["verdict"] == "healthy", hosts_json["ok1"]["reason"]
    assert hosts_json["slow"]["verdict"] == "unhealthy"
    assert hosts_json["slow"]["reason"].startswith("PROBE_HUNG") and "nvidia-smi" in hosts_json["slow"]["reason"]
    # The hung nvidia-smi cost its own limit: the kernel log and NICs of that host were still read.
    assert "ib_ports" in hosts_json["slow"]["facts"] and "kernel_events" in hosts_json["slow"]["facts"]
    missing = [f for f in hosts_json["nosmi"]["findings"] if f["code"] == "TOOL_MISSING"]
    assert any(f["evidence"]["tool"] == "nvidia-smi" and f["severity"] == "error" for f in missing)
    # Level 0 writes nothing: a second run leaves every host's files (and the simulated tools' state,
    # seeded on the first command a host ever answers) as they were.
    state = hosts[0].state_root
    before = _digest(state)
    again = run_clusterctl(argv, home=tmp_path / "home", timeout_s=120)
    assert again.exit_code == 1 and _digest(state) == before
