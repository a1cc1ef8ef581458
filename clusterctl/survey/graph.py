"""Each host's GPU/NIC/NUMA graph as Graphviz DOT, and SVG/PNG where ``dot`` is installed.

NUMA nodes are clusters; GPUs and NICs sit in theirs. Edges: NVLink between GPUs (label
``NV18``, thicker with more links; a full mesh of equal counts is drawn as one NVSwitch hub)
and GPU-NIC pairs on one PCIe switch or host bridge (``PIX``/``PXB``/``PHB``). Farther pairs
are left out: drawn, an 8-GPU 10-NIC host is a hairball. What the host's findings name (a GPU
that lost its NVLinks, a slow NIC, the missing GPU-GPU links) is drawn in red.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from clusterctl.errors import UsageError
from clusterctl.findings import Finding, Severity
from clusterctl.survey.report import SurveyReport
from clusterctl.survey.topology import SHAPE_WORDS, HostTopology

_GPU_NIC_EDGES = {"PIX": "darkgreen", "PXB": "steelblue", "PHB": "orange"}
_SAFE_NAME = re.compile(r"[^A-Za-z0-9._-]+")
_RENDER_TIMEOUT_S = 30


def _quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


@dataclass(frozen=True)
class Marks:
    """What a host's findings name, drawn in red: GPUs, NICs and GPU pairs that lost NVLink."""

    gpus: frozenset[int] = frozenset()
    nics: frozenset[str] = frozenset()
    #: (a, b, what was expected there, e.g. ``NV12``).
    missing_links: tuple[tuple[int, int, str], ...] = ()

    @classmethod
    def from_findings(cls, findings: Iterable[Finding]) -> Marks:
        gpus: set[int] = set()
        nics: set[str] = set()
        missing: list[tuple[int, int, str]] = []
        for f in findings:
            if f.severity is Severity.INFO:
                continue
            evidence = f.evidence or {}
            if isinstance(evidence.get("gpu"), int):
                gpus.add(evidence["gpu"])
            if isinstance(evidence.get("hca"), str):
                nics.add(evidence["hca"])
            for pair in evidence.get("pairs") or ():
                ends = pair.get("gpus") if isinstance(pair, Mapping) else None
                if isinstance(ends, (list, tuple)) and len(ends) == 2 and all(isinstance(g, int) for g in ends):
                    missing.append((ends[0], ends[1], str(pair.get("expected") or "NVLink")))
        # A GPU in every missing pair is the broken one (GPU3 of 0-3, 1-3, 2-3...).
        if missing:
            common = set.intersection(*({a, b} for a, b, _ in missing))
            gpus |= common
        return cls(frozenset(gpus), frozenset(nics), tuple(missing))


_BAD = "fillcolor=salmon, color=red, penwidth=2"


def host_dot(name: str, topology: HostTopology, marks: Marks | None = None) -> str:
    marks = marks or Marks()
    title = f"{name}: {SHAPE_WORDS[topology.shape]}"
    if marks.gpus or marks.nics or marks.missing_links:
        title += " (red: named by a finding)"
    lines = [f"graph {_quote(name)} {{",
             f"  label={_quote(title)}; labelloc=t; fontname=Helvetica;",
             "  node [fontname=Helvetica, style=filled];"]
    groups: dict[str, list[str]] = {}
    # (node, its text, NUMA node, shape, named by a finding, colour) of every GPU and NIC.
    devices = [(g.label, g.label, g.numa_node, "box", g.index in marks.gpus, "palegreen") for g in topology.gpus]
    devices += [(n.label, n.name, n.numa_node, "ellipse", n.name in marks.nics, "lightblue") for n in topology.nics]
    for label, text, numa, shape, bad, fill in devices:
        look = _BAD if bad else f"fillcolor={fill}"
        groups.setdefault(numa or "?", []).append(f"    {_quote(label)} [shape={shape}, {look}, label={_quote(text)}];")
    for number, (numa, nodes) in enumerate(sorted(groups.items())):
        title = f"NUMA {numa}" if numa != "?" else "NUMA unknown"
        lines += [f"  subgraph cluster_{number} {{", f"    label={_quote(title)}; style=rounded;", *nodes, "  }"]
    hubbed: set[frozenset[int]] = set()
    for number, (members, count) in enumerate(_switched_domains(topology)):
        # A full mesh of equal NV# counts is an NVSwitch fabric: one hub reads better than
        # n*(n-1)/2 crossing edges, and a GPU missing from it stands out at once.
        hub = f"nvswitch{number}"
        lines.append(f"  {_quote(hub)} [shape=hexagon, fillcolor=darkseagreen1, "
                     f"label={_quote(f'NVSwitch fabric: NV{count} per GPU pair')}];")
        width = 1 + min(count, 18) / 6
        for index in members:
            lines.append(f"  {_quote(f'GPU{index}')} -- {_quote(hub)} [color=darkgreen, penwidth={width:.1f}];")
        hubbed.update(frozenset((a, b)) for a in members for b in members if a < b)
    for gpu in topology.gpus:
        for peer, count in gpu.nvlink_peers:
            if peer > gpu.index and frozenset((gpu.index, peer)) not in hubbed:
                width = 1 + min(count, 18) / 6
                lines.append(f"  {_quote(gpu.label)} -- {_quote(f'GPU{peer}')} "
                             f"[label=\"NV{count}\", color=darkgreen, penwidth={width:.1f}];")
    for gpu in topology.gpus:
        for nic in topology.nics:
            link = topology.link(gpu.label, nic.label)
            if link is not None and link.kind in _GPU_NIC_EDGES:
                lines.append(f"  {_quote(gpu.label)} -- {_quote(nic.label)} "
                             f"[label={_quote(link.kind)}, color={_GPU_NIC_EDGES[link.kind]}, style=dashed];")
    for a, b, expected in marks.missing_links:
        lines.append(f"  {_quote(f'GPU{a}')} -- {_quote(f'GPU{b}')} "
                     f"[label={_quote(f'no {expected}')}, color=red, fontcolor=red, style=dotted, penwidth=2];")
    lines.append("}")
    return "\n".join(lines) + "\n"


def _switched_domains(topology: HostTopology) -> list[tuple[tuple[int, ...], int]]:
    """NVLink domains of 3+ GPUs where every pair has the same NV# count (NVSwitch-like)."""
    peers = {gpu.index: dict(gpu.nvlink_peers) for gpu in topology.gpus}
    out: list[tuple[tuple[int, ...], int]] = []
    for domain in topology.nvlink_domains:
        if len(domain) < 3:
            continue
        counts = {peers.get(a, {}).get(b) for a in domain for b in domain if a < b}
        if len(counts) == 1 and (count := counts.pop()) is not None:
            out.append((domain, count))
    return out


@dataclass(frozen=True)
class GraphFiles:
    host: str
    dot: Path
    rendered: tuple[Path, ...]
    #: Why SVG/PNG were not made, if they were not.
    note: str | None = None

    def describe(self) -> str:
        """``graph HOST: HOST.dot, HOST.svg`` (and why SVG/PNG are missing, when they are)."""
        made = ", ".join(str(p) for p in (self.dot, *self.rendered))
        return f"graph {self.host}: {made}" + (f" ({self.note})" if self.note else "")


def write_report_graphs(folder: str | Path, report: SurveyReport) -> list[GraphFiles]:
    """Write ``HOST.dot`` (and ``HOST.svg``/``.png`` when ``dot`` exists) for every host of a survey (or
    ``topo show``) report whose topology is known."""
    out = Path(folder)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"cannot create the graph folder ({exc.strerror})", file=str(out)) from exc
    dot_program = shutil.which("dot")
    written: list[GraphFiles] = []
    for host in report.hosts:
        name, topology = host.name, host.state.topology
        if topology is None:
            continue
        stem = _SAFE_NAME.sub("_", name) or "host"
        dot_path = out / f"{stem}.dot"
        dot_path.write_text(host_dot(name, topology, Marks.from_findings(host.findings)))
        rendered: list[Path] = []
        note = None if dot_program else "Graphviz 'dot' not installed: only .dot written"
        for fmt in ("svg", "png") if dot_program else ():
            target = out / f"{stem}.{fmt}"
            try:
                subprocess.run([dot_program or "dot", f"-T{fmt}", "-o", str(target), str(dot_path)],
                               check=True, capture_output=True, timeout=_RENDER_TIMEOUT_S)
                rendered.append(target)
            except (subprocess.SubprocessError, OSError) as exc:
                note = f"dot -T{fmt} failed: {exc}"
        written.append(GraphFiles(name, dot_path, tuple(rendered), note))
    return written
