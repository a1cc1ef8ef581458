"""The one way every command prints findings, and maps them to its exit code.

A finding is one line: severity, where (host and subject, or file:line and variable), code
and message; below it, for errors and warnings, the fix to try. Exit 1 when any finding is
an error (or, with ``--strict``, a warning); ``-o json`` prints ``Finding.to_json`` instead.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import typer

from clusterctl.errors import ExitCode
from clusterctl.findings import Finding, Severity, count_by_severity, fails, sorted_findings

if TYPE_CHECKING:
    from rich.console import Console

SEVERITY_STYLE: dict[Severity, str] = {Severity.ERROR: "bold red", Severity.WARNING: "yellow", Severity.INFO: "cyan"}


def print_findings(console: Console, findings: Sequence[Finding], *, empty: str = "No findings.") -> None:
    from rich.markup import escape

    if not findings:
        console.print(f"[green]{escape(empty)}[/]")
        return
    for f in sorted_findings(findings):
        style = SEVERITY_STYLE[f.severity]
        console.print(f"[{style}]{f.severity.value.upper():7}[/] [bold]{escape(f.label)}[/] {f.code}: "
                      f"{escape(f.message)}", soft_wrap=True, highlight=False)
        if f.severity is not Severity.INFO and f.fix:
            console.print(f"        [dim]fix: {escape(f.fix)}[/]", soft_wrap=True, highlight=False)


def summary_line(findings: Sequence[Finding]) -> str:
    """``2 error(s), 1 warning(s), 0 info``."""
    counts = count_by_severity(findings)
    return f"{counts['error']} error(s), {counts['warning']} warning(s), {counts['info']} info"


def exit_for(findings: Sequence[Finding], *, strict: bool = False) -> None:
    """Exit 1 when the findings hold an error (with ``strict``, a warning too); return otherwise."""
    if fails(findings, strict=strict):
        raise typer.Exit(int(ExitCode.FAILED))
