"""The NCCL settings a careful engineer would set for these hosts, each with a one-line reason.

Pure functions of ``TuneHost`` data. A setting is only derived when it changes what NCCL
would do on its own: repeating a default is noise in a config file and hides the settings
that matter. What is left at its default, and why, goes to ``notes``; what looks wrong on a
host (a down port, a slow port, no RDMA at all) goes to ``warnings`` as something to fix, never
into the config for good. Settings NCCL's documentation files under debugging
(NCCL_NET_GDR_LEVEL, NCCL_IB_DISABLE...) are not derived from topology alone: where the
topology makes one worth trying it is offered to the sweep (``Tuning.sweep_candidates``), so it
lands in a file only with a measured reason.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from clusterctl.facts.rdma import runs_slow
from clusterctl.hostlist import compress
from clusterctl.inventory.model import Fabric
from clusterctl.nccl.knowledge import knowledge_base
from clusterctl.nccl.lint import MAX_SOCKETS_PER_PEER
from clusterctl.nccl.paths import DEFAULT_GDR_LEVEL, nccl_path, path_rank, uses_gdr
from clusterctl.nccl.tune.inputs import NicFacts, TuneHost
from clusterctl.nccl.versions import NcclVersion, distinct, try_parse_version
from clusterctl.survey.checks.host import CardPort, rate_basis, usual_link_rates

#: ``usual_link_rates``' answer: each port of a card, the rate it runs at on most hosts.
UsualRates = dict[CardPort, float]

#: The order settings are listed in everywhere (files, tables): selection first, then policy.
SETTING_ORDER: tuple[str, ...] = (
    "NCCL_IB_DISABLE",
    "NCCL_IB_HCA",
    "NCCL_IB_GID_INDEX",
    "NCCL_IB_ADDR_FAMILY",
    "NCCL_IB_ROCE_VERSION_NUM",
    "NCCL_SOCKET_IFNAME",
    "NCCL_NET_GDR_LEVEL",
    "NCCL_CROSS_NIC",
    "NCCL_SOCKET_NTHREADS",
    "NCCL_NSOCKS_PERTHREAD",
)
#: env.rst: "For generic 100G networks, this value can be manually set to 4" (both socket knobs);
#: src/transport/net_socket.cc: at most 16 threads and 64 sockets (threads x sockets per thread).
SOCKET_THREADS, SOCKETS_PER_THREAD = 4, 4
#: The (threads, sockets per thread) --sweep measures, each within 16 threads and 64 sockets; above that NCCL
#: lowers NCCL_NSOCKS_PERTHREAD itself with a warning. Not the derived pair: the sweep's baseline runs it.
SOCKET_SWEEP = ((2, 8), (4, 4), (4, 8), (8, 4), (8, 8), (16, 4))
#: Below this Ethernet rate one TCP stream per peer keeps up; no socket knobs are derived.
SOCKET_KNOBS_FROM_GBPS = 50.0
#: Interfaces that must never carry NCCL bootstrap traffic.
NEVER_BOOTSTRAP_PREFIXES: tuple[str, ...] = ("lo", "docker", "virbr", "veth", "cni", "flannel", "cali", "kube-")


@dataclass(frozen=True)
class TunedSetting:
    name: str
    value: str
    #: One line a user reads next to the value: why this and not NCCL's default.
    reason: str
    #: ``survey`` (derived from facts) or ``sweep`` (measured).
    source: str = "survey"


@dataclass(frozen=True)
class Tuning:
    """Settings for the cluster, the hosts that need something else, and what was left alone."""

    hosts: tuple[str, ...]
    nccl_version: str | None
    #: ``ib``, ``roce``, ``ethernet`` (no RDMA: NCCL's socket transport; the inventory's word) or ``mixed``.
    fabric: str
    settings: tuple[TunedSetting, ...]
    #: host name -> settings that replace or add to the common ones on that host.
    host_overrides: dict[str, tuple[TunedSetting, ...]] = field(default_factory=dict)
    notes: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()
    #: Settings the topology makes worth measuring but not writing unmeasured: one env per entry.
    sweep_candidates: tuple[tuple[tuple[str, str], ...], ...] = ()
    #: Every host is an NVSwitch system (NVLS/NVLSTree are worth measuring).
    nvswitch: bool = False
    #: Every host has one GPU (NCCL's PAT algorithm applies).
    one_gpu_per_node: bool = False

    def for_host(self, name: str) -> tuple[TunedSetting, ...]:
        """The settings one host gets: the common ones with its overrides applied."""
        merged = {s.name: s for s in self.settings}
        for setting in self.host_overrides.get(name, ()):
            merged[setting.name] = setting
        return sort_settings(merged.values())


def sort_settings(settings: Iterable[TunedSetting]) -> tuple[TunedSetting, ...]:
    rank = {name: i for i, name in enumerate(SETTING_ORDER)}
    return tuple(sorted(settings, key=lambda s: (rank.get(s.name, len(rank)), s.name)))


@dataclass
class _HostPlan:
    """One host's own view, before hosts are compared."""

    values: dict[str, TunedSetting] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    fabric: str = "ethernet"
    chosen: tuple[NicFacts, ...] = ()
    #: For NCCL_CROSS_NIC: per GPU, the position of its nearest chosen NIC(s).
    rail_layout: tuple[tuple[int, tuple[int, ...]], ...] = ()
    socket_ifname: str | None = None
    candidates: list[tuple[tuple[str, str], ...]] = field(default_factory=list)

    def set(self, name: str, value: str, reason: str) -> None:
        self.values[name] = TunedSetting(name, value, reason)


# --- NIC selection ---------------------------------------------------------------------------


def _rank(kind: str) -> int:
    """Nearness of an nvidia-smi class as NCCL sees it (NODE ranks with PHB)."""
    return path_rank(nccl_path(kind) or "")


def _affinity_key(nic: NicFacts) -> tuple[int, str, int]:
    first_gpu = min(nic.nearest_gpus) if nic.nearest_gpus else 1 << 30
    return (first_gpu, nic.hca, nic.port)


def select_nics(host: TuneHost) -> tuple[tuple[NicFacts, ...], list[str]]:
    """The RDMA ports NCCL should use, in GPU-affinity order, and why each other port is left out."""
    left_out: list[str] = []
    active: list[NicFacts] = []
    for nic in host.nics:
        if host.expected_hcas and nic.hca not in host.expected_hcas:
            if nic.active:
                left_out.append(f"{nic.spec} (not a fabric HCA in the inventory)")
        elif nic.active:
            active.append(nic)
        else:
            left_out.append(f"{nic.spec} ({nic.state.lower().removeprefix('port_')})")
    infiniband = [n for n in active if not n.is_ethernet]
    chosen: list[NicFacts]
    if infiniband:
        chosen = infiniband
        left_out += [f"{n.spec} (Ethernet-only on an InfiniBand fabric)" for n in active if n.is_ethernet]
    else:
        chosen = []
        for nic in active:
            if nic.roce_v2_gid_index is None and not nic.gids:
                left_out.append(f"{nic.spec} (no RoCE GID: no IP on its netdev)")
            elif host.address and len(active) > 1 and any(d.name == nic.netdev and host.address in d.ipv4
                                                           for d in host.netdevs):
                left_out.append(f"{nic.spec} (management: carries {host.address})")
            else:
                chosen.append(nic)
    # Storage/management NICs sit on another NUMA node than every GPU; keep them out of
    # collectives when the host has NICs next to its GPUs.
    if any(n.nearest_gpus for n in chosen):
        far = [n for n in chosen if not n.nearest_gpus]
        left_out += [f"{n.spec} (no GPU nearer than SYS)" for n in far]
        chosen = [n for n in chosen if n.nearest_gpus]
    return tuple(sorted(chosen, key=_affinity_key)), left_out


# --- per-host rules --------------------------------------------------------------------------


def _gpu_nic_order(nics: Sequence[NicFacts]) -> str:
    # Where two GPUs share a PCIe switch with two NICs (DGX A100), both NICs are nearest to
    # both GPUs: give each NIC, in order, the first nearest GPU no earlier NIC took, so the
    # text reads GPU6->mlx5_6, GPU7->mlx5_7 rather than GPU6 twice.
    taken: set[int] = set()
    pairs = []
    for nic in nics:
        if not nic.nearest_gpus:
            continue
        free = sorted(set(nic.nearest_gpus) - taken)
        gpu = free[0] if free else min(nic.nearest_gpus)
        taken.add(gpu)
        pairs.append(f"GPU{gpu}->{nic.hca}")
    if not pairs:
        return "no topology, by name"
    return f"{pairs[0]} ... {pairs[-1]}" if len(pairs) > 3 else ", ".join(pairs)


def _plan_hca(host: TuneHost, plan: _HostPlan, usual_rates: UsualRates) -> None:
    chosen, left_out = select_nics(host)
    if not chosen:
        plan.fabric = "ethernet"
        why = "no active RDMA port" if host.nics else "no RDMA device"
        if host.fabric == "ethernet":
            plan.notes.append(
                f"{why}, as the inventory's Ethernet fabric says: NCCL uses TCP sockets by itself "
                "(src/transport/net_ib/init.cc finds no IB device), so NCCL_IB_DISABLE is not needed")
        else:
            plan.warnings.append(
                f"{why} found: NCCL falls back to TCP sockets over NCCL_SOCKET_IFNAME. Fix the fabric "
                "(driver, cabling, port state) and survey again; NCCL_IB_DISABLE=1 is not written, it would "
                "keep NCCL on TCP after the fix")
        return
    chosen, slow_notes = _drop_slow_ports(host, chosen, usual_rates, plan)
    left_out += slow_notes
    plan.chosen = chosen
    plan.fabric = "roce" if all(n.is_ethernet for n in chosen) else "ib"
    skipped = f"; leaves out {', '.join(left_out)}" if left_out else ""
    plan.set(
        "NCCL_IB_HCA",
        "=" + ",".join(n.spec for n in chosen),
        f"{len(chosen)} active {'RoCE' if plan.fabric == 'roce' else 'IB'} ports in GPU order "
        f"({_gpu_nic_order(chosen)}), exact names{skipped}",
    )
    for item in left_out:
        if "(down" in item or "(init" in item or "(polling" in item:
            plan.warnings.append(f"RDMA port {item} is not active")


def _drop_slow_ports(host: TuneHost, chosen: tuple[NicFacts, ...], usual_rates: UsualRates, plan: _HostPlan
                     ) -> tuple[tuple[NicFacts, ...], list[str]]:
    """Leave out ports that trained below their rate (``rate_basis``: the inventory's, else the same port of the
    same card on most hosts): rings and trees run at their slowest link. Slow is what survey and health call
    slow."""
    fabric = Fabric(rate_gbps=host.expected_rate_gbps)  # the chosen ports are the fabric's
    slow = [(n, *judged) for n in chosen
            if (judged := rate_basis(fabric, n.hca, n.link_layer, usual_rates.get(n.card_port), True))
            and runs_slow(n.rate_gbps, judged[1])]
    if not slow:
        return chosen, []
    names = ", ".join(f"{n.spec} at {n.rate_gbps:g} Gb/s" for n, _, _ in slow)
    rate = " or ".join(sorted({f"{expected:g} Gb/s (the inventory's fabric.rate_gbps)" if basis == "inventory"
                               else f"the fleet's {expected:g} Gb/s" for _, basis, expected in slow}))
    if len(slow) == len(chosen):
        plan.warnings.append(
            f"every fabric port trained below {rate} ({names}): kept in NCCL_IB_HCA "
            "because NCCL needs a port, but jobs spanning this host run at that rate; fix the links")
        return chosen, []
    plan.warnings.append(
        f"{names} trained below {rate}: left out of NCCL_IB_HCA on {host.name}, since "
        "a ring or tree through it would run at its rate; fix the link (cable, transceiver, port speed) "
        "and tune again to get it back")
    kept = tuple(n for n in chosen if n not in {s[0] for s in slow})
    return kept, [f"{n.spec} (trained at {n.rate_gbps:g} Gb/s, {'inventory' if basis == 'inventory' else 'fleet'} "
                  f"{expected:g} Gb/s)" for n, basis, expected in slow]


def usual_port_rates(hosts: Sequence[TuneHost], notes: list[str]) -> UsualRates:
    """The rate each chosen port of a card runs at on most hosts (``usual_link_rates``, as survey and health
    judge ports), for hosts whose inventory gives no ``fabric.rate_gbps``."""
    chosen = [(h, n) for h in hosts for n in select_nics(h)[0]]
    usual = usual_link_rates((n.card_port, n.rate_gbps) for _, n in chosen)
    rates = sorted({n.rate_gbps for _, n in chosen if n.rate_gbps})
    if len(rates) > 1 and any(n.rate_gbps and n.card_port not in usual and not h.expected_rate_gbps for h, n in chosen):
        notes.append(f"fabric ports run at {', '.join(f'{r:g}' for r in rates)} Gb/s and not each at a rate most "
                     "hosts' same port of the same card runs at: those are not left out of NCCL_IB_HCA as slow; set "
                     "fabric.rate_gbps in the inventory")
    return usual


def _plan_roce(plan: _HostPlan, version: NcclVersion | None) -> None:
    if plan.fabric != "roce":
        return
    chosen = plan.chosen
    # The catalogue's NCCL_IB_GID_INDEX default: -1 from 2.21 (NCCL picks the GID by address family), 0 before.
    gid_default = knowledge_base().catalogued("NCCL_IB_GID_INDEX").default_for(version)
    if version is not None and gid_default is not None and gid_default.value == "-1":
        gids = [g for n in chosen for g in n.gids]
        v2_any = [g for g in gids if "v2" in g[2].lower()]
        v1 = [g for g in gids if "v1" in g[2].lower()]
        # roce_v2_gid_index is the parser's one answer to "a RoCE v2 GID with an IPv4 address" (facts/rdma.py)
        if any(n.roce_v2_gid_index is not None for n in chosen):
            plan.notes.append(f"NCCL {version} picks the RoCE v2 IPv4 GID itself (AF_INET, RoCE v2 are its defaults)")
        elif v2_any:
            plan.set("NCCL_IB_ADDR_FAMILY", "AF_INET6",
                     "the RoCE v2 GIDs carry only IPv6 addresses; NCCL looks for AF_INET")
        elif v1:
            plan.set("NCCL_IB_ROCE_VERSION_NUM", "1", "the ports list only RoCE v1 GIDs; NCCL looks for RoCE v2")
        else:
            plan.warnings.append("no RoCE GID found on the chosen ports: NCCL cannot address them")
        return
    indices = Counter(n.roce_v2_gid_index for n in chosen if n.roce_v2_gid_index is not None)
    if not indices:
        plan.warnings.append("no RoCE v2 GID with an IPv4 address on the chosen ports; NCCL_IB_GID_INDEX left unset")
        return
    index, _ = indices.most_common(1)[0]
    if len(indices) > 1:
        plan.warnings.append(
            f"ports differ in RoCE v2 GID index {sorted(indices)}; NCCL takes one index for all, using {index}"
        )
    before = f"NCCL {version}" if version is not None else "NCCL before 2.21"
    if index == 0:
        plan.notes.append(f"RoCE v2 IPv4 GID is at index 0, which {before} uses by default")
        return
    plan.set("NCCL_IB_GID_INDEX", str(index),
             f"RoCE v2 IPv4 GID is at index {index}; {before} would use index 0 (RoCE v1)")


def _plan_socket(host: TuneHost, plan: _HostPlan) -> None:
    address = host.address
    carriers = [d for d in host.netdevs if address and address in d.ipv4]
    if not carriers:
        plan.warnings.append(
            "no surveyed interface carries the host's inventory address (the survey lists RDMA netdevs and, "
            "when given, 'ip -o -4 addr'); NCCL_SOCKET_IFNAME left unset: set it to the management interface"
        )
        return
    name = carriers[0].name
    if name.startswith(NEVER_BOOTSTRAP_PREFIXES):
        plan.warnings.append(f"the inventory address {address} is on {name}, which NCCL must not bootstrap over")
        return
    plan.socket_ifname = name
    # Not this host's address: the reason lands in the file every host with the same interface gets.
    plan.set("NCCL_SOCKET_IFNAME", "=" + name,
             f"{name} carries the inventory address of every host it is set for; NCCL would prefer ib*")


def _plan_socket_knobs(host: TuneHost, plan: _HostPlan) -> None:
    """TCP between hosts: more helper threads and sockets than NCCL's one stream per peer."""
    if plan.fabric != "ethernet":
        return
    rate = host.expected_rate_gbps
    if rate is not None and rate < SOCKET_KNOBS_FROM_GBPS:
        plan.notes.append(f"the {rate:g} Gb/s Ethernet fabric is filled by NCCL's default socket threads")
        return
    speed = f"the {rate:g} Gb/s" if rate else "an Ethernet"
    plan.set("NCCL_SOCKET_NTHREADS", str(SOCKET_THREADS),
             f"NCCL talks TCP between hosts over {speed} fabric; without this it uses one helper thread and one "
             "socket per peer except on AWS/GCP NICs (src/transport/net_socket.cc), which cannot fill 100G links; "
             "env.rst suggests 4 for generic 100G networks")
    plan.set("NCCL_NSOCKS_PERTHREAD", str(SOCKETS_PER_THREAD),
             f"{SOCKET_THREADS} threads x {SOCKETS_PER_THREAD} sockets = {SOCKET_THREADS * SOCKETS_PER_THREAD} "
             f"sockets per peer, within NCCL's limit of {MAX_SOCKETS_PER_PEER} (net_socket.cc MAX_SOCKETS); env.rst "
             "suggests 4 for generic 100G networks")
    plan.candidates += [(("NCCL_SOCKET_NTHREADS", str(t)), ("NCCL_NSOCKS_PERTHREAD", str(k)))
                        for t, k in SOCKET_SWEEP if (t, k) != (SOCKET_THREADS, SOCKETS_PER_THREAD)]


def _plan_gdr(host: TuneHost, plan: _HostPlan) -> None:
    """Where NCCL will and will not use GPUDirect RDMA, said in NCCL's terms (clusterctl.nccl.paths)."""
    if not plan.chosen or not host.gpu_indices:
        return
    distance: dict[int, str] = {}
    for gpu in host.gpu_indices:
        classes = [kind for n in plan.chosen for g, kind in n.gpu_links if g == gpu and nccl_path(kind)]
        if classes:
            distance[gpu] = min(classes, key=_rank)
    if not distance:
        return
    paths = {gpu: nccl_path(kind) or "SYS" for gpu, kind in distance.items()}
    if all(uses_gdr(p) for p in paths.values()):
        worst = max(distance.values(), key=_rank)
        plan.notes.append(
            f"every GPU has a NIC at {worst} or nearer: NCCL's default (NCCL_NET_GDR_LEVEL={DEFAULT_GDR_LEVEL}) "
            "already uses GPUDirect RDMA"
        )
        return
    through_cpu = sorted(g for g, p in paths.items() if p == "PHB")
    far = sorted(g for g, p in paths.items() if p == "SYS")
    if through_cpu:
        shown = sorted({distance[g] for g in through_cpu})
        gpus = ",".join(map(str, through_cpu))
        plan.notes.append(
            f"GPU {gpus} reach their nearest NIC through the CPU (nvidia-smi {'/'.join(shown)}, which NCCL calls "
            f"PHB): NCCL's default ({DEFAULT_GDR_LEVEL}) stages their traffic through host memory. "
            "NCCL_NET_GDR_LEVEL=PHB would use GPUDirect RDMA for them; NCCL's documentation files it under "
            "debugging, so it is measured by --sweep rather than written"
        )
        plan.candidates.append((("NCCL_NET_GDR_LEVEL", "PHB"),))
    if far:
        plan.notes.append(
            f"GPU {','.join(map(str, far))} have no NIC nearer than SYS (across the CPU interconnect): NCCL keeps "
            "GPUDirect RDMA off for them, which is right: staging in host memory is faster there"
        )


def plan_host(host: TuneHost, version: NcclVersion | None, rates: UsualRates | None = None) -> _HostPlan:
    plan = _HostPlan()
    _plan_hca(host, plan, rates or {})
    _plan_roce(plan, version)
    _plan_socket(host, plan)
    _plan_socket_knobs(host, plan)
    _plan_gdr(host, plan)
    if len(plan.chosen) >= 2:
        plan.rail_layout = tuple((gpu, tuple(i for i, n in enumerate(plan.chosen) if gpu in n.nearest_gpus))
                                 for gpu in host.gpu_indices)
    return plan


# --- across hosts ----------------------------------------------------------------------------


def _merge_socket(hosts: Sequence[TuneHost], plans: dict[str, _HostPlan]) -> TunedSetting | None:
    """One NCCL_SOCKET_IFNAME for all when the names agree or share a prefix that picks only them."""
    names = {h.name: plans[h.name].socket_ifname for h in hosts}
    if any(n is None for n in names.values()):
        return None
    distinct = sorted({n for n in names.values() if n})
    if len(distinct) == 1:
        return None  # identical values merge as usual
    prefix = os.path.commonprefix(distinct)  # noqa: RUF071 - interface names, compared character by character
    if len(prefix) < 2 or prefix.startswith(NEVER_BOOTSTRAP_PREFIXES):
        return None
    if any([d.name for d in host.netdevs if d.name.startswith(prefix) and d.ipv4] != [names[host.name]]
           for host in hosts):
        return None
    return TunedSetting(
        "NCCL_SOCKET_IFNAME",
        prefix,
        f"the interfaces carrying the inventory addresses ({', '.join(distinct)}) share the prefix {prefix!r}, "
        "which matches no other interface with an address",
    )


def _merge_cross_nic(
    hosts: Sequence[TuneHost], plans: dict[str, _HostPlan], notes: list[str], warnings: list[str]
) -> TunedSetting | None:
    """NCCL_CROSS_NIC=0 only on a fabric known to be rail-optimised, for jobs that span hosts.

    env.rst: the setting "is dependent on the network topology, and in particular on whether the
    network fabric is rail-optimized"; NCCL's default (2, src/graph/search.cc) lets rings use
    different NICs on different hosts when that is better. A survey sees the GPU-NIC layout
    inside hosts, not how NICs are cabled to switches: that comes from the inventory.
    """
    layouts = {h.name: plans[h.name].rail_layout for h in hosts}
    if len(hosts) < 2 or not all(layouts.values()):
        return None  # one host, or one NIC: no inter-host ring to keep on a rail
    declared = {h.rail_optimized for h in hosts}
    if declared != {True}:
        notes.append(
            "NCCL_CROSS_NIC left at NCCL's default (2): whether the fabric is rail-optimised (NIC i of every host "
            "on switch rail i) is not known; set fabric.rail_optimized: true in the inventory if it is"
            if None in declared else
            "NCCL_CROSS_NIC left at NCCL's default (2): the inventory says the fabric is not rail-optimised"
        )
        return None
    if any(not near for layout in layouts.values() for _, near in layout):
        notes.append("some GPUs have no nearby NIC: NCCL_CROSS_NIC left at its default (2)")
        return None
    if len({layout for layout in layouts.values()}) > 1:
        warnings.append("hosts differ in GPU-NIC layout: NCCL_CROSS_NIC left at its default (2, cross-rail allowed)")
        return None
    nics = len(plans[hosts[0].name].chosen)
    return TunedSetting(
        "NCCL_CROSS_NIC",
        "0",
        f"the inventory declares the fabric rail-optimised (fabric.rail_optimized) and every host has the same "
        f"GPU-to-NIC layout over {nics} NICs: rings and trees stay on one rail",
    )


def _version_of(hosts: Sequence[TuneHost], override: str | None, warnings: list[str]) -> NcclVersion | None:
    if override:
        return try_parse_version(override)
    versions = distinct(h.nccl_version for h in hosts if h.nccl_version)
    if len(versions) > 1:
        warnings.append(f"hosts run different NCCL versions ({', '.join(map(str, versions))}); "
                        "settings follow the oldest")
    return versions[0] if versions else None


def derive_settings(hosts: Sequence[TuneHost], *, nccl_version: str | None = None) -> Tuning:
    """Settings for ``hosts``: common ones, per-host overrides where hosts differ, notes and warnings."""
    if not hosts:
        return Tuning(hosts=(), nccl_version=nccl_version, fabric="ethernet", settings=())
    warnings: list[str] = []
    notes: list[str] = []
    version = _version_of(hosts, nccl_version, warnings)
    if version is None:
        warnings.append("NCCL version unknown: version-dependent settings assume NCCL before 2.21")
    rates = usual_port_rates(hosts, notes)
    plans = {h.name: plan_host(h, version, rates) for h in hosts}
    host_names = tuple(h.name for h in hosts)

    common: dict[str, TunedSetting] = {}
    overrides: dict[str, dict[str, TunedSetting]] = {h: {} for h in host_names}
    shared_ifname = _merge_socket(hosts, plans)
    for name in SETTING_ORDER:
        if shared_ifname is not None and name == shared_ifname.name:
            common[name] = shared_ifname
            continue
        per_host = {h: plans[h].values.get(name) for h in host_names}
        values = Counter(s.value for s in per_host.values() if s is not None)
        # Set on every host: the most common value for all, the others as overrides; else all overrides.
        value = values.most_common(1)[0][0] if values and None not in per_host.values() else None
        for h, s in per_host.items():
            if s is not None and s.value == value:
                common.setdefault(name, s)
            elif s is not None:
                overrides[h][name] = s
    cross = _merge_cross_nic(hosts, plans, notes, warnings)
    if cross is not None:
        common[cross.name] = cross

    for name in SETTING_ORDER:
        differing = sorted(h for h in host_names if name in overrides[h])
        if differing:
            warnings.append(f"{name} differs on {', '.join(differing)}: written as per-host overrides")
    fabrics = {plans[h].fabric for h in host_names}
    if len(fabrics) > 1:
        warnings.append(
            f"hosts use different transports ({', '.join(sorted(fabrics))}): jobs spanning them run at the slowest"
        )

    notes += _grouped({h: plans[h].notes for h in host_names})
    warnings += _grouped({h: plans[h].warnings for h in host_names})
    candidates = tuple(dict.fromkeys(c for h in host_names for c in plans[h].candidates))
    return Tuning(
        hosts=host_names,
        nccl_version=str(version) if version else None,
        fabric=fabrics.pop() if len(fabrics) == 1 else "mixed",
        settings=sort_settings(common.values()),
        host_overrides={h: sort_settings(o.values()) for h, o in overrides.items() if o},
        notes=tuple(dict.fromkeys(notes)),
        warnings=tuple(dict.fromkeys(warnings)),
        sweep_candidates=candidates,
        nvswitch=all(h.nvswitch for h in hosts),
        one_gpu_per_node=all(len(h.gpu_indices) == 1 for h in hosts),
    )


def _grouped(per_host: dict[str, list[str]]) -> list[str]:
    """Each message once: bare when every host said it, else led by the hosts that did."""
    said: dict[str, list[str]] = {}
    for host, messages in per_host.items():
        for message in messages:
            said.setdefault(message, []).append(host)
    return [m if len(hosts) == len(per_host) else f"{compress(hosts)}: {m}" for m, hosts in said.items()]
