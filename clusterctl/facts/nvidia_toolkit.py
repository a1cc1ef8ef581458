"""The NVIDIA Container Toolkit on a node: version, runtime binary, CDI spec and devices."""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass

from clusterctl.errors import ParseError
from clusterctl.facts.base import absent_reason
from clusterctl.facts.sections import MARKER_FILES, cat_missing, section_command, split_sections
from clusterctl.facts.table import read_lines

_LOG = re.compile(r"^(?:[A-Z]{4}\[\d+\]|time=\"[^\"]*\" level=)")
_VERSION = re.compile(r"NVIDIA Container Toolkit CLI version (\d+\.\d+\.\d+)")
_CDI_DEVICE = re.compile(r"[a-z0-9.\-]+/[a-z0-9.\-]+=\S+")


def parse_ctk_version(text: str) -> str:
    match = _VERSION.search(text)
    if not match:
        raise ParseError("nvidia-ctk --version", "no 'NVIDIA Container Toolkit CLI version X.Y.Z' line",
                         line=1, text=text.splitlines()[0] if text.strip() else "")
    return match.group(1)


def parse_cdi_list(text: str) -> tuple[str, ...]:
    """``nvidia-ctk cdi list``: ``vendor/class=name`` lines; the toolkit's log lines are skipped."""
    return tuple(read_lines(text, "nvidia-ctk cdi list",
                            lambda line: line.strip() if _CDI_DEVICE.fullmatch(line.strip()) else None,
                            "expected a CDI device name such as nvidia.com/gpu=0",
                            skip=lambda line: _LOG.match(line.strip())))


@dataclass(frozen=True)
class ToolkitFacts:
    ctk_version: str | None
    runtime_binary: bool
    #: The CDI spec's text (None: no spec file) and the loaded driver version it should name.
    cdi_spec: str | None
    driver: str | None


def toolkit_probe(runtime_binary: str, cdi_spec: str) -> str:
    return section_command([
        ("ctk-version", "nvidia-ctk --version"),
        ("runtime", f"ls -1 {shlex.quote(runtime_binary)}"),
        ("cdi-spec", f"cat {shlex.quote(cdi_spec)}"),
        ("driver", "cat /sys/module/nvidia/version"),
    ], marker=MARKER_FILES)


def parse_toolkit_probe(text: str) -> ToolkitFacts:
    sections = split_sections(text, "nvidia toolkit facts", marker=MARKER_FILES)
    body = sections.text
    # A tool's answer is read for the shell's words; a file's text never is (cat's own line says it is absent).
    version = None if absent_reason(body("ctk-version")) else sections.read("ctk-version", parse_ctk_version)
    driver = None if absent_reason(body("driver")) else body("driver").strip()
    return ToolkitFacts(version, absent_reason(body("runtime")) is None, None if cat_missing(body("cdi-spec")) else
                        body("cdi-spec"), driver)
