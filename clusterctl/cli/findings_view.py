"""The one way every command prints findings, and maps them to its exit code.

A finding is one line: severity, where (host and subject, or file:line and variable), code
and message; below it, for errors and warnings, the fix to try. Exit 1 when any finding is
an error (or, with ``--strict``, a warning): ``AppContext.emit(..., failed=findings.fails(...))``;
``-o json`` prints ``Finding.to_json`` instead.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from clusterctl.findings import Finding, Severity, count_by_severity, sorted_findings
from clusterctl.secret import mask_text
from clusterctl.terminal_layout import hanging, wrap_width
from clusterctl.terminal_text import one_line
from clusterctl.wording import plural

if TYPE_CHECKING:
    from rich.console import Console

SEVERITY_STYLE: dict[Severity, str] = {Severity.ERROR: "bold red", Severity.WARNING: "yellow", Severity.INFO: "cyan"}


def print_findings(console: Console, findings: Sequence[Finding], *, empty: str = "No findings.") -> None:
    from rich.text import Text

    if not findings:
        console.print(Text(empty, style="green"))
        return
    # One Text built with styled appends (no markup to parse per line) and printed once: 10,000
    # findings cost what writing them costs, where a console.print per line took seconds.
    # Long lines wrap at the terminal's width under their message (a hanging indent), between
    # words: a host, a path or a value is never broken in two.
    width = wrap_width(console)
    text = Text(no_wrap=False)
    for f in sorted_findings(findings):
        severity = f"{f.severity.value.upper():7}"
        text.append(severity, style=SEVERITY_STYLE[f.severity])
        text.append(" ")
        # Where, message and fix may hold what a host answered (a file name reset found): shown as text,
        # a registered secret masked, as ``AppContext.say`` and ``-o json`` do.
        label, message = one_line(mask_text(f.label)), one_line(mask_text(f.message))
        line = f"{label} {f.code}: {message}"
        if len(line) + 8 <= width:
            text.append(label, style="bold")
            text.append(f" {f.code}: {message}\n")
        else:
            text.append(hanging(line, width, 10, first_indent=f"{severity} ")[8:] + "\n")
        if f.severity is not Severity.INFO and f.fix:
            text.append(hanging(f"        fix: {one_line(mask_text(f.fix))}", width, 13) + "\n", style="dim")
    text.rstrip()
    if console.no_color or not console.is_terminal:
        console.file.write(text.plain + "\n")
    else:
        console.print(text, soft_wrap=True, highlight=False)


def summary_line(findings: Sequence[Finding]) -> str:
    """``2 errors, 1 warning, 0 info``: counts that read naturally."""
    counts = count_by_severity(findings)
    return f"{plural(counts['error'], 'error')}, {plural(counts['warning'], 'warning')}, {counts['info']} info"
