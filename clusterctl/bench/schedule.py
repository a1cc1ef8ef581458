"""Which host pairs to test, and in which rounds.

A round is a set of pairs in which no host appears twice, so every test of a round can run
at the same time without two tests sharing a NIC. All pairs of N hosts use the circle method
of a round-robin tournament: N-1 rounds for even N, N for odd N (one host sits out each
round), instead of N(N-1)/2 one-at-a-time tests.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from clusterctl.errors import UsageError
from clusterctl.inventory.model import Host

Pair = tuple[str, str]
Round = tuple[Pair, ...]

PATTERNS: tuple[str, ...] = ("all-pairs", "ring", "within-rack", "across-racks")


def all_pairs_round_count(hosts: int) -> int:
    """Rounds ``round_robin`` takes over this many hosts: N-1 for even N, N for odd N."""
    return hosts - 1 if hosts % 2 == 0 else hosts


def round_robin(names: Sequence[str]) -> list[Round]:
    """Circle method: fix the first name, rotate the others; every pair exactly once."""
    players: list[str | None] = list(names)
    if len(players) < 2:
        return []
    if len(players) % 2:
        players.append(None)  # the bye
    n = len(players)
    rounds: list[Round] = []
    for r in range(n - 1):
        pairs: list[Pair] = []
        for i in range(n // 2):
            a, b = players[i], players[n - 1 - i]
            if a is not None and b is not None:
                # Alternate who serves so each host is server in about half its tests.
                serve_first = r % 2 == 0 if i == 0 else i % 2 == 1
                pairs.append((a, b) if serve_first else (b, a))
        rounds.append(tuple(pairs))
        players = [players[0], players[-1], *players[1:-1]]
    return rounds


def ring(names: Sequence[str]) -> list[Round]:
    """Each host with the next one (and the last with the first): 2 rounds, 3 when N is odd."""
    n = len(names)
    if n < 2:
        return []
    if n == 2:
        return [((names[0], names[1]),)]
    return pack_rounds([(names[i], names[(i + 1) % n]) for i in range(n)])


def pack_rounds(pairs: Iterable[Pair]) -> list[Round]:
    """Greedy edge colouring: put each pair in the first round where both hosts are free."""
    rounds: list[list[Pair]] = []
    busy: list[set[str]] = []
    for a, b in pairs:
        if a == b:
            raise ValueError(f"a host cannot be paired with itself: {a}")
        for members, used in zip(rounds, busy, strict=True):
            if a not in used and b not in used:
                members.append((a, b))
                used.update((a, b))
                break
        else:
            rounds.append([(a, b)])
            busy.append({a, b})
    return [tuple(r) for r in rounds]


def _merge_parallel(schedules: list[list[Round]]) -> list[Round]:
    """Run independent schedules (disjoint host sets) side by side: round i of each together."""
    depth = max((len(s) for s in schedules), default=0)
    return [tuple(p for s in schedules if i < len(s) for p in s[i]) for i in range(depth)]


def plan_rounds(hosts: Sequence[Host], pattern: str) -> list[Round]:
    """The rounds of pairs ``pattern`` asks for over ``hosts`` (inventory order kept)."""
    names = [h.name for h in hosts]
    if len(set(names)) != len(names):
        raise UsageError("the same host is selected twice")
    if pattern == "all-pairs":
        return round_robin(names)
    if pattern == "ring":
        return ring(names)
    racks: dict[str, list[str]] = {}
    for h in hosts:
        racks.setdefault(h.rack or "", []).append(h.name)
    if pattern == "within-rack":
        return [r for r in _merge_parallel([round_robin(members) for members in racks.values()]) if r]
    if pattern == "across-racks":
        if len(racks) < 2:
            raise UsageError("--pattern across-racks needs hosts in at least two racks (set 'rack' in the inventory)")
        rack_of = {h.name: h.rack or "" for h in hosts}
        filtered = [tuple(p for p in r if rack_of[p[0]] != rack_of[p[1]]) for r in round_robin(names)]
        return [r for r in filtered if r]
    raise UsageError(f"unknown pattern {pattern!r}; choose one of {', '.join(PATTERNS)}")
