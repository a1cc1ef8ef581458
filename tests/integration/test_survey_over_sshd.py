"""``clusterctl survey`` over real sshd mock hosts replaying the demo cluster's profiles.

The demo inventory's six hosts, each a real ``sshd`` whose fake tools (nvidia-smi,
ibv_devinfo, ibdev2netdev...) replay its demo profile: four healthy DGX A100 hosts,
gpu-a3 with GPU3's NVLinks lost and gpu-b3 with mlx5_2 trained at 10 Gb/s. The survey
must name exactly those two hosts, the same as on the mock demo inventory
(tests/survey/test_report_and_cli.py), but through SSH, the shell and the wrappers.

The stack command starts with a shell builtin (``echo '### os-release'; ...``), which no
wrapper can intercept: the real shell runs it, so every host reports *this* machine's
stack (no NVIDIA driver, say). That is the same on all six hosts, so the inventory pins
no stack, and a difference the whole fleet shares must not be a warning on any host.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from clirun import CliRun, run_clusterctl
from sshd_hosts import SSHDHosts

pytestmark = pytest.mark.sshd

REPO = Path(__file__).resolve().parents[2]
DEMO_PROFILES = REPO / "inventories" / "demo" / "profiles"

#: Host name -> (demo profile, rack), as in inventories/demo.yaml.
DEMO_HOSTS: dict[str, tuple[str, str]] = {
    "gpu-a1": ("dgx-a100", "a"),
    "gpu-a2": ("dgx-a100", "a"),
    "gpu-a3": ("gpu-a3", "a"),
    "gpu-b1": ("dgx-a100", "b"),
    "gpu-b2": ("dgx-a100", "b"),
    "gpu-b3": ("gpu-b3", "b"),
}
BROKEN = {"gpu-a3", "gpu-b3"}
HEALTHY = sorted(set(DEMO_HOSTS) - BROKEN)
#: The demo's fabric (inventories/demo.yaml): HDR 200G InfiniBand on the 8 compute HCAs.
DEMO_FABRIC: dict[str, Any] = {
    "type": "ib",
    "rate_gbps": 200,
    "hcas": [f"mlx5_{i}" for i in range(8)],
}
ALL_GPUS = list(range(8))


@dataclass(frozen=True)
class DemoOverSSHD:
    inventory: Path
    known_hosts: Path
    home: Path

    def survey(self, *args: str) -> CliRun:
        return run_clusterctl(
            ["-i", str(self.inventory), "--known-hosts", str(self.known_hosts), "survey", *args],
            home=self.home,
            timeout_s=180,
        )


@pytest.fixture
def demo_over_sshd(sshd_hosts: SSHDHosts, tmp_path: Path) -> DemoOverSSHD:
    hosts = []
    for name, (profile, _rack) in DEMO_HOSTS.items():
        hosts.extend(sshd_hosts(1, profile=DEMO_PROFILES / profile, names=[name]))
    extra: dict[str, dict[str, Any]] = {
        name: {
            "rack": rack,
            # gpu-a1 is the demo's control plane; it is a worker too, so its GPUs count.
            "roles": ["control-plane", "worker"] if name == "gpu-a1" else ["worker"],
            "fabric": DEMO_FABRIC,
        }
        for name, (_profile, rack) in DEMO_HOSTS.items()
    }
    return DemoOverSSHD(
        inventory=sshd_hosts.write_inventory(tmp_path / "inv.yaml", hosts, extra),
        known_hosts=sshd_hosts.write_known_hosts(tmp_path / "known_hosts", hosts),
        home=tmp_path / "home",
    )


def _problems(data: dict[str, Any]) -> set[tuple[str, str, str]]:
    return {(f["host"], f["code"], f["severity"]) for f in data["findings"] if f["severity"] != "info"}


def test_survey_over_sshd_names_the_lost_nvlink_and_the_slow_nic_only(demo_over_sshd: DemoOverSSHD) -> None:
    run = demo_over_sshd.survey("-o", "json")

    assert run.exit_code == 1, run.stderr
    data = run.json()
    problems = _problems(data)
    assert ("gpu-a3", "NVLINK_MISSING", "error") in problems, problems
    assert ("gpu-b3", "NIC_SLOW", "error") in problems, problems
    # Nothing at warning or error level on the healthy hosts (the shared stack included).
    assert {host for host, _code, _severity in problems} == BROKEN, problems

    lost = next(f for f in data["findings"] if f["host"] == "gpu-a3" and f["code"] == "NVLINK_MISSING")
    assert all(3 in pair["gpus"] for pair in lost["evidence"]["pairs"]), lost
    slow = next(f for f in data["findings"] if f["host"] == "gpu-b3" and f["code"] == "NIC_SLOW")
    assert slow["evidence"]["hca"] == "mlx5_2" and slow["evidence"]["rate_gbps"] == 10, slow

    hosts = {h["host"]: h for h in data["hosts"]}
    assert sorted(hosts) == sorted(DEMO_HOSTS)
    for name, host in hosts.items():
        assert len(host["gpus"]) == 8, name
    # GPU3 lost every NVLink: it drops out of the NVSwitch domain (docs/survey.md: domains are
    # components of >= 2 GPUs, so a GPU without NVLink is in none); the others keep all 8.
    assert hosts["gpu-a3"]["nvlink_domains"] == [[0, 1, 2, 4, 5, 6, 7]]
    for name in sorted(set(DEMO_HOSTS) - {"gpu-a3"}):
        assert hosts[name]["nvlink_domains"] == [ALL_GPUS], name
    # The premise of the inventory without a stack pin: the real shell read one stack for all.
    assert len({json.dumps(h["stack"], sort_keys=True) for h in hosts.values()}) == 1


def test_survey_table_over_sshd_prints_the_two_hosts_findings(demo_over_sshd: DemoOverSSHD) -> None:
    run = demo_over_sshd.survey()

    assert run.exit_code == 1, run.stderr
    assert "gpu-a3 NVLINK_MISSING" in run.stdout, run.stdout
    assert "gpu-b3 NIC_SLOW" in run.stdout, run.stdout
    assert "mlx5_2" in run.stdout
    for name in HEALTHY:
        assert f"{name} NVLINK" not in run.stdout and f"{name} NIC_" not in run.stdout, run.stdout
        row = next(line for line in run.stdout.splitlines() if re.match(rf"\W*{name}\b", line))
        assert re.search(r"\bok\W*$", row), row
