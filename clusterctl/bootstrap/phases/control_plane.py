"""control-plane and join: ``kubeadm init`` on the first control plane, then HA and worker joins.

The first control-plane host (inventory order) gets the kubeadm configuration at
``/etc/kubernetes/clusterctl/kubeadm-config.yaml`` (no secret in it), checked with
``kubeadm config validate``, then ``kubeadm init`` reading the same configuration plus the run's
bootstrap token and certificate key on stdin (``--upload-certs``: the control-plane
certificates wait, encrypted, in the ``kubeadm-certs`` Secret for two hours). When the control
plane already answers, init is skipped; when hosts of the run are not nodes yet, a fresh
30-minute token is made instead (``kubeadm token create`` reading it on stdin), and control-plane
certificates are uploaded again with a fresh key when another control plane must join. The CA
hash comes from ``/etc/kubernetes/pki/ca.crt``. Token, key and hash live in ``ctx.shared`` for
this run only: never in argv, files, output or the progress file.

More control-plane hosts join one at a time (``serial``), then workers all at once (phase
``join``); a host whose ``/etc/kubernetes/kubelet.conf`` exists has joined and is skipped.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from clusterctl.bootstrap.cluster import kubeadm
from clusterctl.bootstrap.phase import Phase, PhaseContext
from clusterctl.bootstrap.phases import cluster_common as cc
from clusterctl.changes import (
    MAKES_ETCD_MEMBER,
    MAKES_IN_CLUSTER,
    MAKES_KUBEADM_NODE,
    MAKES_NO_TRACE,
    Change,
    ChangeFailed,
    GateRecord,
    HostGate,
)
from clusterctl.cluster_access import read_nodes
from clusterctl.findings import Finding, Severity
from clusterctl.secret import Secret
from clusterctl.transport.base import FailureKind, TransportError

#: Join configurations rendered in a plan before the CA exists carry this in place of the hash.
PLACEHOLDER_HASH = "sha256:" + "0" * 64


@dataclass
class ControlPlaneState:
    first: bool
    config: bytes | None = None
    #: kubeadm has run here (init on the first host, join on the others).
    joined: bool = False
    api_ready: bool = False
    ca_pem: bytes | None = None
    #: Inventory hosts of this run that are not nodes yet (first host only).
    pending: list[str] = field(default_factory=list)


def _join_change(ctx: PhaseContext, *, control_plane: bool) -> Change:
    material = ctx.shared.join
    assert material.token is not None
    config = kubeadm.render_join_config(
        ctx.settings(), ctx.host, token=material.token, ca_hash=material.ca_hash or PLACEHOLDER_HASH,
        certificate_key=material.certificate_key if control_plane else None,
    )
    what = "as a control plane (etcd member, API server)" if control_plane else "as a worker"
    # What reset reads back from the journal: this host's kubeadm state (and etcd data) is bootstrap's.
    makes = (MAKES_KUBEADM_NODE, MAKES_ETCD_MEMBER) if control_plane else (MAKES_KUBEADM_NODE,)
    return Change.run(ctx.host.name, kubeadm.JOIN_COMMAND, summary=f"kubeadm join {what}", stdin_secret=config,
                      undo="kubeadm reset --force", timeout_s=900, makes=makes)


#: What kubeadm says when the token is unknown to the cluster: it expired (or was deleted).
EXPIRED_TOKEN = "could not find a JWS signature in the cluster-info ConfigMap"


def _submit_join(gate: HostGate, changes: Sequence[Change]) -> list[GateRecord]:
    """Submit the join; an expired token is said in those words, with what to do."""
    try:
        return gate.submit_all(changes)
    except ChangeFailed as exc:
        if EXPIRED_TOKEN in exc.result.stderr + exc.result.stdout:
            raise TransportError(FailureKind.COMMAND_FAILED,
                                 "kubeadm join: the join token expired or is unknown to the cluster (tokens made by "
                                 "clusterctl live 30 minutes); run 'clusterctl bootstrap' again: each run makes a "
                                 "fresh one") from exc
        raise


def _joined(ctx: PhaseContext) -> list[Finding]:
    """Verify of a join: kubeadm left the kubelet's kubeconfig."""
    if cc.exists(ctx, kubeadm.KUBELET_CONF):
        return []
    return [Finding(Severity.ERROR, "NOT_JOINED", "kubeadm join left no kubelet.conf", host=ctx.host.name)]


def _missing_material(ctx: PhaseContext, *, control_plane: bool) -> list[Finding]:
    material = ctx.shared.join
    lacking = [] if material.token is not None else ["a join token"]
    if control_plane and material.certificate_key is None:
        lacking.append("the uploaded control-plane certificates")
    if not lacking:
        return []
    first = cc.first_cp(ctx).name
    return [Finding(Severity.ERROR, "JOIN_MATERIAL_MISSING",
                    f"cannot join: {' and '.join(lacking)} must be made on {first} in the same run",
                    host=ctx.host.name, fix=f"Run with {first} included (phase control-plane runs there first).")]


class ControlPlane(Phase[ControlPlaneState]):
    name = "control-plane"
    description = "kubeadm init on the first control plane (v1beta4 config), HA joins of the others"
    role = "control-plane"
    serial = True
    timeout_s = 1200.0
    uses_cluster_settings = True

    def check(self, ctx: PhaseContext) -> ControlPlaneState:
        first = cc.is_first_cp(ctx)
        state = ControlPlaneState(first=first, joined=cc.exists(ctx, kubeadm.KUBELET_CONF))
        if not first:
            return state
        state.config = ctx.reader.get(kubeadm.KUBEADM_CONFIG_PATH, sudo=True)
        if state.joined or cc.has_cluster(ctx):
            state.joined = True
            state.api_ready = cc.api_ready(ctx)
            if state.api_ready:
                nodes = read_nodes(ctx.reader)
                state.pending = [name for name in cc.run_hosts(ctx) if name not in nodes]
            state.ca_pem = ctx.reader.get(kubeadm.CA_CERT, sudo=True)
        return state

    def findings(self, ctx: PhaseContext, state: ControlPlaneState) -> list[Finding]:
        notes = []
        control_planes = ctx.inventory.control_planes
        if state.first and len(control_planes) > 1 and not ctx.inventory.bootstrap.control_plane_endpoint:
            notes.append(Finding(
                Severity.WARNING, "NO_HA_ENDPOINT",
                f"{len(control_planes)} control planes share the endpoint {ctx.settings().control_plane_endpoint} "
                f"(the first one's address): when {ctx.host.name} is down, nodes lose the API server",
                host=ctx.host.name, fix="Set bootstrap.control_plane_endpoint to a load balancer or VIP in front of "
                "every control plane before the first run (kubeadm bakes it into certificates and kubeconfigs)."))
        if state.first and state.joined and not state.api_ready:
            notes.append(Finding(Severity.ERROR, "CONTROL_PLANE_DOWN", "kubeadm already initialised this host but "
                                 "its API server does not answer (kubectl get --raw /readyz)", host=ctx.host.name,
                                 fix="Look at 'crictl ps -a' and the kubelet log; 'clusterctl reset' starts over."))
        if not state.first and not state.joined:
            notes += _missing_material(ctx, control_plane=True)
        return notes

    def plan(self, ctx: PhaseContext, state: ControlPlaneState) -> list[Change]:
        if not state.first:
            return [] if state.joined else [_join_change(ctx, control_plane=True)]
        settings = ctx.settings()
        inventory, host = ctx.inventory, ctx.host
        material = ctx.shared.join
        if state.ca_pem:
            material.ca_hash = kubeadm.ca_cert_hash(state.ca_pem)
        on_disk = kubeadm.render_init_config(settings, host, inventory)
        changes = [Change.write_file(host.name, kubeadm.KUBEADM_CONFIG_PATH, on_disk, current=state.config,
                                     mode=0o600, summary="kubeadm configuration (v1beta4)")]
        validate = Change.run(host.name, kubeadm.VALIDATE_COMMAND, summary="kubeadm config validate",
                              makes=(MAKES_NO_TRACE,))
        if not state.joined:
            material.token, material.certificate_key = kubeadm.new_bootstrap_token(), kubeadm.new_certificate_key()
            full = Secret(kubeadm.render_init_config(settings, host, inventory, token=material.token,
                                                     certificate_key=material.certificate_key), "init configuration")
            changes += [
                validate,
                Change.run(host.name, kubeadm.INIT_COMMAND, summary="kubeadm init (first control plane)",
                           stdin_secret=full, undo="kubeadm reset --force", timeout_s=1200,
                           makes=(MAKES_KUBEADM_NODE, MAKES_ETCD_MEMBER)),
            ]
            return cc.with_folders(ctx, changes)
        if changes[0].content != changes[0].current:
            changes.append(validate)
        pending = state.pending
        if pending:
            material.token = kubeadm.new_bootstrap_token()
            changes.append(Change.run(
                host.name, kubeadm.TOKEN_CREATE_COMMAND, summary=f"join token (30 min) for {', '.join(pending)}",
                stdin_secret=kubeadm.render_cluster_op_config(settings, token=material.token),
                makes=(MAKES_IN_CLUSTER, MAKES_NO_TRACE), cannot_undo="the token expires by itself in 30 minutes"))
        pending_cp = [n for n in pending if inventory.host(n).is_control_plane]
        if pending_cp:
            material.certificate_key = kubeadm.new_certificate_key()
            changes.append(Change.run(
                host.name, kubeadm.UPLOAD_CERTS_COMMAND,
                summary=f"upload control-plane certificates (2 h) for {', '.join(pending_cp)}",
                stdin_secret=kubeadm.render_cluster_op_config(settings, certificate_key=material.certificate_key),
                makes=(MAKES_IN_CLUSTER, MAKES_NO_TRACE), cannot_undo="the cluster deletes them by itself in 2 hours"))
        return cc.with_folders(ctx, changes)

    def apply(self, ctx: PhaseContext, gate: HostGate, changes: Sequence[Change]) -> list[GateRecord]:
        if not cc.is_first_cp(ctx):
            return _submit_join(gate, changes)
        records = gate.submit_all(changes)
        material = ctx.shared.join
        if material.ca_hash is None and (pem := ctx.reader.get(kubeadm.CA_CERT, sudo=True)):
            material.ca_hash = kubeadm.ca_cert_hash(pem)
        return records

    def verify(self, ctx: PhaseContext) -> list[Finding]:
        if cc.is_first_cp(ctx):
            if cc.api_ready(ctx):
                return []
            return [Finding(Severity.ERROR, "CONTROL_PLANE_DOWN", "the API server does not answer after kubeadm init",
                            host=ctx.host.name)]
        return _joined(ctx)


class Join(Phase[bool]):
    """State: whether this host has joined already (kubelet.conf is there)."""

    name = "join"
    confirmable = True
    description = "workers join with this run's short-lived token and the CA hash (stdin only)"
    timeout_s = 900.0
    uses_cluster_settings = True
    not_role = "control-plane"

    def check(self, ctx: PhaseContext) -> bool:
        return cc.exists(ctx, kubeadm.KUBELET_CONF)

    def findings(self, ctx: PhaseContext, state: bool) -> list[Finding]:
        return [] if state else _missing_material(ctx, control_plane=False)

    def plan(self, ctx: PhaseContext, state: bool) -> list[Change]:
        return [] if state else [_join_change(ctx, control_plane=False)]

    def apply(self, ctx: PhaseContext, gate: HostGate, changes: Sequence[Change]) -> list[GateRecord]:
        return _submit_join(gate, changes)

    def verify(self, ctx: PhaseContext) -> list[Finding]:
        return _joined(ctx)
