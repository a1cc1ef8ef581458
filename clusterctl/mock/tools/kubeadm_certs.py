"""``kubeadm certs check-expiration`` and ``kubeadm certs renew all`` on a simulated control plane.

The tables are laid out as kubeadm's tabwriter lays them out (tests/fixtures/kubeadm-certs);
certificates live a year from when they were issued (kubeadm's default), the CAs ten years.
A host keeps when its certificates were last issued in its state (``kubeadm_certs_issued``);
one that never renewed counts as issued 30 days ago, or 360 days ago with the fault
``certs: expiring`` (a cluster about to lose its certificates). ``renew all`` prints kubeadm's
lines and its reminder to restart the control-plane components.
"""

from __future__ import annotations

from datetime import datetime, timezone

from clusterctl.mock.tools import kube_state as ks
from clusterctl.mock.tools.base import ToolContext, ToolResult

DAY = 86400.0
CERTS = (("admin.conf", "ca"), ("apiserver", "ca"), ("apiserver-etcd-client", "etcd-ca"),
         ("apiserver-kubelet-client", "ca"), ("controller-manager.conf", "ca"), ("etcd-healthcheck-client", "etcd-ca"),
         ("etcd-peer", "etcd-ca"), ("etcd-server", "etcd-ca"), ("front-proxy-client", "front-proxy-ca"),
         ("scheduler.conf", "ca"), ("super-admin.conf", "ca"))
RENEWED = ("certificate embedded in the kubeconfig file for the admin to use and for kubeadm itself renewed",
           "certificate for serving the Kubernetes API renewed",
           "certificate the apiserver uses to access etcd renewed",
           "certificate for the API server to connect to kubelet renewed",
           "certificate embedded in the kubeconfig file for the controller manager to use renewed",
           "certificate for liveness probes to healthcheck etcd renewed",
           "certificate for etcd nodes to communicate with each other renewed",
           "certificate for serving etcd renewed",
           "certificate for the front proxy client renewed",
           "certificate embedded in the kubeconfig file for the scheduler manager to use renewed",
           "certificate embedded in the kubeconfig file for the super-admin renewed")


def _issued(ctx: ToolContext, now: float) -> float:
    stored = ctx.host.read().get("kubeadm_certs_issued")
    if isinstance(stored, (int, float)):
        return float(stored)
    return now - (360 if ks.fault(ctx, ctx.host_name, "certs") == "expiring" else 30) * DAY


def _date(ts: float) -> str:
    return datetime.fromtimestamp(ts, timezone.utc).strftime("%b %d, %Y %H:%M UTC")


def _residual(seconds: float) -> str:
    if seconds < 0:
        return "<invalid>"
    days = int(seconds // DAY)
    return f"{days // 365}y" if days >= 730 else f"{days}d" if days >= 1 else f"{int(seconds // 3600)}h"


def check_expiration(ctx: ToolContext) -> ToolResult:
    if not ctx.fs.exists("/etc/kubernetes/pki/ca.crt"):
        return ctx.fail("[check-expiration] Error reading configuration from the Cluster. Falling back to default "
                        "configuration\nerror: open /etc/kubernetes/pki/ca.crt: no such file or directory\n")
    now = ks.now(ks.read(ctx))
    issued = _issued(ctx, now)
    expires = issued + 365 * DAY
    ca_expires = now + 3620 * DAY
    out = ("[check-expiration] Reading configuration from the cluster...\n[check-expiration] FYI: You can look at "
           "this config file with 'kubectl -n kube-system get cm kubeadm-config -o yaml'\n\n"
           f"{'CERTIFICATE':<27}{'EXPIRES':<25}{'RESIDUAL TIME':<16}{'CERTIFICATE AUTHORITY':<24}EXTERNALLY MANAGED\n")
    for name, ca in CERTS:
        out += f"{name:<27}{_date(expires):<25}{_residual(expires - now):<16}{ca:<24}no      \n"
    out += f"\n{'CERTIFICATE AUTHORITY':<24}{'EXPIRES':<25}{'RESIDUAL TIME':<16}EXTERNALLY MANAGED\n"
    for name in ("ca", "etcd-ca", "front-proxy-ca"):
        out += f"{name:<24}{_date(ca_expires):<25}{_residual(ca_expires - now):<16}no      \n"
    return ctx.ok(out)


def renew_all(ctx: ToolContext) -> ToolResult:
    if not ctx.fs.exists("/etc/kubernetes/pki/ca.crt"):
        return ctx.fail("error execution phase: open /etc/kubernetes/pki/ca.crt: no such file or directory\n")
    now = ks.now(ks.read(ctx))
    with ctx.host.edit() as data:
        data["kubeadm_certs_issued"] = now
    return ctx.ok("[renew] Reading configuration from the cluster...\n[renew] FYI: You can look at this config file "
                  "with 'kubectl -n kube-system get cm kubeadm-config -o yaml'\n\n" + "".join(f"{line}\n" for line in
                                                                                            RENEWED)
                  + "\nDone renewing certificates. You must restart the kube-apiserver, kube-controller-manager, "
                  "kube-scheduler and etcd, so that they can use the new certificates.\n")
