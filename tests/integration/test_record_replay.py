"""``clusterctl record`` on real sshd hosts, then replay: the survey from the recorded profiles
equals the survey of the live hosts, and ``--redact`` leaves no original identifier behind."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from clirun import run_clusterctl
from sshd_hosts import SSHDHosts

pytestmark = pytest.mark.sshd

DEMO_PROFILES = Path(__file__).resolve().parents[2] / "inventories" / "demo" / "profiles"
HOSTS = {"gpu-a1": ("dgx-a100", "a"), "gpu-b3": ("gpu-b3", "b")}
FABRIC = {"type": "ib", "rate_gbps": 200, "hcas": [f"mlx5_{i}" for i in range(8)]}
#: Keys whose values say when or how long, not what: left out of the comparison.
TIMING = {"generated_at", "collected_at", "timestamp", "duration_s", "elapsed_s", "started_at", "finished_at"}


def _without_timing(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _without_timing(v) for k, v in value.items() if k not in TIMING}
    if isinstance(value, list):
        return [_without_timing(v) for v in value]
    return value


@pytest.fixture
def live(sshd_hosts: SSHDHosts, tmp_path: Path) -> tuple[Path, Path]:
    hosts = []
    for name, (profile, _rack) in HOSTS.items():
        hosts.extend(sshd_hosts(1, profile=DEMO_PROFILES / profile, names=[name]))
    extra = {name: {"rack": rack, "fabric": FABRIC} for name, (_p, rack) in HOSTS.items()}
    inventory = sshd_hosts.write_inventory(tmp_path / "live.yaml", hosts, extra)
    return inventory, sshd_hosts.write_known_hosts(tmp_path / "known_hosts", hosts)


def test_survey_of_the_replica_equals_the_live_survey(live: tuple[Path, Path], tmp_path: Path) -> None:
    inventory, known = live
    home = tmp_path / "home"
    out = tmp_path / "replica"
    recorded = run_clusterctl(["-i", str(inventory), "--known-hosts", str(known), "record", "--out", str(out)],
                              home=home, timeout_s=180)
    assert recorded.exit_code == 0, recorded.stderr + recorded.stdout
    assert (out / "README.md").read_text().count("clusterctl:") == 1
    live_run = run_clusterctl(["-i", str(inventory), "--known-hosts", str(known), "-o", "json", "survey"], home=home,
                              timeout_s=180)
    replay = run_clusterctl(["-i", str(out / "inventory.yaml"), "-o", "json", "survey"], home=home)
    assert live_run.exit_code == replay.exit_code == 1, live_run.stderr + replay.stderr
    assert _without_timing(replay.json()) == _without_timing(live_run.json())


def test_redact_leaves_no_original_address_or_serial(live: tuple[Path, Path], tmp_path: Path) -> None:
    inventory, known = live
    out = tmp_path / "redacted"
    recorded = run_clusterctl(["-i", str(inventory), "--known-hosts", str(known), "record", "--out", str(out),
                               "--redact"], home=tmp_path / "home", timeout_s=180)
    assert recorded.exit_code == 0, recorded.stderr
    originals: set[str] = set()
    for profile in {p for p, _rack in HOSTS.values()} | {"dgx-a100", "net/gpu-a1"}:
        for path in (DEMO_PROFILES / profile).rglob("*.txt"):
            text = path.read_text(errors="replace")
            originals |= set(re.findall(r"GPU-[0-9a-f-]{36}", text))
            # An address is not part of a longer dotted number (a VBIOS version such as 96.00.74.00.0D).
            addresses = set(re.findall(r"(?<![\d.])(?:\d{1,3}\.){3}\d{1,3}(?![\d.])", text))
            originals |= addresses - {"255.255.255.0", "0.0.0.0", "127.0.0.1", "127.0.0.53"}
            # GUIDs alone (node_guid) and inside a link-local GID, whose fe80 prefix identifies nothing.
            originals |= set(re.findall(r"(?<![0-9a-f:])[0-9a-f]{4}(?::[0-9a-f]{4}){3}(?![0-9a-f:])", text))
            originals |= set(re.findall(r"fe80:0000:0000:0000:([0-9a-f]{4}(?::[0-9a-f]{4}){3})", text))
    written = "".join(p.read_text(errors="replace") for p in out.rglob("*") if p.is_file())
    leaked = sorted(o for o in originals if o in written)
    assert originals and not leaked, leaked
    # The live hosts' own address (loopback here) is replaced in the replica's inventory too.
    assert "127.0.0.1" not in (out / "inventory.yaml").read_text()
    # The replica still surveys: same hosts, same problem found.
    replay = run_clusterctl(["-i", str(out / "inventory.yaml"), "-o", "json", "survey"], home=tmp_path / "home")
    codes = {(f["host"], f["code"]) for f in replay.json()["findings"]}
    assert ("gpu-b3", "NIC_SLOW") in codes
