"""RDMA devices and their ports, from ``ibv_devinfo -v`` (or plain ``ibv_devinfo``) or ``ibstat``.

``ibv_devinfo`` prints ``key: value`` lines indented with tabs: ``hca_id:`` opens a device,
``port:`` opens a port, ``GID[  3]: ::ffff:10.0.0.1, RoCE v2`` lines list a port's GIDs.
Capability flag lists (indented words without a colon) are skipped. Plain ``ibv_devinfo``
has no ``active_width``/``active_speed``, so the rate stays ``None``.

``ibstat`` (infiniband-diags) prints the same facts another way: ``CA 'mlx5_0'`` opens a
device, ``Port 1:`` a port, with ``State: Active``, ``Physical state: LinkUp``, ``Rate: 200``
and ``Link layer: InfiniBand``. Device names are whatever the kernel calls them: ``mlx5_0``,
or with predictable naming ``ibp2s0f0`` / ``ibp3s0f0`` (the two halves of a socket-direct
card), ``roceo1`` (Broadcom). It prints the rate, which ``ibv_devinfo`` without ``-v`` does not.
``parse_rdma`` tells the two formats apart, so a pasted file can be either; survey runs
``ibv_devinfo -v`` and falls back to ``ibstat`` on hosts without it.

Both go through the shared pre-cleaning (``clusterctl.facts.clean``): prompt lines, fences,
borders and blank lines between ports are dropped. A line that belongs to neither format costs
that line (a warning naming it), a port without a state costs that port; only input with no
device at all is refused.
"""

from __future__ import annotations

import ipaddress
import re
from abc import ABC, abstractmethod
from dataclasses import dataclass, field

from clusterctl.errors import ParseError
from clusterctl.facts.base import Fact
from clusterctl.facts.clean import ELISIONS, Cleaned, Line, clean
from clusterctl.facts.model import ParseWarning, RDMADevice, RDMADevices, RDMAPort

_WHAT = "ibv_devinfo"
#: ``key: value``; the value is stripped after the match (a lazy ``(.*?)\s*$`` costs a survey 0.3 ms a host).
_KEY_VALUE = re.compile(r"^\s*([A-Za-z_][\w ]*?)\s*:(.*)$")
_GID = re.compile(r"^\s*GID\[\s*(\d+)\]\s*:\s*([0-9A-Fa-f:.]+)\s*(?:,\s*(.+?))?\s*$")
_CODE_SUFFIX = re.compile(r"\s*\(\d+\)\s*$")
_WIDTH = re.compile(r"^(\d+)X$")
_SPEED = re.compile(r"^(\d+(?:\.\d+)?)\s*Gbps")
_NO_DEVICES = "No IB devices found"
#: ibv_devinfo prints phys_state as ``LINK_UP (5)``, ``PORT_CONFIGURATION_TRAINING (4)``; ibstat and the model say
#: ``LinkUp``, ``PortConfigurationTraining``: its words capitalised and joined.
_PHYS_STATE_WORDS = re.compile(r"[A-Z]+(?:_[A-Z]+)*")
#: ibstat's port states as ibv_devinfo (and the model) names them.
_IBSTAT_STATES = {"Active": "PORT_ACTIVE", "Down": "PORT_DOWN", "Initializing": "PORT_INIT", "Init": "PORT_INIT",
                  "Armed": "PORT_ARMED", "ActiveDefer": "PORT_ACTIVE_DEFER"}
_CA = re.compile(r"^\s*CA '([^']+)'\s*$")
_IBSTAT_PORT = re.compile(r"^\s*Port (\d+):\s*$")
_RATE = re.compile(r"^(\d+(?:\.\d+)?)\b")
#: ``ibstatus`` (infiniband-diags' script) opens each port so; it has no device facts (firmware, GUID, board).
_IBSTATUS = re.compile(r"^\s*Infiniband device '[^']+' port \d+ status:")


@dataclass
class _PortDraft:
    port: int
    line: int
    values: dict[str, str] = field(default_factory=dict)
    gids: list[tuple[int, str, str]] = field(default_factory=list)


@dataclass
class _DeviceDraft:
    hca: str
    line: int
    values: dict[str, str] = field(default_factory=dict)
    ports: list[_PortDraft] = field(default_factory=list)


def _without_code(value: str) -> str:
    """``PORT_ACTIVE (4)`` -> ``PORT_ACTIVE``."""
    return _CODE_SUFFIX.sub("", value).strip()


def _rate_gbps(width: str | None, speed: str | None) -> float | None:
    lanes, per_lane = _WIDTH.match(width or ""), _SPEED.match(speed or "")
    if not lanes or not per_lane:
        return None
    return int(lanes.group(1)) * float(per_lane.group(1))


def _is_ipv4_mapped(gid: str) -> bool:
    try:
        return ipaddress.IPv6Address(gid).ipv4_mapped is not None
    except ValueError:
        return False


class _Reader(ABC):
    """One format's reading: its lines open device and port blocks, then the blocks become devices.

    Both formats open a device (``hca_id:`` / ``CA '...'``), then its ports (``port:`` /
    ``Port N:``), and every ``key: value`` line goes to the open port, else to the open device.
    """

    #: The tool, for messages and ``RDMADevices.source``.
    tool: str
    #: The key of a port's state line; a port without one is left out.
    state_key: str

    def __init__(self) -> None:
        self.devices: list[_DeviceDraft] = []
        self.device: _DeviceDraft | None = None
        self.port: _PortDraft | None = None

    def read(self, pasted: Cleaned) -> RDMADevices:
        self.warnings: list[ParseWarning] = pasted.elision_warnings("lines", "devices and ports there are not read")
        for line in pasted.lines:
            self.read_line(line.number, line.text)
        if not self.devices:
            if ibstatus := next((line for line in pasted.lines if _IBSTATUS.match(line.text)), None):
                raise ParseError(self.tool, "this is ibstatus output, which clusterctl does not read: paste the "
                                 "output of ibstat or ibv_devinfo -v instead", line=ibstatus.number, text=ibstatus.text)
            self.check_empty(pasted.lines)
        devices = [self.device_of(draft, self._ports(draft)) for draft in self._unique()]
        return RDMADevices(devices, tuple(self.warnings), source=self.tool)

    @abstractmethod
    def read_line(self, number: int, line: str) -> None: ...

    @abstractmethod
    def check_empty(self, lines: list[Line]) -> None:
        """Raise ``ParseError`` unless input with no device block is a host without RDMA devices."""

    @abstractmethod
    def port_of(self, draft: _PortDraft) -> RDMAPort: ...

    @abstractmethod
    def device_of(self, draft: _DeviceDraft, ports: tuple[RDMAPort, ...]) -> RDMADevice: ...

    def warn(self, message: str, line: int | None) -> None:
        self.warnings.append(ParseWarning(message, line))

    def open_device(self, hca: str, line: int) -> None:
        self.device, self.port = _DeviceDraft(hca=hca, line=line), None
        self.devices.append(self.device)

    def open_port(self, device: _DeviceDraft, port_number: int, line: int) -> None:
        """A new port block of ``device``; none (and a warning) when the device already has that port."""
        self.port = None
        if any(existing.port == port_number for existing in device.ports):
            self.warn(f"port {port_number} listed twice for {device.hca}: the second is not read", line)
            return
        self.port = _PortDraft(port=port_number, line=line)
        device.ports.append(self.port)

    def set(self, device: _DeviceDraft, key: str, value: str, line: int) -> None:
        if value in ELISIONS:  # ``Node GUID: ...``: the author left the value out
            self.warn(f"{key}: {value!r} (the value was left out of the paste): unknown", line)
        elif value:  # a key printed without a value (EFA's ``CA type:``, ``Firmware version:``) tells nothing
            (self.port.values if self.port is not None else device.values)[key] = value

    def _unique(self) -> list[_DeviceDraft]:
        """Each device once: a paste that repeats a block costs the repeat, with a warning."""
        seen: set[str] = set()
        kept: list[_DeviceDraft] = []
        for draft in self.devices:
            if draft.hca in seen:
                self.warn(f"{self.tool} lists {draft.hca} a second time: the second block is left out", draft.line)
                continue
            seen.add(draft.hca)
            kept.append(draft)
        return kept

    def _ports(self, device: _DeviceDraft) -> tuple[RDMAPort, ...]:
        ports = []
        for draft in device.ports:
            if self.state_key in draft.values:
                ports.append(self.port_of(draft))
            else:
                self.warn(f"{device.hca} port {draft.port} has no '{self.state_key}' line: port left out", draft.line)
        return tuple(ports)


def _key_value(line: str) -> tuple[str, str] | None:
    found = _KEY_VALUE.match(line)
    return (found.group(1), found.group(2).strip()) if found else None


class _IbvDevinfo(_Reader):
    tool = "ibv_devinfo"
    state_key = "state"

    def read_line(self, number: int, line: str) -> None:
        device = self.device
        if line.strip() == _NO_DEVICES and device is None:
            return
        gid = _GID.match(line) if "GID[" in line else None
        if gid:
            if self.port is None:
                self.warn("GID line outside a port: not read", number)
            else:
                self.port.gids.append((int(gid.group(1)), gid.group(2), gid.group(3) or ""))
            return
        pair = _key_value(line)
        if pair is None:
            if line[:1] not in (" ", "\t") or device is None:
                self.warn(f"unrecognised line not read: {line.strip()[:80]!r}", number)
            return  # else a capability flag list under a key such as device_cap_flags
        key, value = pair
        if key == "hca_id":
            if value:
                self.open_device(value, number)
            else:
                self.warn("'hca_id' names no device: its block is not read", number)
                self.device = self.port = None
        elif device is None:
            self.warn(f"'{key}' line outside a device (no 'hca_id' above it): not read", number)
        elif key == "state" and self.port is None:  # a grep that kept the port's lines but not its 'port:'
            self.warn(f"'state' outside a port (no 'port:' line above it): a port of {device.hca} is not read", number)
        elif key != "port":
            self.set(device, key, value, number)
        elif value.isdigit():
            self.open_port(device, int(value), number)
        else:
            self.warn(f"port number {value!r} is not a number: that port is not read", number)
            self.port = None

    def check_empty(self, lines: list[Line]) -> None:
        # Nothing at all (or ``No IB devices found``) is a host without RDMA devices.
        if self.warnings:
            first = next((w for w in self.warnings if w.line is not None), None)
            raise ParseError(_WHAT, "no 'hca_id' device block in the input", line=first.line if first else None)

    def port_of(self, draft: _PortDraft) -> RDMAPort:
        values = draft.values
        phys = _without_code(values["phys_state"]) if "phys_state" in values else None
        phys_state = phys.title().replace("_", "") if phys and _PHYS_STATE_WORDS.fullmatch(phys) else phys
        width = _without_code(values["active_width"]) if "active_width" in values else None
        speed = _without_code(values["active_speed"]) if "active_speed" in values else None
        roce_index = next((index for index, gid, kind in draft.gids if kind == "RoCE v2" and _is_ipv4_mapped(gid)),
                          None)
        return RDMAPort(port=draft.port, state=_without_code(values["state"]), phys_state=phys_state,
                        link_layer=values.get("link_layer", "InfiniBand"), rate_gbps=_rate_gbps(width, speed),
                        active_width=width, active_speed=speed, roce_v2_gid_index=roce_index, gids=tuple(draft.gids))

    def device_of(self, draft: _DeviceDraft, ports: tuple[RDMAPort, ...]) -> RDMADevice:
        values = draft.values
        return RDMADevice(hca=draft.hca, fw_version=values.get("fw_ver"), node_guid=values.get("node_guid"),
                          board_id=values.get("board_id"), ports=ports)


def _guid(value: str | None) -> str | None:
    """``0x0c42a10300609810`` -> ``0c42:a103:0060:9810``, the form ibv_devinfo prints."""
    match = re.fullmatch(r"0x([0-9a-fA-F]{16})", value or "")
    if not match:
        return value
    digits = match.group(1).lower()
    return ":".join(digits[i:i + 4] for i in range(0, 16, 4))


class _Ibstat(_Reader):
    tool = "ibstat"
    state_key = "State"

    def read_line(self, number: int, line: str) -> None:
        ca = _CA.match(line)
        if ca:
            self.open_device(ca.group(1), number)
            return
        device = self.device
        found = _IBSTAT_PORT.match(line)
        pair = _key_value(line)
        if found and device is not None:
            self.open_port(device, int(found.group(1)), number)
        elif line.strip().startswith(("ibpanic:", "ibwarn:", "ibstat:")):
            self.warn(f"ibstat reported: {line.strip()[:100]}", number)
        elif pair is None or device is None:
            self.warn(f"unrecognised line not read: {line.strip()[:80]!r}", number)
        else:
            self.set(device, *pair, number)

    def check_empty(self, lines: list[Line]) -> None:
        first = lines[0] if lines else None
        raise ParseError("ibstat", "no \"CA '<name>'\" device block in the input",
                         line=first.number if first else None, text=first.text if first else None)

    def port_of(self, draft: _PortDraft) -> RDMAPort:
        values = draft.values
        rate = _RATE.match(values.get("Rate", ""))
        return RDMAPort(port=draft.port, state=_IBSTAT_STATES.get(values["State"], values["State"]),
                        phys_state=values.get("Physical state"), link_layer=values.get("Link layer", "InfiniBand"),
                        rate_gbps=float(rate.group(1)) if rate else None)

    def device_of(self, draft: _DeviceDraft, ports: tuple[RDMAPort, ...]) -> RDMADevice:
        values = draft.values
        return RDMADevice(hca=draft.hca, fw_version=values.get("Firmware version"),
                          node_guid=_guid(values.get("Node GUID")), ports=ports, ca_type=values.get("CA type"))


def parse_ibstat(text: str) -> RDMADevices:
    """``ibstat`` output as devices; see the module docstring."""
    return _Ibstat().read(clean(text))


def parse_rdma(text: str) -> RDMADevices:
    """``ibv_devinfo`` or ``ibstat`` output, whichever ``text`` is."""
    pasted = clean(text)
    reader = _Ibstat() if any(_CA.match(line.text) for line in pasted.lines if "CA '" in line.text) else _IbvDevinfo()
    return reader.read(pasted)


# --- what a port's rate says: the one reading survey, health and tune-nccl judge ports by ----------

#: A port this far below the rate it should run at is slow. Links train at discrete rates (a width or a
#: speed step down at least halves it), so a healthy port matches exactly; the margin only absorbs
#: rounding such as 4 x 53.125.
RATE_TOLERANCE = 0.97


def card_of(device: RDMADevice) -> str | None:
    """The card model whose ports a port's rate is judged against: the board id (the SKU: a 200G and a 400G
    ConnectX-7 differ), else ``ibstat``'s CA type (the chip); ``None`` when the tool printed neither.

    Not the host's GPUs: a host that lost a GPU, or has none (a storage node on the fabric), still has
    its card's peers.
    """
    return device.board_id or device.ca_type


def link_rate(port: RDMAPort) -> float | None:
    """The rate an active port runs at; ``None`` when it is not active or reads no rate.

    A port that is not active prints a rate that means nothing (``ibstat`` its slowest, ``Rate: 10``;
    ``ibv_devinfo`` the lowest width x speed, 4X x 2.5 Gbps), and a rate of 0 is a driver that does not
    know it: neither is a speed to call slow, nor one to count in the fleet's majority.
    """
    return port.rate_gbps if port.state == "PORT_ACTIVE" and port.rate_gbps else None


def runs_slow(rate_gbps: float | None, expected_gbps: float | None) -> bool:
    """Whether an active port's ``rate_gbps`` (``link_rate``'s: ``None`` or 0 is unknown, never slow) is below
    ``expected_gbps`` (the inventory's, the peers', the fleet's)."""
    return bool(rate_gbps and expected_gbps and rate_gbps < expected_gbps * RATE_TOLERANCE)


IBSTAT: Fact[RDMADevices] = Fact("rdma", "ibstat", parse_ibstat)
#: Survey reads ``ibv_devinfo -v``; on a host without it (no ibverbs-utils), ``ibstat``.
RDMA: Fact[RDMADevices] = Fact("rdma", "ibv_devinfo -v", parse_rdma, fallbacks=(IBSTAT,))
