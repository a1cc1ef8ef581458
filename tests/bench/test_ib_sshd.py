"""bench ib over real sshd mock hosts whose fake ib_write_bw answers depend on the pair."""

from __future__ import annotations

import os
import shutil
import sys
import time
from pathlib import Path

import pytest
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "integration"))

from clirun import run_clusterctl
from sshd_hosts import SSHDHosts

from .conftest import FAST, PERFTEST, SLOW

pytestmark = pytest.mark.sshd


def bench_address(i: int) -> str:
    return f"10.9.0.{i}"


def profile(folder: Path, slow_peers: list[int], *, all_slow: bool = False, hang: bool = False) -> Path:
    folder.mkdir(parents=True)
    shutil.copy(PERFTEST / FAST, folder / "fast.txt")
    shutil.copy(PERFTEST / SLOW, folder / "slow.txt")
    mine = "slow.txt" if all_slow else "fast.txt"
    hang_rule = {"delay": 60} if hang else {}
    rules: list[dict[str, object]] = [
        # Server side (no peer address at the end): prints its table, or waits forever for a client.
        {"regex": r"^ib_write_bw .*--report_gbits$", "stdout": mine, **hang_rule},
    ]
    for peer in slow_peers:
        rules.append({"regex": rf"^ib_write_bw .*--report_gbits 10\.9\.0\.{peer}$", "stdout": "slow.txt"})
    rules.append({"regex": r"^ib_write_bw .*--report_gbits \S+$", "stdout": mine, **hang_rule})
    (folder / "profile.yaml").write_text(yaml.safe_dump({"commands": rules}, sort_keys=False))
    return folder


def start_fleet(sshd_hosts: SSHDHosts, tmp_path: Path, count: int, *, slow_host: int | None = None,
                bad_link: tuple[int, int] | None = None, hang: bool = False) -> tuple[Path, Path, list[Path]]:
    hosts = []
    profiles = []
    for i in range(1, count + 1):
        peers = [slow_host] if slow_host and i != slow_host else []
        if bad_link and i in bad_link:
            peers.append(bad_link[1] if i == bad_link[0] else bad_link[0])
        folder = profile(tmp_path / f"profile-h{i}", peers, all_slow=(i == slow_host), hang=hang)
        profiles.append(folder)
        hosts.extend(sshd_hosts(1, profile=folder, names=[f"h{i}"]))
    extra = {f"h{i}": {"rack": "ab"[(i - 1) // 2 % 2], "vars": {"bench_address": bench_address(i)},
                       "fabric": {"type": "ib", "rate_gbps": 200, "hcas": ["mlx5_0"]}} for i in range(1, count + 1)}
    inventory, known = sshd_hosts.write_client_files(tmp_path, hosts, extra)
    return inventory, known, profiles


def bench(tmp_path: Path, inventory: Path, known: Path, *extra: str) -> tuple[int, dict, str]:  # type: ignore[type-arg]
    import json

    run = run_clusterctl(["-i", str(inventory), "--known-hosts", str(known), "-o", "json", "bench", "ib",
                          "--hca", "mlx5_0", "--results-dir", str(tmp_path / "results"), *extra],
                         home=tmp_path / "home", timeout_s=180)
    return run.exit_code, json.loads(run.stdout) if run.stdout.strip() else {}, run.stderr


def test_slow_host_over_sshd(sshd_hosts: SSHDHosts, tmp_path: Path) -> None:
    inventory, known, _ = start_fleet(sshd_hosts, tmp_path, 4, slow_host=2)
    code, payload, err = bench(tmp_path, inventory, known)
    assert code == 1, err
    assert [(d["kind"], d["subject"]) for d in payload["diagnoses"]] == [("slow-host", "h2")]


def test_bad_link_over_sshd(sshd_hosts: SSHDHosts, tmp_path: Path) -> None:
    inventory, known, _ = start_fleet(sshd_hosts, tmp_path, 4, bad_link=(1, 3))
    code, payload, err = bench(tmp_path, inventory, known)
    assert code == 1, err
    assert [(d["kind"], d["subject"]) for d in payload["diagnoses"]] == [("bad-link", "h1/mlx5_0 <-> h3/mlx5_0")]


def _fake_tools_running(folders: list[Path]) -> list[str]:
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if "ib_write_bw" in cmdline and any(str(f) in cmdline for f in folders):
            found.append(f"{pid}: {cmdline}")
    return found


def test_no_server_left_after_a_client_timeout(sshd_hosts: SSHDHosts, tmp_path: Path) -> None:
    inventory, known, profiles = start_fleet(sshd_hosts, tmp_path, 2, hang=True)
    code, payload, err = bench(tmp_path, inventory, known, "--duration", "1", "--settle", "0.5",
                               "--client-timeout", "3")
    assert code == 1, err
    (link,) = payload["links"]
    assert link["error"] and "timed out" in link["error"]
    # The server was killed before clusterctl returned, and the hung client is stopped on its own host
    # too (coreutils timeout, its limit + kill grace). Polled with room for a loaded machine, and well
    # inside the fake tools' 60 s hang: a leaked process would still be there.
    server = profiles[:1] if link["server"] == "h1" else profiles[1:]
    for left, wait_s in ((server, 15), (profiles, 25)):
        deadline = time.monotonic() + wait_s
        while _fake_tools_running(left) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert _fake_tools_running(left) == []
