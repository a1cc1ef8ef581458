"""A fleet of mock hosts with two card models on one fabric, for the rules that judge a port's rate.

Every host is the demo's DGX A100 (``inventories/demo/profiles/dgx-a100``: real recordings, 8
ConnectX-6 HDR compute HCAs mlx5_0..7 at 4X 50 Gbps = 200 Gb/s, board id MT_0000000594, and the
storage card's mlx5_8 at 200 Gb/s). A host profile made here answers ``ibv_devinfo -v`` with that
recording DERIVED per HCA: another board id (MT_0000000838, the ConnectX-7 of the survey tests),
and another ``active_speed`` as ``ibv_devinfo`` prints it for that speed (rdma-core's
``speed_str``: NDR ``100.0 Gbps (128)``, 4X = 400 Gb/s; SDR ``2.5 Gbps (1)``), or ``link_layer:
Ethernet`` for a port on another network.
"""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DGX_A100 = REPO / "inventories" / "demo" / "profiles" / "dgx-a100"

CX6 = "MT_0000000594"
CX7 = "MT_0000000838"
HDR = "50.0 Gbps (64)"
NDR = "100.0 Gbps (128)"
SDR = "2.5 Gbps (1)"


def ibv_devinfo(changes: dict[str, dict[str, str]]) -> str:
    """The DGX A100's ``ibv_devinfo -v`` with, per HCA, ``board_id``, ``active_speed`` or ``link_layer``
    replaced (``{"mlx5_0": {"board_id": CX7, "active_speed": NDR}}``)."""
    text = (DGX_A100 / "ibv_devinfo-v.txt").read_text()
    blocks = re.split(r"(?m)^(?=hca_id:)", text)
    out = []
    for block in blocks:
        name = re.match(r"hca_id:\s*(\S+)", block)
        for key, value in (changes.get(name.group(1), {}) if name else {}).items():
            block, count = re.subn(rf"(?m)^(\s*{key}:\s*).*$", lambda m, v=value: m.group(1) + v, block)
            assert count == 1, (name, key)
        out.append(block)
    return "".join(out)


def host_profile(folder: Path, name: str, changes: dict[str, dict[str, str]]) -> Path:
    """A profile: the DGX A100 answering ``ibv_devinfo -v`` as ``ibv_devinfo(changes)`` says."""
    path = folder / name
    path.mkdir(parents=True, exist_ok=True)
    (path / "ibv_devinfo-v.txt").write_text(ibv_devinfo(changes))
    (path / "profile.yaml").write_text(f"extends: {DGX_A100}\ncommands:\n"
                                       "  - match: \"ibv_devinfo -v\"\n    stdout: ibv_devinfo-v.txt\n")
    return path


def compute_cards(board: str, speed: str, **ports: str) -> dict[str, dict[str, str]]:
    """mlx5_0..7 as ``board`` cards at ``speed``, each ``mlx5_N=SPEED`` given at that speed instead."""
    return {f"mlx5_{i}": {"board_id": board, "active_speed": ports.get(f"mlx5_{i}", speed)} for i in range(8)}


def inventory(folder: Path, hosts: dict[str, Path], fabric: str = "{type: ib}") -> Path:
    """An inventory of mock workers, each host on its profile, all with ``fabric``."""
    path = folder / "inventory.yaml"
    lines = [f"  {name}: {{profile: {profile}}}" for name, profile in hosts.items()]
    path.write_text("cluster: mixed\ndefaults: {transport: mock, roles: [worker], fabric: " + fabric + "}\n"
                    "hosts:\n" + "\n".join(lines) + "\n")
    return path
