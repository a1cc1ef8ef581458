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
from dataclasses import dataclass, field

from clusterctl.errors import ParseError
from clusterctl.facts.base import Fact
from clusterctl.facts.clean import Line, clean_lines
from clusterctl.facts.model import ParseWarning, RDMADevice, RDMADevices, RDMAPort

_WHAT = "ibv_devinfo"
_KEY_VALUE = re.compile(r"^\s*([A-Za-z_][\w ]*?)\s*:\s*(.*?)\s*$")
_GID = re.compile(r"^\s*GID\[\s*(\d+)\]\s*:\s*([0-9A-Fa-f:.]+)\s*(?:,\s*(.+?))?\s*$")
_CODE_SUFFIX = re.compile(r"\s*\(\d+\)\s*$")
_WIDTH = re.compile(r"^(\d+)X$")
_SPEED = re.compile(r"^(\d+(?:\.\d+)?)\s*Gbps")
_NO_DEVICES = "No IB devices found"
#: ibv_devinfo prints phys_state as ``LINK_UP (5)``; ibstat and the model say ``LinkUp``.
_PHYS_STATE_NAMES = {
    "SLEEP": "Sleep",
    "POLLING": "Polling",
    "DISABLED": "Disabled",
    "PORT_CONFIGURATION_TRAINING": "PortConfigurationTraining",
    "LINK_UP": "LinkUp",
    "LINK_ERROR_RECOVERY": "LinkErrorRecovery",
    "PHY_TEST": "PhyTest",
}
#: ibstat's port states as ibv_devinfo (and the model) names them.
_IBSTAT_STATES = {"Active": "PORT_ACTIVE", "Down": "PORT_DOWN", "Initializing": "PORT_INIT", "Init": "PORT_INIT",
                  "Armed": "PORT_ARMED", "ActiveDefer": "PORT_ACTIVE_DEFER"}
_CA = re.compile(r"^\s*CA '([^']+)'\s*$")
_IBSTAT_PORT = re.compile(r"^\s*Port (\d+):\s*$")
_RATE = re.compile(r"^(\d+(?:\.\d+)?)\b")


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
    if width is None or speed is None:
        return None
    lanes = _WIDTH.match(width)
    per_lane = _SPEED.match(speed)
    if not lanes or not per_lane:
        return None
    return int(lanes.group(1)) * float(per_lane.group(1))


def _is_ipv4_mapped(gid: str) -> bool:
    try:
        return ipaddress.IPv6Address(gid).ipv4_mapped is not None
    except ValueError:
        return False


def _finish_port(draft: _PortDraft, hca: str, warnings: list[ParseWarning]) -> RDMAPort | None:
    values = draft.values
    if "state" not in values:
        warnings.append(ParseWarning(f"{hca} port {draft.port} has no 'state' line: port left out", draft.line))
        return None
    phys = values.get("phys_state")
    phys_state = _PHYS_STATE_NAMES.get(_without_code(phys), _without_code(phys)) if phys else None
    width = _without_code(values["active_width"]) if "active_width" in values else None
    speed = _without_code(values["active_speed"]) if "active_speed" in values else None
    roce_index = next(
        (index for index, gid, kind in draft.gids if kind == "RoCE v2" and _is_ipv4_mapped(gid)),
        None,
    )
    return RDMAPort(
        port=draft.port,
        state=_without_code(values["state"]),
        phys_state=phys_state,
        link_layer=values.get("link_layer", "InfiniBand"),
        rate_gbps=_rate_gbps(width, speed),
        active_width=width,
        active_speed=speed,
        roce_v2_gid_index=roce_index,
        gids=tuple(draft.gids),
    )


def _unique(drafts: list[_DeviceDraft], warnings: list[ParseWarning], what: str) -> list[_DeviceDraft]:
    """Drafts with a name seen before dropped (a paste that repeats a block), with a warning."""
    seen: set[str] = set()
    kept: list[_DeviceDraft] = []
    for draft in drafts:
        if draft.hca in seen:
            warnings.append(ParseWarning(f"{what} lists {draft.hca} a second time: the second block is left out",
                                         draft.line))
            continue
        seen.add(draft.hca)
        kept.append(draft)
    return kept


def _add_port(device: _DeviceDraft, port_number: int, line: int, warnings: list[ParseWarning]) -> _PortDraft | None:
    """A new port block of ``device``; None (and a warning) when the device already has that port."""
    if any(existing.port == port_number for existing in device.ports):
        warnings.append(ParseWarning(f"port {port_number} listed twice for {device.hca}: the second is not read", line))
        return None
    port = _PortDraft(port=port_number, line=line)
    device.ports.append(port)
    return port


def parse_ibv_devinfo(text: str) -> RDMADevices:
    """``ibv_devinfo [-v]`` output as devices; see the module docstring."""
    return _parse_ibv_devinfo(clean_lines(text))


def _parse_ibv_devinfo(lines: list[Line]) -> RDMADevices:
    drafts: list[_DeviceDraft] = []
    warnings: list[ParseWarning] = []
    device: _DeviceDraft | None = None
    port: _PortDraft | None = None
    for item in lines:
        number, line = item.number, item.text
        if line.strip() == _NO_DEVICES and device is None:
            continue
        indented = line[:1] in (" ", "\t")
        gid = _GID.match(line)
        if gid:
            if port is None:
                warnings.append(ParseWarning("GID line outside a port: not read", number))
                continue
            port.gids.append((int(gid.group(1)), gid.group(2), gid.group(3) or ""))
            continue
        pair = _KEY_VALUE.match(line)
        if pair is None:
            if indented and device is not None:
                continue  # capability flag list under a key such as device_cap_flags
            warnings.append(ParseWarning(f"unrecognised line not read: {line.strip()[:80]!r}", number))
            continue
        key, value = pair.group(1), pair.group(2)
        if key == "hca_id":
            if not value:
                warnings.append(ParseWarning("'hca_id' names no device: its block is not read", number))
                device = port = None
                continue
            device = _DeviceDraft(hca=value, line=number)
            port = None
            drafts.append(device)
            continue
        if device is None:
            warnings.append(ParseWarning(f"'{key}' line outside a device (no 'hca_id' above it): not read", number))
            continue
        if key == "port":
            if not value.isdigit():
                warnings.append(ParseWarning(f"port number {value!r} is not a number: that port is not read", number))
                port = None
                continue
            port = _add_port(device, int(value), number, warnings)
            continue
        (port.values if port is not None else device.values)[key] = value
    if not drafts and warnings:
        first = next((w for w in warnings if w.line is not None), None)
        raise ParseError(_WHAT, "no 'hca_id' device block in the input",
                         line=first.line if first else None)
    devices = []
    for draft in _unique(drafts, warnings, "ibv_devinfo"):
        ports = tuple(p for p in (_finish_port(d, draft.hca, warnings) for d in draft.ports) if p is not None)
        devices.append(RDMADevice(
            hca=draft.hca,
            fw_version=draft.values.get("fw_ver"),
            node_guid=draft.values.get("node_guid"),
            board_id=draft.values.get("board_id"),
            ports=ports,
        ))
    return RDMADevices(devices, tuple(warnings), source="ibv_devinfo")


def _guid(value: str | None) -> str | None:
    """``0x0c42a10300609810`` -> ``0c42:a103:0060:9810``, the form ibv_devinfo prints."""
    if value is None:
        return None
    match = re.fullmatch(r"0x([0-9a-fA-F]{16})", value)
    if not match:
        return value
    digits = match.group(1).lower()
    return ":".join(digits[i:i + 4] for i in range(0, 16, 4))


def _ibstat_port(draft: _PortDraft, hca: str, warnings: list[ParseWarning]) -> RDMAPort | None:
    values = draft.values
    if "State" not in values:
        warnings.append(ParseWarning(f"{hca} port {draft.port} has no 'State' line: port left out", draft.line))
        return None
    rate = _RATE.match(values.get("Rate", ""))
    return RDMAPort(
        port=draft.port,
        state=_IBSTAT_STATES.get(values["State"], values["State"]),
        phys_state=values.get("Physical state"),
        link_layer=values.get("Link layer", "InfiniBand"),
        rate_gbps=float(rate.group(1)) if rate else None,
    )


def parse_ibstat(text: str) -> RDMADevices:
    """``ibstat`` output as devices; see the module docstring."""
    return _parse_ibstat(clean_lines(text))


def _parse_ibstat(lines: list[Line]) -> RDMADevices:
    drafts: list[_DeviceDraft] = []
    warnings: list[ParseWarning] = []
    device: _DeviceDraft | None = None
    port: _PortDraft | None = None
    for item in lines:
        number, line = item.number, item.text
        ca = _CA.match(line)
        if ca:
            device, port = _DeviceDraft(hca=ca.group(1), line=number), None
            drafts.append(device)
            continue
        found = _IBSTAT_PORT.match(line)
        if found and device is not None:
            port = _add_port(device, int(found.group(1)), number, warnings)
            continue
        if line.strip().startswith(("ibpanic:", "ibwarn:", "ibstat:")):
            warnings.append(ParseWarning(f"ibstat reported: {line.strip()[:100]}", number))
            continue
        pair = _KEY_VALUE.match(line)
        if pair is None or device is None:
            warnings.append(ParseWarning(f"unrecognised line not read: {line.strip()[:80]!r}", number))
            continue
        (port.values if port is not None else device.values)[pair.group(1)] = pair.group(2)
    if not drafts:
        first = lines[0] if lines else None
        raise ParseError("ibstat", "no \"CA '<name>'\" device block in the input",
                         line=first.number if first else None, text=first.text if first else None)
    devices = []
    for draft in _unique(drafts, warnings, "ibstat"):
        ports = tuple(p for p in (_ibstat_port(d, draft.hca, warnings) for d in draft.ports) if p is not None)
        devices.append(RDMADevice(
            hca=draft.hca,
            fw_version=draft.values.get("Firmware version"),
            node_guid=_guid(draft.values.get("Node GUID")),
            ports=ports,
            ca_type=draft.values.get("CA type"),
        ))
    return RDMADevices(devices, tuple(warnings), source="ibstat")


def is_ibstat(text: str) -> bool:
    """Whether ``text`` is ``ibstat`` output (a ``CA '<name>'`` line) rather than ``ibv_devinfo``."""
    return any(_CA.match(line.text) for line in clean_lines(text))


def parse_rdma(text: str) -> RDMADevices:
    """``ibv_devinfo`` or ``ibstat`` output, whichever ``text`` is."""
    lines = clean_lines(text)
    if any(_CA.match(line.text) for line in lines):
        return _parse_ibstat(lines)
    return _parse_ibv_devinfo(lines)


IBSTAT: Fact[RDMADevices] = Fact("rdma", "ibstat", parse_ibstat)
#: Survey reads ``ibv_devinfo -v``; on a host without it (no ibverbs-utils), ``ibstat``.
RDMA: Fact[RDMADevices] = Fact("rdma", "ibv_devinfo -v", parse_rdma, fallbacks=(IBSTAT,))
