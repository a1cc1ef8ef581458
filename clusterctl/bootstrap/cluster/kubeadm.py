"""kubeadm configuration (v1beta4) for init and joins, bootstrap tokens, certificate keys, CA hashes.

The init configuration written to the host (``KUBEADM_CONFIG_PATH``) never holds a secret: the
run's join token and the certificate key for control-plane joins are rendered into a second copy
that kubeadm reads on stdin (``--config /dev/stdin``), so they stay out of argv, files and output.
Tokens and keys are made here, on the control machine, and registered as ``Secret`` before any
command that could echo them runs.
"""

from __future__ import annotations

import hashlib
import secrets
import shlex
import string
from dataclasses import dataclass
from typing import TYPE_CHECKING

from clusterctl.bootstrap.cluster.settings import ClusterSettings, kubelet_node_labels
from clusterctl.errors import UsageError
from clusterctl.facts.kube import ADMIN_KUBECONFIG
from clusterctl.inventory.values import ip_literal
from clusterctl.secret import Secret
from clusterctl.templating import render

if TYPE_CHECKING:
    from clusterctl.inventory.model import Host, Inventory

KUBEADM_CONFIG_PATH = "/etc/kubernetes/clusterctl/kubeadm-config.yaml"
#: What kubeadm init/join leave on a node: the kubelet's kubeconfig, the cluster's CA, the static pods.
KUBELET_CONF = "/etc/kubernetes/kubelet.conf"
CA_CERT = "/etc/kubernetes/pki/ca.crt"
MANIFESTS_DIR = "/etc/kubernetes/manifests"
APISERVER_MANIFEST = f"{MANIFESTS_DIR}/kube-apiserver.yaml"
#: Short on purpose: a fresh token is made for every run that joins nodes.
JOIN_TOKEN_TTL = "30m0s"
CONTROL_PLANE_TAINT = {"key": "node-role.kubernetes.io/control-plane", "effect": "NoSchedule"}
_TOKEN_ALPHABET = string.ascii_lowercase + string.digits


@dataclass(frozen=True)
class Timeouts:
    """v1beta4 ``timeouts`` (Go durations); ``apiServer.timeoutForControlPlane`` moved here."""

    control_plane: str = "4m0s"
    kubelet: str = "4m0s"
    api_call: str = "1m0s"
    tls_bootstrap: str = "5m0s"
    discovery: str = "5m0s"
    #: ``kubeadm upgrade``: how long it waits for a static pod to come back at the new version.
    upgrade_manifests: str = "5m0s"


TIMEOUTS = Timeouts()


def new_bootstrap_token() -> Secret:
    """A bootstrap token in kubeadm's ``[a-z0-9]{6}.[a-z0-9]{16}`` form, already masked everywhere."""
    token = "".join(secrets.choice(_TOKEN_ALPHABET) for _ in range(6)) + "." + \
        "".join(secrets.choice(_TOKEN_ALPHABET) for _ in range(16))
    return Secret(token, "join token")


def new_certificate_key() -> Secret:
    """A 32-byte AES key, hex-encoded, as ``kubeadm certs certificate-key`` makes one."""
    return Secret(secrets.token_hex(32), "certificate key")


def ca_cert_hash(pem: bytes) -> str:
    """``sha256:<hex>`` of the CA certificate's Subject Public Key Info, as kubeadm pins it."""
    from cryptography import x509
    from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

    try:
        cert = x509.load_pem_x509_certificate(pem)
    except ValueError as exc:
        raise UsageError(f"the cluster CA certificate could not be read: {exc}") from exc
    spki = cert.public_key().public_bytes(Encoding.DER, PublicFormat.SubjectPublicKeyInfo)
    return "sha256:" + hashlib.sha256(spki).hexdigest()


def control_plane_taints(host: Host) -> list[dict[str, str]]:
    """No taint on a control-plane host that is also a worker (small GPU clusters use every host)."""
    return [] if "worker" in host.roles else [dict(CONTROL_PLANE_TAINT)]


def _common(settings: ClusterSettings, host: Host) -> dict[str, object]:
    return {
        "cluster_name": settings.cluster_name,
        "kubernetes_version": settings.kubernetes.tag,
        "control_plane_endpoint": settings.control_plane_endpoint,
        "node_name": host.name,
        "cri_socket": settings.cri_socket,
        "node_labels": ",".join(f"{k}={v}" for k, v in sorted(kubelet_node_labels(host).items())),
        # A host name: kubeadm picks the address of the default route itself.
        "advertise_address": str(ip) if (ip := ip_literal(host.address)) else None,
        "bind_port": 6443,
        "timeouts": TIMEOUTS,
        "allow_cgroup_v1": settings.allow_cgroup_v1,
    }


def render_init_config(
    settings: ClusterSettings,
    host: Host,
    inventory: Inventory,
    *,
    token: Secret | None = None,
    certificate_key: Secret | None = None,
) -> str:
    """ClusterConfiguration + InitConfiguration + KubeletConfiguration for the first control plane.

    Without ``token``/``certificate_key`` this is the file kept on the host (and shown in plans);
    with them it is the copy kubeadm reads on stdin.
    """
    endpoint_host = settings.control_plane_endpoint.rsplit(":", 1)[0].strip("[]")
    names = (name for cp in inventory.control_planes for name in (cp.name, cp.address) if name)
    sans = list(dict.fromkeys([endpoint_host, *names]))
    return render(
        "bootstrap/kubeadm/init-config.yaml.j2",
        **_common(settings, host),
        image_repository=settings.image_repository,
        pod_subnet=settings.pod_subnet,
        service_subnet=settings.service_subnet,
        cert_sans=sans,
        taints=control_plane_taints(host),
        token=token.reveal() if token is not None else None,
        token_ttl=JOIN_TOKEN_TTL,
        certificate_key=certificate_key.reveal() if certificate_key is not None else None,
    )


def render_join_config(
    settings: ClusterSettings,
    host: Host,
    *,
    token: Secret,
    ca_hash: str,
    certificate_key: Secret | None = None,
) -> Secret:
    """The JoinConfiguration kubeadm reads on stdin: a ``Secret`` (it holds the token)."""
    control_plane = host.is_control_plane
    if control_plane and certificate_key is None:
        raise ValueError(f"{host.name} joins as a control plane: a certificate key is needed")
    text = render(
        "bootstrap/kubeadm/join-config.yaml.j2",
        **_common(settings, host),
        token=token.reveal(),
        ca_cert_hash=ca_hash,
        control_plane=control_plane,
        certificate_key=certificate_key.reveal() if certificate_key is not None else None,
        taints=control_plane_taints(host) if control_plane else None,
    )
    return Secret(text, "join configuration")


def render_cluster_op_config(
    settings: ClusterSettings, *, token: Secret | None = None, certificate_key: Secret | None = None,
) -> Secret:
    """Config for ``kubeadm token create`` / ``kubeadm init phase upload-certs`` read on stdin."""
    text = render(
        "bootstrap/kubeadm/cluster-op-config.yaml.j2",
        kubernetes_version=settings.kubernetes.tag,
        control_plane_endpoint=settings.control_plane_endpoint,
        cri_socket=settings.cri_socket,
        token=token.reveal() if token is not None else None,
        token_ttl=JOIN_TOKEN_TTL,
        certificate_key=certificate_key.reveal() if certificate_key is not None else None,
    )
    return Secret(text, "kubeadm configuration")


#: Pull policy of the control-plane images during an upgrade (kubeadm's default, said out loud).
UPGRADE_IMAGE_PULL_POLICY = "IfNotPresent"


def render_reset_config(cri_socket: str, *, skip_phases: tuple[str, ...] = ()) -> str:
    """The ResetConfiguration ``kubeadm reset --config /dev/stdin`` reads (``RESET_COMMAND``);
    ``skip_phases``: kubeadm's reset phases not to run (``remove-etcd-member`` where bootstrap made no
    etcd member: that phase empties /var/lib/etcd even on a worker)."""
    return render("bootstrap/kubeadm/reset-config.yaml.j2", cri_socket=cri_socket, timeouts=TIMEOUTS,
                  skip_phases=skip_phases)


def render_upgrade_config(target: str, *, allow_cgroup_v1: bool = False) -> str:
    """The UpgradeConfiguration ``kubeadm upgrade plan|apply|node --config /dev/stdin`` reads.

    ``target`` is the tag upgraded to (``v1.37.2``); ``upgrade node`` reads the cluster's version.
    ``allow_cgroup_v1`` (``bootstrap.allow_cgroup_v1``): the preflight of ``upgrade apply`` and
    ``upgrade node`` runs kubeadm's SystemVerification, which refuses a cgroup v1 host as init's does.
    """
    return render("bootstrap/kubeadm/upgrade-config.yaml.j2", kubernetes_version=target,
                  image_pull_policy=UPGRADE_IMAGE_PULL_POLICY, timeouts=TIMEOUTS,
                  allow_cgroup_v1=allow_cgroup_v1)


# --- commands (every value quoted; secrets only ever on stdin) -------------------------------------------

VALIDATE_COMMAND = f"kubeadm config validate --config {shlex.quote(KUBEADM_CONFIG_PATH)}"
INIT_COMMAND = "kubeadm init --config /dev/stdin --upload-certs --skip-token-print --skip-certificate-key-print"
JOIN_COMMAND = "kubeadm join --config /dev/stdin"
TOKEN_CREATE_COMMAND = f"kubeadm token create --config /dev/stdin --kubeconfig {ADMIN_KUBECONFIG}"
UPLOAD_CERTS_COMMAND = (
    "kubeadm init phase upload-certs --upload-certs --config /dev/stdin --skip-certificate-key-print"
)
#: kubeadm refuses ``--force``/``--cri-socket`` beside ``--config``: the ResetConfiguration carries them.
RESET_COMMAND = "kubeadm reset --config /dev/stdin"


def upgrade_command(verb: str, target: str | None = None) -> str:
    """``kubeadm upgrade plan|apply|node`` reading ``render_upgrade_config`` on stdin."""
    version = f" {shlex.quote(target)}" if target else ""
    confirm = " --yes" if verb == "apply" else ""
    return f"kubeadm upgrade {verb}{version} --config /dev/stdin{confirm}"
