"""The human views of a survey: fleet table, colour-coded matrices, advice (rich).

Findings are printed the one way every command prints them: ``clusterctl.cli.findings_view``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from clusterctl.findings import Severity, count_by_severity
from clusterctl.survey.advice import FIT_NONE, LayoutAdvice
from clusterctl.survey.checks.codes import NIC_LOSS_CODES, NVLINK_LOSS_CODES
from clusterctl.survey.report import HostReport, SurveyReport
from clusterctl.survey.topology import SHAPE_WORDS, Shape, compress_indices
from clusterctl.terminal_layout import Column, print_table, print_title, print_wrapped
from clusterctl.terminal_text import markup_safe
from clusterctl.wording import plural

if TYPE_CHECKING:
    from rich.console import Console

#: Nearer is greener: the colour says how fast a pair talks.
LINK_STYLE: dict[str, str] = {
    "X": "dim", "NV": "bold green", "PIX": "green", "PXB": "cyan", "PHB": "yellow", "NODE": "magenta",
    "SYS": "red", "SOC": "red",
}
#: Paths from a GPU to a NIC that are not affinity: traffic leaves the GPU's PCIe host bridge or socket.
_ACROSS: dict[str, str] = {
    "NODE": "across the PCIe host bridges of its NUMA node",
    "SYS": "across the CPU interconnect to another NUMA node",
    "SOC": "across the CPU interconnect to another NUMA node",
}


def _nic_summary(report: HostReport) -> tuple[str, bool]:
    """``8/8 up @ 400G`` and whether it looks wrong (a port down or slow)."""
    facts = report.state.facts
    devices = facts.rdma if facts else None
    if devices is None:
        return ("-" if facts is None else "?"), False
    ports = [p for d in devices for p in d.ports]
    up = [p for p in ports if p.state == "PORT_ACTIVE"]
    rates = sorted({p.rate_gbps for p in up if p.rate_gbps}, reverse=True)
    rate = "/".join(f"{r:g}G" for r in rates) if rates else ""
    bad = any(f.code in NIC_LOSS_CODES and f.severity is not Severity.INFO for f in report.findings)
    return f"{len(up)}/{len(ports)} up" + (f" @ {rate}" if rate else ""), bad


#: Fleet table columns, most important first: on a narrow console the last ones are left out
#: (the JSON output has everything).
FLEET_COLUMNS: tuple[str, ...] = ("host", "GPUs", "shape", "NICs", "findings", "NVLink domains", "driver", "NCCL",
                                  "CUDA", "rack", "model")
#: Order the kept columns are shown in.
_SHOWN_ORDER: tuple[str, ...] = ("host", "rack", "GPUs", "model", "shape", "NVLink domains", "NICs", "driver", "CUDA",
                                 "NCCL", "findings")


def render_fleet_table(console: Console, report: SurveyReport) -> None:
    from rich.text import Text

    # Cells never wrap; on a narrow console the last of FLEET_COLUMNS are left out first, never its first three.
    rank = {c: (i if i >= 3 else 0) for i, c in enumerate(FLEET_COLUMNS)}
    columns = [Column(c, keep=True, drop_order=rank[c]) for c in _SHOWN_ORDER]
    rows = [[Text.from_markup(row[c], emoji=False) for c in _SHOWN_ORDER] for row in map(_fleet_row, report.hosts)]
    print_table(console, columns, rows, title=f"Survey of {plural(len(report.hosts), 'host')}")


def _fleet_row(host: HostReport) -> dict[str, str]:
    state = host.state
    if state.facts is None:
        row = dict.fromkeys(FLEET_COLUMNS, "")
        row.update(host=f"[bold red]{state.name}[/]", rack=markup_safe(state.host.rack or ""),
                   findings="[bold red]unreachable[/]")
        return row
    topology = state.topology
    codes = {f.code for f in host.findings if f.severity is not Severity.INFO}
    gpus = "?" if state.gpu_count is None else str(state.gpu_count)
    if "GPU_COUNT_DIFFERS" in codes:
        gpus = f"[bold red]{gpus}[/]"
    model = markup_safe((state.gpu_model or "?").removeprefix("NVIDIA "))
    if "GPU_MODEL_DIFFERS" in codes:
        model = f"[yellow]{model}[/]"
    shape = SHAPE_WORDS[topology.shape] if topology else "?"
    domains = ", ".join(compress_indices(d) for d in topology.nvlink_domains) if topology else "?"
    if codes & NVLINK_LOSS_CODES:
        shape, domains = f"[bold red]{shape}[/]", f"[bold red]{domains or '-'}[/]"
    nics, nic_bad = _nic_summary(host)
    if nic_bad:
        nics = f"[bold red]{nics}[/]"
    stack = state.facts.stack
    drift = {f.evidence.get("component") for f in host.findings
             if f.code in ("STACK_DRIFT", "STACK_PIN_MISMATCH") and f.severity is not Severity.INFO}
    return {
        "host": state.name, "rack": markup_safe(state.host.rack or ""), "GPUs": gpus, "model": model, "shape": shape,
        "NVLink domains": domains or "-", "NICs": nics, "driver": _version_cell(stack, "driver", drift),
        "CUDA": _version_cell(stack, "cuda", drift), "NCCL": _version_cell(stack, "nccl", drift),
        "findings": _findings_cell(host),
    }


def _version_cell(stack: object, attribute: str, drift: set[object]) -> str:
    """A version, yellow when it is off the pin or the fleet majority."""
    value = getattr(stack, attribute, None) if stack is not None else None
    text = markup_safe(str(value)) if value else "-"
    return f"[yellow]{text}[/]" if attribute in drift else text


def _findings_cell(host: HostReport) -> str:
    counts = count_by_severity(host.findings)
    errors, warnings, infos = counts["error"], counts["warning"], counts["info"]
    parts = []
    if errors:
        parts.append(f"[bold red]{plural(errors, 'error')}[/]")
    if warnings:
        parts.append(f"[yellow]{plural(warnings, 'warning')}[/]")
    if infos and not parts:  # infos only count when nothing worse is there (all are listed below)
        parts.append(f"[cyan]{infos} info[/]")
    return ", ".join(parts) if parts else "[green]ok[/]"


def render_matrix(console: Console, host: HostReport) -> None:
    """The host's ``nvidia-smi topo -m`` matrix, each cell coloured by its link class.

    Cells are never cut: where the NIC names do not fit the terminal, columns are headed by
    short names (``N0``...) with a key line, and a matrix still wider than the terminal is
    printed whole (the terminal wraps it; a pipe keeps it) rather than cropped to ``G…``.
    """
    from rich.markup import escape
    from rich.table import Table

    topology = host.state.topology
    if topology is None:
        return
    devices = topology.matrix.devices
    labels = [d.label for d in devices]
    names = {d.label: (d.device_name or d.label) for d in devices}
    cells = {(a, b): topology.link(a, b) for a in labels for b in labels}
    cell_width = max([len(link.raw) for link in cells.values() if link] + [2])

    def width_with(headers: dict[str, str]) -> int:
        # No padding: each column is one character wider than its widest cell, centred.
        widths = [max(len(h) for h in headers.values()), *(max(len(headers[a]), cell_width) for a in labels), 4]
        return sum(w + 1 for w in widths)

    full = {a: names[a] if a.startswith("NIC") else a for a in labels}
    nics = [a for a in labels if a.startswith("NIC")]
    short = {a: (f"N{nics.index(a)}" if a in nics else a.replace("GPU", "G")) for a in labels}
    headers = full if width_with(full) <= console.width else short
    print_title(console, f"{host.name}: {SHAPE_WORDS[topology.shape]}")
    table = Table(box=None, pad_edge=False, padding=(0, 0))
    table.add_column("", no_wrap=True, min_width=max(len(h) for h in headers.values()) + 1)
    for label in labels:
        table.add_column(escape(headers[label]), justify="center", no_wrap=True,
                         min_width=max(len(headers[label]), cell_width) + 1)
    table.add_column(" NUMA", no_wrap=True, min_width=5)
    for a in labels:
        row = []
        for b in labels:
            link = cells[(a, b)]
            raw = link.raw if link else "?"
            style = LINK_STYLE.get(link.kind if link else "", "")
            row.append(f"[{style}]{raw}[/]" if style else raw)
        device = next(d for d in devices if d.label == a)
        table.add_row(escape(headers[a]), *row, device.numa_affinity or "")
    console.print(table, width=max(console.width, width_with(headers)), crop=False)
    if headers is short and nics:
        _line(console, "key: " + ", ".join(f"{short[a]}={escape(names[a])}" for a in nics), 5)
    console.print("[dim]NV# NVLink (green) < PIX < PXB < PHB < NODE < SYS (red): nearest first[/]")


def _line(console: Console, markup: str, indent: int) -> None:
    """One line of markup wrapped at the terminal's width with a hanging indent (styles kept)."""
    from rich.text import Text

    print_wrapped(console, Text.from_markup(markup, emoji=False), indent)


def render_host_summary(console: Console, host: HostReport) -> None:
    """Shape, NVLink domains, each GPU's nearest NIC and NUMA node, each NIC's GPUs."""
    from rich.markup import escape

    topology = host.state.topology
    name = escape(host.name)
    if topology is None:
        console.print(f"[bold]{name}[/]: no topology")
        return
    domains = ", ".join(f"\\[{compress_indices(d)}]" for d in topology.nvlink_domains) or "none"
    _line(console, f"[bold]{name}[/]: {len(topology.gpus)} GPU(s), {SHAPE_WORDS[topology.shape]}, "
                   f"NVLink domains: {domains}", 2)
    if topology.shape is Shape.PCIE_ONLY:
        _line(console, "  GPUs talk over PCIe only: keep tensor parallelism at 1 or expect slow all-reduce.", 4)
    if not topology.nics:
        # Said once for the host, not as "nearest NIC none" on every GPU (the matrix may just not list them).
        numa: dict[str, list[int]] = {}
        for gpu in topology.gpus:
            numa.setdefault(gpu.numa_node or "?", []).append(gpu.index)
        _line(console, "  the matrix names no NICs: no GPU-NIC path is known; "
                       + "; ".join(f"NUMA {node}: GPUs {compress_indices(gpus)}" for node, gpus in numa.items()), 4)
    for gpu in topology.gpus if topology.nics else ():
        nic = markup_safe(", ".join(gpu.nearest_nics)) or "none"
        style = LINK_STYLE.get(gpu.nic_link or "", "")
        link = f"[{style}]{gpu.nic_link}[/]" if style and gpu.nic_link else (gpu.nic_link or "-")
        across = _ACROSS.get(gpu.nic_link or "")
        if across and gpu.nearest_nics:
            # Not affinity: a reader of "nearest NIC" must not take a NODE/SYS path for a local one.
            _line(console, f"  GPU{gpu.index}: NUMA {gpu.numa_node or '?'}, [bold]no NIC with affinity[/]: the "
                           f"nearest, {nic}, is only reachable {across} ({link})", 4)
        else:
            _line(console, f"  GPU{gpu.index}: NUMA {gpu.numa_node or '?'}, nearest NIC {nic} ({link})", 4)
    for n in topology.nics:
        gpus = compress_indices(n.nearest_gpus) if n.nearest_gpus else "none (no GPU nearer than SYS)"
        _line(console, f"  {markup_safe(n.name)}: NUMA {n.numa_node or '?'}, GPUs {gpus}"
                       + (f" ({n.gpu_link})" if n.nearest_gpus else ""), 4)


def render_advice(console: Console, advice: LayoutAdvice) -> None:
    from rich.text import Text

    console.print(f"[bold]Layout advice[/] for TP={advice.tp} PP={advice.pp} (DP={advice.dp}, "
                  f"world size {advice.world_size}):")
    for line in advice.explanation:
        print_wrapped(console, f"  - {line}", 4)
    rows = []
    for h in advice.hosts:
        fit = Text(h.fit, style="bold red" if h.fit == FIT_NONE else "green")
        groups = " ".join(f"[{compress_indices(g)}]" for g in h.tp_groups) or "-"
        ranks = ", ".join(f"{r.local_rank}->GPU{r.gpu}->{r.nic or '-'}" for r in h.rank_nics)
        rows.append((h.host, fit, groups, ranks))
    # The host is copied (never cut); the rank map wraps between its entries.
    print_table(console, (Column("host", keep=True), Column("fit", keep=True), Column("TP groups"),
                          Column("rank -> GPU -> NIC")), rows, boxed=False)
    if advice.placements and (advice.pp > 1 or advice.dp > 1):
        placements = [(str(p.dp_rank), str(p.pp_stage), p.host, p.rack or "", compress_indices(p.gpus),
                       f"{p.first_global_rank}-{p.first_global_rank + len(p.gpus) - 1}") for p in advice.placements]
        print_table(console, (Column("DP", keep=True), Column("PP stage", keep=True), Column("host", keep=True),
                              Column("rack", keep=True), Column("GPUs", keep=True),
                              Column("global ranks", keep=True)), placements, title="placement", boxed=False)


def render_parse_warnings(console: Console, host: HostReport, source: str) -> None:
    """What the parsers could not read of this host's facts, with the input's line numbers (each wrapped
    under its dash at the terminal's width, as text: it may quote the input)."""
    from rich.markup import escape

    facts = host.state.facts
    found = facts.warnings if facts else {}
    for fact, warnings in found.items():
        console.print(f"[yellow]{escape(source)}: {fact} read in part[/] ({len(warnings)} warning(s)):")
        for warning in warnings:
            where = f"line {warning.line}: " if warning.line is not None else ""
            _line(console, f"  [yellow]-[/] {markup_safe(where + warning.message)}", 4)
