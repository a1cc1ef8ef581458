"""``kubeadm certs check-expiration`` and ``kubeadm certs renew all`` on a simulated control plane.

What kubeadm lists is what is on the host, as the real one reads it (``cmd/kubeadm/app/cmd/certs.go``,
``phases/certs/certs.go``): a certificate or CA whose file is not there is a ``!MISSING!`` row
(every row before ``kubeadm init`` and after ``kubeadm reset``, exit 0); a CA without its key is
externally managed, and then the certificates it signs must be there; a certificate there whose CA
is not fails the command ("Error checking external CA condition", exit 1). The tables are laid out
by Go's tabwriter as kubeadm's (``tabwriter``). Certificates live a year from when they were issued
(kubeadm's default), the CAs ten years. A host keeps when its certificates were last issued in its
state (``kubeadm_certs_issued``); one that never renewed counts as issued 30 days ago, or 360 days
ago with the fault ``certs: expiring`` (a cluster about to lose its certificates). ``renew all``
goes through the same files, with kubeadm's line for each and its reminder to restart the
control-plane components.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timezone

from clusterctl.mock.tools import kube_state as ks
from clusterctl.mock.tools.base import ToolContext, ToolResult
from clusterctl.mock.tools.kubeadm_config import TRACE

DAY = 86400.0
PKI = "/etc/kubernetes/pki"
#: Each certificate kubeadm lists, its CA, and its file (``pki/BASE.crt``, or a kubeconfig that embeds it).
CERTS = (("admin.conf", "ca", "/etc/kubernetes/admin.conf"), ("apiserver", "ca", "apiserver"),
         ("apiserver-etcd-client", "etcd-ca", "apiserver-etcd-client"),
         ("apiserver-kubelet-client", "ca", "apiserver-kubelet-client"),
         ("controller-manager.conf", "ca", "/etc/kubernetes/controller-manager.conf"),
         ("etcd-healthcheck-client", "etcd-ca", "etcd/healthcheck-client"), ("etcd-peer", "etcd-ca", "etcd/peer"),
         ("etcd-server", "etcd-ca", "etcd/server"), ("front-proxy-client", "front-proxy-ca", "front-proxy-client"),
         ("scheduler.conf", "ca", "/etc/kubernetes/scheduler.conf"),
         ("super-admin.conf", "ca", "/etc/kubernetes/super-admin.conf"))
#: Each CA: its base name under pki/, kubeadm's name for it in errors, and what it signs that must be
#: there when its key is not (an external CA: ``UsingExternalCA``, ``...FrontProxyCA``, ``...EtcdCA``).
CAS = {"ca": ("ca", "CA", (("apiserver", "API server"), ("apiserver-kubelet-client", "API server kubelet client"))),
       "etcd-ca": ("etcd/ca", "etcd CA", (("apiserver-etcd-client", "apiserver etcd client"),
                                          ("etcd/server", "etcd server"), ("etcd/peer", "etcd peer"),
                                          ("etcd/healthcheck-client", "etcd health-check client"))),
       "front-proxy-ca": ("front-proxy-ca", "front-proxy CA", (("front-proxy-client", "front-proxy client"),))}
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


def write_pki(ctx: ToolContext, ca_pem: bytes) -> None:
    """What ``kubeadm init`` writes of a control plane's certificates (the CA a real one; the rest
    stand-ins, as read only by this simulator), kubeconfigs aside: every CA and certificate with its key."""
    ctx.fs.write(f"{PKI}/ca.crt", ca_pem)
    names = {base for base, _, _ in CAS.values()} | {f for _, _, f in CERTS if not f.startswith("/")}
    for base in sorted(names - {"ca"}):
        ctx.fs.write(f"{PKI}/{base}.crt", b"(certificate, simulated)\n")
    for base in sorted(names):
        ctx.fs.write(f"{PKI}/{base}.key", b"(private key, simulated)\n", mode=0o600)


def _path(file: str, suffix: str = ".crt") -> str:
    return file if file.startswith("/") else f"{PKI}/{file}{suffix}"


class _ExternalCAError(Exception):
    """kubeadm could not tell whether a CA is external: its error line."""


def _not_loaded(what: str, kind: str, path: str) -> _ExternalCAError:
    return _ExternalCAError(f"failure loading {what}: couldn't load the {kind} file {path}: open {path}: "
                            "no such file or directory")


def _externally_managed(ctx: ToolContext, ca: str) -> bool:
    """kubeadm's ``UsingExternal*CA``: a CA certificate without its key, whose signed certificates are there."""
    base, called, signed = CAS[ca]
    try:
        if not ctx.fs.exists(_path(base)):
            raise _not_loaded(f"certificate for {called}", "certificate", _path(base))
        if ctx.fs.exists(_path(base, ".key")):
            return False
        for file, name in signed:
            if not ctx.fs.exists(_path(file, ".key")):
                raise _not_loaded(f"key for {file}", "private key", _path(file, ".key"))
            if not ctx.fs.exists(_path(file)):
                raise _not_loaded(f"certificate for {name}", "certificate", _path(file))
    except _ExternalCAError as exc:
        raise _ExternalCAError(f"Error checking external CA condition for {base} certificate authority: {exc}") \
            from None
    return True


def tabwriter(rows: Sequence[Sequence[str]]) -> str:
    """Go's tabwriter as kubeadm sets it (minimum width 10, padding 3): every cell but a row's last
    padded to its column's widest in the block; a row without cells (a blank line) ends a block."""
    out: list[str] = []
    block: list[Sequence[str]] = []
    for row in [*rows, []]:
        if row:
            block.append(row)
            continue
        width = [max(10, *(len(r[i]) + 3 for r in block if i < len(r) - 1)) for i in range(max(map(len, block)) - 1)]
        out += ["".join(c.ljust(w) for c, w in zip(r, width, strict=False)) + r[-1] for r in block] + [""]
        block = []
    return "\n".join(out[:-1]) + "\n"


def _reading(ctx: ToolContext, prefix: str) -> str:
    """What kubeadm says before its answer when it reads its configuration from the cluster."""
    if not ks.admin_reachable(ctx):
        return ""
    return (f'[{prefix}] Reading configuration from the "kubeadm-config" ConfigMap in namespace "kube-system"...\n'
            f"[{prefix}] Use 'kubeadm init phase upload-config kubeadm --config your-config-file' to re-upload it.\n\n")


def check_expiration(ctx: ToolContext) -> ToolResult:
    now = ks.now(ks.read(ctx))
    issued = _issued(ctx, now)
    out = _reading(ctx, "check-expiration")
    rows = [["CERTIFICATE", "EXPIRES", "RESIDUAL TIME", "CERTIFICATE AUTHORITY", "EXTERNALLY MANAGED"]]
    try:
        for name, ca, file in CERTS:
            if not ctx.fs.exists(_path(file)):
                rows.append([f"!MISSING! {name}", "", "", "", ""])
                continue
            external = _externally_managed(ctx, ca)
            rows.append([name, _date(issued + 365 * DAY), _residual(issued + 365 * DAY - now), ca,
                         f"{'yes' if external else 'no':<8}"])
        rows += [[], ["CERTIFICATE AUTHORITY", "EXPIRES", "RESIDUAL TIME", "EXTERNALLY MANAGED"]]
        for ca, (base, _, _) in CAS.items():
            if not ctx.fs.exists(_path(base)):
                rows.append([f"!MISSING! {ca}", "", "", ""])
                continue
            external = _externally_managed(ctx, ca)
            rows.append([ca, _date(now + 3620 * DAY), _residual(3620 * DAY), f"{'yes' if external else 'no':<8}"])
    except _ExternalCAError as exc:
        return ToolResult(out, f"error: {exc}\n{TRACE}", 1)
    return ctx.ok(out + tabwriter(rows))


def renew_all(ctx: ToolContext) -> ToolResult:
    """Each certificate in turn, as kubeadm's ``renewCert``: a missing one said ``MISSING!``, one its
    CA's key is not there for not renewed, the first CA kubeadm cannot check stopping it (exit 1)."""
    out = _reading(ctx, "renew")
    renewed = False
    try:
        for (_, ca, file), what in zip(CERTS, RENEWED, strict=True):
            if not ctx.fs.exists(_path(file)):
                out += f"MISSING! {what.removesuffix(' renewed')}\n"
            elif _externally_managed(ctx, ca):
                out += f"Detected external {CAS[ca][0]}, {what.removesuffix(' renewed')} can't be renewed\n"
            else:
                out += f"{what}\n"
                renewed = True
    except _ExternalCAError as exc:
        return ToolResult(out, f"error: {exc}\n{TRACE}", 1)
    if renewed:
        with ctx.host.edit() as data:
            data["kubeadm_certs_issued"] = ks.now(ks.read(ctx))
    return ctx.ok(out + "\nDone renewing certificates. You must restart the kube-apiserver, kube-controller-manager, "
                  "kube-scheduler and etcd, so that they can use the new certificates.\n")
