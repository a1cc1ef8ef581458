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
from clusterctl.facts.clean import Line, clean
from clusterctl.facts.model import NVLinkLane, NVLinkStatus, NVLinkStatuses, ParseWarning
from clusterctl.facts.table import blocks

_WHAT = "nvidia-smi nvlink -s"
#: nvidia-smi's GPU line in ``-L``, ``nvlink -s``, ``-e`` (a blank after the colon: not a bus id, ``GPU 0000:07:00.0``).
GPU_LINE = re.compile(r"^\s*GPU (\d+):\s+(?=\S)(.*?)(?:\s*\(UUID: ([^)]*)\))?\s*$")
_LINK = re.compile(r"^\s+Link (\d+): (?:(\d+(?:\.\d+)?) GB/s|<inactive>)\s*$")
#: Notes nvidia-smi prints under a GPU instead of link lines.
_NOTE = re.compile(r"^\s*(NVML: .*|.*does not (?:have|support) .*NVLink.*|Unable to retrieve NVLink information.*)$",
                   re.IGNORECASE)

#: What nvidia-smi prints instead of any GPU block on a host without NVLink. ("Unable to retrieve
#: NVLink information as all links are inActive" on its own is a failure, not this: left unread.)
_NO_NVLINK = re.compile(r"^\s*Device does not (?:have|support) (?:or support )?NVLink\.?\s*$", re.IGNORECASE)


def parse_nvlink(text: str) -> NVLinkStatuses:
    cleaned = clean(text)
    warnings = cleaned.elision_warnings("lines", "the links there are unknown, not counted as inactive")

    def elided(line: Line) -> bool:
        if not line.text.strip().startswith("[..."):
            return False
        warnings.append(ParseWarning(f"{line.text.strip()!r}: links left out of the paste are unknown", line.number))
        return True

    before, found = blocks(cleaned.lines, GPU_LINE.match)
    for line in before:
        if not elided(line) and not _NO_NVLINK.match(line.text):  # a host without NVLink answers only that
            what = "link line" if _LINK.match(line.text) else "unrecognised line"
            raise ParseError(_WHAT, f"{what} before any 'GPU N:' line", line=line.number, text=line.text)
    statuses: list[NVLinkStatus] = []
    for _, gpu, lines in found:
        lanes: list[NVLinkLane] = []
        for line in lines:
            link = _LINK.match(line.text)
            if link:
                number = int(link.group(1))
                if any(lane.link == number for lane in lanes):
                    raise ParseError(_WHAT, f"link {number} listed twice for GPU {int(gpu.group(1))}", line=line.number,
                                     text=line.text)
                speed = float(link.group(2)) if link.group(2) else None
                lanes.append(NVLinkLane(link=number, speed_gbps=speed, active=speed is not None))
            elif not elided(line) and not _NOTE.match(line.text):
                raise ParseError(_WHAT, "unrecognised line", line=line.number, text=line.text)
        # Issues often redact the UUID ("UUID: ..."); only a real one is kept.
        uuid = gpu.group(3) if gpu.group(3) and gpu.group(3).startswith("GPU-") else None
        statuses.append(NVLinkStatus(gpu_index=int(gpu.group(1)), gpu_name=gpu.group(2).strip() or None, uuid=uuid,
                                     lanes=tuple(lanes),
                                     all_inactive=any("all links are inactive" in ln.text.lower() for ln in lines)))
    indexes = [status.gpu_index for status in statuses]
    if len(set(indexes)) != len(indexes):
        raise ParseError(_WHAT, "the same GPU is listed twice")
    return NVLinkStatuses(statuses, tuple(warnings))


NVLINK: Fact[tuple[NVLinkStatus, ...]] = Fact("nvlink", "nvidia-smi nvlink -s", parse_nvlink)
