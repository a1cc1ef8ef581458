"""Pair scheduling: rounds are disjoint and, for all-pairs, complete."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from clusterctl.bench.schedule import pack_rounds, plan_rounds, ring, round_robin
from clusterctl.errors import UsageError
from clusterctl.inventory.model import Host

from .conftest import check_rounds


@pytest.mark.parametrize("n", [2, 3, 4, 5, 8, 9, 64])
def test_round_robin_rounds(n: int) -> None:
    names = [f"h{i}" for i in range(n)]
    rounds = round_robin(names)
    assert len(rounds) == (n - 1 if n % 2 == 0 else n)
    check_rounds(rounds)
    covered = {frozenset(p) for r in rounds for p in r}
    assert covered == {frozenset(p) for p in itertools.combinations(names, 2)}


@given(st.integers(min_value=0, max_value=41))
def test_round_robin_is_disjoint_and_complete_for_any_size(n: int) -> None:
    names = [f"h{i}" for i in range(n)]
    rounds = round_robin(names)
    check_rounds(rounds)
    assert sum(len(r) for r in rounds) == n * (n - 1) // 2
    # Every host serves in about half of its tests.
    for name in names:
        served = sum(1 for r in rounds for a, _ in r if a == name)
        assert abs(served - (n - 1) / 2) <= 1


def test_check_rounds_catches_a_host_used_twice() -> None:
    with pytest.raises(ValueError, match="round 1 uses a host twice"):
        check_rounds([(("a", "b"), ("b", "c"))])


@given(st.integers(min_value=2, max_value=40))
def test_ring_needs_two_or_three_rounds(n: int) -> None:
    names = [f"h{i}" for i in range(n)]
    rounds = ring(names)
    check_rounds(rounds)
    assert len(rounds) <= 3
    assert sum(len(r) for r in rounds) == (1 if n == 2 else n)


def _hosts(racks: dict[str, int]) -> list[Host]:
    return [Host(name=f"{rack}{i}", rack=rack) for rack, count in racks.items() for i in range(count)]


def test_within_rack_never_crosses_racks_and_runs_racks_in_parallel() -> None:
    rounds = plan_rounds(_hosts({"a": 4, "b": 3}), "within-rack")
    check_rounds(rounds)
    pairs = [p for r in rounds for p in r]
    assert all(a[0] == b[0] for a, b in pairs)
    assert len(pairs) == 6 + 3 and len(rounds) == 3


def test_across_racks_covers_every_cross_pair_once() -> None:
    hosts = _hosts({"a": 3, "b": 3})
    rounds = plan_rounds(hosts, "across-racks")
    check_rounds(rounds)
    pairs = {frozenset(p) for r in rounds for p in r}
    assert pairs == {frozenset((f"a{i}", f"b{j}")) for i in range(3) for j in range(3)}


def test_across_racks_needs_two_racks() -> None:
    with pytest.raises(UsageError):
        plan_rounds(_hosts({"a": 3}), "across-racks")


def test_pack_rounds_is_disjoint() -> None:
    rounds = pack_rounds([("a", "b"), ("a", "c"), ("b", "c"), ("d", "e")])
    check_rounds(rounds)
    assert len(rounds) == 3
