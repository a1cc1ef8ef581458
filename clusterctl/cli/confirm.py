"""The one confirmation rule of every command that changes hosts (bootstrap, reset, tune-nccl
--push, copy, undo): ``--yes`` (or ``CLUSTERCTL_YES=1`` for CI), else a question on the
terminal that defaults to no; with no terminal to ask on, the command refuses (exit 2) and says
how to confirm. ``--dry-run`` and plans never ask: they change nothing.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence

import typer

from clusterctl.errors import UsageError

#: Set to 1/true/yes to answer yes to every confirmation (a CI job that has reviewed the plan).
YES_ENV = "CLUSTERCTL_YES"


def assumed_yes() -> bool:
    return os.environ.get(YES_ENV, "").strip().lower() in ("1", "true", "yes")


def confirm_change(what: str, hosts: Sequence[str], *, yes: bool, preview: str) -> None:
    """Ask before ``what`` happens on ``hosts``; ``preview`` names the command that shows it first.

    Raises ``UsageError`` (exit 2) off a terminal without --yes, and when the user says no.
    """
    from clusterctl.hostlist import compress
    from clusterctl.wording import plural

    if yes or assumed_yes():
        return
    where = f"{plural(len(hosts), 'host')} ({compress(list(hosts))})"
    if not sys.stdin.isatty():
        raise UsageError(f"this would {what} on {where}; refusing without a terminal to ask on.",
                         hint=f"Pass --yes (or set {YES_ENV}=1) to confirm; '{preview}' shows what would change.")
    if not typer.confirm(f"This will {what} on {where}. Continue?", default=False, err=True):
        raise UsageError("nothing changed: not confirmed.", hint=f"'{preview}' shows what would change.")
