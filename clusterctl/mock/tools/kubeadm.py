"""``kubeadm``: config validate, init, join, token create, init phase upload-certs, reset, version,
upgrade plan/apply/node.

Cluster-wide state is ``kube_state`` (shared by the hosts of one mock cluster). Outputs are
kubeadm's recorded ones (``recordings/kube/``, sources in recordings/README.md). Behaviour that
matters to clusterctl and is kubeadm's own:

* configuration read with ``--config FILE`` or ``--config /dev/stdin``; only
  ``kubeadm.k8s.io/v1beta4`` (and kubelet/kube-proxy types) is accepted from 1.37, v1beta3
  and v1beta4 before; unknown fields fail strict decoding;
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
from importlib import resources
from typing import Any

from clusterctl.mock.tools import kube_state as ks
from clusterctl.mock.tools.base import ToolContext, ToolResult
from clusterctl.mock.tools.kubeadm_manifests import IMAGE_TAGS, write_manifests

PACKAGES = ("kubeadm",)
READS_STDIN = True
CERTS_LIFETIME_S = 2 * 3600
#: kubeadm's config API fields, one schema for the simulator and the tests (recordings/kube/README.md).
SCHEMA_FILE = "kubeadm-v1beta4.schema.json"
#: The git commit a version answer names (the real one is the release's).
REVISION = "0000000000000000000000000000000000000000"


def recording(file_name: str, /, **values: str) -> str:
    text = (resources.files("clusterctl.mock.recordings") / "kube" / file_name).read_text()
    for key, value in values.items():
        text = text.replace("{" + key + "}", value)
    return text


def schema() -> dict[str, Any]:
    import json

    loaded: dict[str, Any] = json.loads((resources.files("clusterctl.mock.recordings") / "kube" / SCHEMA_FILE)
                                        .read_text())
    return loaded


def unknown_field(value: Any, node: dict[str, Any], defs: dict[str, Any], path: str = "") -> str | None:
    """The first field kubeadm's strict decoding refuses, as its path (``apiServer.extraArgs[0].foo``)."""
    while "$ref" in node:
        node = defs[str(node["$ref"]).rsplit("/", 1)[-1]]
    if isinstance(value, dict) and "properties" in node:
        properties: dict[str, Any] = node["properties"]
        for key, item in value.items():
            if key not in properties:
                if node.get("additionalProperties") is False:
                    return f"{path}{key}"
                continue
            found = unknown_field(item, properties[key], defs, f"{path}{key}.")
            if found:
                return found
    elif isinstance(value, list) and isinstance(node.get("items"), dict):
        for index, item in enumerate(value):
            found = unknown_field(item, node["items"], defs, f"{path.rstrip('.')}[{index}].")
            if found:
                return found
    return None


def _minor(ctx: ToolContext) -> int:
    version = ctx.installed_version("kubeadm") or "1.36.0"
    try:
        return int(version.split(".")[1])
    except (IndexError, ValueError):
        return 36


def _version(ctx: ToolContext) -> str:
    return "v" + (ctx.installed_version("kubeadm") or "1.36.0").split("-")[0]


def _option(args: list[str], name: str) -> str | None:
    for i, arg in enumerate(args):
        if arg == name and i + 1 < len(args):
            return args[i + 1]
        if arg.startswith(name + "="):
            return arg.split("=", 1)[1]
    return None


class ConfigError(Exception):
    pass


def load_config(ctx: ToolContext, args: list[str]) -> dict[str, dict[str, Any]]:
    """The documents of ``--config`` by kind; ``ConfigError`` with kubeadm's wording when refused."""
    import yaml

    path = _option(args, "--config")
    if path is None:
        return {}
    if path in ("/dev/stdin", "-"):
        data = ctx.stdin
    else:
        content = ctx.fs.read(ctx.path(path))
        if content is None:
            raise ConfigError(f"unable to read config from \"{path}\" : open {path}: no such file or directory")
        data = content
    docs: dict[str, dict[str, Any]] = {}
    try:
        loaded = [d for d in yaml.safe_load_all(data.decode()) if d]
    except yaml.YAMLError as exc:
        raise ConfigError(f"error converting YAML to JSON: {exc}") from None
    for doc in loaded:
        api, kind = str(doc.get("apiVersion", "")), str(doc.get("kind", ""))
        if api.startswith("kubeadm.k8s.io/"):
            if api == "kubeadm.k8s.io/v1beta3" and _minor(ctx) >= 37:
                # v1beta3 was removed in 1.37 (kubernetes#136016): the real kubeadm's wording.
                raise ConfigError(f'your configuration file uses an old API spec: "{api}" (kind: "{kind}"). Please '
                                  f"use kubeadm v1.{_minor(ctx) - 1} instead and run 'kubeadm config migrate "
                                  "--old-config old-config-file --new-config new-config-file', which will write the "
                                  "new, similar spec using a newer API version.")
            if api not in ("kubeadm.k8s.io/v1beta3", "kubeadm.k8s.io/v1beta4"):
                raise ConfigError(f'no kind "{kind}" is registered for version "{api}" in scheme '
                                  '"k8s.io/kubernetes/cmd/kubeadm/app/apis/kubeadm/scheme/scheme.go:31"')
            if api == "kubeadm.k8s.io/v1beta3":
                _check_v1beta3(ctx, kind, doc)
            types = schema()["$defs"]
            unknown = unknown_field(doc, types[kind], types) if api.endswith("v1beta4") and kind in types else None
            if unknown:
                group, version = api.split("/", 1)
                raise ConfigError(f'error unmarshaling configuration schema.GroupVersionKind{{Group:"{group}", '
                                  f'Version:"{version}", Kind:"{kind}"}}: strict decoding error: unknown field '
                                  f'"{unknown}"')
        docs[kind] = doc
    return docs


#: v1beta3's ``extraArgs`` were maps; v1beta4 made them ``[{name, value}]`` lists (Go struct, field).
V1BETA3_MAPS = {"apiServer": ("APIServer", "extraArgs"), "controllerManager": ("ControlPlaneComponent", "extraArgs"),
                "scheduler": ("ControlPlaneComponent", "extraArgs"),
                "nodeRegistration": ("NodeRegistrationOptions", "kubeletExtraArgs")}


def _check_v1beta3(ctx: ToolContext, kind: str, doc: dict[str, Any]) -> None:
    """Before 1.37 kubeadm still reads v1beta3, warning (klog) that it is deprecated; v1beta4's list
    shapes do not decode into its maps."""
    ctx.log(_klog("W", "common.go:100", f'your configuration file uses a deprecated API spec: "kubeadm.k8s.io/'
                  f'v1beta3" (kind: "{kind}"). Please use \'kubeadm config migrate --old-config old-config-file '
                  "--new-config new-config-file', which will write the new, similar spec using a newer API version."))
    for section, (struct, field) in V1BETA3_MAPS.items():
        if isinstance((doc.get(section) or {}).get(field), list):
            raise ConfigError(f'error unmarshaling configuration schema.GroupVersionKind{{Group:"kubeadm.k8s.io", '
                              f'Version:"v1beta3", Kind:"{kind}"}}: json: cannot unmarshal array into Go struct field '
                              f"{struct}.{section}.{field} of type map[string]string")


def _node_labels(registration: dict[str, Any]) -> dict[str, str]:
    labels: dict[str, str] = {}
    for arg in registration.get("kubeletExtraArgs") or []:
        if isinstance(arg, dict) and arg.get("name") == "node-labels":
            for pair in str(arg.get("value", "")).split(","):
                key, _, value = pair.partition("=")
                if key:
                    labels[key] = value
    return labels


def _gpus(ctx: ToolContext) -> list[str]:
    """The host's GPUs as ``nvidia-smi -L`` lists them (what the device plugin will find)."""
    if ctx.run is None:
        return []
    result = ctx.run("nvidia-smi -L")
    return [line for line in result.stdout.splitlines() if line.startswith("GPU ")] if result.exit_code == 0 else []


def _register_node(ctx: ToolContext, kube: dict[str, Any], registration: dict[str, Any], *,
                   control_plane: bool) -> None:
    name = str(registration.get("name") or ctx.hostname)
    labels = {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64",
              **_node_labels(registration)}
    if control_plane:
        labels["node-role.kubernetes.io/control-plane"] = ""
    kube.setdefault("nodes", {})[name] = {"control_plane": control_plane, "labels": labels, "gpus": _gpus(ctx),
                                          "kubelet_version": _version(ctx), "host": ctx.host_name}


def _write_node_files(ctx: ToolContext, *, control_plane: bool, ca_pem: bytes) -> None:
    ctx.fs.write(ks.KUBELET_CONF, b"apiVersion: v1\nkind: Config\n# kubelet client credentials (simulated)\n",
                 mode=0o600)
    ctx.fs.write("/etc/kubernetes/pki/ca.crt", ca_pem)
    ctx.fs.write("/var/lib/kubelet/config.yaml", b"apiVersion: kubelet.config.k8s.io/v1beta1\nkind: "
                 b"KubeletConfiguration\ncgroupDriver: systemd\n")
    if control_plane:
        ctx.fs.write(ks.ADMIN_CONF, b"apiVersion: v1\nkind: Config\n# cluster-admin credentials (simulated)\n",
                     mode=0o600)
        write_manifests(ctx, str(ks.read(ctx).get("version") or _version(ctx)))
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
    import secrets
    import string

    alphabet = string.ascii_lowercase + string.digits
    return "".join(secrets.choice(alphabet) for _ in range(6)) + "." + \
        "".join(secrets.choice(alphabet) for _ in range(16))


def _ttl_seconds(text: str) -> float:
    import re

    total = 0.0
    for amount, unit in re.findall(r"([0-9.]+)(h|m|s)", text or "24h"):
        total += float(amount) * {"h": 3600, "m": 60, "s": 1}[unit]
    return total or 24 * 3600


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
    version = _version(ctx)
    if ctx.fs.exists("/etc/kubernetes/manifests/kube-apiserver.yaml"):
        return ctx.fail(recording("kubeadm-init-preflight-exists.txt", version=version), 1)
    docs = load_config(ctx, ctx.args)
    cluster = docs.get("ClusterConfiguration") or {}
    init = docs.get("InitConfiguration") or {}
    ca_pem, ca_hash = _new_ca()
    with ks.edit(ctx) as kube:
        kube.clear()
        kube.update({"initialized": True, "version": str(cluster.get("kubernetesVersion") or version),
                     "endpoint": str(cluster.get("controlPlaneEndpoint") or ""), "ca_hash": ca_hash,
                     "pod_subnet": str((cluster.get("networking") or {}).get("podSubnet") or ""),
                     "objects": {}, "releases": {}, "pods": {}, "nodes": {}, "tokens": {}})
        stored = _store_tokens(kube, init)
        if not stored:  # kubeadm makes a default token (24 h) when the config names none
            _store_tokens(kube, {"bootstrapTokens": [{"token": _new_token(), "ttl": "24h"}]})
        key = init.get("certificateKey")
        if "--upload-certs" in ctx.args and key:
            kube["certs"] = {"sha256": ks.digest(str(key)), "expires": ks.now(kube) + CERTS_LIFETIME_S}
        _register_node(ctx, kube, init.get("nodeRegistration") or {}, control_plane=True)
    _write_node_files(ctx, control_plane=True, ca_pem=ca_pem)
    node = str((init.get("nodeRegistration") or {}).get("name") or ctx.hostname)
    return ctx.ok(recording("kubeadm-init-success.txt", version=version, node=node))


def _join(ctx: ToolContext) -> ToolResult:
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
    ca_pem = next((ks.other_host(ctx, n.get("host", name)).fs.read("/etc/kubernetes/pki/ca.crt")
                   for name, n in (kube.get("nodes") or {}).items() if n.get("control_plane")), None)
    with ks.edit(ctx) as live:
        _register_node(ctx, live, join.get("nodeRegistration") or {}, control_plane=control_plane)
        ks.spread_cni(ctx, live)
    _write_node_files(ctx, control_plane=control_plane, ca_pem=ca_pem or b"")
    return ctx.ok(recording("kubeadm-join-success.txt"))




def _images(ctx: ToolContext) -> ToolResult:
    """``kubeadm config images list|pull [--kubernetes-version V] [--config F]``."""
    version = _option(ctx.args, "--kubernetes-version")
    logged = ""
    if version is None:
        cluster = load_config(ctx, ctx.args).get("ClusterConfiguration") or {}
        version = str(cluster.get("kubernetesVersion") or "")
    if not version:
        # Unpinned, kubeadm asks dl.k8s.io for stable-1.txt; a mock host has no internet, so it
        # logs (klog, on stderr) and falls back to its own version, as the real one does offline.
        version = _version(ctx)
        logged = _klog("W", "version.go:108", 'could not fetch a Kubernetes version from the internet: unable to '
                       'get URL "https://dl.k8s.io/release/stable-1.txt": Get "https://dl.k8s.io/release/'
                       'stable-1.txt": dial tcp: lookup dl.k8s.io: no such host')
        logged += _klog("W", "version.go:109", f"falling back to the local client version: {version}")
    version = "v" + version.lstrip("v")
    try:
        minor = int(version.split(".")[1])
    except (IndexError, ValueError):
        return ctx.fail(f'couldn\'t parse Kubernetes version "{version}"\n', 1)
    pause, etcd, coredns = IMAGE_TAGS.get(minor, IMAGE_TAGS[max(IMAGE_TAGS)])
    images = [f"registry.k8s.io/{name}:{version}" for name in ("kube-apiserver", "kube-controller-manager",
                                                              "kube-scheduler", "kube-proxy")]
    images += [f"registry.k8s.io/coredns/coredns:{coredns}", f"registry.k8s.io/pause:{pause}",
               f"registry.k8s.io/etcd:{etcd}"]
    if ctx.args[2:3] == ["pull"]:
        return ctx.ok("".join(f"[config/images] Pulled {image}\n" for image in images), logged)
    return ctx.ok("\n".join(images) + "\n", logged)


def _klog(level: str, where: str, message: str) -> str:
    """One klog line (``W1201 20:36:04.244084   12315 version.go:108] ...``), as kubeadm logs to stderr."""
    import time

    now = time.time()
    stamp = time.strftime("%m%d %H:%M:%S", time.gmtime(now)) + f".{int(now % 1 * 1e6):06d}"
    return f"{level}{stamp}   12315 {where}] {message}\n"


def _token_create(ctx: ToolContext) -> ToolResult:
    if not ctx.fs.exists(ks.ADMIN_CONF) or not ks.read(ctx).get("initialized"):
        return ctx.fail("failed to load admin kubeconfig: open /etc/kubernetes/admin.conf: no such file or directory\n"
                        "To see the stack trace of this error execute with --v=5 or higher\n", 1)
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
        import secrets

        key = secrets.token_hex(32)
    with ks.edit(ctx) as kube:
        kube["certs"] = {"sha256": ks.digest(key), "expires": ks.now(kube) + CERTS_LIFETIME_S}
    stored = '[upload-certs] Storing the certificates in Secret "kubeadm-certs" in the "kube-system" Namespace\n'
    if "--skip-certificate-key-print" in ctx.args:
        return ctx.ok(stored)  # the real kubeadm prints no key line at all then, not a placeholder
    return ctx.ok(stored + f"[upload-certs] Using certificate key:\n{key}\n")


def _reset(ctx: ToolContext) -> ToolResult:
    if "--force" not in ctx.args and "-f" not in ctx.args:
        return ctx.fail("[reset] Are you sure you want to proceed? [y/N]: error: won't proceed; the user didn't "
                        "answer (Y|y) in order to continue\n", 1)
    # The remove-etcd-member phase cleans the default etcd data folder even without an etcd manifest
    # (removeetcdmember.go's getEtcdDataDir falls back to /var/lib/etcd), unless it is skipped.
    skipped = {p for i, a in enumerate(ctx.args) if a == "--skip-phases" and i + 1 < len(ctx.args)
               for p in ctx.args[i + 1].split(",")}
    skipped |= {p for a in ctx.args if a.startswith("--skip-phases=") for p in a.split("=", 1)[1].split(",")}
    folders = ["/etc/kubernetes/manifests", "/etc/kubernetes/pki"]
    folders += [] if "remove-etcd-member" in skipped else ["/var/lib/etcd"]
    for path in folders:
        if ctx.fs.is_dir(path):
            ctx.fs.remove(path, recursive=True)
    for name in ("admin.conf", "super-admin.conf", "kubelet.conf", "bootstrap-kubelet.conf", "controller-manager.conf",
                 "scheduler.conf"):
        ctx.fs.remove(f"/etc/kubernetes/{name}")
    if ctx.fs.is_dir("/var/lib/kubelet"):
        for name in ctx.fs.listdir("/var/lib/kubelet"):
            ctx.fs.remove(f"/var/lib/kubelet/{name}", recursive=True)
    with ks.edit(ctx) as kube:
        nodes = kube.get("nodes") or {}
        for name in [n for n, v in nodes.items() if v.get("host") == ctx.host_name]:
            del nodes[name]
        if not any(v.get("control_plane") for v in nodes.values()):
            kube.clear()  # the last control plane is gone: so is the cluster
    return ctx.ok(recording("kubeadm-reset.txt"))


def _remove_etcd_member(ctx: ToolContext) -> ToolResult:
    """``kubeadm reset phase remove-etcd-member``: this control plane's member leaves etcd (wording simplified)."""
    if not ctx.fs.exists("/etc/kubernetes/manifests/etcd.yaml"):
        return ctx.ok("[reset] No etcd config found. Assuming external etcd\n[reset] Please, manually reset etcd to "
                      "prevent further issues\n")
    with ks.edit(ctx) as kube:
        removed = kube.setdefault("etcd_removed", [])
        if ctx.host_name not in removed:
            removed.append(ctx.host_name)
    ctx.fs.remove("/var/lib/etcd/member", recursive=True)
    return ctx.ok(f"[reset] Removing member {ctx.hostname} from the etcd cluster\n[reset] Deleting contents of the "
                  "etcd data directory: /var/lib/etcd\n")


def _version_answer(ctx: ToolContext) -> ToolResult:
    """``kubeadm version [-o short|json|yaml]`` in the real kubeadm's three shapes."""
    output = _option(ctx.args, "-o") or _option(ctx.args, "--output") or ""
    version, minor = _version(ctx), str(_minor(ctx))
    if output == "short":
        return ctx.ok(version + "\n")
    info = {"major": "1", "minor": minor, "gitVersion": version, "gitCommit": REVISION, "gitTreeState": "clean",
            "buildDate": "2026-01-01T00:00:00Z", "goVersion": "go1.26.8", "compiler": "gc",
            "platform": "linux/amd64"}
    if output == "json":
        import json

        return ctx.ok(json.dumps({"clientVersion": info}, indent=2) + "\n")
    if output == "yaml":
        return ctx.ok("clientVersion:\n" + "".join(f"  {key}: {value!r}\n".replace("'", '"')
                                                   for key, value in info.items()))
    if output:
        return ctx.fail(f'error: invalid output format: {output}\nTo see the stack trace of this error execute with '
                        "--v=5 or higher\n", 1)
    return ctx.ok(f'kubeadm version: &version.Info{{Major:"1", Minor:"{minor}", EmulationMajor:"", '
                  f'EmulationMinor:"", MinCompatibilityMajor:"", MinCompatibilityMinor:"", GitVersion:"{version}", '
                  f'GitCommit:"{REVISION}", GitTreeState:"clean", BuildDate:"2026-01-01T00:00:00Z", '
                  'GoVersion:"go1.26.8", Compiler:"gc", Platform:"linux/amd64"}\n')


def run(ctx: ToolContext) -> ToolResult:
    result = _run(ctx)
    if not ctx.logged:
        return result
    return ToolResult(result.stdout, "".join(ctx.logged) + result.stderr, result.exit_code)


def _run(ctx: ToolContext) -> ToolResult:
    args = ctx.args
    try:
        if args[:1] == ["version"]:
            return _version_answer(ctx)
        if args[:2] == ["token", "generate"]:
            return ctx.ok(_new_token() + "\n")
        if args[:2] == ["certs", "certificate-key"]:
            import secrets

            return ctx.ok(secrets.token_hex(32) + "\n")
        if args[:2] == ["config", "images"] and args[2:3] in (["list"], ["pull"]):
            return _images(ctx)
        if args[:2] == ["config", "validate"]:
            load_config(ctx, args)
            return ctx.ok("ok\n")
        if args[:3] == ["init", "phase", "upload-certs"]:
            return _upload_certs(ctx)
        if args[:1] == ["init"]:
            return _init(ctx)
        if args[:1] == ["join"]:
            return _join(ctx)
        if args[:2] == ["token", "create"]:
            return _token_create(ctx)
        if args[:2] == ["certs", "check-expiration"]:
            from clusterctl.mock.tools import kubeadm_certs

            return kubeadm_certs.check_expiration(ctx)
        if args[:3] == ["certs", "renew", "all"]:
            from clusterctl.mock.tools import kubeadm_certs

            return kubeadm_certs.renew_all(ctx)
        if args[:3] == ["reset", "phase", "remove-etcd-member"]:
            return _remove_etcd_member(ctx)
        if args[:1] == ["reset"]:
            return _reset(ctx)
        if args[:1] == ["upgrade"]:
            from clusterctl.mock.tools import kubeadm_upgrade

            return kubeadm_upgrade.run(ctx)
    except ConfigError as exc:
        return ctx.fail(f"error: {exc}\nTo see the stack trace of this error execute with --v=5 or higher\n", 1)
    word = args[0] if args else ""
    return ctx.fail(f'unknown command "{word}" for "kubeadm"\nRun \'kubeadm --help\' for usage.\n', 1)
