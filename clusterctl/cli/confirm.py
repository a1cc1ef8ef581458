"""The one confirmation rule of every command that changes hosts (CONTRIBUTING.md, "Confirming
changes"): bootstrap, reset, undo, copy, tune-nccl --push, upgrade apply, remove-node, certs
renew, quarantine, release, health --quarantine and remediate serve.

- ``--dry-run`` (and the ``plan`` commands) never ask: they change nothing, show what would
  change, and say "nothing was changed".
- ``--yes``, or ``CLUSTERCTL_YES=1`` in the environment (a CI job that reviewed the plan),
  confirms without asking.
- Otherwise, at a terminal, one question naming what will happen and on which hosts, default no;
  "no" changes nothing and exits 2.
- With no terminal to ask on, the command refuses before it touches anything: exit 2, naming
  ``--yes``, ``CLUSTERCTL_YES`` and the command that previews the change.

tests/core/test_one_confirmation_rule.py holds every command of the app to it.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence

import typer

from clusterctl.errors import UsageError

#: ``--yes`` of every command whose help says no more about it: one wording everywhere.
YES = typer.Option(False, "--yes", "-y", help="Change without asking (required off a terminal; CLUSTERCTL_YES=1 "
                   "does the same).")

#: Set to 1/true/yes to answer yes to every confirmation (a CI job that has reviewed the plan).
YES_ENV = "CLUSTERCTL_YES"


def assumed_yes() -> bool:
    return os.environ.get(YES_ENV, "").strip().lower() in ("1", "true", "yes")


def _where(hosts: Sequence[str]) -> str:
    from clusterctl.hostlist import compress
    from clusterctl.wording import plural

    return f"{plural(len(hosts), 'host')} ({compress(list(hosts))})"


def refuse_off_terminal(what: str, hosts: Sequence[str], *, yes: bool, preview: str, dry_run: bool = False) -> None:
    """The first half of the rule, for a command that asks only once it knows what it will change
    (``release`` after its checks): off a terminal without --yes, refuse now, before any work."""
    if dry_run or yes or assumed_yes() or sys.stdin.isatty():
        return
    raise UsageError(f"this would {what} on {_where(hosts)}; refusing without a terminal to ask.",
                     hint=f"Pass --yes (or set {YES_ENV}=1) to confirm; '{preview}' shows what would change.")


def confirm_change(what: str, hosts: Sequence[str], *, yes: bool, preview: str, dry_run: bool = False) -> None:
    """Ask before ``what`` happens on ``hosts``; ``preview`` names the command that shows it first.

    Raises ``UsageError`` (exit 2) off a terminal without --yes, and when the user says no.
    """
    if dry_run or yes or assumed_yes():
        return
    refuse_off_terminal(what, hosts, yes=yes, preview=preview)
    if not typer.confirm(f"This will {what} on {_where(hosts)}. Continue?", default=False, err=True):
        raise UsageError("nothing changed: not confirmed.", hint=f"'{preview}' shows what would change.")
