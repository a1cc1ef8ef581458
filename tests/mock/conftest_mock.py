"""A small mock cluster written to tmp_path: two hosts on one profile with a package repository."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]

PROFILE = """\
hostname: node
files:
  /etc/os-release: os-release.txt
commands:
  - match: "nvidia-smi -L"
    stdout_text: "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-1)\\nGPU 1: NVIDIA H100 80GB HBM3 (UUID: GPU-2)\\n"
simulate: true
machine:
  kernel: 6.8.0-45-generic
  packages:
    installed: {containerd: "1.7.24-0ubuntu1~24.04.2"}
    repository:
      containerd: ["1.7.24-0ubuntu1~24.04.2"]
      kubeadm: {versions: ["1.30.1-1.1", "1.30.2-1.1"], source: pkgs.k8s.io/core:/stable:/v1.30/deb}
      kubelet: {versions: ["1.30.1-1.1", "1.30.2-1.1"], source: pkgs.k8s.io/core:/stable:/v1.30/deb}
      nvidia-container-toolkit: ["1.18.1-1"]
      cri-tools: ["1.30.0-1.1"]
  services:
    containerd: {active: true, enabled: true}
  swap:
    - {name: /swap.img, type: file, size: 8G, used: 0B, prio: -2}
"""


def write_cluster(root: Path, profile_extra: str = "", mock_state: str | None = None) -> Path:
    """An inventory with hosts n1, n2 on one profile; returns the inventory path."""
    profile = root / "profile"
    profile.mkdir(parents=True, exist_ok=True)
    (profile / "profile.yaml").write_text(PROFILE + profile_extra)
    (profile / "os-release.txt").write_text('PRETTY_NAME="Ubuntu 24.04.1 LTS"\n')
    state = f"  mock_state: {mock_state}\n" if mock_state else ""
    inventory = root / "inventory.yaml"
    inventory.write_text(
        "cluster: lab\ndefaults:\n  transport: mock\n  profile: profile\n" + state
        + "hosts:\n  n1: {roles: [control-plane, worker]}\n  n2: {}\n"
    )
    return inventory


def clusterctl(inventory: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``clusterctl -i INVENTORY ARGS`` in a new process, as a user runs it twice in a row."""
    return subprocess.run(
        [sys.executable, "-m", "clusterctl", "-i", str(inventory), *args],
        capture_output=True, text=True, timeout=120, cwd=REPO_ROOT,
        env={**__import__("os").environ, "NO_COLOR": "1", "PYTHONPATH": str(REPO_ROOT)},
    )


