"""Tell a slow host (or HCA) from a bad link and from a slow rack uplink.

The evidence is a graph: nodes are hosts (or ``host/hca`` endpoints), edges are tested
pairs marked slow or fine.

- slow host / HCA: every one of its (at least two) tested links is slow: the host with a
  10G NIC in a 200G fabric drags down everything it touches;
- slow rack uplink: all cross-rack links of one rack are slow while its hosts are fine with
  each other (and other racks are fine with each other);
- bad link / cable: one pair slow while both ends are fine with someone else.

``find_straggler`` gets there with few rounds on big fleets: a ring first (2 or 3 rounds
for any N), then targeted re-tests of the ends of each slow ring edge against hosts that
were fine (one in the same rack, one in another), instead of the N-1 rounds of all pairs.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from clusterctl.bench.schedule import Pair, Round, all_pairs_round_count, pack_rounds, ring

Edge = tuple[str, str, bool]


@dataclass(frozen=True)
class Diagnosis:
    #: ``slow-host``, ``slow-hca``, ``bad-link``, ``slow-rack-uplink`` or ``inconclusive``.
    kind: str
    subject: str
    explanation: str


def _host_of(node: str) -> str:
    return node.split("/", 1)[0]


def localise(edges: Iterable[Edge], rack_of: Mapping[str, str | None], *, by_hca: bool = False) -> list[Diagnosis]:
    """Name the cause of every slow edge. ``rack_of`` maps hosts (not endpoints) to racks."""
    edge_list = [(a, b, slow) for a, b, slow in edges if a != b]

    def rack(node: str) -> str | None:
        return rack_of.get(_host_of(node))

    diagnoses: list[Diagnosis] = []
    uplink_racks = _slow_uplinks(edge_list, rack)
    explained_by_uplink: set[tuple[str, str]] = set()
    for racks_text, members in uplink_racks:
        diagnoses.append(Diagnosis(
            "slow-rack-uplink", racks_text,
            f"every cross-rack link of {racks_text} is slow while its hosts reach each other at full speed",
        ))
        for a, b, _ in edge_list:
            if (rack(a) in members) != (rack(b) in members):
                explained_by_uplink.add((a, b))

    remaining = [(a, b, s) for a, b, s in edge_list if (a, b) not in explained_by_uplink]
    links: dict[str, list[tuple[str, bool]]] = {}
    for a, b, slow in remaining:
        links.setdefault(a, []).append((b, slow))
        links.setdefault(b, []).append((a, slow))
    slow_nodes = {n for n, ls in links.items() if len(ls) >= 2 and all(s for _, s in ls)}
    diagnoses.extend(_name_slow_nodes(slow_nodes, set(links), by_hca=by_hca))

    for a, b, slow in remaining:
        if not slow or a in slow_nodes or b in slow_nodes:
            continue
        if all(any(not s for _, s in links[end]) for end in (a, b)):  # both ends fine with someone else
            kind, why = "bad-link", (f"only this pair is slow; {a} and {b} are fine with other peers: check the "
                                     "cable or switch port")
        else:
            kind, why = "inconclusive", "slow, but too few other tests of its ends to tell a slow host from a bad link"
        diagnoses.append(Diagnosis(kind, f"{a} <-> {b}", why))
    return diagnoses


def _name_slow_nodes(slow_nodes: set[str], all_nodes: set[str], *, by_hca: bool) -> list[Diagnosis]:
    if not by_hca:
        return [Diagnosis("slow-host", n, f"every tested link of {n} is slow: check its NIC, PCIe link and firmware")
                for n in sorted(slow_nodes)]
    out: list[Diagnosis] = []
    hosts: dict[str, list[str]] = {}
    for node in all_nodes:
        hosts.setdefault(_host_of(node), []).append(node)
    for host in sorted(hosts):
        endpoints = hosts[host]
        slow = sorted(e for e in endpoints if e in slow_nodes)
        if slow and len(slow) == len(endpoints):
            out.append(Diagnosis("slow-host", host, f"every tested link of every HCA of {host} is slow"))
        else:
            out.extend(Diagnosis("slow-hca", e, f"every tested link of {e} is slow; the other HCAs of {host} are fine")
                       for e in slow)
    return out


def _slow_uplinks(edges: list[Edge], rack: Callable[[str], str | None]) -> list[tuple[str, set[str | None]]]:
    racks = sorted({r for a, b, _ in edges for r in (rack(a), rack(b)) if r is not None})
    if len(racks) < 2:
        return []
    found: list[tuple[str, set[str | None]]] = []
    for candidate in racks:
        cross = [(a, b, s) for a, b, s in edges if (rack(a) == candidate) != (rack(b) == candidate)]
        inside = [(a, b, s) for a, b, s in edges if rack(a) == candidate and rack(b) == candidate]
        others = [(a, b, s) for a, b, s in edges
                  if rack(a) != candidate and rack(b) != candidate and rack(a) != rack(b)]
        own_hosts = {n for a, b, _ in cross for n in (a, b) if rack(n) == candidate}
        if len(cross) < 2 or not all(s for _, _, s in cross) or any(s for _, _, s in (*inside, *others)):
            continue
        # One host alone cannot tell a rack uplink from that host's own NIC: need either two of the
        # rack's hosts slow across racks, or the rack (tested) fine inside.
        if not inside and len(own_hosts) < 2:
            continue
        found.append((candidate, {candidate}))
    if len(racks) == 2 and len(found) == 2:
        # With two racks both look the same: it is the link between them.
        return [(f"{racks[0]} <-> {racks[1]}", {racks[0]})]
    return [(f"rack {name}", members) for name, members in found]


def plan_retests(
    edges: Sequence[Edge], nodes: Sequence[str], rack_of: Mapping[str, str | None], tested: set[frozenset[str]]
) -> list[Pair]:
    """Pairs that decide which end of each slow edge is at fault: each suspect against up to
    two nodes that showed no slow link, one in its own rack and one in another."""
    suspects = sorted({n for a, b, s in edges if s for n in (a, b)}, key=list(nodes).index)
    involved_slow = set(suspects)
    good = [n for n in nodes if n not in involved_slow and any(n in (a, b) for a, b, _ in edges)]
    if not good:
        good = [n for n in nodes if n not in involved_slow]
    use: dict[str, int] = dict.fromkeys(good, 0)
    pairs: list[Pair] = []
    for s in suspects:
        rack = rack_of.get(_host_of(s))
        same = [g for g in good if rack_of.get(_host_of(g)) == rack]
        other = [g for g in good if rack_of.get(_host_of(g)) != rack]
        for pool in (same, other):
            choices = [g for g in pool if frozenset((s, g)) not in tested]
            if not choices:
                continue
            ref = min(choices, key=lambda g: use[g])
            use[ref] += 1
            pairs.append((ref, s))
            tested.add(frozenset((s, ref)))
    return pairs


@dataclass(frozen=True)
class StragglerSearch:
    rounds_used: int
    all_pairs_rounds: int
    diagnoses: tuple[Diagnosis, ...]


def find_straggler(
    nodes: Sequence[str],
    rack_of: Mapping[str, str | None],
    run_rounds: Callable[[list[Round]], list[Edge]],
    *,
    max_retest_passes: int = 2,
) -> StragglerSearch:
    """Ring, then targeted re-tests until every slow edge is explained (or passes run out).

    ``run_rounds`` runs the given rounds and returns (a, b, slow) per tested pair.
    """
    rounds = ring(list(nodes))
    edges: list[Edge] = list(run_rounds(rounds)) if rounds else []
    used = len(rounds)
    tested = {frozenset((a, b)) for a, b, _ in edges}
    for attempt in range(max_retest_passes):
        if not any(s for _, _, s in edges):
            break
        diagnoses = localise(edges, rack_of)
        # Always confirm a ring's verdict once (two slow ring edges next to each other could be two
        # bad cables); after that, re-test only while something is still unexplained.
        settled = not any(d.kind == "inconclusive" for d in diagnoses) and not _ambiguous_uplink(
            edges, rack_of, diagnoses)
        if attempt > 0 and settled:
            break
        pairs = plan_retests(edges, nodes, rack_of, tested)
        if not pairs:
            break
        extra = pack_rounds(pairs)
        edges.extend(run_rounds(extra))
        used += len(extra)
    return StragglerSearch(used, all_pairs_round_count(len(nodes)), tuple(localise(edges, rack_of)))


def _ambiguous_uplink(edges: Sequence[Edge], rack_of: Mapping[str, str | None], diagnoses: list[Diagnosis]) -> bool:
    """Slow cross-rack edges seen on a ring say little until their ends are re-tested."""
    if any(d.kind == "slow-rack-uplink" for d in diagnoses):
        return False
    return any(s and rack_of.get(_host_of(a)) != rack_of.get(_host_of(b)) for a, b, s in edges)
