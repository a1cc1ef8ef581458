"""``health read FILE...``: the health parsers and checks on saved or pasted tool outputs.

Each text's tool is recognised from its content (first match wins, most specific first), read by
the same parser the live check uses (after the one pre-cleaning step, ``facts.clean``), and all
texts are judged together as one host. What a parser could not read comes back as notes naming
the file and line; a text no parser recognises is a usage error (exit 2).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Sequence
from typing import Any

from clusterctl.errors import ParseError, UsageError
from clusterctl.facts.model import warnings_of
from clusterctl.health.checks import HostInput
from clusterctl.health.model import HealthReport
from clusterctl.health.probe import HostProbe, parsers
from clusterctl.inventory.model import Fabric
from clusterctl.plain_json import to_plain


def _has(pattern: str) -> Callable[[str], bool]:
    compiled = re.compile(pattern, re.MULTILINE)
    return lambda text: bool(compiled.search(text))


def _formats() -> list[tuple[str, str, Callable[[str], bool]]]:
    """(what the tool is called, the ``HostProbe`` attribute its output goes to, whether a text is one)."""
    from clusterctl.facts import lspci
    from clusterctl.facts.dcgmi import looks_like_dcgmi
    from clusterctl.facts.nvsmi_query import LOST_GPU, looks_like_nvidia_smi_q

    return [
        ("dcgmi diag", "dcgm", looks_like_dcgmi),
        ("nvidia-smi -q", "smi", looks_like_nvidia_smi_q),
        ("nvidia-smi nvlink -e", "nvlink_errors", _has(r"Link \d+: [A-Za-z][\w /-]*: \d+")),
        ("nvidia-smi nvlink -s", "nvlink", _has(r"Link \d+: (?:[\d.]+ GB/s|<inactive>)")),
        ("lspci -vvv", "pci", _has(rf"^\s*{lspci.DEVICE}.*\n(?:\s+.*\n)*?\s+"
                                   r"(?:Control:|Capabilities:|LnkSta:|Subsystem:)")),
        ("InfiniBand counters", "ib_counters", _has(r"/sys/class/infiniband/\S+/counters/\w+:\s*\d+|"
                                                    r"# Port (?:extended )?counters")),
        # ibstatus too, so that its parser can say which output to paste instead.
        ("ibstat / ibv_devinfo", "rdma", _has(r"^\s*(?:CA '|hca_id:|Infiniband device '[^']+' port \d+ status:)")),
        ("kernel log", "kernel", _has(r"NVRM|SXid|nvidia-nvswitch|kernel:|^\s*\[\s*\d+\.\d+\]|"
                                      r"^\s*\[[A-Z][a-z]{2} [A-Z][a-z]{2}")),
        # Last: a host whose only GPU is lost prints that one line.
        ("nvidia-smi -q", "smi", lambda text: LOST_GPU.search(text) is not None),
    ]


def read_outputs(texts: Sequence[tuple[str, str]], *, host: str = "input", fabric: Fabric | None = None
                 ) -> tuple[HealthReport, list[str]]:
    """Judge ``(name, text)`` tool outputs as one host (``fabric``: the inventory's, a port's rate is held to);
    also returns notes on what was read partly."""
    from clusterctl.health.run import judge

    probe = HostProbe()
    notes: list[str] = []
    readings: dict[str, Any] = {}
    formats = _formats()
    for name, text in texts:
        if not text.strip():
            raise UsageError("empty input: expected the output of a health tool (nvidia-smi -q, dmesg, ...)",
                             file=name)
        chosen = next((f for f in formats if f[2](text)), None)
        if chosen is None:
            raise UsageError("not recognised as nvidia-smi -q, a kernel log, nvidia-smi nvlink -s/-e, ibstat, "
                             "InfiniBand counters, perfquery, lspci -vvv or dcgmi diag output", file=name)
        label, attribute, _ = chosen
        try:
            value = parsers()[attribute](text)
        except ParseError as exc:
            raise UsageError(f"{label} output could not be read: {exc.reason}", file=name, line=exc.line) from exc
        if getattr(probe, attribute) is not None:
            notes.append(f"{name}: a second {label} output; this one replaces the first")
        setattr(probe, attribute, value)
        notes += [f"{name}: {label}: {w}" for w in warnings_of(value)]
        notes += [f"{name}: {label}: GPU {gpu.bus_id}: note after a value: {note}"
                  for gpu in getattr(value, "gpus", ()) for note in getattr(gpu, "notes", ())]
        readings[attribute] = reading(label, name, value)
    report = judge([HostInput(host, probe, fabric=fabric or Fabric())], source="health-read")
    hosts = tuple(dataclasses.replace(h, readings=readings) for h in report.hosts)
    return dataclasses.replace(report, hosts=hosts), notes


def reading(label: str, name: str, value: Any) -> dict[str, Any]:
    """One parser's whole result as plain JSON: every field it read, whatever the checks use, but its warnings:
    they are the host's ``facts.parse_warnings`` (with the probe), in one place as a live run has them."""
    result = to_plain(value)
    if isinstance(result, dict) and isinstance(getattr(value, "warnings", None), tuple):
        del result["warnings"]
    return {"tool": label, "file": name, "result": result}
