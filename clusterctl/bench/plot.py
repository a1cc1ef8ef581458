"""Heat map of a bandwidth (or latency) matrix: SVG written by hand, PNG when matplotlib exists."""

from __future__ import annotations

from html import escape
from pathlib import Path

from clusterctl.bench.model import Matrix
from clusterctl.errors import UsageError

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


def svg(matrix: Matrix, *, good: float | None, title: str = "") -> str:
    n = len(matrix.nodes)
    size = LABEL + n * CELL + 20
    latency = matrix.unit == "us"
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{max(size, 600)}" height="{size + 30}" '
             f'font-family="sans-serif" font-size="11">',
             f'<text x="10" y="18" font-size="14">{escape(title or "bandwidth matrix")} ({escape(matrix.unit)})</text>',
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
    parts.append("</svg>")
    return "\n".join(parts) + "\n"


def check_plot_target(path: str) -> None:
    """Before any host is touched: the extension is known, the folder writable, matplotlib there for .png."""
    from importlib.util import find_spec

    from clusterctl.writable import writable_file

    suffix = Path(path).suffix.lower()
    if suffix not in (".svg", ".png"):
        raise UsageError(f"--plot writes .svg or .png, not {suffix or 'a file without an extension'}", file=path)
    writable_file(path, "--plot")
    if suffix == ".png" and find_spec("matplotlib") is None:
        raise UsageError("a .png plot needs matplotlib (pip install matplotlib); .svg works without it", file=path)


def write_plot(matrix: Matrix, path: str, *, good: float | None, title: str = "") -> Path:
    """``.svg`` always works; ``.png`` needs matplotlib (a clear error when it is missing)."""
    target = Path(path)
    if target.suffix.lower() == ".svg":
        target.write_text(svg(matrix, good=good, title=title))
        return target
    if target.suffix.lower() != ".png":
        raise UsageError(f"--plot writes .svg or .png, not {target.suffix or 'no extension'}", file=path)
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise UsageError("a .png plot needs matplotlib (pip install matplotlib); .svg works without it",
                         file=path) from None
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
