"""What a log's ``NCCL INFO`` lines say about the network NCCL used (``NCCL_DEBUG=INFO``).

nccl-tests users paste these lines with the result table; they say which NICs NCCL found, which
ones its channels went through, how fast NCCL thinks each one is, and how many ranks and nodes
the run had. That is enough to judge a bus bandwidth against what the links can carry, from the
log alone. Lines read (``host:pid:tid [dev] NCCL INFO`` first, host optional):

- ``NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/RoCE [RO]; OOB ib0:10.0.0.1<0>`` (``/SHARP`` too),
  ``NET/Socket : Using [0]eth0:10.0.0.1<0>``: the NICs NCCL listed, by index.
- ``NET/IB: [0] mlx5_0:uverbs0:1/IB provider=Mlx5 speed=400000``: a NIC's speed in Mb/s (2.2x).
- ``+ NET[25.0] - NET/1 (7a852d0003f6ceb8/1/25.000000)``: a NIC's speed in GB/s, from the
  topology dump (``NCCL_DEBUG_SUBSYS=GRAPH``).
- ``Channel 00/0 : 0[0] -> 1[0] [send] via NET/IB/1/GDRDMA`` (``NET/IBext_v8/7``): the NIC a
  channel went through; ``Channel 00/24 :``: how many channels.
- ``comm 0x... rank 0 nranks 16 ...`` / ``nRanks 16 nNodes 2``; ``Using network IB``;
  ``NET/OFI Selected Provider is efa (found 4 nics)``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field

#: ``host:pid:tid [dev] NCCL INFO message``; launchers may put more before the host (``[1,0]<stdout>:``,
#: ``(RayWorkerWrapper pid=626, ip=...)``).
_INFO = re.compile(r"(?:(?P<host>[A-Za-z0-9][\w.-]*):\d+:\d+\s+\[\d+\]\s+)?NCCL INFO\s+(?P<message>.*)$")
_USING = re.compile(r"^NET/(?P<net>IB|Socket)\s*:\s*Using\s+(?P<list>\[\d+\].*)$")
_IB_NIC = re.compile(r"\[(\d+)\]([\w.-]+):(\d+)/(IB|RoCE)")
_SOCKET_NIC = re.compile(r"\[(\d+)\]([\w.-]+):")
_SPEED = re.compile(r"^NET/IB\s*:\s*\[(\d+)\]\s+([\w.-]+):\S*?(?::(\d+))?/(IB|RoCE)\b.*?\bspeed=(\d+)")
_TOPO_NET = re.compile(r"\bNET/(\d+)\s+\([0-9A-Fa-fx]+/\d+/([\d.]+)\)")
_VIA = re.compile(r"\bvia NET/[^/\s]+/(\d+)")
_CHANNELS = re.compile(r"^Channel\s+\d+/(\d+)\s*:\s+\d")
_NRANKS = re.compile(r"\bn[Rr]anks\s+(\d+)")
_NNODES = re.compile(r"\bnNodes\s+(\d+)")
_NETWORK = re.compile(r"^Using network\s+(.+?)\s*$")
_OFI = re.compile(r"NET/OFI Selected Provider is (\S+) \(found (\d+) nics?\)")


@dataclass(frozen=True)
class NcclNic:
    """A NIC as NCCL listed it."""

    index: int
    name: str
    #: ``IB``, ``RoCE`` or ``Socket``.
    link: str
    #: Speed per direction in GB/s when the log says it (``speed=`` or the topology dump).
    gbs: float | None = None


@dataclass(frozen=True)
class NcclNetInfo:
    """The network part of a log's ``NCCL INFO`` lines; empty fields where the log is silent."""

    #: ``IB``, ``Socket``, ``AWS Libfabric``, ``IBext``... from ``Using network``.
    network: str | None = None
    #: Per host (``""`` where the lines name none): the NICs NCCL listed.
    nics: dict[str, tuple[NcclNic, ...]] = field(default_factory=dict)
    #: Per host: the NIC indexes its channels went through (``via NET/IB/<index>``).
    used: dict[str, frozenset[int]] = field(default_factory=dict)
    nranks: int | None = None
    nnodes: int | None = None
    #: Hosts that printed NCCL INFO lines.
    hosts: tuple[str, ...] = ()
    channels: int | None = None
    #: ``NET/OFI ... (found N nics)`` (EFA).
    ofi_nics: int | None = None

    @property
    def empty(self) -> bool:
        return self == NcclNetInfo()

    def listed(self) -> tuple[NcclNic, ...]:
        """The NICs of the host that listed the most (hosts of one job are alike)."""
        return max(self.nics.values(), key=len, default=())

    def used_nics(self) -> tuple[NcclNic, ...]:
        """The listed NICs a host's channels went through, for the host that used the most."""
        if not self.used:
            return ()
        host, indexes = max(self.used.items(), key=lambda item: len(item[1]))
        by_index = {nic.index: nic for nic in self.nics.get(host) or self.listed()}
        return tuple(by_index.get(i, NcclNic(i, f"NET/{i}", self.network or "?")) for i in sorted(indexes))


def parse_nccl_info(lines: Iterable[str]) -> NcclNetInfo:
    """The network facts of the ``NCCL INFO`` lines among ``lines`` (other lines are ignored)."""
    nics: dict[str, dict[int, NcclNic]] = {}
    speeds: dict[tuple[str, int], float] = {}
    used: dict[str, set[int]] = {}
    hosts: dict[str, None] = {}
    network = None
    nranks = nnodes = channels = ofi = None
    for line in lines:
        if "NCCL INFO" not in line:
            continue
        found = _INFO.search(line)
        if found is None:
            continue
        host, message = found.group("host") or "", found.group("message").strip()
        if host:
            hosts.setdefault(host)
        using = _USING.match(message)
        if using:
            listed = nics.setdefault(host, {})
            if using.group("net") == "IB":
                for index, name, _port, link in _IB_NIC.findall(using.group("list")):
                    listed.setdefault(int(index), NcclNic(int(index), name, link))
            else:
                for index, name in _SOCKET_NIC.findall(using.group("list")):
                    listed.setdefault(int(index), NcclNic(int(index), name, "Socket"))
            continue
        speed = _SPEED.match(message)
        if speed:
            speeds[(host, int(speed.group(1)))] = int(speed.group(5)) / 8000  # Mb/s -> GB/s
            continue
        topo = _TOPO_NET.search(message)
        if topo and message.lstrip("+ ").startswith("NET["):
            speeds[(host, int(topo.group(1)))] = float(topo.group(2))
            continue
        via = _VIA.search(message)
        if via:
            used.setdefault(host, set()).add(int(via.group(1)))
            continue
        if message.startswith("Channel"):
            count = _CHANNELS.match(message)
            if count:
                channels = max(channels or 0, int(count.group(1)))
            continue
        if network is None and (net := _NETWORK.match(message)):
            network = net.group(1)
            continue
        if (ranks := _NRANKS.search(message)) and ("comm " in message or "nNodes" in message):
            nranks = max(nranks or 0, int(ranks.group(1)))
            if nodes := _NNODES.search(message):
                nnodes = max(nnodes or 0, int(nodes.group(1)))
            continue
        if ofi_found := _OFI.search(message):
            ofi = int(ofi_found.group(2))
            network = network or f"OFI/{ofi_found.group(1)}"
    # The topology dump may come from another rank's host than the NIC list: same job, same NICs.
    by_index = {index: gbs for (_, index), gbs in speeds.items()}
    with_speed = {
        host: tuple(NcclNic(n.index, n.name, n.link, speeds.get((host, n.index), by_index.get(n.index)))
                    for _, n in sorted(by.items()))
        for host, by in nics.items()
    }
    return NcclNetInfo(network=network, nics=with_speed, used={h: frozenset(i) for h, i in used.items()},
                       nranks=nranks, nnodes=nnodes, hosts=tuple(hosts), channels=channels, ofi_nics=ofi)
