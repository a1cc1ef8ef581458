"""Parallel-layout advice: tensor-parallel groups inside NVLink domains, a NIC per local rank,
pipeline stages across hosts of one rack, data parallelism across the rest.

Tensor parallelism all-reduces every layer, so its group must sit on NVLink: a group fits
when every pair in it is NVLinked (NVSwitch), or, on a hybrid cube mesh, when it lies in
the one NVLink domain (NCCL rings then stay on NVLink). Pipeline stages talk point-to-point
once per micro-batch: they go across hosts, kept within a rack where possible. Data
parallelism all-reduces once per step: across racks is acceptable.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from itertools import combinations

from clusterctl.errors import UsageError
from clusterctl.survey.topology import HostTopology, Shape, compress_indices, is_nvlink_clique, nearest_of
from clusterctl.wording import first_few

FIT_FULL = "nvlink-all-pairs"
FIT_RING = "nvlink-ring"
FIT_NONE = "does-not-fit"


@dataclass(frozen=True)
class RankNIC:
    local_rank: int
    gpu: int
    nic: str | None
    link: str | None


@dataclass(frozen=True)
class HostAdvice:
    host: str
    rack: str | None
    gpus: int
    #: ``nvlink-all-pairs``, ``nvlink-ring`` or ``does-not-fit``.
    fit: str
    reason: str
    tp_groups: tuple[tuple[int, ...], ...]
    rank_nics: tuple[RankNIC, ...]


@dataclass(frozen=True)
class StagePlacement:
    dp_rank: int
    pp_stage: int
    host: str
    rack: str | None
    gpus: tuple[int, ...]
    first_global_rank: int


@dataclass(frozen=True)
class LayoutAdvice:
    tp: int
    pp: int
    dp: int
    world_size: int
    #: True when every host can hold its TP groups on NVLink.
    fits: bool
    hosts: tuple[HostAdvice, ...]
    placements: tuple[StagePlacement, ...]
    explanation: tuple[str, ...] = field(default_factory=tuple)


def _partition(
    items: tuple[int, ...], size: int, ok: Callable[[tuple[int, ...]], bool]
) -> list[tuple[int, ...]] | None:
    """Split ``items`` into groups of ``size`` that all satisfy ``ok``; ``None`` if impossible.

    Small search (a host has at most 8-16 GPUs); groups are tried lowest indices first so
    the result reads naturally (``0-3``, ``4-7``).
    """
    if not items:
        return []
    first, rest = items[0], items[1:]
    for others in combinations(rest, size - 1):
        group = (first, *others)
        if not ok(group):
            continue
        remaining = tuple(i for i in rest if i not in others)
        tail = _partition(remaining, size, ok)
        if tail is not None:
            return [group, *tail]
    return None


def tp_groups_for_host(topology: HostTopology, tp: int) -> tuple[str, tuple[tuple[int, ...], ...], str]:
    """How ``tp``-sized groups fit this host: (fit, groups, reason in words)."""
    gpus = topology.gpu_indices
    if tp > len(gpus):
        return FIT_NONE, (), f"TP={tp} needs {tp} GPUs; the host has {len(gpus)}"
    if len(gpus) % tp:
        return FIT_NONE, (), f"{len(gpus)} GPUs do not split into groups of {tp}"
    if tp == 1:
        return FIT_FULL, tuple((g,) for g in gpus), "TP=1: no tensor-parallel traffic"
    full = _partition(gpus, tp, lambda g: is_nvlink_clique(topology, g))
    if full is not None:
        return FIT_FULL, tuple(full), f"every pair of each group of {tp} is NVLinked"
    if topology.shape is Shape.HYBRID_CUBE_MESH:
        domain_of = {g: d for d in topology.nvlink_domains for g in d}
        ring = _partition(gpus, tp, lambda g: len({domain_of.get(i) for i in g}) == 1 and g[0] in domain_of)
        if ring is not None:
            return FIT_RING, tuple(ring), (f"groups of {tp} lie in one NVLink domain of the hybrid cube mesh; "
                                           "not every pair is direct, NCCL rings stay on NVLink")
    largest = largest_nvlink_clique(topology)
    missing = [f"GPU{a}-GPU{b}" for a, b in combinations(gpus, 2) if topology.nvlinks(a, b) == 0]
    detail = f"; pairs without NVLink: {first_few(missing, 6, ', ')}" if missing else ""
    return FIT_NONE, (), (f"TP={tp} cannot fit an NVLink domain: no split into {len(gpus) // tp} group(s) of {tp} "
                          f"GPUs that are all NVLinked (at most {largest} GPUs are all NVLinked to each other){detail}")


def largest_nvlink_clique(topology: HostTopology) -> int:
    """Size of the largest GPU set whose every pair is NVLinked (small hosts: plain search)."""
    gpus = topology.gpu_indices
    best = 1 if gpus else 0
    for size in range(2, len(gpus) + 1):
        if any(is_nvlink_clique(topology, group) for group in combinations(gpus, size)):
            best = size
        else:
            break
    return best


def rank_nics(topology: HostTopology, usable: set[str] | None = None) -> tuple[RankNIC, ...]:
    """The NIC each local rank (= GPU, in index order) should use: its nearest, spread evenly.

    When several NICs are equally near (two HCAs on one PCIe switch), ranks take turns so
    each NIC carries the same number of ranks. ``usable`` drops NICs that are down.
    """
    load: dict[str, int] = {}
    out: list[RankNIC] = []
    for rank, gpu in enumerate(topology.gpus):
        choices: tuple[str, ...] = tuple(n for n in gpu.nearest_nics if usable is None or n in usable)
        if not choices and usable is not None:
            # Nearest NICs are down: fall back to the best usable one by link class.
            choices = nearest_of([(nic.name, found) for nic in topology.nics if nic.name in usable
                                  and (found := topology.link(gpu.label, nic.label)) is not None])[1]
        nic = min(choices, key=lambda n: (load.get(n, 0), n)) if choices else None
        if nic is not None:
            load[nic] = load.get(nic, 0) + 1
        placement = topology.nic(nic) if nic else None
        link = topology.link(gpu.label, placement.label) if placement else None
        out.append(RankNIC(rank, gpu.index, nic, link.kind if link else None))
    return tuple(out)


@dataclass(frozen=True)
class AdviceHost:
    """What advice needs of a host: its name, rack and topology, and the NICs that are up."""

    name: str
    rack: str | None
    topology: HostTopology
    usable_nics: set[str] | None = None


def advise(hosts: Sequence[AdviceHost], tp: int, pp: int = 1, world_size: int | None = None) -> LayoutAdvice:
    """Propose a TP/PP/DP layout over ``hosts`` (in rack, then name order)."""
    if tp < 1 or pp < 1:
        raise UsageError("--tp and --pp must be at least 1")
    if not hosts:
        raise UsageError("no host with a readable topology to advise on")
    ordered = sorted(hosts, key=lambda h: (h.rack or "", h.name))
    per_host = [_advise_host(h, tp) for h in ordered]
    gpus_per_host = min(len(h.topology.gpus) for h in ordered)
    total = sum(len(h.topology.gpus) for h in ordered)
    model = tp * pp
    # Only hosts whose TP groups sit on NVLink take part; the others are named in the advice.
    fitting = sum(1 for a in per_host if a.fit != FIT_NONE)
    if world_size is None:
        # Default: as many whole model replicas as the (smallest) fitting hosts hold.
        world = (gpus_per_host * fitting) // model * model
    else:
        world = world_size
        if world < 1 or world > total:
            raise UsageError(f"--world-size {world} is not between 1 and the {total} GPUs surveyed")
        if world % model:
            raise UsageError(f"--world-size {world} is not a multiple of TP x PP = {model}")
    dp = world // model
    fits = all(h.fit != FIT_NONE for h in per_host)
    placements = _place(ordered, per_host, tp, pp, dp, gpus_per_host)
    explanation = _explain(ordered, per_host, tp, pp, dp, world, placements, gpus_per_host)
    return LayoutAdvice(tp, pp, dp, world, fits, tuple(per_host), tuple(placements), tuple(explanation))


def _advise_host(host: AdviceHost, tp: int) -> HostAdvice:
    fit, groups, reason = tp_groups_for_host(host.topology, tp)
    return HostAdvice(host.name, host.rack, len(host.topology.gpus), fit, reason, groups,
                      rank_nics(host.topology, host.usable_nics))


def _place(hosts: Sequence[AdviceHost], advice: Sequence[HostAdvice], tp: int, pp: int, dp: int,
           gpus_per_host: int) -> list[StagePlacement]:
    """Lay out ``dp`` replicas of ``pp`` stages of ``tp`` GPUs over the hosts, in order.

    Hosts are in rack order, so a replica's consecutive stages land on neighbouring hosts
    of one rack whenever a rack has room for them. Within a host, stages take its TP groups
    (NVLink) in order; a host that cannot hold its TP groups on NVLink gets plain slices.
    """
    by_rack: dict[str, list[tuple[AdviceHost, tuple[int, ...]]]] = {}
    for host, host_advice in zip(hosts, advice, strict=True):
        if host_advice.fit == FIT_NONE:
            continue  # TP would leave NVLink there: the advice tells the user to drop or shrink it
        groups = list(host_advice.tp_groups)
        by_rack.setdefault(host.rack or "", []).extend(
            (host, g) for g in groups[: gpus_per_host // tp] if len(g) == tp
        )
    # A replica's stages go to one rack while the rack has room for a whole replica; the
    # slots left over in each rack are then pooled, and only those replicas cross racks.
    replicas: list[list[tuple[AdviceHost, tuple[int, ...]]]] = []
    leftovers: list[tuple[AdviceHost, tuple[int, ...]]] = []
    for rack_slots in by_rack.values():
        whole = len(rack_slots) // pp * pp
        replicas.extend(rack_slots[i : i + pp] for i in range(0, whole, pp))
        leftovers.extend(rack_slots[whole:])
    replicas.extend(leftovers[i : i + pp] for i in range(0, len(leftovers) // pp * pp, pp))
    placements: list[StagePlacement] = []
    rank = 0
    for d, replica in enumerate(replicas[:dp]):
        for s, (host, gpus) in enumerate(replica):
            placements.append(StagePlacement(d, s, host.name, host.rack, gpus, rank))
            rank += tp
    return placements


def _explain(hosts: Sequence[AdviceHost], advice: Sequence[HostAdvice], tp: int, pp: int, dp: int, world: int,
             placements: Sequence[StagePlacement], gpus_per_host: int) -> list[str]:
    if dp == 0:
        lines = [f"TP {tp} x PP {pp} needs {tp * pp} GPUs; the hosts hold {gpus_per_host * len(hosts)}: "
                 "no replica fits."]
    else:
        lines = [f"{world} GPUs = TP {tp} x PP {pp} x DP {dp}."]
    ok = [a for a in advice if a.fit != FIT_NONE]
    bad = [a for a in advice if a.fit == FIT_NONE]
    if ok:
        sample = ok[0]
        groups = "; ".join(compress_indices(g) for g in sample.tp_groups)
        lines.append(f"Tensor parallelism stays on NVLink: on {sample.host} the TP groups are GPUs {groups} "
                     f"({sample.reason}).")
    for a in bad:
        lines.append(f"{a.host}: {a.reason}. Use a smaller --tp there, or leave the host out (-l '!{a.host}').")
    nic_pairs = [f"rank {r.local_rank}->{r.nic}" for r in (ok or bad)[0].rank_nics if r.nic]
    if nic_pairs:
        lines.append(f"Each local rank uses the NIC nearest its GPU ({', '.join(nic_pairs)}); set "
                     "NCCL_IB_HCA / the rank's NIC accordingly.")
    else:
        lines.append("No NIC is near the GPUs: inter-host traffic will cross the CPU (no GPUDirect RDMA).")
    if pp > 1 and dp:  # no replica fits: none spans hosts
        hosts_per_replica = max(1, -(-tp * pp // gpus_per_host))
        racks_of: dict[int, set[str | None]] = {}
        for p in placements:
            racks_of.setdefault(p.dp_rank, set()).add(p.rack)
        crossing = sorted(d for d, racks in racks_of.items() if len(racks) > 1)
        lines.append(f"Pipeline parallelism: each replica's {pp} stages span {hosts_per_replica} host(s), "
                     "kept inside one rack where the rack has room, so stage-to-stage sends stay near.")
        if crossing:
            lines.append(f"Replica(s) {', '.join(str(d) for d in crossing)} cross racks: no rack had room for "
                         "all their stages; their stage-to-stage sends go over the spine.")
    if dp > 1:
        lines.append(f"Data parallelism: {dp} replicas across hosts; their gradient all-reduce runs once per step "
                     "and tolerates crossing racks.")
    if len(placements) < dp * pp:
        lines.append(f"Only {len(placements)} of {dp * pp} stage slots could be placed: the hosts lack room.")
    placed = {p.host for p in placements}
    spare = [a.host for a in ok if a.host not in placed]
    if spare and dp > 0:
        # A host that fits but gets no rank must not look like an oversight.
        model = tp * pp
        free = sum(a.gpus for a in ok if a.host in spare)
        lines.append(
            f"{', '.join(spare)} {'fits' if len(spare) == 1 else 'fit'} but {'holds' if len(spare) == 1 else 'hold'} "
            f"no rank: {world} GPUs make {dp} whole replica{'s' if dp != 1 else ''} of TP {tp} x PP {pp} = {model} "
            f"GPUs, and the {free} GPUs left cannot make another; "
            f"{'it is a spare' if len(spare) == 1 else 'they are spares'} (--world-size chooses the size).")
    return lines
