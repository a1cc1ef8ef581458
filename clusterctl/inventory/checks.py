"""Warnings about an inventory that loads but is probably not what the user meant."""

from __future__ import annotations

import os
from collections import Counter, defaultdict

from clusterctl.errors import BadValue
from clusterctl.inventory.model import Host, Inventory, StackPin
from clusterctl.inventory.values import SSH_PORT, address
from clusterctl.wording import first_few


def check_inventory(inventory: Inventory) -> list[str]:
    """One sentence per suspicious thing, naming the hosts; an empty list means nothing found."""
    warnings: list[str] = []
    hosts = inventory.hosts
    control_planes = [h.name for h in inventory.control_planes]
    if hosts and not control_planes:
        warnings.append(
            "no host has the role control-plane: Kubernetes bootstrap needs at least one "
            "(set 'roles: [control-plane]' on a host)."
        )
    elif len(control_planes) % 2 == 0 and control_planes:
        warnings.append(
            f"{len(control_planes)} control-plane hosts ({first_few(control_planes, 8, ', ')}): etcd needs an odd "
            "number to keep quorum when one fails."
        )
    with_rack = [h.name for h in hosts if h.rack]
    without_rack = [h.name for h in hosts if not h.rack]
    if with_rack and without_rack:
        warnings.append(
            f"hosts without a rack: {first_few(without_rack, 8, ', ')}, while {len(with_rack)} other host(s) have one; "
            "within-rack and across-rack fabric thresholds cannot be told apart for them."
        )
    clashing = [g for g in inventory.groups if any(h.name == g for h in hosts)]
    if clashing:
        warnings.append(
            f"group and host share a name: {first_few(clashing, 8, ', ')}; --limit with that name selects the host "
            "and the whole group."
        )
    for check in (_unreachable_by_design, _same_endpoint, _thresholds, _stack_disagreements):
        warnings.extend(check(hosts))
    return warnings


def _unreachable_by_design(hosts: tuple[Host, ...]) -> list[str]:
    """Addresses (a host's name, where it has none) and key files that cannot work, found before any connection."""
    warnings = []
    for host in hosts:
        if host.transport != "ssh":
            continue
        try:
            address(host.connect_address)
        except BadValue:
            warnings.append(
                f"host {host.name}: address {host.connect_address!r} is not a host name or IP address "
                "(clusterctl quotes it, so it is never run as a command, but no host can be reached by it)."
            )
        if host.ssh.key_file and not os.path.isfile(os.path.expanduser(host.ssh.key_file)):
            warnings.append(f"host {host.name}: SSH key file {host.ssh.key_file} does not exist on this machine.")
    return warnings


def _same_endpoint(hosts: tuple[Host, ...]) -> list[str]:
    by_endpoint: dict[str, list[str]] = defaultdict(list)
    for host in hosts:
        if host.transport != "ssh":
            continue  # mock and local hosts do not connect anywhere
        jump = f" via {host.ssh.jump_host}" if host.ssh.jump_host else ""
        endpoint = f"{host.connect_address}:{host.port or SSH_PORT}{jump}"
        by_endpoint[endpoint].append(host.name)
    return [
        f"hosts {first_few(names, 8, ', ')} all connect to {endpoint}: they are probably one machine listed twice."
        for endpoint, names in by_endpoint.items()
        if len(names) > 1
    ]


def _thresholds(hosts: tuple[Host, ...]) -> list[str]:
    inverted = (
        ([h.name for h in hosts if h.fabric.latency_warn_us > h.fabric.latency_error_us],
         "latency_warn_us is above latency_error_us on {}: every slow link would be an error before it could be a "
         "warning."),
        ([h.name for h in hosts if h.fabric.within_rack_min < h.fabric.across_racks_min],
         "within_rack_min is below across_racks_min on {}: links inside a rack usually must be faster than links "
         "across racks."),
    )
    return [said.format(first_few(names, 8, ", ")) for names, said in inverted if names]


def _stack_disagreements(hosts: tuple[Host, ...]) -> list[str]:
    warnings = []
    for component in StackPin.__dataclass_fields__:
        pins = Counter(getattr(h.stack, component) for h in hosts if getattr(h.stack, component))
        if len(pins) > 1:
            listed = ", ".join(f"{version} ({count} host(s))" for version, count in pins.most_common())
            warnings.append(f"hosts pin different {component} versions: {listed}; a cluster usually runs one.")
    return warnings
