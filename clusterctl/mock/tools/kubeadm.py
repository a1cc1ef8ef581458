"""``kubeadm``: config validate, init, join, token create, init phase upload-certs, reset, version,
upgrade plan/apply/node.

Cluster-wide state is ``kube_state`` (shared by the hosts of one mock cluster). Outputs are
kubeadm's recorded ones (``recordings/kube/``, sources in recordings/README.md). Behaviour that
matters to clusterctl and is kubeadm's own:

* configuration read with ``--config FILE`` or ``--config /dev/stdin``; only
  ``kubeadm.k8s.io/v1beta4`` (and kubelet/kube-proxy types) is accepted from 1.37, v1beta3
  and v1beta4 before; an unknown field fails ``config validate`` (strict decoding) and is a klog
  warning for the other commands, as in kubeadm (``kubeadm_config``); a flag kubeadm does not
  allow beside ``--config`` fails; ``--dry-run`` changes nothing (``kubeadm_reset``, ``kubeadm_upgrade``);
* ``init`` on a host that already runs a control plane fails preflight;
* ``join`` needs a known, unexpired token and a pinned CA hash matching the cluster's; a
  control-plane join needs the certificate key of certificates uploaded less than two hours ago;
  a host with ``/etc/kubernetes/kubelet.conf`` fails preflight;
* with ``--skip-token-print``/``--skip-certificate-key-print`` the values are withheld;
* ``upgrade plan|apply VERSION`` refuse a version above the installed kubeadm ("Upgrade kubeadm
  first") and more than one minor above the cluster's (kubeadm's ``MaximumAllowedMinorVersionUpgradeSkew``,
  ``app/phases/upgrade/policy.go``); ``apply`` asks unless ``-y``, then writes this host's static
  pod manifests at the new version and records it as the cluster's; ``upgrade node`` brings a
  further control plane's manifests to the cluster's version (a worker: nothing but the kubelet
  configuration). Static pod manifests name their image with its tag, as kubeadm's do.
"""

from __future__ import annotations

import hashlib
import json
import re
import secrets
import string
from collections.abc import Callable
from typing import Any

from clusterctl.mock.tools import kube_state as ks
from clusterctl.mock.tools import kubeadm_certs, kubeadm_reset, kubeadm_upgrade
from clusterctl.mock.tools.base import ToolContext, ToolResult, option
from clusterctl.mock.tools.kube_state import recording
from clusterctl.mock.tools.kubeadm_config import (
    TRACE,
    ConfigError,
    check_mixed_arguments,
    dry_run,
    klog,
    kubeadm_version,
    load_config,
    minor_of,
)
from clusterctl.mock.tools.kubeadm_manifests import image_tags, write_manifests

PACKAGES = ("kubeadm",)
READS_STDIN = True
CERTS_LIFETIME_S = 2 * 3600
#: The git commit a version answer names (the real one is the release's).
REVISION = "0000000000000000000000000000000000000000"


def dry_run_files(ctx: ToolContext, command: str, *, control_plane: bool) -> ToolResult:
    """What a dry-run ``init``/``join`` ends with (``PrintFilesIfDryRunning``, cmd/kubeadm/app/util/dryrun):
    the folder it would have written to; the manifests it then prints are left out, and unlike the
    real one the simulator does not make that folder (nothing on the host changes)."""
    folder = f"/etc/kubernetes/tmp/kubeadm-{command}-dryrun{secrets.randbelow(10**9)}"
    ctx.log(klog("W", "constants.go:621", f"Using dry-run directory {folder}. To override it, set the environment "
                  f"variable KUBEADM_{command.upper()}_DRYRUN_DIR"))
    wrote = "certificates, kubeconfig files and control plane manifests" if control_plane else \
        "certificates and kubeconfig files"
    return ctx.ok(f'[dryrun] Wrote {wrote} to the "{folder}" directory\n[dryrun] The certificates or kubeconfig '
                  f"files would not be printed due to their sensitive nature\n[dryrun] Please examine the "
                  f'"{folder}" directory for details about what would be written\n')


def _node_labels(registration: dict[str, Any]) -> dict[str, str]:
    labels: dict[str, str] = {}
    for arg in registration.get("kubeletExtraArgs") or []:
        if isinstance(arg, dict) and arg.get("name") == "node-labels":
            for pair in str(arg.get("value", "")).split(","):
                key, _, value = pair.partition("=")
                if key:
                    labels[key] = value
    return labels


def _register_node(ctx: ToolContext, kube: dict[str, Any], registration: dict[str, Any], *,
                   control_plane: bool) -> None:
    name = str(registration.get("name") or ctx.hostname)
    labels = {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64",
              **_node_labels(registration)}
    if control_plane:
        labels["node-role.kubernetes.io/control-plane"] = ""
    kube.setdefault("nodes", {})[name] = {"control_plane": control_plane, "labels": labels, "gpus": ctx.gpus(),
                                          "kubelet_version": kubeadm_version(ctx), "host": ctx.host_name}


def _write_node_files(ctx: ToolContext, *, control_plane: bool, ca_pem: bytes, first: bool = False) -> None:
    ctx.fs.write(ks.KUBELET_CONF, b"apiVersion: v1\nkind: Config\n# kubelet client credentials (simulated)\n",
                 mode=0o600)
    ctx.fs.write("/etc/kubernetes/pki/ca.crt", ca_pem)
    ctx.fs.write("/var/lib/kubelet/config.yaml", b"apiVersion: kubelet.config.k8s.io/v1beta1\nkind: "
                 b"KubeletConfiguration\ncgroupDriver: systemd\n")
    if control_plane:
        kubeadm_certs.write_pki(ctx, ca_pem)
        # super-admin.conf is the first control plane's only (kubeadm 1.29+): a joined one has none.
        names = ("admin", "controller-manager", "scheduler") + (("super-admin",) if first else ())
        for name in names:
            ctx.fs.write(f"/etc/kubernetes/{name}.conf", b"apiVersion: v1\nkind: Config\n# " + name.encode()
                         + b" credentials (simulated)\n", mode=0o600)
        write_manifests(ctx, str(ks.read(ctx).get("version") or kubeadm_version(ctx)))
        ctx.fs.write("/var/lib/etcd/member/snap/db", b"")


def _new_ca() -> tuple[bytes, str]:
    """A real self-signed CA certificate and its kubeadm pin (SHA-256 of the public key info)."""
    from datetime import datetime, timedelta, timezone

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "kubernetes")])
    start = datetime.now(timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(start)
            .not_valid_after(start + timedelta(days=3650))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(key, hashes.SHA256()))
    spki = cert.public_key().public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    return cert.public_bytes(serialization.Encoding.PEM), "sha256:" + hashlib.sha256(spki).hexdigest()


def _new_token() -> str:
    """``[a-z0-9]{6}.[a-z0-9]{16}``, as ``kubeadm token generate`` prints one."""
    alphabet = string.ascii_lowercase + string.digits
    return "".join(secrets.choice(alphabet) for _ in range(6)) + "." + \
        "".join(secrets.choice(alphabet) for _ in range(16))


def _ttl_seconds(text: str) -> float:
    return sum(float(amount) * {"h": 3600, "m": 60, "s": 1}[unit]
               for amount, unit in re.findall(r"([0-9.]+)(h|m|s)", text or "24h")) or 24 * 3600


def _store_tokens(kube: dict[str, Any], init: dict[str, Any]) -> list[str]:
    stored = []
    for token in init.get("bootstrapTokens") or []:
        value = str(token.get("token", ""))
        if "." in value:
            token_id = value.split(".", 1)[0]
            kube.setdefault("tokens", {})[token_id] = {"sha256": ks.digest(value),
                                                      "expires": ks.now(kube) + _ttl_seconds(str(token.get("ttl")))}
            stored.append(value)
    return stored


def _init(ctx: ToolContext) -> ToolResult:
    version = kubeadm_version(ctx)
    check_mixed_arguments(ctx.args)
    if ctx.fs.exists("/etc/kubernetes/manifests/kube-apiserver.yaml"):
        return ctx.fail(recording("kubeadm-init-preflight-exists.txt", version=version), 1)
    docs = load_config(ctx, ctx.args)
    cluster = docs.get("ClusterConfiguration") or {}
    init = docs.get("InitConfiguration") or {}
    if dry_run(ctx.args, init):
        # kubeadm writes what init would make into a temporary folder and prints it; nothing of the
        # host or the cluster changes (cmd/kubeadm/app/cmd/init.go, dry-run directory).
        return dry_run_files(ctx, "init", control_plane=True)
    ca_pem, ca_hash = _new_ca()
    with ks.edit(ctx) as kube:
        kube.clear()
        kube.update({"initialized": True, "version": str(cluster.get("kubernetesVersion") or version),
                     "endpoint": str(cluster.get("controlPlaneEndpoint") or ""), "ca_hash": ca_hash,
                     "pod_subnet": str((cluster.get("networking") or {}).get("podSubnet") or ""),
                     # What kubeadm uploads to the kubeadm-config ConfigMap (kubectl reads it back).
                     "cluster_configuration": cluster,
                     "objects": {}, "releases": {}, "pods": {}, "nodes": {}, "tokens": {}})
        stored = _store_tokens(kube, init)
        if not stored:  # kubeadm makes a default token (24 h) when the config names none
            _store_tokens(kube, {"bootstrapTokens": [{"token": _new_token(), "ttl": "24h"}]})
        key = init.get("certificateKey")
        if "--upload-certs" in ctx.args and key:
            kube["certs"] = {"sha256": ks.digest(str(key)), "expires": ks.now(kube) + CERTS_LIFETIME_S}
        _register_node(ctx, kube, init.get("nodeRegistration") or {}, control_plane=True)
    _write_node_files(ctx, control_plane=True, ca_pem=ca_pem, first=True)
    node = str((init.get("nodeRegistration") or {}).get("name") or ctx.hostname)
    return ctx.ok(recording("kubeadm-init-success.txt", version=version, node=node))


def _join(ctx: ToolContext) -> ToolResult:
    check_mixed_arguments(ctx.args)
    if ctx.fs.exists(ks.KUBELET_CONF):
        return ctx.fail(recording("kubeadm-join-kubelet-conf-exists.txt"), 1)
    docs = load_config(ctx, ctx.args)
    join = docs.get("JoinConfiguration") or {}
    discovery = (join.get("discovery") or {}).get("bootstrapToken") or {}
    token = str(discovery.get("token", ""))
    token_id = token.split(".", 1)[0]
    kube = ks.read(ctx)
    if not kube.get("initialized"):
        return ctx.fail(f"error execution phase preflight: couldn't validate the identity of the API Server: "
                        f"Get \"https://{discovery.get('apiServerEndpoint', '')}/api/v1/namespaces/kube-public/"
                        "configmaps/cluster-info?timeout=10s\": dial tcp: connect: connection refused\n", 1)
    known = (kube.get("tokens") or {}).get(token_id)
    if known is None or known.get("sha256") != ks.digest(token) or known.get("expires", 0) < ks.now(kube):
        return ctx.fail(recording("kubeadm-join-jws.txt", token_id=token_id), 1)
    pins = [str(h) for h in discovery.get("caCertHashes") or []]
    if kube.get("ca_hash") not in pins:
        return ctx.fail(recording("kubeadm-join-ca-pin.txt", ca_hash=kube.get("ca_hash", "")), 1)
    control_plane = join.get("controlPlane") is not None
    if control_plane:
        key = str((join.get("controlPlane") or {}).get("certificateKey", ""))
        certs = kube.get("certs") or {}
        if certs.get("sha256") != ks.digest(key) or certs.get("expires", 0) < ks.now(kube):
            return ctx.fail("error execution phase control-plane-prepare/download-certs: error downloading certs: "
                            "the Secret does not include the required certificate or key - name: external-etcd.crt, "
                            "path: /etc/kubernetes/pki/apiserver-etcd-client.crt\n", 1)
    if dry_run(ctx.args, join):
        return dry_run_files(ctx, "join", control_plane=control_plane)
    ca_pem = next((ks.other_host(ctx, n.get("host", name)).fs.read("/etc/kubernetes/pki/ca.crt")
                   for name, n in (kube.get("nodes") or {}).items() if n.get("control_plane")), None)
    with ks.edit(ctx) as live:
        _register_node(ctx, live, join.get("nodeRegistration") or {}, control_plane=control_plane)
        ks.spread_cni(ctx, live)
    _write_node_files(ctx, control_plane=control_plane, ca_pem=ca_pem or b"")
    return ctx.ok(recording("kubeadm-join-success.txt"))


def _images(ctx: ToolContext) -> ToolResult:
    """``kubeadm config images list [--kubernetes-version V] [--config F]``."""
    version = option(ctx.args, "--kubernetes-version")
    logged = ""
    if version is None:
        cluster = load_config(ctx, ctx.args).get("ClusterConfiguration") or {}
        version = str(cluster.get("kubernetesVersion") or "")
    if not version:
        # Unpinned, kubeadm asks dl.k8s.io for stable-1.txt; a mock host has no internet, so it
        # logs (klog, on stderr) and falls back to its own version, as the real one does offline.
        version = kubeadm_version(ctx)
        logged = klog("W", "version.go:108", 'could not fetch a Kubernetes version from the internet: unable to '
                       'get URL "https://dl.k8s.io/release/stable-1.txt": Get "https://dl.k8s.io/release/'
                       'stable-1.txt": dial tcp: lookup dl.k8s.io: no such host')
        logged += klog("W", "version.go:109", f"falling back to the local client version: {version}")
    version = "v" + version.lstrip("v")
    if not re.match(r"v\d+\.\d+(\.|$)", version):
        return ctx.fail(f'couldn\'t parse Kubernetes version "{version}"\n', 1)
    pause, etcd, coredns = image_tags(version)
    images = [f"registry.k8s.io/{name}:{version}" for name in ("kube-apiserver", "kube-controller-manager",
                                                              "kube-scheduler", "kube-proxy")]
    images += [f"registry.k8s.io/coredns/coredns:{coredns}", f"registry.k8s.io/pause:{pause}",
               f"registry.k8s.io/etcd:{etcd}"]
    return ctx.ok("\n".join(images) + "\n", logged)


def _token_create(ctx: ToolContext) -> ToolResult:
    if not ks.admin_reachable(ctx):
        return ctx.fail("failed to load admin kubeconfig: open /etc/kubernetes/admin.conf: no such file or directory\n"
                        + TRACE, 1)
    docs = load_config(ctx, ctx.args)
    init = docs.get("InitConfiguration") or {}
    with ks.edit(ctx) as kube:
        stored = _store_tokens(kube, init)
    if not stored:
        return ctx.fail("clusterctl's simulated kubeadm needs the token in the configuration\n", 2)
    return ctx.ok(stored[0] + "\n")


def _upload_certs(ctx: ToolContext) -> ToolResult:
    docs = load_config(ctx, ctx.args)
    key = str((docs.get("InitConfiguration") or {}).get("certificateKey", ""))
    if "--upload-certs" not in ctx.args:
        # Without the flag the phase does nothing (kubeadm's uploadcerts.go): it only says so.
        return ctx.ok("[upload-certs] Skipping phase. Please see --upload-certs\n")
    if not key:  # kubeadm makes one (copycerts.CreateCertificateKey)
        key = secrets.token_hex(32)
    with ks.edit(ctx) as kube:
        kube["certs"] = {"sha256": ks.digest(key), "expires": ks.now(kube) + CERTS_LIFETIME_S}
    stored = '[upload-certs] Storing the certificates in Secret "kubeadm-certs" in the "kube-system" Namespace\n'
    if "--skip-certificate-key-print" in ctx.args:
        return ctx.ok(stored)  # the real kubeadm prints no key line at all then, not a placeholder
    return ctx.ok(stored + f"[upload-certs] Using certificate key:\n{key}\n")


def _version_answer(ctx: ToolContext) -> ToolResult:
    """``kubeadm version [-o short|json|yaml]`` in the real kubeadm's three shapes."""
    output = option(ctx.args, "-o", "--output") or ""
    version = kubeadm_version(ctx)
    minor = str(minor_of(version))
    if output == "short":
        return ctx.ok(version + "\n")
    info = {"major": "1", "minor": minor, "gitVersion": version, "gitCommit": REVISION, "gitTreeState": "clean",
            "buildDate": "2026-01-01T00:00:00Z", "goVersion": "go1.26.8", "compiler": "gc",
            "platform": "linux/amd64"}
    if output == "json":
        return ctx.ok(json.dumps({"clientVersion": info}, indent=2) + "\n")
    if output == "yaml":
        return ctx.ok("clientVersion:\n" + "".join(f"  {key}: {value!r}\n".replace("'", '"')
                                                   for key, value in info.items()))
    if output:
        return ctx.fail(f"error: invalid output format: {output}\n" + TRACE, 1)
    return ctx.ok(f'kubeadm version: &version.Info{{Major:"1", Minor:"{minor}", EmulationMajor:"", '
                  f'EmulationMinor:"", MinCompatibilityMajor:"", MinCompatibilityMinor:"", GitVersion:"{version}", '
                  f'GitCommit:"{REVISION}", GitTreeState:"clean", BuildDate:"2026-01-01T00:00:00Z", '
                  'GoVersion:"go1.26.8", Compiler:"gc", Platform:"linux/amd64"}\n')


def _validate(ctx: ToolContext) -> ToolResult:
    load_config(ctx, ctx.args, strict=True)
    return ctx.ok("ok\n")


#: The commands by their leading words, the first that fits answering.
COMMANDS: tuple[tuple[tuple[str, ...], Callable[[ToolContext], ToolResult]], ...] = (
    (("version",), _version_answer),
    (("token", "generate"), lambda ctx: ctx.ok(_new_token() + "\n")),
    (("certs", "certificate-key"), lambda ctx: ctx.ok(secrets.token_hex(32) + "\n")),
    (("config", "images", "list"), _images),
    (("config", "validate"), _validate),
    (("init", "phase", "upload-certs"), _upload_certs),
    (("init",), _init),
    (("join",), _join),
    (("token", "create"), _token_create),
    (("certs", "check-expiration"), kubeadm_certs.check_expiration),
    (("certs", "renew", "all"), kubeadm_certs.renew_all),
    (("reset", "phase", "remove-etcd-member"), kubeadm_reset.remove_etcd_member),
    (("reset",), kubeadm_reset.run),
    (("upgrade",), kubeadm_upgrade.run),
)


def run(ctx: ToolContext) -> ToolResult:
    args = ctx.args
    try:
        for words, answer in COMMANDS:
            if tuple(args[:len(words)]) == words:
                return answer(ctx)
    except ConfigError as exc:
        return ctx.fail(f"error: {exc}\n" + TRACE, 1)
    word = args[0] if args else ""
    return ctx.fail(f'unknown command "{word}" for "kubeadm"\nRun \'kubeadm --help\' for usage.\n', 1)
