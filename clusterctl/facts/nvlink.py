"""``nvidia-smi nvlink -s``: per-GPU NVLink lanes and their speed.

Output is a ``GPU N: <name> (UUID: GPU-...)`` line followed by indented
``Link K: 26.562 GB/s`` or ``Link K: <inactive>`` lines. GPUs without NVLink get a header
and either no link lines or an ``NVML: Unable to retrieve NVLink information...`` note; a host
without NVLink prints only a note (``Device does not have or support Nvlink.``). Pastes go through
the shared pre-cleaning (prompts, fences, quotes, comment prefixes, ``...`` elisions).
"""

from __future__ import annotations

import re

from clusterctl.errors import ParseError
from clusterctl.facts.base import Fact
from clusterctl.facts.clean import clean
from clusterctl.facts.model import NVLinkLane, NVLinkStatus, NVLinkStatuses, ParseWarning

_WHAT = "nvidia-smi nvlink -s"
_GPU = re.compile(r"^GPU (\d+): (.*?)(?: \(UUID: ([^)]*)\))?\s*$")
_LINK = re.compile(r"^\s+Link (\d+): (?:(\d+(?:\.\d+)?) GB/s|<inactive>)\s*$")
#: Notes nvidia-smi prints under a GPU instead of link lines.
_NOTE = re.compile(r"^\s*(NVML: .*|.*does not (?:have|support) .*NVLink.*|Unable to retrieve NVLink information.*)$",
                   re.IGNORECASE)

#: What nvidia-smi prints instead of any GPU block on a host without NVLink. ("Unable to retrieve
#: NVLink information as all links are inActive" on its own is a failure, not this: left unread.)
_NO_NVLINK = re.compile(r"^\s*Device does not (?:have|support) (?:or support )?NVLink\.?\s*$", re.IGNORECASE)


def parse_nvlink(text: str) -> NVLinkStatuses:
    statuses: list[NVLinkStatus] = []
    current: tuple[int, str | None, str | None] | None = None
    lanes: list[NVLinkLane] = []

    def flush() -> None:
        if current is not None:
            statuses.append(
                NVLinkStatus(gpu_index=current[0], gpu_name=current[1], uuid=current[2], lanes=tuple(lanes))
            )

    cleaned_text = clean(text)
    warnings = cleaned_text.elision_warnings("lines", "the links there are unknown, not counted as inactive")
    for cleaned in cleaned_text.lines:
        number, line = cleaned.number, cleaned.text
        if line.strip().startswith("[..."):
            warnings.append(ParseWarning(f"{line.strip()!r}: links left out of the paste are unknown", number))
            continue
        gpu = _GPU.match(line)
        if gpu:
            flush()
            # Issues often redact the UUID ("UUID: ..."); only a real one is kept.
            uuid = gpu.group(3) if gpu.group(3) and gpu.group(3).startswith("GPU-") else None
            current = (int(gpu.group(1)), gpu.group(2).strip() or None, uuid)
            lanes = []
            continue
        link = _LINK.match(line)
        if link:
            if current is None:
                raise ParseError(_WHAT, "link line before any 'GPU N:' line", line=number, text=line)
            link_number = int(link.group(1))
            if any(lane.link == link_number for lane in lanes):
                raise ParseError(
                    _WHAT, f"link {link_number} listed twice for GPU {current[0]}", line=number, text=line
                )
            speed = float(link.group(2)) if link.group(2) else None
            lanes.append(NVLinkLane(link=link_number, speed_gbps=speed, active=speed is not None))
            continue
        if current is not None and _NOTE.match(line):
            continue
        if not statuses and _NO_NVLINK.match(line):
            continue  # the whole answer of a host without NVLink
        raise ParseError(_WHAT, "unrecognised line" if current is not None or statuses else
                         "unrecognised line before any 'GPU N:' line", line=number, text=line)
    flush()
    indexes = [status.gpu_index for status in statuses]
    if len(set(indexes)) != len(indexes):
        raise ParseError(_WHAT, "the same GPU is listed twice")
    return NVLinkStatuses(statuses, tuple(warnings))


NVLINK: Fact[tuple[NVLinkStatus, ...]] = Fact("nvlink", "nvidia-smi nvlink -s", parse_nvlink)
