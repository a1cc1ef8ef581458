"""``clusterctl remediate serve`` (quarantine the hosts alerts name) and ``remediate alertmanager-config``."""

from __future__ import annotations

import sys
from typing import Optional

import typer

from clusterctl.cli.context import app_context
from clusterctl.errors import UsageError

remediate_app = typer.Typer(help="""Act on alerts: quarantine the hosts that bootstrap's DCGM alert rules name.

'remediate serve' is an Alertmanager webhook receiver; 'remediate alertmanager-config' prints
the Alertmanager configuration that sends alerts to it. See docs/quarantine.md.
""", no_args_is_help=True)

SERVE_HELP = """\
Receive Alertmanager webhooks and quarantine the hosts the alerts name, on the same path as
'clusterctl quarantine': GPUFellOffTheBus, GPURowRemapFailure, GPUDoubleBitECCErrors and
NVLinkBandwidthZero quarantine and drain; GPUXidError and NVLinkCRCErrors quarantine; the
others are only logged (the inventory's quarantine.alerts changes that). Hosts not in the
inventory are never acted on; a host already quarantined is not acted on again; never more
than --max-unavailable hosts out of service (cordoned nodes count). Every decision is one JSON
line on stderr. A body that is not a webhook payload gets 400 and changes nothing. With
--dry-run it decides and logs, and changes nothing.

Examples:

  clusterctl remediate serve --listen 127.0.0.1:9095 --dry-run

  clusterctl remediate serve --listen 0.0.0.0:9095 --max-unavailable 2
"""


def register(app: typer.Typer) -> None:
    app.add_typer(remediate_app, name="remediate")


def _listen(text: str) -> tuple[str, int]:
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise UsageError(f"--listen takes HOST:PORT such as 127.0.0.1:9095, got {text!r}", field="--listen")
    return host.strip("[]") or "127.0.0.1", int(port)


@remediate_app.command("serve", help=SERVE_HELP)
def serve_command(
    ctx: typer.Context,
    listen: str = typer.Option("127.0.0.1:9095", "--listen", metavar="HOST:PORT", help="Where to listen."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Decide and log; change nothing."),
    max_unavailable: Optional[str] = typer.Option(  # noqa: UP045
        None, "--max-unavailable", metavar="N|PCT",
        help="Most hosts out of service at once (default: the inventory's, else 10%, at least 1)."),
    drain_timeout: float = typer.Option(300.0, "--drain-timeout", metavar="SECONDS",
                                        help="How long each drain may wait for budgets."),
) -> None:
    from clusterctl.quarantine.drain import DrainOptions
    from clusterctl.quarantine.policy import cap
    from clusterctl.quarantine.receiver import Remediator, serve

    app = app_context(ctx)
    inventory = app.inventory()
    address, port = _listen(listen)
    cap(max_unavailable or inventory.quarantine.max_unavailable, len(inventory.hosts))  # a bad value: exit 2 now
    remediator = Remediator(inventory, app.runner, sys.stderr, dry_run=dry_run, max_unavailable=max_unavailable,
                            drain_options=DrainOptions(timeout_s=drain_timeout))

    def ready(bound: int) -> None:
        mode = " (dry run: nothing will be changed)" if dry_run else ""
        print(f"listening on http://{address}:{bound}/webhook{mode}", file=sys.stderr, flush=True)

    try:
        serve(remediator, address, port, ready=ready)
    except OSError as exc:
        raise UsageError(f"cannot listen on {address}:{port}: {exc.strerror or exc}", field="--listen") from exc


@remediate_app.command("alertmanager-config", help="""Print the Alertmanager configuration that sends alerts to
'remediate serve' (route and webhook_configs receiver), to merge into alertmanager.yml.

Example:

  clusterctl remediate alertmanager-config --url http://10.0.0.5:9095/webhook
""")
def alertmanager_config_command(
    url: str = typer.Option("http://127.0.0.1:9095/webhook", "--url", metavar="URL",
                            help="Where 'remediate serve' listens, as Alertmanager reaches it."),
) -> None:
    from clusterctl.quarantine.receiver import webhook_config

    if not url.startswith(("http://", "https://")) or any(c.isspace() for c in url):
        raise UsageError(f"--url must be an http(s) URL, got {url!r}", field="--url")
    typer.echo(webhook_config(url), nl=False)
