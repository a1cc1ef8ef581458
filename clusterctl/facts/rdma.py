"""``ibv_devinfo -v`` (and plain ``ibv_devinfo``): RDMA devices and their ports.

The output is ``key: value`` lines indented with tabs: ``hca_id:`` opens a device,
``port:`` opens a port, ``GID[  3]: ::ffff:10.0.0.1, RoCE v2`` lines list a port's GIDs.
Capability flag lists (indented words without a colon) are skipped. Plain ``ibv_devinfo``
has no ``active_width``/``active_speed``, so the rate stays ``None``.
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass, field

from clusterctl.errors import ParseError
from clusterctl.facts.base import Fact
from clusterctl.facts.model import RDMADevice, RDMAPort

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


@dataclass
class _PortDraft:
    port: int
    line: int
    values: dict[str, str] = field(default_factory=dict)
    gids: list[tuple[int, str, str]] = field(default_factory=list)


@dataclass
class _DeviceDraft:
    hca: str
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


def _finish_port(draft: _PortDraft) -> RDMAPort:
    values = draft.values
    if "state" not in values:
        raise ParseError(_WHAT, f"port {draft.port} has no 'state' line", line=draft.line)
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


def parse_ibv_devinfo(text: str) -> tuple[RDMADevice, ...]:
    drafts: list[_DeviceDraft] = []
    device: _DeviceDraft | None = None
    port: _PortDraft | None = None
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        if line.strip() == _NO_DEVICES and device is None:
            continue
        indented = line[:1] in (" ", "\t")
        gid = _GID.match(line)
        if gid:
            if port is None:
                raise ParseError(_WHAT, "GID line outside a port", line=number, text=line)
            port.gids.append((int(gid.group(1)), gid.group(2), gid.group(3) or ""))
            continue
        pair = _KEY_VALUE.match(line)
        if pair is None:
            if indented and device is not None:
                continue  # capability flag list under a key such as device_cap_flags
            raise ParseError(_WHAT, "unrecognised line", line=number, text=line)
        key, value = pair.group(1), pair.group(2)
        if key == "hca_id":
            if indented or not value:
                raise ParseError(
                    _WHAT, "'hca_id' must start a line and name a device", line=number, text=line
                )
            device = _DeviceDraft(hca=value)
            port = None
            drafts.append(device)
            continue
        if device is None or not indented:
            raise ParseError(
                _WHAT, f"'{key}' line outside a device (no 'hca_id' above it)", line=number, text=line
            )
        if key == "port":
            if not value.isdigit():
                raise ParseError(_WHAT, f"port number {value!r} is not a number", line=number, text=line)
            if any(existing.port == int(value) for existing in device.ports):
                raise ParseError(_WHAT, f"port {value} listed twice for {device.hca}", line=number, text=line)
            port = _PortDraft(port=int(value), line=number)
            device.ports.append(port)
            continue
        (port.values if port is not None else device.values)[key] = value
    names = [draft.hca for draft in drafts]
    if len(set(names)) != len(names):
        raise ParseError(_WHAT, "the same hca_id is listed twice")
    return tuple(
        RDMADevice(
            hca=draft.hca,
            fw_version=draft.values.get("fw_ver"),
            node_guid=draft.values.get("node_guid"),
            board_id=draft.values.get("board_id"),
            ports=tuple(_finish_port(p) for p in draft.ports),
        )
        for draft in drafts
    )


RDMA: Fact[tuple[RDMADevice, ...]] = Fact("rdma", "ibv_devinfo -v", parse_ibv_devinfo)
