"""``nvidia-smi nvlink -e``: per-GPU, per-link NVLink error counters.

Output is a ``GPU N: <name> (UUID: ...)`` line followed by ``Link K: <Counter>: <value>`` lines
(``Replay Errors``, ``Recovery Errors``, ``CRC Errors`` on Ampere/Hopper; other names on newer
drivers), one counter a line or several on a line separated by commas. Blank lines separate
links. Pastes add ``=== GPU 0 ===`` banners of loops and ``[...]`` where they were clipped:
those are skipped with a warning, and so is any other line the parser cannot read.
"""

from __future__ import annotations

import re

from clusterctl.errors import ParseError
from clusterctl.facts.clean import clean
from clusterctl.facts.health_model import NVLinkErrorCounters, NVLinkErrors
from clusterctl.facts.model import ParseWarning
from clusterctl.facts.nvlink import GPU_LINE

_WHAT = "nvidia-smi nvlink -e"
_LINK = re.compile(r"^Link (\d+):\s*(.*)$")
#: A trailing note after the number (``891   <- link 1 is unhealthy``) is a paste's annotation: ignored.
_COUNTER = re.compile(r"^([A-Za-z][\w /-]*?)\s*:\s*(\d+(?:\.\d*)?(?:[eE][-+]?\d+)?)(?:\s+\S.*)?$")
#: What Blackwell drivers (595 on B300) list beside the errors, kept apart: traffic, the FEC histogram of corrected
#: codewords (billions on a healthy link), rates (any value with a point or exponent), pre-FEC raw lane counts.
_NOT_ERRORS = re.compile(r"[TR]x (?:packets|bytes)|FEC Errors - \d+|Raw (?:BER|Errors)\b.*|.*\bBER\b.*|PLR \w+ Blocks")
#: A loop's ``=== GPU 0 ===`` banner (the pre-cleaning has taken out ``[...]`` elision lines).
_NOISE = re.compile(r"^=+.*=+$")


def parse_nvlink_errors(text: str) -> NVLinkErrors:
    #: (GPU, link) -> its counters so far, the GPU's name, the link's first line (built once at the end).
    links: dict[tuple[int, int], tuple[dict[str, int | float], str | None, int]] = {}
    gpu: tuple[int, str | None] | None = None
    gpus_seen = 0
    cleaned = clean(text)
    warnings = cleaned.elision_warnings("links", "their counters are unknown")
    for line in cleaned.lines:
        raw = line.text.strip()
        header = GPU_LINE.match(raw) if raw.startswith("GPU ") else None
        if header:
            gpu = (int(header.group(1)), header.group(2).strip() or None)
            gpus_seen += 1
            continue
        link = _LINK.match(raw) if raw.startswith("Link ") else None
        if link and gpu is not None:
            number = int(link.group(1))
            rest = link.group(2).strip()
            counters: dict[str, int | float] = {}
            for part in (p.strip() for p in rest.split(",")) if rest else ():
                counter = _COUNTER.match(part)
                if counter:
                    value = counter.group(2)
                    counters[counter.group(1)] = int(value) if value.isdigit() else float(value)
                elif part:
                    warnings.append(ParseWarning(f"GPU {gpu[0]} link {number}: unreadable counter {part[:60]!r}",
                                                 line.number))
            known, _, first = links.setdefault((gpu[0], number), ({}, gpu[1], line.number))
            known.update(counters)
            links[(gpu[0], number)] = (known, gpu[1], first)
            continue
        if raw.startswith("NVML:"):
            continue
        if _NOISE.match(raw):
            if "[" in raw or "..." in raw or "…" in raw:
                warnings.append(ParseWarning("the paste was clipped here: links left out are unknown", line.number))
            continue
        if link:
            warnings.append(ParseWarning("link line before any 'GPU N:' line", line.number))
            continue
        warnings.append(ParseWarning(f"unrecognised line {raw[:80]!r}", line.number))
    if not links and not gpus_seen:
        raise ParseError(_WHAT, "no 'GPU N:' block with 'Link K: <counter>: <value>' lines", line=1)
    return NVLinkErrors(tuple(_link(key, *links[key]) for key in sorted(links)), warnings=tuple(warnings))


def _link(key: tuple[int, int], values: dict[str, int | float], name: str | None, line: int) -> NVLinkErrorCounters:
    errors = {k: v for k, v in values.items() if isinstance(v, int) and not _NOT_ERRORS.fullmatch(k)}
    return NVLinkErrorCounters(*key, errors, name, line, {k: v for k, v in values.items() if k not in errors})
