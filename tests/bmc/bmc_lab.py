"""A small lab of mock hosts whose BMCs are systems of sushy-tools' Redfish emulator (tests/bmc, tests of the
escalation chain)."""

from __future__ import annotations

import json
from pathlib import Path

from redfish_emulator import USERNAME, RedfishEmulator

REPO = Path(__file__).resolve().parents[2]
HOSTS = ("gpu-a1", "gpu-a2")


class Lab:
    """Two mock hosts (the demo's DGX A100 recordings) whose BMCs are systems of one Redfish emulator."""

    def __init__(self, root: Path, emulator: RedfishEmulator) -> None:
        self.root = root
        self.emulator = emulator
        self.state = root / "state"
        self.password_file = root / "bmc-password"
        from redfish_emulator import PASSWORD

        self.password_file.write_text(PASSWORD + "\n")
        self.password_file.chmod(0o600)
        self.inventory = root / "inventory.yaml"
        self.write_inventory()
        # First use seeds each mock host from its profile (a seeding would forget a power state set before).
        from clusterctl.inventory.loader import load_inventory
        from clusterctl.mock.transport import MockTransport

        for host in load_inventory(str(self.inventory)).hosts:
            assert MockTransport(host).run("true").ok

    def write_inventory(self, **bmc: object) -> Path:
        settings = {"address": self.emulator.url, "username": USERNAME, "password_file": str(self.password_file),
                    "system": "{host}", "ca_file": str(self.emulator.ca_file), "timeout_s": 5,
                    "power_timeout_s": 60, **bmc}
        fields = ", ".join(f"{k}: {json.dumps(v)}" for k, v in settings.items() if v is not None)
        lines = ["cluster: bmclab", "defaults:", "  transport: mock", "  mock_state: state",
                 f"  profile: {REPO / 'inventories' / 'demo' / 'profiles' / 'dgx-a100'}", "hosts:"]
        lines += [f"  {h}: {{address: 10.0.0.{i + 1}}}" for i, h in enumerate(HOSTS)]
        lines += ["bmc:", f"  gpu-a*: {{{fields}}}"]
        self.inventory.write_text("\n".join(lines) + "\n")
        return self.inventory

    def host_state(self, name: str) -> object:
        from clusterctl.mock.state import MockCluster

        return MockCluster(self.state).host(name)


