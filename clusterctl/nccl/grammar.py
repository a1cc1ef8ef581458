"""Value grammars of NCCL variables, checked the way NCCL itself reads them.

NCCL reads numeric parameters with ``strtoll(value, NULL, 0)``: "0x10" is 16, "4M" is 4 (the
parse stops at the first non-digit) and "abc" is 0. Messages say what NCCL will actually use.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass

from clusterctl.inventory.values import ip_literal
from clusterctl.nccl.knowledge import VariableInfo
from clusterctl.nccl.versions import NcclVersion


@dataclass(frozen=True)
class ValueProblem:
    """One thing wrong with a value: a stable code, a severity, what NCCL does with it, how to fix it."""

    code: str
    severity: str
    message: str
    fix: str


def invalid(message: str, fix: str, severity: str = "error") -> ValueProblem:
    """The usual problem: a value its reader does not take as written (``INVALID_VALUE``)."""
    return ValueProblem("INVALID_VALUE", severity, message, fix)


#: NCCL 2.24 introduced "allreduce:tree,ring;broadcast:ring" for NCCL_ALGO / NCCL_PROTO.
PER_COLLECTIVE_SINCE = NcclVersion(2, 24, 0)
_STRTOLL_RE = re.compile(r"^\s*([+-]?)(0[xX][0-9a-fA-F]+|0[0-7]*|[1-9][0-9]*)")
_UNIT_RE = re.compile(r"^(?:[kKmMgGtT](?:i?[bB])?|[bB])$")
_UNIT_FACTOR = {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}
_HCA_TOKEN_RE = re.compile(r"^[A-Za-z0-9_.\-]+(?::\d+){0,3}$")


def strtoll(text: str) -> tuple[int, str]:
    """What C's strtoll(text, &end, 0) returns, and the unread rest ("" when all of it was a number)."""
    m = _STRTOLL_RE.match(text)
    if m is None:
        return 0, text
    sign, digits = m.group(1), m.group(2)
    if digits.lower().startswith("0x"):
        number = int(digits, 16)
    elif digits.startswith("0") and len(digits) > 1:
        number = int(digits, 8)
    else:
        number = int(digits, 10)
    return (-number if sign == "-" else number), text[m.end():]


def check_value(info: VariableInfo, value: str, version: NcclVersion | None) -> list[ValueProblem]:
    checker = _CHECKERS.get(info.kind)
    if checker is None or info.scope not in ("core", "example-plugin"):
        # Only NCCL's own parsing is modelled; PyTorch and plugins parse their variables differently.
        return []
    return checker(info, value, version)


# -- numbers -------------------------------------------------------------------------------


def _read_number(info: VariableInfo, value: str) -> tuple[int | None, list[ValueProblem]]:
    """The number NCCL reads from ``value``, with a problem when that is not what the text says."""
    name = info.name
    if value.strip() == "":
        return None, [invalid(f"{name} is set to an empty value; NCCL ignores it and uses its default",
                              f"remove {name} or give it a value", severity="warning")]
    number, rest = strtoll(value)
    if rest == "":
        return number, []
    stripped = rest.strip()
    if _STRTOLL_RE.match(value) and _UNIT_RE.match(stripped):
        meant = number * _UNIT_FACTOR.get(stripped[0].lower(), 1)
        return number, [invalid(
            f"{name}={value} is read as {number}: NCCL parses numbers with strtoll, which stops at {stripped!r}",
            f"write the number in full: {name}={meant}",
        )]
    if _STRTOLL_RE.match(value):
        return number, [invalid(
            f"{name}={value} is not a whole number: NCCL reads only the leading digits, {number}",
            f"write a whole number, e.g. {name}={number}",
        )]
    return number, [invalid(
        f"{name}={value} is not a number: NCCL reads it as 0",
        "write a whole number" + (f" ({', '.join(info.values)})" if info.values else ""),
    )]


def _range_text(low: int | None, high: int | None) -> str:
    if low is not None and high is not None:
        return f"{low}-{high}"
    if low is not None:
        return f">= {low}"
    return f"<= {high}"


def _check_int(info: VariableInfo, value: str, version: NcclVersion | None) -> list[ValueProblem]:
    number, problems = _read_number(info, value)
    if problems or number is None:
        return problems
    name = info.name
    high = info.maximum_for(version)
    low = info.minimum
    if info.clamped:
        return _check_clamped(info, value, number, low, high)
    if info.multiple_of and number % info.multiple_of != 0:
        problems.append(invalid(f"{name}={value} is not a multiple of {info.multiple_of}",
                                f"use a multiple of {info.multiple_of}"))
    if (low is not None and number < low) or (high is not None and number > high):
        where = f" for NCCL {version}" if version is not None and info.maximum_by_version else ""
        problems.append(invalid(f"{name}={value} is outside the accepted range {_range_text(low, high)}{where}",
                                f"use a value in {_range_text(low, high)}"))
    return problems


def _check_clamped(info: VariableInfo, value: str, number: int, low: int | None, high: int | None
                   ) -> list[ValueProblem]:
    """NCCL_NTHREADS: NCCL does not fail on a bad value, it silently uses another one."""
    name = info.name
    multiple = info.multiple_of or 1
    if number % multiple != 0:
        used, why = high, f"not a multiple of {multiple}"
    elif high is not None and number > high:
        used, why = high, f"above {high}"
    elif low is not None and number < low:
        used, why = low, f"below {low}"
    else:
        return []
    return [invalid(f"{name}={value} is {why}: NCCL replaces it with {used}",
                    f"use one of {', '.join(info.values)}" if info.values else f"use {used}")]


def _check_bool(info: VariableInfo, value: str, version: NcclVersion | None) -> list[ValueProblem]:
    name = info.name
    number, problems = _read_number(info, value)
    if problems:
        if value.strip().lower() in ("true", "yes", "on", "false", "no", "off"):
            return [invalid(f"{name}={value} is not 0 or 1: NCCL reads it with strtoll as 0",
                            f"write {name}=1 to turn it on or {name}=0 to turn it off")]
        return problems
    if number not in (0, 1):
        return [invalid(f"{name}={value} is not 0 or 1", f"write {name}=1 or {name}=0", severity="warning")]
    return []


# -- words ---------------------------------------------------------------------------------


def matching_choice(info: VariableInfo, word: str, choices: tuple[str, ...]) -> str | None:
    return next((choice for choice in choices
                 if word == choice or (info.case_insensitive and word.lower() == choice.lower())), None)


def _suggest(word: str, choices: tuple[str, ...]) -> str:
    lowered = {c.lower(): c for c in choices}
    close = difflib.get_close_matches(word.lower(), list(lowered), n=1, cutoff=0.6)
    return f" (did you mean {lowered[close[0]]}?)" if close else ""


def _check_enum(info: VariableInfo, value: str, version: NcclVersion | None) -> list[ValueProblem]:
    name = info.name
    choice = matching_choice(info, value.strip(), info.values)
    if choice is None:
        case = "" if info.case_insensitive else " (case matters)"
        return [invalid(f"{name}={value} is not one of {', '.join(info.values)}{case}; NCCL does not recognise it",
                        f"use one of {', '.join(info.values)}{_suggest(value, info.values)}")]
    if choice in info.deprecated_values:
        return [ValueProblem("DEPRECATED", "warning", f"{name}={value}: {info.deprecated_values[choice]}",
                             f"remove {name} or use {info.default}" if info.default else f"remove {name}")]
    return []


#: src/graph/paths.cc levelsOldToNew: legacy numbers 0..5 as path types (larger ones are clamped to 5).
LEGACY_LEVELS: tuple[str, ...] = ("LOC", "PIX", "PXB", "PHB", "SYS", "SYS")


def legacy_level(text: str) -> str | None:
    """The level NCCL reads from a legacy number ("3" -> PHB), None when ``text`` does not start with a digit."""
    if not text[:1].isdigit():
        return None
    number, _ = strtoll(text)
    return LEGACY_LEVELS[min(number, len(LEGACY_LEVELS) - 1)]


def _check_level(info: VariableInfo, value: str, version: NcclVersion | None) -> list[ValueProblem]:
    """NCCL_P2P_LEVEL / NCCL_NET_GDR_LEVEL as ncclGetLevel (src/graph/paths.cc) reads them.

    A name is compared with strcmp against topoPathTypeStr (src/graph/topo.cc): exact case
    only; a text starting with a digit is a legacy number; anything else is silently ignored
    and NCCL keeps its own choice.
    """
    name = info.name
    word = value.strip()
    known = info.values_for(version)
    if word in known:
        return []
    if word in info.values:
        since = info.value_since[word]
        return [invalid(f"{name}={value}: NCCL knows the level {word} only from {since.major}.{since.minor} on "
                        f"(this is {version}); it ignores the value and keeps its own choice",
                        f"use one of {', '.join(known)}, or upgrade NCCL")]
    exact = next((v for v in known if v.lower() == word.lower()), None)
    if exact is not None:
        return [invalid(f"{name}={value} is ignored: NCCL compares level names case-sensitively (strcmp), "
                        f"so {word!r} matches no level and NCCL keeps its own choice",
                        f"write {name}={exact}")]
    legacy = legacy_level(word)
    if legacy is not None:
        return [ValueProblem("LEGACY_VALUE", "info",
                             f"{name}={value} is a legacy numeric level, read as {legacy}; "
                             "what each number means changed between NCCL releases",
                             f"write {name}={legacy}")]
    return [invalid(f"{name}={value} is not a level NCCL knows ({', '.join(known)}); "
                    "NCCL ignores it and keeps its own choice",
                    f"use one of {', '.join(known)}{_suggest(word, known)}")]


def _check_cidr(info: VariableInfo, value: str, version: NcclVersion | None) -> list[ValueProblem]:
    """NCCL_IB_ADDR_RANGE as envIbAddrRange (src/transport/net_ib) reads it: one CIDR, else ignored.

    NCCL splits at the first '/', reads the address with inet_pton and the mask with strtol, so
    in "10.0.0.0/8,192.168.0.0/16" the mask is 8 and everything after the comma is dropped.
    """
    name = info.name
    text = value.strip()
    if not text:
        return []
    address, slash, mask_text = text.partition("/")
    if not slash:
        return [invalid(f"{name}={value} has no '/mask': NCCL ignores the range and considers every GID",
                        f"write one range such as {name}={address or '10.0.0.0'}/16")]
    ip = ip_literal(address)
    if ip is None:
        return [invalid(f"{name}={value}: {address!r} is not an IP address; NCCL ignores the range",
                        "write one range such as 10.0.0.0/16")]
    mask, rest = strtoll(mask_text)
    bits = 32 if ip.version == 4 else 128
    problems: list[ValueProblem] = []
    if rest.strip():
        if "," in rest or " " in rest:
            problems.append(invalid(
                f"{name}={value} lists more than one range; NCCL reads only one CIDR: it uses "
                f"{address}/{mask} and silently drops the rest", f"keep one range: {name}={address}/{mask}",
                "warning"))
        else:
            problems.append(invalid(f"{name}={value}: the mask {mask_text!r} is read as {mask}",
                                    f"write {name}={address}/{mask}", "warning"))
    if mask > bits or mask < 0:
        problems.append(invalid(f"{name}={value}: a /{mask} mask is invalid for IPv{ip.version}; NCCL ignores "
                                "the range", f"use a mask of 0-{bits}"))
    return problems


# -- lists ---------------------------------------------------------------------------------


def _check_word_list(info: VariableInfo, value: str, version: NcclVersion | None) -> list[ValueProblem]:
    """NCCL_ALGO / NCCL_PROTO: "Ring,Tree", "^LL128", or since 2.24 "allreduce:tree,ring;broadcast:ring"."""
    name = info.name
    text = value.strip()
    if text == "":
        return [invalid(f"{name} is set to an empty value", f"remove {name} or list what to use", "warning")]
    problems: list[ValueProblem] = []
    what = "an algorithm" if info.kind == "algo-list" else "a protocol"
    if ":" in text or ";" in text:
        if version is not None and version < PER_COLLECTIVE_SINCE:
            problems.append(invalid(
                f"{name}={value} uses the per-collective form, which NCCL reads only from 2.24 on (this is {version})",
                f"use a plain list such as {name}={info.values[0]} or upgrade NCCL"))
        lists = []
        for part in filter(str.strip, text.split(";")):
            collective, colon, words = part.partition(":")
            if colon and not collective.strip():
                problems.append(invalid(f"{name}={value}: {part!r} has no collective name before ':'",
                                        f"write it as allreduce:{words}"))
            lists.append(words if colon else part)
    else:
        lists = [text]
    for words in lists:
        for token in words.strip().removeprefix("^").split(","):
            token = token.strip()
            if not token:
                problems.append(invalid(f"{name}={value} has an empty entry", "remove the extra comma", "warning"))
                continue
            choice = matching_choice(info, token, info.values)
            if choice is None:
                current = ", ".join(v for v in info.values if v != "Collnet")
                problems.append(invalid(f"{name}={value}: {token!r} is not {what} NCCL knows ({current})",
                                        f"use {current}{_suggest(token, info.values)}"))
            elif choice == "Collnet" and version is not None and version.series >= (2, 14):
                problems.append(invalid(f"{name}={value}: 'Collnet' is read only by NCCL 2.5-2.13",
                                        "use CollnetDirect or CollnetChain"))
    return problems


def _check_name_list(info: VariableInfo, value: str, version: NcclVersion | None) -> list[ValueProblem]:
    """NCCL_IB_HCA ("=mlx5_0:1,mlx5_1:1", "^mlx5_2") and NCCL_SOCKET_IFNAME ("=eth0", "^docker,lo")."""
    name = info.name
    problems: list[ValueProblem] = []
    if value.strip() == "":
        return [invalid(f"{name} is set to an empty value", f"remove {name} or list the devices", "warning")]
    if value != value.strip() or " " in value:
        problems.append(invalid(f"{name}={value!r} contains spaces; NCCL does not strip them from names",
                                "remove the spaces"))
    seen: set[str] = set()
    # after NCCL's "^" (exclude) then "=" (exact names) prefixes
    for token in value.strip().removeprefix("^").removeprefix("=").split(","):
        token = token.strip()
        if not token:
            problems.append(invalid(f"{name}={value} has an empty entry", "remove the extra comma", "warning"))
            continue
        if token in seen:
            problems.append(invalid(f"{name}={value} lists {token} more than once", f"list {token} once",
                                    "warning"))
        seen.add(token)
        if info.kind == "hca-list" and not _HCA_TOKEN_RE.match(token):
            problems.append(invalid(
                f"{name}={value}: {token!r} is not <device>[:<port>] (e.g. mlx5_0:1)",
                "write devices as mlx5_0 or mlx5_0:1, comma separated"))
        if token[0] in "^=":
            problems.append(invalid(
                f"{name}={value}: {token[0]!r} only works at the start of the whole list, not before {token[1:]}",
                f"put {token[0]!r} once in front of the list"))
    return problems


def _check_subsys_list(info: VariableInfo, value: str, version: NcclVersion | None) -> list[ValueProblem]:
    """NCCL_DEBUG_SUBSYS: names compared with strcasecmp (src/debug.cc); the list grew by release."""
    name = info.name
    problems: list[ValueProblem] = []
    known = info.values_for(version)
    for token in value.strip().removeprefix("^").split(","):
        token = token.strip()
        if not token or matching_choice(info, token, known) is not None:
            continue
        later = matching_choice(info, token, info.values)
        if later is not None:
            since = info.value_since[later]
            problems.append(invalid(
                f"{name}={value}: {token!r} is a subsystem only from NCCL {since.major}.{since.minor} on "
                f"(this is {version}); NCCL ignores it", f"use {', '.join(known)}", "warning"))
        else:
            problems.append(invalid(f"{name}={value}: {token!r} is not one NCCL knows ({', '.join(known)})",
                                    f"use {', '.join(known)}{_suggest(token, known)}", "warning"))
    return problems


#: The grammar of each kind of value; NCCL takes a "list" or "string" as written.
_CHECKERS = {
    "int": _check_int,
    "bytes": _check_int,
    "bool": _check_bool,
    "enum": _check_enum,
    "level": _check_level,
    "algo-list": _check_word_list,
    "proto-list": _check_word_list,
    "hca-list": _check_name_list,
    "ifname-list": _check_name_list,
    "subsys-list": _check_subsys_list,
    "cidr": _check_cidr,
}


def normalise(info: VariableInfo, value: str) -> str:
    """The value in a form that compares equal to the knowledge base's default when NCCL sees them alike."""
    text = value.strip()
    if info.kind in ("int", "bytes", "bool"):
        number, rest = strtoll(text)
        return str(number) if rest == "" and text else text
    return text.upper() if info.case_insensitive else text
