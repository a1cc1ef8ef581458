"""The demo (six mock DGX A100 hosts) after bootstrap, with a BMC for each in sushy-tools' Redfish emulator.

``DemoHeal(folder)`` writes a copy of ``inventories/demo.yaml`` whose hosts keep their state in
``folder/state``, with a ``bmc:`` section pointing every host at its system of the emulator
(password in a 0600 file) and ``quarantine.heal`` settings, bootstraps it, then starts the
emulator (``with DemoHeal(...) as demo:``). Shared by tests/heal and benchmarks/mttr.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from demo_cluster import KUBECTL, SURVEY, TRAINER, kubectl_apply, node
from redfish_emulator import PASSWORD, USERNAME, RedfishEmulator

REPO = Path(__file__).resolve().parents[2]
HOSTS = ("gpu-a1", "gpu-a2", "gpu-a3", "gpu-b1", "gpu-b2", "gpu-b3")


def payload(alert: str, host: str) -> bytes:
    """An Alertmanager webhook body (version 4) with one firing alert, as bootstrap's DCGM rules label it."""
    return json.dumps({"version": "4", "status": "firing", "receiver": "clusterctl-remediate", "alerts": [
        {"status": "firing", "labels": {"alertname": alert, "Hostname": host, "gpu": "3", "severity": "critical"},
         "annotations": {}, "startsAt": "2026-12-06T00:00:00Z"}]}).encode()


#: The demo's quarantine.heal settings (flow mapping text).
HEAL_SETTINGS = "passes: 2, pass_interval_s: 0.5, flapping: {count: 4, window_h: 24}"


class DemoHeal:
    def __init__(self, folder: Path, *, heal: str = HEAL_SETTINGS) -> None:
        self.folder = folder
        self.state = folder / "state"
        self.inventory = folder / "demo.yaml"
        self.password_file = folder / "bmc-password"
        self.heal = heal
        self.emulator: RedfishEmulator | None = None

    def cli(self, *args: str | Path) -> tuple[int, str]:
        from clirun import clusterctl

        done = clusterctl("-i", self.inventory, *args)
        return done.exit_code, done.stdout + done.stderr

    def node(self, name: str) -> dict[str, Any]:
        return node(self.inventory, name)

    def pods_on(self, name: str) -> list[str]:
        code, out = self.cli("-l", "gpu-a1", "-o", "json", "exec", "--",
                             f"{KUBECTL} get pods -A --field-selector spec.nodeName={name} -o json")
        assert code == 0, out
        items = json.loads(json.loads(out)["hosts"][0]["stdout"])["items"]
        return [f"{p['metadata']['namespace']}/{p['metadata']['name']}" for p in items]

    def host_state(self, name: str) -> Any:
        from clusterctl.mock.state import MockCluster

        return MockCluster(self.state).host(name)

    def write_inventory(self, url: str, ca_file: Path) -> None:
        text = (REPO / "inventories" / "demo.yaml").read_text()
        text = text.replace("profile: demo/", f"profile: {REPO / 'inventories' / 'demo'}/")
        text = text.replace("defaults:\n", f"defaults:\n  mock_state: {self.state}\n", 1)
        bmc = {"address": url, "username": USERNAME, "password_file": str(self.password_file), "system": "{host}",
               "ca_file": str(ca_file), "timeout_s": 5, "power_timeout_s": 60}
        text += ("\nbmc:\n  gpu-*: {" + ", ".join(f"{k}: {json.dumps(v)}" for k, v in bmc.items()) + "}\n"
                 f"quarantine:\n  heal: {{{self.heal}}}\n")
        self.inventory.write_text(text)

    def __enter__(self) -> DemoHeal:
        self.folder.mkdir(parents=True, exist_ok=True)
        self.password_file.write_text(PASSWORD + "\n")
        self.password_file.chmod(0o600)
        self.emulator = RedfishEmulator(self.folder / "bmc", HOSTS, mock_state=self.state)
        self.emulator.__enter__()
        try:
            self.write_inventory(self.emulator.url, self.emulator.ca_file)
            code, out = self.cli("bootstrap", "--survey", SURVEY, "--state-dir", self.folder / "progress")
            assert code == 0, out
            kubectl_apply(self.inventory, self.folder, TRAINER)
        except BaseException:
            self.emulator.__exit__()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        if self.emulator is not None:
            self.emulator.__exit__()

    def receiver(self, log: Any) -> Any:
        """``remediate serve --heal`` as the CLI builds it, in this process (no HTTP: ``handle(body)``)."""
        from clusterctl.fanout import Runner
        from clusterctl.heal.run import heal_after_drain
        from clusterctl.inventory.loader import load_inventory
        from clusterctl.quarantine.receiver import Remediator
        from clusterctl.transport.factory import ConnectOptions, make_connector

        inventory = load_inventory(str(self.inventory))
        connect = make_connector(ConnectOptions())
        return Remediator(inventory, lambda: Runner(connect, parallel=16, timeout_s=120), log,
                          state_dir=str(self.folder),
                          after_drain=heal_after_drain(inventory, state_dir=str(self.folder)))
