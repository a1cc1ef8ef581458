"""``--limit``: choose hosts of the inventory by name, glob, group, exclusion and intersection.

The pattern language is Ansible's: ``a,b`` or ``a:b`` is a union, ``!x`` removes, ``&x`` keeps
only hosts also in ``x``, ``*`` globs match host and group names, ``~regex`` matches host names,
``all`` is every host, ``@FILE`` the names in a file (``@retry``: the last run's failed hosts).
Hosts come back in inventory order, whatever the pattern order.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Iterable, Sequence

from clusterctl.errors import UsageError
from clusterctl.inventory.model import Host, Inventory
from clusterctl.inventory.values import did_you_mean


def select_hosts(inventory: Inventory, patterns: Iterable[str] | str | None,
                 given: str = "--limit") -> tuple[Host, ...]:
    """Hosts matching ``patterns``, the option ``given`` (``--only``); all hosts when there is no pattern (``None``).

    Raises ``UsageError`` (exit 2) naming a pattern that matches no host, so a typo never
    silently runs on nothing (or, with ``!``, on everything); and one given with no term in it
    (``-l "$HOSTS"`` with the variable empty), which would otherwise act on every host.
    """
    terms = split_patterns(patterns)
    if not terms and patterns is not None:
        joined = patterns if isinstance(patterns, str) else ",".join(patterns)
        raise UsageError(f"{given} {joined!r}: names no host; leave {given} out to act on every host of the "
                         "inventory.")
    if not terms:
        return inventory.hosts
    included: set[str] | None = None
    required: list[set[str]] = []
    excluded: set[str] = set()
    for term in terms:
        if term.startswith("!"):
            excluded |= _match(inventory, term[1:], term, given)
        elif term.startswith("&"):
            required.append(_match(inventory, term[1:], term, given))
        else:
            included = (included or set()) | _match(inventory, term, term, given)
    chosen = set(h.name for h in inventory.hosts) if included is None else included
    for names in required:
        chosen &= names
    chosen -= excluded
    return tuple(h for h in inventory.hosts if h.name in chosen)


def hosts_named(inventory: Inventory, names: Iterable[str], given: str) -> tuple[Host, ...]:
    """The inventory's hosts of these names (each once, in the order named): THE check of host names a
    user typed as ``HOST...`` (``given``). A name it lacks is exit 2."""
    known = {h.name: h for h in inventory.hosts}
    names = list(dict.fromkeys(names))
    unknown = [n for n in names if n not in known]
    if unknown:
        raise not_in_inventory(inventory, unknown, given)
    return tuple(known[n] for n in names)


def host_named(inventory: Inventory, name: str, given: str) -> Host:
    """The one host an option names (``--host``, ``--from``: ``given``), as ``--limit`` finds hosts: its
    name, its address, a group or pattern of one host. None is ``not_in_inventory``'s exit 2, several too."""
    from clusterctl.hostlist import compress

    matched = _match(inventory, name, name, given)
    found = [h for h in inventory.hosts if h.name in matched]
    if len(found) > 1:
        raise UsageError(f"{given} {name!r} matches {len(found)} hosts ({compress([h.name for h in found])}); "
                         "it takes one.", file=inventory.source)
    return found[0]


def not_in_inventory(inventory: Inventory, names: Sequence[str], given: str, *, groups: bool = False) -> UsageError:
    """The one refusal of names the inventory does not have: its file, the names as given and the
    closest names it has (its groups' too, for a --limit pattern)."""
    known = [h.name for h in inventory.hosts] + (list(inventory.groups) if groups else [])
    return UsageError(f"{given} {', '.join(map(repr, names))}: not in the inventory.", file=inventory.source,
                      hint=did_you_mean(names, known, n=3) or "Run 'clusterctl inventory show' to see its host and "
                      "group names.")


def split_patterns(patterns: Iterable[str] | str | None) -> list[str]:
    """``"a,b:!c"`` and ``["a", "b,c"]`` to single terms; empty pieces are dropped."""
    if patterns is None:
        return []
    items = [patterns] if isinstance(patterns, str) else list(patterns)
    terms: list[str] = []
    for item in items:
        # As in Ansible: commas separate when there are any (so "fe80::1,gpu01" works);
        # otherwise colons do. A colon inside [..] belongs to a glob class, not a separator.
        separator = r",(?![^\[]*\])" if "," in item else r":(?![^\[]*\])"
        terms.extend(piece.strip() for piece in re.split(separator, item) if piece.strip())
    return terms


def _match(inventory: Inventory, pattern: str, term: str, given: str) -> set[str]:
    host_names = [h.name for h in inventory.hosts]
    if pattern.startswith("@") and len(pattern) > 1:
        # Ansible's --limit @file, and @retry for the hosts the last run failed on.
        from clusterctl.retry import names_from

        listed: set[str] = set()
        for name in names_from(pattern):
            listed |= _match(inventory, name, f"{name} (from {pattern})", given)
        return listed
    if not pattern:
        raise UsageError(f"the {given} pattern '{term}' is incomplete.", hint="Write '!name' or '&group'.")
    if pattern in ("all", "*"):
        return set(host_names)
    found: set[str] = set()
    # Exact names first, so a host called 'gpu[1]' or 'a*b' is found as itself.
    if pattern in host_names:
        found.add(pattern)
    if pattern in inventory.groups:
        found.update(inventory.groups[pattern])
    if not found:  # the address ssh connects to, as a user reads it in ~/.ssh/config or a prompt
        found.update(h.name for h in inventory.hosts if h.address == pattern)
    if not found and pattern.startswith("~"):
        try:
            regex = re.compile(pattern[1:])
        except re.error as exc:
            raise UsageError(f"the {given} pattern '{term}' is not a valid regular expression: {exc}.") from None
        found.update(n for n in host_names if regex.search(n))
    elif not found and any(c in pattern for c in "*?["):
        found.update(n for n in host_names if fnmatch.fnmatchcase(n, pattern))
        for group, members in inventory.groups.items():
            if fnmatch.fnmatchcase(group, pattern):
                found.update(members)
    if not found:
        raise not_in_inventory(inventory, [term], given, groups=True)
    return found
