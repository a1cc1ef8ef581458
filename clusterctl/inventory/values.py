"""Checks and conversions of single inventory values, shared by every inventory format.

Each function takes the value as the file gave it (a YAML scalar, or the text of an Ansible
INI variable) and returns the typed value, or raises ``BadValue`` with a sentence a user
understands. The format readers add file, line and field to turn it into an
``InventoryError``: these functions know nothing about where the value came from.
"""

from __future__ import annotations

import difflib
import ipaddress
import math
import os
import re
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from clusterctl.errors import BadValue
from clusterctl.inventory.model import FABRIC_TYPES, ROLES, TRANSPORT_KINDS
from clusterctl.terminal_text import one_line

#: Words people use for a role, from kubeadm/kubespray/k3s vocabulary, and the role they mean.
ROLE_ALIASES: dict[str, str] = {
    "master": "control-plane",
    "masters": "control-plane",
    "control_plane": "control-plane",
    "controlplane": "control-plane",
    "control": "control-plane",
    "server": "control-plane",
    "node": "worker",
    "workers": "worker",
    "agent": "worker",
    "compute": "worker",
}

#: Names people write for a fabric type.
FABRIC_ALIASES: dict[str, str] = {
    "infiniband": "ib",
    "rocev2": "roce",
    "eth": "ethernet",
    "tcp": "ethernet",
}

#: Variable names whose values are secrets: kept as ``Secret`` (masked wherever shown, usable
#: through ``reveal()`` by code that hands them to a host on stdin or in a 0600 file).
SECRET_WORDS: tuple[str, ...] = ("pass", "secret", "token", "vault", "key", "credential")

SSH_PORT = 22  # ssh's own: where it connects when neither the inventory nor ssh_config names a port


def did_you_mean(typed: str | Sequence[str], choices: Iterable[str], *, n: int = 1) -> str | None:
    """``Did you mean 'x'?`` for the ``n`` choices closest to each word ``typed``, or ``None`` when nothing is
    close: the one decision of which names a typo was meant to be."""
    options = list(choices)
    close = dict.fromkeys(c for word in ([typed] if isinstance(typed, str) else typed)
                          for c in difflib.get_close_matches(word, options, n=n))
    return f"Did you mean {', '.join(f'{c!r}' for c in close)}?" if close else None


def fields_hint(fields: Iterable[str]) -> str:
    """``Valid fields: a, b.``: the hint of a section that is not a mapping or has an unknown field."""
    return "Valid fields: " + ", ".join(fields) + "."

def one_of_hint(word: str, choices: Iterable[str]) -> str:
    options = list(choices)
    listed = ", ".join(f"'{c}'" for c in options)
    suggestion = did_you_mean(word, options)
    return f"{suggestion} Valid values: {listed}." if suggestion else f"Valid values: {listed}."


def mask_secrets(variables: dict[str, Any]) -> dict[str, Any]:
    """Same variables with every secret-looking value (its name has a ``SECRET_WORDS``) wrapped in a ``Secret``,
    so no output can show it."""
    from clusterctl.secret import Secret

    def secret(name: str, value: Any) -> bool:
        return value is not None and not isinstance(value, Secret) and any(w in name.lower() for w in SECRET_WORDS)

    return {k: Secret(str(v), label=k) if secret(k, v) else v for k, v in variables.items()}


def text(value: Any, what: str) -> str:
    """A plain scalar as text (YAML turns ``rack: 1`` into an int), on one line and with no terminal escape."""
    if isinstance(value, bool) or value is None or not isinstance(value, (str, int, float)):
        raise BadValue(f"{what} must be a text value, not {describe(value)}.")
    if one_line(given := str(value)) != given:
        raise BadValue(f"{what} must not hold a control character (a newline, a terminal escape), not {given!r}.")
    return given


def port(value: Any) -> int:
    """A TCP port: a whole number from 1 to 65535 (digits in a string are accepted, as in INI)."""
    number: int | None = None
    if isinstance(value, int) and not isinstance(value, bool):
        number = value
    elif isinstance(value, str) and value.strip().isdigit():
        number = int(value.strip())
    if number is None or not 1 <= number <= 65535:
        raise BadValue(
            f"port must be a whole number from 1 to 65535, not {describe(value)}.",
            f"SSH normally listens on port {SSH_PORT}.",
        )
    return number


# ``host[:port]``: an IPv6 address (with its %zone) is written bare, or in brackets when a port follows.
_HOST_PORT = (r"(?:\[(?P<bracketed>[^\[\]@\s]+)\]|(?P<name>[^:@\[\]\s]+))(?::(?P<port>[^:]*))?"
              r"|(?P<bare_ipv6>[0-9A-Fa-f.]*:[0-9A-Fa-f:.]*:[0-9A-Fa-f:.]*(?:%[\w.-]+)?)")
# ``[user@]host[:port]``, optionally as an ``ssh://`` URI, as OpenSSH reads it: the user runs to the last '@'.
_USER_HOST_PORT = re.compile(rf"(?:ssh://)?(?:(?P<user>\S+)@)?(?:{_HOST_PORT})")


def user_host_port(spec: str) -> tuple[str | None, str, int | None]:
    """The user, host and port of a host list's item or a ProxyJump hop: the one reading of both."""
    m = _USER_HOST_PORT.fullmatch(spec)
    if m is None:
        raise BadValue(f"{spec!r} is not [user@]host[:port].")
    return (m["user"], m["bracketed"] or m["name"] or m["bare_ipv6"],
            None if m["port"] is None else port(m["port"]))


def host_port(value: Any, what: str, hint: str | None = None) -> tuple[str, int | None]:
    """``host[:port]`` with the host by ``address``'s rule and the port by ``port``'s: the one reading of an API
    endpoint, a BMC's address and a listen address (an IPv6 address bare, or in brackets when a port follows)."""
    given = text(value, what).strip()
    try:
        if (m := re.fullmatch(_HOST_PORT, given)) is None:
            address(given)  # its sentence, when the host is what is wrong
            raise BadValue("an IPv6 address is written in brackets when a port follows, as [fd00::1]:6443.")
        return address(m["bracketed"] or m["name"] or m["bare_ipv6"]), None if m["port"] is None else port(m["port"])
    except BadValue as exc:
        raise BadValue(f"{what} {given!r} is not host[:port]: {exc.message}", hint) from None


def join_host_port(host: str, port: int | str) -> str:
    """``host:port`` as ``host_port`` reads it back and a URL writes it: an IPv6 address in brackets."""
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def jump_hops(chain: str) -> tuple[tuple[str | None, str, int | None], ...]:
    """The hops of a ProxyJump chain (``none``: no hop), each ``user_host_port`` with a host by ``address``'s rule:
    the one reading of an inventory's jump host (at load) and of ssh_config's ProxyJump."""
    if chain.strip().lower() == "none":
        return ()
    hops = tuple(user_host_port(hop.strip()) for hop in chain.split(",") if hop.strip())
    for _, host, _ in hops:
        address(host, "jump host")
    return hops


def jump_host(value: Any, what: str) -> str:
    """An inventory's ProxyJump chain, as written once ``jump_hops`` can read it."""
    jump_hops(chain := text(value, what))
    return chain


def role(value: Any) -> str:
    name = text(value, "a role").strip()
    if name in ROLES:
        return name
    alias = ROLE_ALIASES.get(name.lower())
    if alias:
        raise BadValue(f"unknown role '{name}'.", f"Did you mean '{alias}'? Valid roles: control-plane, worker.")
    raise BadValue(f"unknown role '{name}'.", one_of_hint(name, ROLES))


def roles(value: Any) -> tuple[str, ...]:
    """A list of roles, or one text with commas (``control-plane,worker``) as INI files write it."""
    items: list[Any]
    if isinstance(value, str):
        items = [part for part in (p.strip() for p in value.split(",")) if part]
    elif isinstance(value, list):
        items = value
    else:
        raise BadValue(f"roles must be a list such as [control-plane, worker], not {describe(value)}.")
    if not items:
        raise BadValue("roles must not be empty.", "Give at least one of: control-plane, worker.")
    return tuple(dict.fromkeys(role(item) for item in items))  # each role once, in the order written


def fabric_type(value: Any, what: str = "fabric type") -> str:
    name = text(value, what).strip()
    if name.lower() in FABRIC_TYPES:
        return name.lower()
    alias = FABRIC_ALIASES.get(name.lower())
    if alias:
        raise BadValue(f"unknown fabric type '{name}'.", f"Write '{alias}' for {name}.")
    raise BadValue(f"unknown fabric type '{name}'.", one_of_hint(name, FABRIC_TYPES))


def transport(value: Any) -> str:
    name = text(value, "transport").strip()
    if name in TRANSPORT_KINDS:
        return name
    raise BadValue(f"unknown transport '{name}'.", one_of_hint(name, TRANSPORT_KINDS))


def boolean(value: Any, what: str) -> bool:
    """A YAML true/false (not a quoted string, not a number)."""
    if isinstance(value, bool):
        return value
    raise BadValue(f"{what} must be true or false, not {describe(value)}.")


def url(value: Any, what: str, *, local_files: bool = True) -> str:
    """A base URL apt, containerd or Helm fetches from (``http(s)://`` or, with ``local_files``, a ``file:/``
    mirror), one word, without its trailing slash: every URL setting and option is read by this one rule."""
    given = value if isinstance(value, str) else text(value, what)  # its own words for a control character
    if not given.startswith(("http://", "https://", "file:/") if local_files else ("http://", "https://")):
        raise BadValue(f"{what} must be an http(s):// {'or file:/ ' if local_files else ''}URL, not {given!r}.")
    if any(c.isspace() or ord(c) < 32 for c in given):
        raise BadValue(f"{what} must not contain spaces or control characters, not {given!r}.")
    return given.rstrip("/")


def subnet(value: Any, what: str) -> str:
    """A network in CIDR form, host bits zero (``10.244.0.0/16``), as kubeadm and the CNIs take it."""
    try:
        return str(ipaddress.ip_network(text(value, what), strict=True))
    except ValueError as exc:
        raise BadValue(f"{what} is not a network in CIDR form: {exc}.", "Write it like 10.244.0.0/16.") from None


#: Ansible's spellings of a boolean (its ``bool`` filter), as an INI inventory gives them: text.
ANSIBLE_TRUE = ("true", "yes", "on", "1")
ANSIBLE_FALSE = ("false", "no", "off", "0")


def ansible_boolean(value: Any, what: str) -> bool:
    """A boolean as Ansible reads one: YAML's true/false, or INI text such as ``false``, ``no``, ``0``."""
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower() if isinstance(value, (str, int)) else None
    if text in ANSIBLE_TRUE:
        return True
    if text in ANSIBLE_FALSE:
        return False
    raise BadValue(f"{what} must be true or false, not {describe(value)}.", hint="Write true or false.")


def positive_number(value: Any, what: str) -> float:
    number = _number(value)
    if number is None or number <= 0:
        raise BadValue(f"{what} must be a number greater than 0, not {describe(value)}.")
    return number


def fraction(value: Any, what: str) -> float:
    number = _number(value)
    if number is None or not 0 < number <= 1:
        raise BadValue(
            f"{what} must be a fraction of line rate between 0 and 1, not {describe(value)}.",
            "For example 0.9 means 90% of line rate.",
        )
    return number


def text_list(value: Any, what: str) -> tuple[str, ...]:
    """A list of names, or one text with commas."""
    if isinstance(value, str):
        return tuple(part.strip() for part in value.split(",") if part.strip())
    if isinstance(value, list):
        return tuple(text(item, f"each entry of {what}") for item in value)
    raise BadValue(f"{what} must be a list of names, not {describe(value)}.")


def host_profile(value: Any, transport: str, base_dir: Path, hint: str) -> str | None:
    """A host's ``profile`` (``None``: none named): a mock host must name its folder, whose absolute path this is
    (``hint`` says where to name it); any other host's is kept as written."""
    if transport != "mock":
        return None if value is None else str(value)
    if value is None:
        raise BadValue("no profile is named for the mock transport.", hint)
    raw = text(value, "profile").strip()
    path = local_path(raw, base_dir)
    if not path.is_dir():
        raise BadValue(
            f"mock profile folder '{raw}' does not exist (looked for {path}).",
            "A relative profile path is taken from the folder of the inventory file.",
        )
    return str(path)


def local_path(value: Any, base_dir: Path) -> Path:
    """A file on the control machine as an inventory names it: ``~`` expanded, a relative path taken
    from the inventory's folder (``base_dir``)."""
    return (base_dir / os.path.expanduser(str(value))).resolve()


def mock_state_folder(value: Any, base_dir: Path) -> str | None:
    """A mock cluster's state folder as an inventory names it (``local_path``); empty: none named (the default)."""
    return None if value in (None, "") else str(local_path(value, base_dir))


def describe(value: Any) -> str:
    """How a wrong value is shown in a message: its text, or its kind when it is a structure."""
    if value is None:
        return "an empty value"
    if isinstance(value, bool):
        return f"'{str(value).lower()}' (a yes/no value)"
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    return f"'{value}'"


def _number(value: Any) -> float | None:
    """A finite number, or None: ``nan`` and ``inf`` (YAML ``.nan``/``.inf``, JSON ``NaN``, INI ``nan``)
    are no timeout, rate or fraction (every comparison with NaN is false: it would pass any range)."""
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        return None
    try:
        number = float(value.strip() if isinstance(value, str) else value)
    except (ValueError, OverflowError):  # OverflowError: a whole number too large for a float
        return None
    return number if math.isfinite(number) else None


# --- values that become file names, keys, URLs or command arguments -----------------------------
# Refused at load, with the file and line, rather than quoted into a command that then fails:
# a plan that says "ok" must describe an apply that can work.

_NAME_CHARS = re.compile(r"^[A-Za-z0-9_\[][A-Za-z0-9_.:%\[\]-]*$")
_VERSION = re.compile(r"^[vV]?[0-9][0-9A-Za-z.+~:_-]*$")
# ``host[:port]`` then a ``/path``; an IPv6 host in brackets (an image reference's grammar has no bare one).
_REGISTRY = re.compile(r"(?P<host>(?:\[[^\]/\s]+\]|[^:/\s\[\]]+)(?::\d*)?)(?P<path>/[a-z0-9][a-z0-9._/-]*)?")
_IMAGE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._/-]*(:[0-9]{1,5}/[A-Za-z0-9._/-]+)?(:[A-Za-z0-9_][A-Za-z0-9_.-]*)?"
                    r"(@sha256:[0-9a-f]{64})?$")
_PACKAGE = re.compile(r"^[a-z0-9][a-z0-9+.-]+(=[0-9A-Za-z.+~:_-]+)?$")
#: A name a POSIX shell can export (``fullmatch``): ASCII letters, digits and '_', not starting with a digit.
ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _matching(value: Any, what: str, pattern: re.Pattern[str], problem: str, hint: str | None = None, *,
              strip: bool = True, dots: bool = True) -> str:
    """``value``'s text (stripped unless not ``strip``) when ``pattern`` matches it (and, without ``dots``, it
    has no ``..``); else ``BadValue`` "<what> '<text>' <problem>" with ``hint``."""
    name = text(value, what).strip() if strip else text(value, what)
    if not pattern.match(name) or (not dots and ".." in name):
        raise BadValue(f"{what} {name!r} {problem}", hint)
    return name


def host_name(value: Any, what: str = "a host name") -> str:
    """A host's name in the inventory: letters, digits, ``. _ - :`` (IPv6 names), never a blank or ``;``."""
    return _matching(value, what, _NAME_CHARS, "may only use ASCII letters, digits, '.', '-', '_' and ':' (no spaces, "
                     "quotes or shell characters).", "It names the host in commands, file names and Kubernetes; "
                     "put a real address in 'address:'.", strip=False, dots=False)


# A DNS name, ending in '.' when absolute (also an IPv6 address's %zone: an interface name): RFC 1123's labels of
# 1 to 63 characters, no '-' at either end ('_' inside one, as real host names have), at most 253 in all.
_DNS_NAME = re.compile(r"(?=.{1,253}\.?\Z)(?:[A-Za-z0-9](?:[A-Za-z0-9_-]{0,61}[A-Za-z0-9])?(?:\.|\Z))+")


def ip_literal(address: str | None) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    """The address when it is written as one (``10.0.0.11``, ``fd00::1``), not a name to resolve."""
    try:
        return ipaddress.ip_address(address or "")
    except ValueError:
        return None


def address(value: Any, what: str = "address") -> str:
    """A host name or IP address, what a connection can resolve (``::1`` and ``fe80::1%eth0`` included): the rule
    of an address, a jump host and (in ``inventory check``) a host reached by its name."""
    name = text(value, what).strip()
    ip, percent, zone = name.partition("%")
    try:
        ipaddress.ip_address(ip)
        resolvable = not percent or _DNS_NAME.fullmatch(zone)
    except ValueError:
        resolvable = _DNS_NAME.fullmatch(name)
    if not resolvable:
        raise BadValue(f"{what} {name!r} is not a host name or IP address.",
                       "Write a DNS name such as gpu-a1.example.com or an address such as 10.0.0.11.")
    return name


def version(value: Any, what: str) -> str:
    """A package or release version (``1.36.2``, ``v1.36.2``, ``2.2.1-1``, ``580``): a digit first, what every
    comparison of a pin reads; no quotes, spaces or shell."""
    return _matching(value, what, _VERSION, "is not a version (a digit first, then letters, digits and '.', '+', '~', "
                     "':', '_', '-').", "For example 1.36.2.")


def registry(value: Any, what: str, *, path: bool = True) -> str:
    """An image registry ``host[:port][/path]`` (no trailing '/'), or without ``path`` a certs.d folder's name
    (``docker.io``, ``host:5000``, ``_default``): the host and port by ``host_port``'s rule, for every registry."""
    name = text(value, what).strip().rstrip("/") if path else text(value, what)
    hint = None if path else "It names the folder /etc/containerd/certs.d/<registry>/ and a key in hosts.toml."
    if (m := _REGISTRY.fullmatch(name)) is None or (m["path"] and not path):
        raise BadValue(f"{what} {name!r} " + ("is not a registry such as registry.example.internal:5000/mirror." if path
                       else "must be a registry host name such as docker.io or registry.local:5000."), hint)
    if path or name != "_default":  # containerd's folder for every registry not named
        host_port(m["host"], what, hint)
    return name


def image_reference(value: Any, what: str) -> str:
    """A container image or repository such as ``registry.k8s.io/pause:3.10``, its registry's port by the one rule."""
    name = _matching(value, what, _IMAGE, "is not an image reference such as registry.k8s.io/pause:3.10.", dots=False)
    first, slash, _ = name.partition("/")
    if slash and ":" in first:  # a registry's host:port (a tag never has a '/' after it)
        host_port(first, what)
    return name


def package_name(value: Any, what: str) -> str:
    """A Debian package name, optionally ``=version``."""
    return _matching(value, what, _PACKAGE, "is not a Debian package name such as containerd.io.")
