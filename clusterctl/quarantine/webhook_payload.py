"""Alertmanager's webhook body, read within bounds, and the receiver's one-JSON-line-per-decision log.

The body comes from the network, so nothing in it is trusted: its size is bounded by the
server, its nesting depth here (before ``json.loads`` recurses into it), every number must be
short (a 5,000-digit integer is refused rather than converted), ``NaN`` and ``Infinity`` are
refused, and the two labels the receiver reads (the alert's name and the host) have the sizes
real ones have. Anything else is a ``BadPayload`` (answered 400, nothing done, never a
traceback), except one alert of a payload whose other alerts can be read (a blackbox exporter's
300-character URL in ``instance``): that alert is ``Unreadable``, named and left out, so that
the good alerts of its group are acted on (a 400 would make Alertmanager drop them all). Log
lines cut every text field to ``FIELD_CHARS``, so a 1 MB label cannot become a 1 MB log line.
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NamedTuple, TextIO

from clusterctl.json_input import BadField, count, items, join, mapping, shown, syntax_error
from clusterctl.json_input import text as text_field
from clusterctl.utc import utc_stamp

HOST_LABELS = ("Hostname", "hostname", "node", "instance")
#: Deepest nesting of objects and arrays a webhook body may have: a real one has 4
#: (body, alerts, alert, labels).
MAX_DEPTH = 16
#: Longest number in a body (a real one has small ones: ``truncatedAlerts``).
MAX_NUMBER_CHARS = 32
#: Longest alert name and host label read (a DNS name is at most 253 characters; an instance label
#: adds a port).
MAX_ALERTNAME_CHARS = 256
MAX_HOST_CHARS = 262
#: Longest text of one field in a log line.
FIELD_CHARS = 300

_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_BRACKET = re.compile(rb"[\[\]{}]")


class BadPayload(ValueError):
    """Not an Alertmanager webhook payload; the message says what is wrong."""


@dataclass(frozen=True)
class Alert:
    name: str
    host_label: str
    status: str


@dataclass(frozen=True)
class Unreadable:
    """An alert that could not be read: ``alerts[1] ('GPUXidError')`` and why, both short and printable."""

    name: str
    why: str


def _depth(body: bytes) -> int:
    """The deepest nesting of ``[``/``{`` outside strings (brackets inside strings do not count)."""
    deepest = depth = 0
    for match in _BRACKET.finditer(_STRING.sub(b'""', body)):
        if match.group() in (b"[", b"{"):
            depth += 1
            deepest = max(deepest, depth)
        else:
            depth -= 1
    return deepest


def _number(text: str) -> float | int:
    if len(text) > MAX_NUMBER_CHARS:
        raise BadPayload(f"a number of {len(text)} characters (at most {MAX_NUMBER_CHARS}): not a webhook payload")
    return float(text) if any(c in text for c in ".eE") else int(text)


def _constant(text: str) -> None:
    raise BadPayload(f"{text} is not JSON a webhook payload has")


def _loads(body: bytes) -> Any:
    depth = _depth(body)
    if depth > MAX_DEPTH:
        raise BadPayload(f"nested {depth} levels deep (at most {MAX_DEPTH}): not a webhook payload")
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise BadPayload(f"not UTF-8: {exc.reason} at byte {exc.start}") from None
    try:
        return json.loads(text, parse_int=_number, parse_float=_number, parse_constant=_constant)
    except json.JSONDecodeError as exc:
        raise BadPayload(f"not JSON at line {exc.lineno}, {syntax_error(exc)}") from None
    except RecursionError:  # the depth check makes this unreachable; kept as a 400, never a traceback
        raise BadPayload("nested too deeply: not a webhook payload") from None


class Payload(NamedTuple):
    alerts: list[Alert]
    unreadable: list[Unreadable]
    #: Alerts of the group the sender left out of this POST (``truncatedAlerts``: its ``max_alerts``).
    truncated: int = 0


def parse_payload(body: bytes) -> Payload:
    """The alerts of one webhook POST, those of its alerts that could not be read, and how many the sender left
    out; ``BadPayload`` for anything else, and for a payload not one of whose alerts can be read."""
    def said(exc: BadField) -> str:
        return f"{exc.field or 'body'}: {exc.message}"

    data = _loads(body)
    try:
        status = mapping(data, "", required=("alerts",)).get("status", "firing")
        entries = items(data["alerts"], "alerts", lambda alert, field: (alert, field))
        truncated = count(data.get("truncatedAlerts", 0), "truncatedAlerts")
    except BadField as exc:
        raise BadPayload(f"{said(exc)}: not an Alertmanager webhook payload") from None
    alerts: list[Alert] = []
    unreadable: list[Unreadable] = []
    for value, field in entries:
        try:
            alerts.append(_alert(value, field, status))
        except BadField as exc:
            labels = value.get("labels") if isinstance(value, dict) else None
            name = labels.get("alertname") if isinstance(labels, dict) else None
            unreadable.append(Unreadable(f"{field} ({shown(name)})" if isinstance(name, str) else field, said(exc)))
    if unreadable and not alerts:
        raise BadPayload(f"{unreadable[0].why}: not an Alertmanager webhook payload")
    return Payload(alerts, unreadable, truncated)


def _alert(value: Any, field: str, status: Any) -> Alert:
    alert = mapping(value, field, required=("labels",))
    labels = mapping(alert["labels"], join(field, "labels"), required=("alertname",))
    name = text_field(labels["alertname"], join(field, "labels.alertname"), limit=MAX_ALERTNAME_CHARS)
    if not name:
        raise BadField(join(field, "labels.alertname"), "empty")
    status = text_field(alert.get("status", status), join(field, "status"), choices=("firing", "resolved"))
    key = next((k for k in HOST_LABELS if isinstance(labels.get(k), str) and labels[k]), None)
    host = text_field(labels[key], join(field, f"labels.{key}"), limit=MAX_HOST_CHARS) if key else ""
    return Alert(name, _instance_host(host) if key == "instance" else host, status)


def _instance_host(instance: str) -> str:
    """The host an ``instance`` label names: ``gpu-01:9400``, ``[fd00::4]:9400``, a bare name or address (``fd00::4``
    too), or the URL a blackbox exporter's HTTP probe puts there (``https://gpu-01.lab:8443/healthz``)."""
    if "://" in instance:
        instance = re.split(r"[/?#]", instance.split("://", 1)[1], maxsplit=1)[0].rpartition("@")[2]
    if instance.startswith("[") and "]" in instance:
        return instance[1:instance.index("]")]
    return instance.rsplit(":", 1)[0] if instance.count(":") == 1 else instance


def clip(text: str, limit: int = FIELD_CHARS) -> str:
    """``text`` cut to ``limit`` characters, saying how long it was."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}... ({len(text)} characters)"


def _bounded(value: object) -> object:
    if isinstance(value, str):
        return clip(value)
    if isinstance(value, (list, tuple)):
        return [_bounded(v) for v in list(value)[:20]]
    return value


class DecisionLog:
    """One JSON line per decision (``time`` first), each text field at most ``FIELD_CHARS``; thread-safe."""

    def __init__(self, stream: TextIO, clock: Callable[[], float] = time.time) -> None:
        self.stream = stream
        self.clock = clock
        self._lock = threading.Lock()

    def say(self, **entry: object) -> None:
        text = json.dumps({"time": utc_stamp(self.clock()), **{k: _bounded(v) for k, v in entry.items()}}) + "\n"
        with self._lock:
            self.stream.write(text)
            self.stream.flush()
