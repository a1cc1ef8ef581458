"""An inventory from a host list on the command line: ``-i 'gpu-[01-16],login1'`` or ``-i 'a,b,'``.

pdsh users name hosts with ``-w gpu[01-16]`` and Ansible users with ``-i 'a,b,'``; both work
without writing an inventory file. Each item is ``[user@]host[:port]``; everything else takes
its default (ssh, port from ssh_config, the current user), as in those tools.
"""

from __future__ import annotations

from clusterctl.errors import BadValue, UsageError
from clusterctl.hostlist import expand
from clusterctl.inventory.model import Host, Inventory
from clusterctl.inventory.values import host_name, user_host_port

_HOW = "Write hosts as 'gpu-[01-16],login1' or 'a,b,'."


def inventory_from_host_list(spec: str) -> Inventory:
    hosts: dict[str, Host] = {}
    try:
        items = expand(spec)
        for item in items:
            # The rule an inventory file's host names keep: '-foo' would reach commands as an option.
            user, host, port = user_host_port(item)
            name = host_name(host)
            if name not in hosts:  # the first of a name's items says how to reach it
                hosts[name] = Host(name=name, user=user, port=port, groups=("ungrouped",), source="-i")
    except BadValue as exc:
        raise UsageError(f"-i {spec!r}: {exc}", hint=_HOW) from None
    if not items:
        raise UsageError(f"-i {spec!r} names no host.", hint=_HOW)
    return Inventory(name="ad-hoc", hosts=tuple(hosts.values()), groups={"ungrouped": tuple(hosts)},
                     source=f"-i {spec}", format="host-list")
