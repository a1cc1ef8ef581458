"""``clusterctl certs check|renew``: kubeadm's certificates on the control planes."""

from __future__ import annotations

import typer

from clusterctl.cli.confirm import YES, confirm_change
from clusterctl.cli.context import STATE_DIR, app_context, given_options
from clusterctl.terminal_layout import Column, print_table
from clusterctl.terminal_text import one_line

HELP = """\
Check and renew the certificates kubeadm manages on every control plane.

'certs check' runs 'kubeadm certs check-expiration' on each control plane and shows the days
each certificate has left (exit 1 when one expired; a warning under 30 days). 'certs renew'
runs 'kubeadm certs renew all' and restarts the control plane's static pods so they load the
new certificates, one control plane at a time.

Examples:

  clusterctl -i inventories/demo.yaml certs check

  clusterctl certs renew --dry-run

  clusterctl certs renew --yes
"""

certs_app = typer.Typer(help=HELP, no_args_is_help=True, rich_markup_mode=None)


def register(app: typer.Typer) -> None:
    app.add_typer(certs_app, name="certs")


@certs_app.command("check", help="""Days left for each certificate kubeadm manages, per control plane.

Examples:

  clusterctl -i inventories/demo.yaml certs check

  clusterctl certs check --warn-days 60 -o json
""")
def certs_check(
    ctx: typer.Context,
    warn_days: int = typer.Option(30, "--warn-days", min=0, metavar="N", help="Warn when fewer days are left."),
) -> None:
    from clusterctl.cli.findings_view import print_findings
    from clusterctl.day2.certs import check
    from clusterctl.findings import fails

    app = app_context(ctx)
    with app.runner() as runner:
        report = check(runner, list(app.hosts()), warn_days=warn_days)

    def table() -> None:
        rows: list[tuple[str, str, str, str, str]] = []
        for host in report.hosts:
            if host.expiration is None:
                rows.append((host.host, "(unread)", one_line(host.error or ""), "", ""))
                continue
            for cert in (*host.expiration.certificates, *host.expiration.authorities):
                rows.append((host.host, cert.name, f"{cert.expires:%Y-%m-%d %H:%M}", str(cert.days_left(report.now)),
                             cert.authority or ("(authority)" if cert in host.expiration.authorities else "")))
            rows += [(host.host, name, "MISSING", "", "") for name in host.expiration.missing]
        # Host, certificate and expiry are what a user acts on: never cut; the signer goes first.
        print_table(app.console, (Column("host", keep=True), Column("certificate", keep=True),
                                  Column("expires", keep=True), Column("days left", keep=True, justify="right"),
                                  Column("signed by", keep=True, drop_order=1)), rows, title="kubeadm certificates")
        if report.findings:  # each with its fix, as every report prints findings
            print_findings(app.console, report.findings)

    app.emit(report.to_json(), table, failed=fails(report.findings))


@certs_app.command("renew", help="""kubeadm certs renew all, then restart the static pods; one control plane at a time.

Examples:

  clusterctl certs renew --dry-run

  clusterctl certs renew --yes

  clusterctl certs renew --resume --yes
""")
def certs_renew(
    ctx: typer.Context,
    dry_run: bool = typer.Option(False, "--dry-run", help="Show the steps; touch nothing."),
    yes: bool = YES,
    wait: int = typer.Option(20, "--restart-wait", min=1, metavar="S",
                             help="Seconds a manifest stays out (the kubelet's fileCheckFrequency, 20 s)."),
    resume: bool = typer.Option(False, "--resume", help="Go on from a renew that was cut short (a parked "
                                "manifest is moved back first)."),
    skip_phases: str | None = typer.Option(None, "--skip-phases", metavar="A,B",
                                              help="Phases to leave out: renew, restart-etcd, restart-kube-apiserver, "
                                              "restart-kube-controller-manager, restart-kube-scheduler, api-ready."),
    state_dir: str | None = STATE_DIR,
) -> None:
    from clusterctl.cli.changes_view import say_plan_step
    from clusterctl.day2.certs import RenewRequest, control_planes, renew, renew_summary

    app = app_context(ctx)
    selected = list(app.hosts())
    confirm_change("renew the certificates and restart the control plane's static pods",
                   [h.name for h in control_planes(selected)], yes=yes, dry_run=dry_run,
                   preview="clusterctl certs renew --dry-run")
    request = RenewRequest(apply=not dry_run, wait_s=wait, resume=resume, state_dir=state_dir,
                           skip_phases=skip_phases, given=given_options(ctx))
    with app.runner() as runner:
        report = renew(runner, app.inventory(), selected, request)
    hosts = renew_summary(report)

    def table() -> None:
        for row in hosts:
            app.say(f"{row['host']}: {row['status']}" + (f": {row['message']}" if row.get("message") else "")
                    + (f" (soonest certificate: {row['soonest_days_left']} days left)"
                       if row.get("soonest_days_left") is not None else ""))
            if dry_run:
                say_plan_step(app, [change["command"] for change in row["changes"]], row["waits"], "    ")
        for note in report.notes:
            app.note(note)
        if dry_run:
            app.say("PLAN (nothing was changed)", soft_wrap=False)

    app.emit({"dry_run": dry_run, "hosts": hosts, "undo_journal": report.undo_journal, "run": report.to_json()},
             table, failed=not report.ok)
