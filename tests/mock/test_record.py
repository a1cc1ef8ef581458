"""`clusterctl record` runs only read-only commands and redacts consistently."""

from __future__ import annotations

from pathlib import Path

from clusterctl.fanout import Runner
from clusterctl.inventory.loader import load_inventory
from clusterctl.mock.transport import MockTransport
from clusterctl.record.redact import Redactor
from clusterctl.record.run import record, record_commands
from clusterctl.transport.base import Transport

DEMO = Path(__file__).resolve().parents[2] / "inventories" / "demo.yaml"


def test_record_runs_only_the_read_only_fact_commands_and_writes_nothing(tmp_path: Path) -> None:
    inventory = load_inventory(DEMO)
    hosts = [inventory.host("gpu-a1")]
    transports: list[MockTransport] = []

    def connect(host: object, _timeout: float) -> Transport:
        transports.append(MockTransport(host))  # type: ignore[arg-type]
        return transports[-1]

    with Runner(connect, parallel=1) as runner:
        report = record(runner, inventory, hosts, tmp_path / "out", redact=False)
    assert report.hosts == ["gpu-a1"] and not report.failed
    allowed = {command for command, _sudo in record_commands()}
    history = [line for t in transports for line in t.history]
    assert history and all(line in allowed for line in history), history
    assert not any(line.startswith("# put") for line in history)
    profile = (tmp_path / "out" / "profiles" / "gpu-a1" / "profile.yaml").read_text()
    assert "match: nvidia-smi topo -m" in profile and "hostname: gpu-a1" in profile


def test_redaction_is_consistent_across_texts() -> None:
    r = Redactor()
    first = r.text("inet 10.0.0.11/24 link/infiniband 00:00:10:29:fe:80 GPU-5269b708-678a-b1a8-60f0-c90406537486\n"
                   "Serial Number : 1320221015603\nnode_guid: 0c42:a103:00c4:1fea\n")
    again = r.text("peer 10.0.0.11 and GPU-5269b708-678a-b1a8-60f0-c90406537486, loopback 127.0.0.1\n")
    for original in ("10.0.0.11", "5269b708", "1320221015603", "0c42:a103", "00:00:10:29:fe:80"):
        assert original not in first + again
    assert first.split()[1].split("/")[0] == again.split()[1]  # the same address, the same stand-in
    assert "127.0.0.1" in again
