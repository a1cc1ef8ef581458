"""``clusterctl health``: GPU, NVLink, NIC and PCIe health per host, with a verdict; ``health compare``
of two saved runs; ``health read`` of pasted or saved tool outputs."""

from __future__ import annotations

from typing import TYPE_CHECKING

import typer

from clusterctl.cli.confirm import confirm_change
from clusterctl.cli.context import DELETE_EMPTYDIR_DATA, STATE_DIR, AppContext, app_context
from clusterctl.errors import UsageError
from clusterctl.terminal_text import one_line

if TYPE_CHECKING:
    from clusterctl.health.model import HealthReport
    from clusterctl.inventory.model import Host
    from clusterctl.quarantine.auto import PolicyRun

health_app = typer.Typer(
    help="""Check the hosts' GPUs, NVLinks, NICs and PCIe paths; give each host a verdict.

Level 0 (the default: seconds, read-only, safe while jobs run) reads nvidia-smi -q (ECC, row
remapping, retired pages, throttle reasons, temperatures, power, PCIe link), the kernel log
since --since (NVRM Xid, NVSwitch SXid, "fallen off the bus", each Xid judged with NVIDIA's
Xid catalogue), nvidia-smi nvlink -s/-e, ibstat and the InfiniBand port counters, and lspci
-vvv (PCIe downgrades, ACS on the switches between GPUs and NICs). Levels 1-3 add
'dcgmi diag -r N' where DCGM is installed; level 2 and 3 also run single-host nccl-tests,
judged against the fleet. Each host ends healthy, degraded (watch it) or unhealthy (take it
out of service), with the reason; findings say what to do. See docs/health.md.

Levels 2 and 3 take the GPUs: they are not run on a host whose GPUs have compute processes
(nvidia-smi --query-compute-apps) or whose node runs a GPU pod no DaemonSet owns, unless the
host is quarantined (cordoned) or --force is given (INVASIVE_CHECK_REFUSED says which).

Exits 0 when every host is healthy, 1 when a host is degraded, unhealthy or could not be
checked, 2 for usage problems.

On a node itself (--local: this machine, no SSH, no inventory needed), --slurm makes it Slurm's
HealthCheckProgram, prolog or epilog, as LBNL NHC is: bounded by --deadline (Slurm stops a
health check after 60 s), and on an error-level finding it drains the node with a reason that
marks it as clusterctl's (scontrol update nodename=N state=drain reason="clusterctl: CODE: ..."),
prints "ERROR: clusterctl: Health check failed: ..." and exits 1; a healthy run resumes the node
only when clusterctl drained it, never a node drained for another reason. Degraded (warnings
only) exits 0. Without --local, --slurm does the same on each selected host over its transport.

Examples:

  clusterctl -i inventories/demo.yaml health

  clusterctl health --since 7d --save health-monday.json

  clusterctl health compare health-monday.json health-today.json

  clusterctl health read dmesg.txt nvidia-smi-q.txt -o json

  clusterctl health --local --slurm   # what Slurm's HealthCheckProgram runs
""",
    invoke_without_command=True,
)


def register(app: typer.Typer) -> None:
    app.add_typer(health_app, name="health")


@health_app.callback()
def health_command(
    ctx: typer.Context,
    level: int = typer.Option(0, "--level", min=0, max=3, help="0 reads only; 1-3 add dcgmi diag -r N; 2+ nccl-tests."),
    since: str | None = typer.Option(None, "--since", metavar="DURATION",
                                     help="Kernel log window: 30m, 24h, 7d (default 24h; 1h with --slurm)."),
    save: str | None = typer.Option(
        None, "--save", metavar="FILE", help="Keep the report as JSON (for 'health compare')."),
    probe_timeout: float | None = typer.Option(None, "--probe-timeout", min=1.0, metavar="SECONDS",
                                               help="Limit for each probe command on a host (a hung nvidia-smi; "
                                               "default 30)."),
    quarantine: bool = typer.Option(False, "--quarantine",
                                    help="Apply the quarantine policy: unhealthy hosts are quarantined (drained "
                                    "where the policy says), degraded ones reported (docs/quarantine.md). Asks "
                                    "first; --yes for scripts (required off a terminal)."),
    dry_run: bool = typer.Option(False, "--dry-run", help="With --quarantine: decide and show; touch nothing."),
    yes: bool = typer.Option(False, "--yes", "-y", help="With --quarantine: quarantine without asking."),
    max_unavailable: str | None = typer.Option(
        None, "--max-unavailable", metavar="N|PCT",
        help="With --quarantine: most hosts out of service at once (default: the inventory's, else 10%, at least 1)."),
    state_dir: str | None = STATE_DIR,
    delete_emptydir_data: bool = DELETE_EMPTYDIR_DATA,
    force: bool = typer.Option(False, "--force", help="Level 2+: run dcgmi diag and nccl-tests even on GPUs that run "
                               "compute processes or GPU pods (they take the GPUs from those jobs)."),
    local: bool = typer.Option(False, "--local", help="Check this machine (local commands, no SSH, no inventory)."),
    slurm: bool = typer.Option(False, "--slurm", help="As Slurm's health check: drain on failure with a "
                               "'clusterctl: ' reason, resume only nodes clusterctl drained; NHC's exit code."),
    deadline: float = typer.Option(50.0, "--deadline", min=10.0, metavar="SECONDS",
                                   help="With --slurm: the whole check's bound (Slurm allows 60 s)."),
    slurm_node: str | None = typer.Option(
        None, "--slurm-node", metavar="NAME",
        help="With --slurm: the Slurm node name (default: the host's short name)."),
) -> None:
    if ctx.invoked_subcommand is not None:
        return
    app = app_context(ctx)
    if not quarantine and (yes or max_unavailable or dry_run or delete_emptydir_data):
        raise UsageError("--yes, --dry-run, --max-unavailable and --delete-emptydir-data go with --quarantine")
    if slurm and (quarantine or save or level or force or probe_timeout is not None):
        raise UsageError("--slurm runs level 0 within --deadline: it takes no --quarantine, --save, --level, "
                         "--force or --probe-timeout")
    if save:  # refused before the fleet is read, not after
        from clusterctl.writable import writable_file

        writable_file(save, "--save")
    from clusterctl.health.model import HealthOptions
    from clusterctl.health.run import run_health

    # Made with --slurm too: a --since it cannot read is refused here, not in each host's check.
    options = HealthOptions(level=level, since=since or ("1h" if slurm else "24h"), force=force,
                            probe_timeout_s=probe_timeout or HealthOptions.probe_timeout_s)
    if local and quarantine:
        raise UsageError("--local checks this machine alone: it takes no --quarantine (the cluster's to do)")
    # --local: this machine, the inventory (-i) only naming it.
    inventory = None if local and not app.inventory_path else app.inventory()
    hosts = (app.this_machine(),) if local else app.hosts()
    if slurm:
        slurm_check(app, hosts, deadline=deadline, since=options.since, node=slurm_node)
        return
    if quarantine:
        # Asked before the health run: what it finds is quarantined without a second question.
        confirm_change("quarantine (and, where the policy says, drain) the hosts this health run finds unhealthy",
                       [h.name for h in hosts], yes=yes, dry_run=dry_run,
                       preview="clusterctl health --quarantine --dry-run")
    policy = None
    with app.runner() as runner:
        report = run_health(hosts, runner, options, inventory=inventory.name if inventory else None,
                            cluster=None if local else inventory)
        if quarantine:
            from clusterctl.quarantine.auto import run_policy
            from clusterctl.quarantine.drain import DrainOptions

            policy = run_policy(runner, app.inventory(), report.hosts, apply=not dry_run,
                                max_unavailable=max_unavailable, state_dir=state_dir,
                                drain=DrainOptions(delete_emptydir_data=delete_emptydir_data))
    finish(app, report, save=save, policy=policy)


def finish(app: AppContext, report: HealthReport, *, save: str | None = None,
           policy: tuple[PolicyRun, str | None] | None = None) -> None:
    """Save, print (table or -o json/yaml) and exit 1 unless every host is healthy."""
    from clusterctl.health.report import report_to_json

    payload = report_to_json(report)
    if policy is not None:
        payload["quarantine"] = {**policy[0].to_json(), "dry_run": not policy[0].applied, "undo_journal": policy[1]}
    if save:
        from clusterctl.cli.output import save_report

        save_report(save, payload)

    def human() -> None:
        from clusterctl.cli.findings_view import print_findings
        from clusterctl.health.render import render_verdicts

        render_verdicts(app.console, report)
        app.console.print()
        print_findings(app.console, [f for f in report.findings if f.severity.value != "info"],
                       empty="No findings above info level.")
        if policy is not None:
            from clusterctl.cli.quarantine_view import print_policy

            app.console.print()
            print_policy(app, policy[0], dry_run=not policy[0].applied, journal=policy[1])

    app.emit(payload, human, failed=not report.ok)


@health_app.command("compare", help="""What got worse between two saved health runs, host by host.

A and B are reports saved with 'clusterctl health --save' (or -o json). Named: hosts whose verdict
got worse, new findings, error counters that grew (ECC, remapped rows, NVLink, InfiniBand), new
Xids, NVLinks and ports that went down. Exits 1 when something got worse, 0 when nothing did.

Example:

  clusterctl health compare monday.json today.json
""")
def compare_command(
    ctx: typer.Context,
    first: str = typer.Argument(..., metavar="A.json", help="The earlier report."),
    second: str = typer.Argument(..., metavar="B.json", help="The later report."),
) -> None:
    from clusterctl.cli.findings_view import print_findings
    from clusterctl.health.compare import compare_reports
    from clusterctl.health.report import load_report

    app = app_context(ctx)
    changes = compare_reports(load_report(first), load_report(second))
    app.emit({"before": first, "after": second, "worse": [c.to_json() for c in changes]},
             lambda: print_findings(app.console, changes, empty="Nothing got worse."), failed=bool(changes))


@health_app.command("read", help="""Judge saved or pasted tool outputs, without reaching any host.

Each FILE holds one tool's output (or '-' for stdin): nvidia-smi -q, the kernel log (dmesg,
journalctl -k, syslog lines), nvidia-smi nvlink -s / -e, ibstat, the sysfs counters (grep -H),
perfquery, lspci -vvv or dcgmi diag (text or -j JSON). The format is recognised from the text;
shell prompts, tmux pane borders and clipped pastes are tolerated, and what could not be read is
named with its line. The files are judged together as one host (--host names it; with -i, its
inventory entry, found as --limit finds hosts, holds its ports to its fabric.rate_gbps).
Exits 1 when the verdict is not healthy, 2 when a file cannot be read as any of these tools.

Example:

  clusterctl health read dmesg.txt nvidia-smi-q.txt nvlink-e.txt -o json
""")
def read_command(
    ctx: typer.Context,
    files: list[str] = typer.Argument(..., metavar="FILE...", help="Saved tool outputs ('-' for stdin)."),
    host: str | None = typer.Option(None, "--host", help="The host these outputs came from (with -i, one of the "
                                    "inventory's: a name, address or --limit pattern of one host; default 'input')."),
) -> None:
    app = app_context(ctx)
    from clusterctl.health.read import read_outputs
    from clusterctl.inputfile import read_text_input
    from clusterctl.inventory.limit import host_named

    # Checked before the files are read: a name the inventory lacks would judge without its fabric's rate.
    entry = host_named(app.inventory(), host, "--host") if host and app.inventory_path else None
    texts = []
    for name in files:
        text, label = read_text_input(name, "tool output")
        texts.append(("stdin" if name == "-" else label, text))
    report, notes = read_outputs(texts, host=entry.name if entry else host or "input",
                                 fabric=entry.fabric if entry else None)
    for note in notes:
        app.warn(note)
    finish(app, report)


def slurm_check(app: AppContext, hosts: tuple[Host, ...], *, deadline: float, since: str, node: str | None) -> None:
    """``--slurm``: each host's Slurm health check (this machine with ``--local``); NHC's line and exit code."""
    from clusterctl.agent.slurm_check import SlurmCheckOptions, run_slurm_check

    options = SlurmCheckOptions(node=node, deadline_s=deadline, since=since)
    with app.runner() as runner:
        fleet = runner.run_task(list(hosts), lambda transport: run_slurm_check(transport, options),
                                label="health --slurm", timeout_s=deadline + 30)
    checks = [o.value for o in fleet.outcomes if o.ok and o.value is not None]
    failures = {o.host.name: o.failure.describe() for o in fleet.outcomes if not o.ok and o.failure}

    def human() -> None:
        for check in checks:
            app.say(one_line(check.message), err=bool(check.exit_code), soft_wrap=False)
            if check.action not in ("none",):
                app.say(f"{check.node}: slurm: {check.action}", soft_wrap=False)
            for problem in check.problems:
                app.say(f"ERROR: clusterctl: {one_line(problem)}", err=True, soft_wrap=False)
        for host, why in failures.items():
            app.say(f"ERROR: clusterctl: {host}: {one_line(why)}", err=True, soft_wrap=False)

    app.emit({"checks": [c.to_json() for c in checks], "failed_hosts": failures}, human,
             failed=bool(failures) or any(c.exit_code for c in checks))
