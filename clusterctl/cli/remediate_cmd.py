"""``clusterctl remediate serve`` (quarantine the hosts alerts name) and ``remediate alertmanager-config``."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from clusterctl.cli.confirm import confirm_change
from clusterctl.cli.context import DELETE_EMPTYDIR_DATA, DRAIN_TIMEOUT, STATE_DIR, app_context
from clusterctl.errors import UsageError
from clusterctl.writable import make_folder, writable_dir, writable_file
from clusterctl.writable import state_dir as chosen_state_dir

if TYPE_CHECKING:
    from clusterctl.inventory.model import Inventory
    from clusterctl.quarantine.webhook_server import Security

remediate_app = typer.Typer(help="""Act on alerts: quarantine the hosts that bootstrap's DCGM alert rules name.

'remediate serve' is an Alertmanager webhook receiver; 'remediate alertmanager-config' prints
the Alertmanager configuration that sends alerts to it. See docs/quarantine.md.
""", no_args_is_help=True)

SERVE_HELP = """\
Receive Alertmanager webhooks and quarantine the hosts the alerts name, on the same path as
'clusterctl quarantine': GPUFellOffTheBus, GPURowRemapFailure, GPUDoubleBitECCErrors and
NVLinkBandwidthZero quarantine and drain; GPUXidError and NVLinkCRCErrors quarantine; the
others are only logged (the inventory's quarantine.alerts changes that); pods with emptyDir data
are drained only with --delete-emptydir-data, as by 'quarantine --drain'. Hosts not in the
inventory are never acted on; the cluster says who is out (a host quarantined already is not
acted on again; one released that fails again is); never more than --max-unavailable hosts
out of service (cordoned nodes count), across every receiver of the cluster (they share a
Lease in the cluster). Each POST is answered at once and each host's work runs on its own;
alerts not yet acted on are kept in --pending-file for a restart. Every decision is one JSON
line on stderr. Its files (undo journals in DIR/undo, --heal's reports in DIR/heal, accepted
alerts in DIR/remediate) are kept in the state folder DIR (--state-dir; default
$CLUSTERCTL_STATE_DIR, else $XDG_STATE_HOME/clusterctl, else ~/.local/state/clusterctl; a
relative DIR is from the current folder), not the folder it starts in (a service unit starts
in /); it prints where at start. A body that is not a webhook payload gets 400 and changes nothing. With
--dry-run it decides and logs, and changes nothing. Otherwise it asks once at start; --yes
(or CLUSTERCTL_YES=1) confirms, and is required off a terminal (a service unit).

Callers authenticate as Alertmanager's http_config does: a bearer token (--token-file, the
same token as Alertmanager's credentials_file; without it: 401, nothing done) and, with
--client-ca, a client certificate (mutual TLS). Anything but loopback is refused (exit 2)
without TLS (--tls-cert, --tls-key) and one of the two. 'remediate alertmanager-config'
prints the matching Alertmanager receiver.

Examples:

  clusterctl remediate serve --listen 127.0.0.1:9095 --dry-run

  (umask 077; openssl rand -hex 32 > remediate.token)
  clusterctl remediate serve --listen 10.0.0.5:9095 --yes \\
      --token-file remediate.token --tls-cert tls.crt --tls-key tls.key
"""


def register(app: typer.Typer) -> None:
    app.add_typer(remediate_app, name="remediate")


def _security(token_file: str | None, tls_cert: str | None, tls_key: str | None,
              client_ca: str | None) -> Security:
    from clusterctl.quarantine import webhook_server

    if (tls_cert is None) != (tls_key is None):
        raise UsageError("--tls-cert and --tls-key go together (the receiver's certificate and its key)",
                         field="--tls-cert" if tls_cert is None else "--tls-key")
    if client_ca is not None and tls_cert is None:
        raise UsageError("--client-ca needs TLS: give --tls-cert and --tls-key too", field="--client-ca")
    token = webhook_server.TokenFile(token_file) if token_file is not None else None
    tls = webhook_server.tls_context(tls_cert, tls_key, client_ca) if tls_cert and tls_key else None
    return webhook_server.Security(token, tls, mutual=client_ca is not None)


@remediate_app.command("serve", help=SERVE_HELP)
def serve_command(
    ctx: typer.Context,
    listen: str = typer.Option("127.0.0.1:9095", "--listen", metavar="HOST:PORT",
                               help="Where to listen ([::1]:9095 for IPv6). Beyond loopback: TLS and "
                                    "authentication required."),
    token_file: str | None = typer.Option(
        None, "--token-file", metavar="FILE",
        help="The bearer token callers must send (mode 0600 or 0640; re-read when it changes)."),
    tls_cert: str | None = typer.Option(None, "--tls-cert", metavar="FILE",
                                           help="Serve HTTPS with this certificate (PEM, chain after it)."),
    tls_key: str | None = typer.Option(None, "--tls-key", metavar="FILE",
                                          help="The certificate's private key (PEM)."),
    client_ca: str | None = typer.Option(
        None, "--client-ca", metavar="FILE", help="Require client certificates signed by this CA (mutual TLS)."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Decide and log; change nothing."),
    yes: bool = typer.Option(False, "--yes", "-y", help="Act on alerts without asking at start (required off a "
                             "terminal: a service unit passes it)."),
    max_unavailable: str | None = typer.Option(
        None, "--max-unavailable", metavar="N|PCT",
        help="Most hosts out of service at once (default: the inventory's, else 10%, at least 1)."),
    drain_timeout: float = DRAIN_TIMEOUT,
    delete_emptydir_data: bool = DELETE_EMPTYDIR_DATA,
    pending_file: str | None = typer.Option(
        None, "--pending-file", metavar="FILE",
        help="Accepted alerts not yet acted on; a restarted receiver acts on them. Default: in the state "
             "folder (--state-dir), remediate/<cluster>-<fleet>-pending.json. A relative FILE is from the "
             "current folder."),
    state_dir: str | None = STATE_DIR,
    heal: bool = typer.Option(False, "--heal", help="After draining a host, run its escalation chain (GPU reset, "
                              "reboot, power cycle through the BMC) and release it once the release gate passes "
                              "(clusterctl heal; the inventory's quarantine.heal)."),
) -> None:
    from clusterctl.heal.run import heal_after_drain
    from clusterctl.quarantine import webhook_server
    from clusterctl.quarantine.drain import DrainOptions
    from clusterctl.quarantine.policy import cap
    from clusterctl.quarantine.receiver import Remediator, serve

    address = webhook_server.parse_listen(listen)
    security = _security(token_file, tls_cert, tls_key, client_ca)
    webhook_server.check_exposure(address, security)
    app = app_context(ctx)
    inventory = app.inventory()
    cap(max_unavailable or inventory.quarantine.max_unavailable, len(inventory.hosts))  # a bad value: exit 2 now
    what = "act on alerts (quarantine, drain" + (", then heal: GPU reset, reboot, power cycle, release)" if heal
                                                  else ")")
    confirm_change(what, [h.name for h in inventory.hosts], yes=yes,
                   dry_run=dry_run, preview=f"clusterctl remediate serve --listen {listen} --dry-run")
    files = _receiver_files(state_dir, pending_file, inventory, dry_run=dry_run, heal=heal)
    drain = DrainOptions(timeout_s=drain_timeout, delete_emptydir_data=delete_emptydir_data)
    remediator = Remediator(inventory, app.runner, sys.stderr, dry_run=dry_run, max_unavailable=max_unavailable,
                            drain_options=drain, pending_file=str(files.pending), state_dir=str(files.state),
                            after_drain=heal_after_drain(inventory, state_dir=str(files.state), drain=drain,
                                                         reports_folder=files.reports) if heal else None)

    def ready(bound: int) -> None:
        mode = " (dry run: nothing will be changed)" if dry_run else ""
        who = ", bearer token" if security.token else ""
        who += ", client certificates" if security.mutual else ""
        who = who or ", no authentication (loopback only)"
        print(f"listening on {address.url(bound, tls=security.tls is not None)}{who}{mode}", file=sys.stderr,
              flush=True)
        if not dry_run:
            print(f"accepted alerts are kept in {files.pending} until acted on", file=sys.stderr, flush=True)
            print(f"undo journals are written to {files.journals}/", file=sys.stderr, flush=True)
            if heal:
                print(f"needs-hardware reports are written to {files.reports}/", file=sys.stderr, flush=True)
        remediator.resume()  # what an earlier run accepted and did not finish

    try:
        serve(remediator, address, security, ready=ready)
    except OSError as exc:
        raise UsageError(f"cannot listen on {listen}: {exc.strerror or exc}", field="--listen") from exc


@dataclass(frozen=True)
class ReceiverFiles:
    """Where a receiver writes, all absolute (fixed at start: a later chdir changes nothing)."""

    #: The state folder (``--state-dir``): what the receiver's commands are told, as every command's.
    state: Path
    #: Accepted alerts not yet acted on (``pending_work``).
    pending: Path
    #: Each host's undo journal (remediate's, and heal's with --heal): ``clusterctl undo`` takes them.
    journals: Path
    #: ``--heal``'s "needs hardware" reports.
    reports: Path


_UNJOURNALED = "the receiver would change hosts it cannot journal"


def _receiver_files(state_dir: str | None, pending_file: str | None, inventory: Inventory, *, dry_run: bool,
                    heal: bool) -> ReceiverFiles:
    """The receiver's files in the state folder (``--state-dir``, else ``$CLUSTERCTL_STATE_DIR``, else
    ``$XDG_STATE_HOME/clusterctl``), not the folder it started in, as every run record is: a receiver
    restarted elsewhere (a service unit starts in /) writes where the last one did; the pending alerts'
    file is ``--pending-file`` where given. Each file and folder is made and checked writable before it
    listens: an alert accepted and then not journaled would be a change no undo finds."""
    base = chosen_state_dir(state_dir).absolute()
    option = "--state-dir" if state_dir else "the state folder"
    from clusterctl.engine.progress import RunPlace
    from clusterctl.quarantine.pending_work import default_pending_file

    # --pending-file made absolute now: the file stays the same whatever the process does later.
    pending = Path(pending_file).expanduser().absolute() if pending_file is not None else \
        default_pending_file(inventory, base)
    files = ReceiverFiles(base, pending, RunPlace.of(inventory, "remediate", str(base)).journal_dir, base / "heal")
    if not dry_run:
        if pending_file is None:
            make_folder(pending.parent, f"{option}: the pending alerts' folder {pending.parent}")
        writable_file(pending, "--pending-file" if pending_file is not None else f"{option}: the pending alerts' file")
        writable_dir(files.journals, f"{option}: the undo journals' folder", why=_UNJOURNALED)
        if heal:
            writable_dir(files.reports, f"{option}: the heal reports' folder", why=_UNJOURNALED)
    return files


@remediate_app.command("alertmanager-config", help="""Print the Alertmanager configuration that sends alerts to
'remediate serve' (route and webhook_configs receiver), to merge into alertmanager.yml. The file
options are paths on Alertmanager's machine: the bearer token (the same as the receiver's
--token-file), the CA that signed the receiver's certificate, and Alertmanager's own certificate
and key for a receiver that asks for client certificates (--client-ca).

Example:

  clusterctl remediate alertmanager-config \\
      --url https://10.0.0.5:9095/webhook \\
      --token-file /etc/alertmanager/remediate.token \\
      --ca-file /etc/alertmanager/ca.crt
""")
def alertmanager_config_command(
    url: str = typer.Option("http://127.0.0.1:9095/webhook", "--url", metavar="URL",
                            help="Where 'remediate serve' listens, as Alertmanager reaches it."),
    token_file: str | None = typer.Option(None, "--token-file", metavar="FILE",
                                             help="http_config.authorization.credentials_file."),
    ca_file: str | None = typer.Option(None, "--ca-file", metavar="FILE",
                                          help="tls_config.ca_file."),
    cert_file: str | None = typer.Option(None, "--cert-file", metavar="FILE",
                                            help="tls_config.cert_file (mutual TLS)."),
    key_file: str | None = typer.Option(None, "--key-file", metavar="FILE",
                                           help="tls_config.key_file (mutual TLS)."),
) -> None:
    from clusterctl.bootstrap.cluster.alerts import ReceiverAuth, render_alertmanager_receiver
    from clusterctl.inventory import values
    from clusterctl.inventory.cluster_sections import by_rule

    url = by_rule(partial(values.url, local_files=False), url, "--url")
    if (cert_file is None) != (key_file is None):
        raise UsageError("--cert-file and --key-file go together", field="--cert-file")
    for option, value in (("--token-file", token_file), ("--ca-file", ca_file), ("--cert-file", cert_file),
                          ("--key-file", key_file)):
        if value is not None and (not value.strip() or any(ord(c) < 32 for c in value)):
            raise UsageError(f"{option} must be a file path, got {value!r}", field=option)
    if url.startswith("http://") and token_file:
        print("warning: the bearer token would cross the network in clear text: use an https:// URL "
              "(the receiver's --tls-cert)", file=sys.stderr)
    typer.echo(render_alertmanager_receiver(url, ReceiverAuth(token_file, ca_file, cert_file, key_file)), nl=False)
