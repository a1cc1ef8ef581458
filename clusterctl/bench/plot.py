"""Heat map of a bandwidth (or latency) matrix: SVG written by hand, PNG when matplotlib exists."""

from __future__ import annotations

from html import escape
from importlib.util import find_spec
from pathlib import Path

from clusterctl.bench.model import Matrix
from clusterctl.errors import UsageError
from clusterctl.writable import writable_file

CELL = 44
LABEL = 120


def colour(value: float | None, good: float | None, *, latency: bool = False) -> str:
    """Green at or past ``good``, through yellow, to red at zero (or twice ``good`` for latency)."""
    if value is None:
        return "#7f7f7f"
    if not good:
        return "#d0d0d0"
    share = (good / value if value else 0.0) if latency else value / good
    share = max(0.0, min(1.0, share))
    red = int(255 * min(1.0, 2 * (1 - share)))
    green = int(255 * min(1.0, 2 * share))
    return f"#{red:02x}{green:02x}40"


#: Width of one character at the SVG's font sizes, generously (sans-serif digits and letters).
CHAR_PX = {11: 6.6, 14: 8.4}
LEGEND_HEIGHT = 56


def _legend(matrix: Matrix, good: float | None, top: float) -> tuple[list[str], int]:
    """What each colour means: the scale from bad to good with its values, then failed and untested."""
    latency = matrix.unit == "us"
    parts = [f'<text x="10" y="{top + 12:.0f}">colour:</text>']
    x = 60
    if good:
        # Five steps of the scale, each with the value it stands for.
        steps = [good * 2, good * 1.5, good * 1.25, good * 1.1, good] if latency else \
            [0.0, good * 0.25, good * 0.5, good * 0.75, good]
        for value in steps:
            label = f"{value:.0f}" if value >= 10 else f"{value:.2f}"
            if value == steps[0] and latency:
                label = ">=" + label
            elif value == good and not latency:
                label += "+"
            parts.append(f'<rect x="{x}" y="{top}" width="{CELL}" height="16" '
                         f'fill="{colour(value, good, latency=latency)}" stroke="#ffffff"/>')
            parts.append(f'<text x="{x + CELL / 2:.0f}" y="{top + 30:.0f}" text-anchor="middle">{escape(label)}</text>')
            x += CELL
        direction = "lower is better" if latency else "higher is better"
        parts.append(f'<text x="{x + 8}" y="{top + 12:.0f}">{escape(matrix.unit)}, {direction} '
                     f'(green at {good:g})</text>')
        x += 8 + int(len(f"{matrix.unit}, {direction} (green at {good:g})") * CHAR_PX[11]) + 16
    else:
        parts.append(f'<rect x="{x}" y="{top}" width="{CELL}" height="16" fill="#d0d0d0"/>')
        parts.append(f'<text x="{x + CELL + 6}" y="{top + 12:.0f}">no expected value: not coloured</text>')
        x += CELL + 6 + int(len("no expected value: not coloured") * CHAR_PX[11]) + 16
    for fill, stroke, words in (("#7f7f7f", "#ffffff", "failed"), ("#ffffff", "#cccccc", "not tested")):
        parts.append(f'<rect x="{x}" y="{top}" width="16" height="16" fill="{fill}" stroke="{stroke}"/>')
        parts.append(f'<text x="{x + 22}" y="{top + 12:.0f}">{words}</text>')
        x += 22 + int(len(words) * CHAR_PX[11]) + 16
    return parts, x


def svg(matrix: Matrix, *, good: float | None, title: str = "") -> str:
    n = len(matrix.nodes)
    size = LABEL + n * CELL + 20
    latency = matrix.unit == "us"
    heading = f"{title or 'bandwidth matrix'} ({matrix.unit})"
    legend, legend_end = _legend(matrix, good, top=30 + size + 6)
    # Wide enough for the title, the subtitle and the legend: none of them is cut at the edge.
    width = max(size, 600, legend_end + 10, int(30 + len(heading) * CHAR_PX[14]),
                int(30 + len(matrix.cell_meaning) * CHAR_PX[11]))
    height = size + 30 + LEGEND_HEIGHT
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
             f'font-family="sans-serif" font-size="11">',
             f'<text x="10" y="18" font-size="14">{escape(heading)}</text>',
             f'<text x="10" y="34" font-size="11">{escape(matrix.cell_meaning)}</text>']
    for i, node in enumerate(matrix.nodes):
        y = 30 + LABEL + i * CELL + CELL / 2
        parts.append(f'<text x="{LABEL - 6}" y="{y:.0f}" text-anchor="end">{escape(node)}</text>')
        x = LABEL + i * CELL + CELL / 2
        parts.append(f'<text x="{x:.0f}" y="{30 + LABEL - 6}" text-anchor="start" '
                     f'transform="rotate(-60 {x:.0f} {30 + LABEL - 6})">{escape(node)}</text>')
    for i, a in enumerate(matrix.nodes):
        for j, b in enumerate(matrix.nodes):
            x, y = LABEL + j * CELL, 30 + LABEL + i * CELL
            if a == b or not matrix.tested(a, b):
                parts.append(f'<rect x="{x}" y="{y}" width="{CELL}" height="{CELL}" fill="#ffffff" stroke="#cccccc"/>')
                continue
            value = matrix.get(a, b)
            text = "fail" if value is None else f"{value:.0f}" if value >= 10 else f"{value:.2f}"
            parts.append(f'<rect x="{x}" y="{y}" width="{CELL}" height="{CELL}" '
                         f'fill="{colour(value, good, latency=latency)}" stroke="#ffffff">'
                         f'<title>{escape(a)} - {escape(b)}: {escape(text)} {escape(matrix.unit)}</title></rect>')
            parts.append(f'<text x="{x + CELL / 2:.0f}" y="{y + CELL / 2 + 4:.0f}" text-anchor="middle">'
                         f'{escape(text)}</text>')
    parts.extend(legend)
    parts.append("</svg>")
    return "\n".join(parts) + "\n"


PNG_NEEDS_MATPLOTLIB = "a .png plot needs matplotlib (pip install matplotlib); .svg works without it"


def _plot_suffix(path: str) -> str:
    """``.svg`` or ``.png``; any other extension is a usage error."""
    suffix = Path(path).suffix.lower()
    if suffix not in (".svg", ".png"):
        raise UsageError(f"--plot writes .svg or .png, not {suffix or 'a file without an extension'}", file=path)
    return suffix


def check_plot_target(path: str) -> None:
    """Before any host is touched: the extension is known, the folder writable, matplotlib there for .png."""
    suffix = _plot_suffix(path)
    writable_file(path, "--plot")
    if suffix == ".png" and find_spec("matplotlib") is None:
        raise UsageError(PNG_NEEDS_MATPLOTLIB, file=path)


def write_plot(matrix: Matrix, path: str, *, good: float | None, title: str = "") -> Path:
    """``.svg`` always works; ``.png`` needs matplotlib (a clear error when it is missing)."""
    target = Path(path)
    if _plot_suffix(path) == ".svg":
        target.write_text(svg(matrix, good=good, title=title))
        return target
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise UsageError(PNG_NEEDS_MATPLOTLIB, file=path) from None
    n = len(matrix.nodes)
    data = [[float("nan") if a == b or not matrix.tested(a, b) or matrix.get(a, b) is None else matrix.get(a, b)
             for b in matrix.nodes] for a in matrix.nodes]
    fig, ax = plt.subplots(figsize=(2 + 0.5 * n, 1.5 + 0.5 * n))
    image = ax.imshow(data, cmap="RdYlGn_r" if matrix.unit == "us" else "RdYlGn", vmin=0, vmax=good)
    ax.set_xticks(range(n), matrix.nodes, rotation=60, ha="right")
    ax.set_yticks(range(n), matrix.nodes)
    fig.colorbar(image, ax=ax, label=matrix.unit)
    ax.set_title(title or "bandwidth matrix")
    fig.tight_layout()
    fig.savefig(target)
    plt.close(fig)
    return target
