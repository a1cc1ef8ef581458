"""How quarantine, release and status print: one line per change, drains and refusals spelled out."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from clusterctl.cli.changes_view import PLANNED_WORDS, say_run_end
from clusterctl.secret import mask_text
from clusterctl.terminal_layout import Column, print_table, print_wrapped
from clusterctl.terminal_text import one_line

if TYPE_CHECKING:
    from clusterctl.cli.context import AppContext
    from clusterctl.heal.run import HostHeal
    from clusterctl.heal.status import HostStatus
    from clusterctl.quarantine.auto import PolicyRun
    from clusterctl.quarantine.release import HostRelease
    from clusterctl.quarantine.run import HostQuarantine
    from clusterctl.quarantine.status import QuarantinedNode


def _say(app: AppContext, text: str) -> None:
    # Pod names, reasons and messages come from the cluster: printed as text, never as markup, each on
    # one line (a Slurm reason's newlines and control characters shown as escapes, as ``health --slurm``
    # shows them), a registered secret masked (as ``AppContext.say`` does), long lines wrapped under their host.
    print_wrapped(app.console, one_line(mask_text(text)), 4)


def print_quarantine(app: AppContext, results: Sequence[HostQuarantine], *, dry_run: bool,
                     journal: str | None) -> None:
    would = "would " if dry_run else ""
    for r in results:
        if r.error:  # what was done beside the failure (a drain's pods unreadable, Slurm) is still said
            _say(app, f"FAILED {r.host}: {r.error}")
        elif not r.done and not (r.slurm and r.slurm.changed):
            _say(app, f"{r.host}: already quarantined as asked; nothing to change")
        for line in r.done:
            _say(app, f"{r.host}: {would}{line}")
        if r.drain is not None:
            d = r.drain
            evicted = ", ".join(d.evicted) if d.evicted else "none"
            _say(app, f"{r.host}: drain: {'would evict' if dry_run else 'evicted'} {len(d.evicted)} pod(s): {evicted}")
            if d.ignored:
                _say(app, f"{r.host}: drain: left {len(d.ignored)} pod(s) on purpose: "
                          + ", ".join(f"{p.pod} ({p.reason})" for p in d.ignored))
            for warning in d.warnings:
                _say(app, f"{r.host}: drain: warning: {warning}")
            for left in d.not_evicted:
                _say(app, f"{r.host}: drain: NOT EVICTED {left.pod}: {left.reason}")
        if r.slurm and r.slurm.runs_slurmd and r.slurm.said != r.error:
            _say(app, f"{r.host}: slurm: {r.slurm.said}")
    say_run_end(app, dry_run=dry_run, journal=journal)


def print_release(app: AppContext, results: Sequence[HostRelease], *, dry_run: bool, journal: str | None,
                  skipped: bool) -> None:
    would = "would " if dry_run else ""
    for r in results:
        if r.not_quarantined:
            _say(app, f"{r.host}: not quarantined; nothing to release")
            continue
        for line in r.checks:
            _say(app, f"{r.host}: check: {line}")
        if skipped:
            _say(app, f"{r.host}: checks skipped (--skip-checks)")
        for line in r.done:  # what was done before a refusal (a failed Slurm resume) too
            _say(app, f"{r.host}: {would}{line}")
        if r.refused:
            _say(app, f"REFUSED {r.host}: {r.refusal}")
            continue
        if r.slurm and r.slurm.runs_slurmd:
            _say(app, f"{r.host}: slurm: {r.slurm.said}")
        _say(app, f"{r.host}: {'would be ' if dry_run else ''}released")
    say_run_end(app, dry_run=dry_run, journal=journal)


def print_heal(app: AppContext, results: Sequence[HostHeal], *, dry_run: bool, journal: str | None) -> None:
    """``heal``: each host's chain, its steps and their changes, its outcome. A dry run says what each step
    would do in the words of bootstrap's plan, and what it would then wait for (a planned step's detail)."""
    for r in results:
        if r.chain or r.outcome == "planned":
            _say(app, f"{r.host}: chain: {' -> '.join([*r.chain, 'needs hardware'])} ({r.chain_reason})")
        for done, step in enumerate([None, *r.steps]):
            if step is not None:
                for line in step.changes:
                    _say(app, f"{r.host}: {step.step}: {'would ' if dry_run else ''}{line}")
                planned = dry_run and step.result.value in PLANNED_WORDS
                word = PLANNED_WORDS[step.result.value] if planned else step.result.value
                detail = (f" (wait: {step.detail})" if planned else f": {step.detail}") if step.detail else ""
                _say(app, f"{r.host}: {step.step}: {word}{detail}")
            for line in (line for after, line in r.notes if after == done):  # the annotation of the node after it
                _say(app, f"{r.host}: {line}")
        _say(app, f"{r.host}: {r.outcome.upper()}: {r.detail}")
        if r.report:
            app.say(r.report)  # the ticket's text line for line, to paste whole
    say_run_end(app, dry_run=dry_run, journal=journal)


def print_status(app: AppContext, nodes: Sequence[QuarantinedNode]) -> None:
    if not nodes:
        _say(app, "no node is quarantined or cordoned")
        return
    # Every cell but CORDONED comes from node annotations (or Slurm reasons) anyone with access can
    # write: control characters are shown as escapes (one_line), never sent to the terminal.
    # Slurm's state gets a column only in a fleet where some host runs slurmd.
    slurm = any(n.slurm_state for n in nodes)
    rows = [tuple(one_line(c) for c in (n.host, n.since or "-", n.by or "-", n.reason or "-",
                                        ",".join(n.codes) or "-",
                                        ("yes" if n.cordoned else "no") if n.kubernetes_node else "no node",
                                        *((n.slurm_state or "-",) if slurm else ()), n.release_needs))
            for n in nodes]
    # The host, since and codes are copied into tickets and commands: never cut; the prose wraps.
    columns = (Column("HOST", keep=True), Column("SINCE", keep=True), Column("BY", keep=True), Column("REASON"),
               Column("CODES", keep=True), Column("CORDONED", keep=True),
               *((Column("SLURM", keep=True),) if slurm else ()), Column("RELEASE NEEDS"))
    print_table(app.console, columns, rows, boxed=False)


def print_policy(app: AppContext, run: PolicyRun, *, dry_run: bool, journal: str | None) -> None:
    """What ``health --quarantine`` decided per host, then what it did (or would do)."""
    words = {"drain": "quarantine and drain", "quarantine": "quarantine", "report": "report only",
             "held": "HELD (cap)", "already": "already out of service"}
    for d in run.decisions:
        if d.action == "report" and not d.codes and d.reason == "all checks passed":
            continue
        _say(app, f"policy: {d.host}: {words.get(d.action, d.action)}"
                  f"{' [' + ','.join(d.codes) + ']' if d.codes else ''}: {d.reason}")
    if run.results:
        print_quarantine(app, run.results, dry_run=dry_run, journal=journal)
    else:
        say_run_end(app, dry_run=dry_run)


def print_host_status(app: AppContext, found: Sequence[HostStatus]) -> None:
    """``status HOST``: the quarantine, the healing state and both histories, one line each."""
    for h in found:
        if h.error:
            _say(app, f"{h.host}: {h.error}")
            continue
        ready = {True: "Ready", False: "NotReady", None: "readiness unknown"}[h.ready]
        q = h.quarantine
        if q is None:
            _say(app, f"{h.host}: in service ({ready})")
        else:
            _say(app, f"{h.host}: quarantined since {q.since or '?'} by {q.by or '?'}: {q.reason or '-'} "
                      f"[{','.join(q.codes) or '-'}] ({ready})")
            _say(app, f"{h.host}: release needs: {q.release_needs}")
        if h.heal_state:
            _say(app, f"{h.host}: healing: {h.heal_state}")
        for step in h.steps:
            _say(app, f"{h.host}: {step.at} {step.step}: {step.result}{': ' + step.detail if step.detail else ''}")
        if h.quarantined_at:
            _say(app, f"{h.host}: quarantined {len(h.quarantined_at)} time(s): {', '.join(h.quarantined_at)}")
