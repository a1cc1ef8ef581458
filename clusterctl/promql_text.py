"""Host names inside PromQL: the one check and escape for alert rules and dashboards alike.

Inventory and survey values are untrusted input; a host name becomes part of a PromQL regex matcher
only when it is a plain host name, and its dots are escaped for RE2 inside a double-quoted PromQL
string (``\\\\.``: PromQL unescapes once, RE2 once more).
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from clusterctl.errors import UsageError

_HOSTNAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")


def checked_host_name(name: str, where: str) -> str:
    """``name``, or ``UsageError`` saying it cannot go into ``where`` (e.g. "an alert rule's Hostname matcher")."""
    if not _HOSTNAME.match(name):
        raise UsageError(f"host name {name!r} cannot go into {where} (letters, digits, '.', '_' and '-' only)")
    return name


def host_alternation(hosts: Iterable[str], where: str) -> str:
    """An RE2 alternation of exact host names inside a PromQL double-quoted string, sorted and unique."""
    return "|".join(checked_host_name(name, where).replace(".", "\\\\.") for name in sorted(set(hosts)))
