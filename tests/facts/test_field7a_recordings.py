"""Field7a round of real outputs: an old perfquery with its short counter names, a RoCE host's bonded
ports in ibdev2netdev, MIG-mode queries of Blackwell and laptop GPUs, an 8x H200 host's memory query."""

from __future__ import annotations

from fixture_files import read_fixture

from clusterctl.facts.ib_counters import parse_ib_counters
from clusterctl.health.probe import IB_COUNTERS


def test_old_perfquery_short_names_are_read_as_the_counters_health_judges() -> None:
    """An older perfquery says ``LinkDowned`` and ``SymbolErrors``: kept under those names, health found no
    ``link_downed`` to judge the port by."""
    counters = parse_ib_counters(read_fixture("ib-counters", "perfquery-ofed1-short-names-lid936.txt"))
    (port,) = counters.ports
    assert (port.hca, port.port, counters.warnings) == ("lid-936", 1, ())
    assert {name: port.counters.get(name) for name in IB_COUNTERS} == dict.fromkeys(IB_COUNTERS, 0)
