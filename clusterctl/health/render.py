"""The human view of a health report: one line per host, worst first."""

from __future__ import annotations

from typing import TYPE_CHECKING

from clusterctl.health.model import HealthReport, Verdict

if TYPE_CHECKING:
    from rich.console import Console

VERDICT_STYLE: dict[Verdict, str] = {Verdict.HEALTHY: "green", Verdict.DEGRADED: "yellow",
                                     Verdict.UNHEALTHY: "bold red", Verdict.UNKNOWN: "magenta"}


def render_verdicts(console: Console, report: HealthReport) -> None:
    from rich.text import Text

    from clusterctl.terminal_layout import Column, print_table

    rows = [(host.host, Text(host.verdict.value, style=VERDICT_STYLE[host.verdict]), host.reason)
            for host in sorted(report.hosts, key=lambda h: (-h.verdict.rank, h.host))]
    print_table(console, (Column("host", keep=True), Column("verdict", keep=True), Column("reason")), rows,
                title=f"Health (level {report.level}, kernel log since {report.since})")
    counts = report.counts()
    console.print(", ".join(f"{counts[v.value]} {v.value}" for v in Verdict if counts[v.value]), markup=False)
