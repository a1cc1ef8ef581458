"""tune-nccl surveyed live reads each fact once per host."""

from __future__ import annotations

from pathlib import Path

from clusterctl.fanout import Runner
from clusterctl.inventory.loader import load_inventory
from clusterctl.inventory.model import Host
from clusterctl.mock.transport import MockTransport
from clusterctl.nccl.tune.run import tune_inputs

DEMO = Path(__file__).resolve().parents[2] / "inventories" / "demo.yaml"


def test_a_live_survey_for_tuning_runs_each_command_once_per_host() -> None:
    hosts = load_inventory(str(DEMO)).hosts[:2]
    made: list[MockTransport] = []

    def connect(host: Host, _timeout: float) -> MockTransport:
        made.append(MockTransport(host))
        return made[-1]

    with Runner(connect, parallel=2, timeout_s=60) as runner:
        tuned, skipped = tune_inputs(runner, hosts, None)
    assert [t.name for t in tuned] == [h.name for h in hosts] and skipped == []
    for transport in made:
        ran = [c for c in transport.history if not c.startswith("#")]
        assert "ip -o -4 addr show" in ran
        assert sorted(ran) == sorted(set(ran)), ran
