"""Telling a slow host from a bad link and from a slow rack uplink."""

from __future__ import annotations

import itertools
from collections.abc import Callable

from clusterctl.bench.schedule import Round
from clusterctl.bench.straggler import Edge, find_straggler, localise

from .conftest import check_rounds

RACKS = {f"{r}{i}": r for r in "abc" for i in range(1, 5)}
NODES = sorted(RACKS)


def all_pairs(slow: Callable[[str, str], bool]) -> list[Edge]:
    return [(a, b, slow(a, b)) for a, b in itertools.combinations(NODES, 2)]


def kinds(diagnoses: list) -> list[tuple[str, str]]:  # type: ignore[type-arg]
    return sorted((d.kind, d.subject) for d in diagnoses)


def test_slow_host() -> None:
    edges = all_pairs(lambda a, b: "b3" in (a, b))
    assert kinds(localise(edges, RACKS)) == [("slow-host", "b3")]


def test_bad_link() -> None:
    edges = all_pairs(lambda a, b: {a, b} == {"a2", "c1"})
    assert kinds(localise(edges, RACKS)) == [("bad-link", "a2 <-> c1")]


def test_slow_rack_uplink() -> None:
    edges = all_pairs(lambda a, b: (RACKS[a] == "c") != (RACKS[b] == "c"))
    assert kinds(localise(edges, RACKS)) == [("slow-rack-uplink", "rack c")]


def test_slow_hca_versus_slow_host_by_endpoint() -> None:
    hosts = ["h1", "h2", "h3", "h4"]
    edges: list[Edge] = []
    for a, b in itertools.combinations(hosts, 2):
        for hca in ("mlx5_0", "mlx5_1"):
            edges.append((f"{a}/{hca}", f"{b}/{hca}", (hca == "mlx5_1" and "h2" in (a, b))))
    assert kinds(localise(edges, {h: "r" for h in hosts}, by_hca=True)) == [("slow-hca", "h2/mlx5_1")]


def _runner(slow: Callable[[str, str], bool], log: list[Round]) -> Callable[[list[Round]], list[Edge]]:
    def run(rounds: list[Round]) -> list[Edge]:
        check_rounds(rounds)
        log.extend(rounds)
        return [(a, b, slow(a, b)) for r in rounds for a, b in r]

    return run


def test_find_straggler_names_a_slow_host_in_far_fewer_rounds() -> None:
    nodes = [f"h{i:02d}" for i in range(64)]
    racks = {n: f"r{i // 8}" for i, n in enumerate(nodes)}
    log: list[Round] = []
    found = find_straggler(nodes, racks, _runner(lambda a, b: "h37" in (a, b), log))
    assert kinds(list(found.diagnoses)) == [("slow-host", "h37")]
    assert found.rounds_used == len(log) and found.rounds_used <= 8 < found.all_pairs_rounds == 63


def test_find_straggler_names_a_bad_link() -> None:
    nodes = [f"h{i:02d}" for i in range(64)]
    racks = {n: f"r{i // 8}" for i, n in enumerate(nodes)}
    log: list[Round] = []
    found = find_straggler(nodes, racks, _runner(lambda a, b: {a, b} == {"h10", "h11"}, log))
    assert kinds(list(found.diagnoses)) == [("bad-link", "h10 <-> h11")]
    assert found.rounds_used <= 8


def test_find_straggler_on_a_healthy_fleet_uses_the_ring_only() -> None:
    nodes = [f"h{i}" for i in range(9)]
    found = find_straggler(nodes, dict.fromkeys(nodes, "r"), _runner(lambda a, b: False, []))
    assert found.diagnoses == () and found.rounds_used == 3
