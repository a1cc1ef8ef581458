"""The simulated Kubernetes cluster that ``kubeadm``, ``kubectl`` and ``helm`` share.

It lives in the mock cluster's ``cluster.json`` under ``kubernetes`` (every host of one mock
cluster sees the same one)::

    {"initialized": true, "version": "v1.36.2", "endpoint": "10.0.0.11:6443",
     "pod_subnet": "10.244.0.0/16", "ca_hash": "sha256:...",
     "tokens": {"<id>": {"sha256": "...", "expires": 1764570000.0}},   # never the token itself
     "certs": {"sha256": "...", "expires": ...},                        # uploaded for CP joins
     "nodes": {"gpu-a1": {"control_plane": true, "labels": {...}, "gpus": ["GPU 0: ..."],
                          "kubelet_version": "v1.36.2"}},
     "objects": {"daemonset/calico-system/calico-node": {...}},         # what kubectl applied
     "releases": {"nvidia-device-plugin/nvidia-device-plugin": {...}},  # what helm installed
     "pods": {"default/<name>": {"node": ..., "phase": ..., "logs": ...}},
     "clock_offset_s": 0}                                              # tests move time forward

Secrets are kept as SHA-256 digests only, so no token or key lands in the state folder.
A node is Ready once a CNI's DaemonSet exists; it offers ``nvidia.com/gpu`` once the device
plugin (or the GPU Operator) is deployed; NFD publishes the labels of each host's
``features.d`` files once NFD is deployed; GFD adds ``nvidia.com/gpu.*`` with the device plugin.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Iterator
from contextlib import contextmanager
from importlib import resources
from typing import Any

from clusterctl.mock.power import powered_off
from clusterctl.mock.state import HostState
from clusterctl.mock.tools.base import ToolContext, ToolResult

ADMIN_CONF = "/etc/kubernetes/admin.conf"
KUBELET_CONF = "/etc/kubernetes/kubelet.conf"
FEATURES_DIR = "/etc/kubernetes/node-feature-discovery/features.d"
#: Each CNI's DaemonSet, and the config file it writes on every node once it runs.
CNI_CONFLISTS = {
    "daemonset/calico-system/calico-node":
        ("/etc/cni/net.d/10-calico.conflist", b'{"name": "k8s-pod-network", "cniVersion": "0.3.1"}\n'),
    "daemonset/kube-flannel/kube-flannel-ds":
        ("/etc/cni/net.d/10-flannel.conflist", b'{"name": "cbr0", "cniVersion": "0.3.1"}\n'),
}
DEVICE_PLUGIN_RELEASES = ("nvidia-device-plugin", "gpu-operator")
NFD_RELEASES = ("node-feature-discovery", "gpu-operator")


def digest(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def now(kube: dict[str, Any]) -> float:
    return time.time() + float(kube.get("clock_offset_s", 0))


def read(ctx: ToolContext) -> dict[str, Any]:
    data = ctx.cluster.read().get("kubernetes")
    return data if isinstance(data, dict) else {}


@contextmanager
def edit(ctx: ToolContext) -> Iterator[dict[str, Any]]:
    with ctx.cluster.edit() as data:
        yield data.setdefault("kubernetes", {})


def recording(file_name: str, /, **values: str) -> str:
    """A recorded answer of kubeadm, kubectl or helm (``recordings/kube/``) with its ``{name}`` places filled."""
    text = (resources.files("clusterctl.mock.recordings") / "kube" / file_name).read_text()
    for key, value in values.items():
        text = text.replace("{" + key + "}", value)
    return text


def admin_reachable(ctx: ToolContext) -> bool:
    """Whether kubeadm on this host reads the cluster: its admin kubeconfig is here and the cluster runs."""
    return ctx.fs.exists(ADMIN_CONF) and bool(read(ctx).get("initialized"))


def not_found(resource: str, name: str, stdout: str = "") -> ToolResult:
    """kubectl's answer for an object the cluster does not have (``nodes``, ``pods``...), exit 1."""
    return ToolResult(stdout, f'Error from server (NotFound): {resource} "{name}" not found\n', 1)


def ignores_not_found(ctx: ToolContext, flags: set[str]) -> bool:
    """``--ignore-not-found``, bare or ``=true`` (which kubectl's word splitting keeps as an option)."""
    return "--ignore-not-found" in flags or "--ignore-not-found=true" in ctx.args


def object_list(items: list[dict[str, Any]], metadata: dict[str, Any] | None = None) -> str:
    """A ``List`` as ``kubectl get -o json`` prints it (four-space indent)."""
    return json.dumps({"apiVersion": "v1", "items": items, "kind": "List",
                       "metadata": {"resourceVersion": ""} if metadata is None else metadata}, indent=4) + "\n"


def filename_data(ctx: ToolContext, source: str) -> bytes | None:
    """What ``-f SOURCE`` reads: stdin for ``-``, else the host's file (None: no such file, or no ``-f``)."""
    if not source:
        return None
    return ctx.stdin if source == "-" else ctx.fs.read(ctx.path(source))


def filename_objects(ctx: ToolContext, options: dict[str, str]) -> list[dict[str, Any]] | ToolResult:
    """The objects ``-f SOURCE`` holds, or kubectl's refusal (apply, create and replace word them alike):
    no ``-f`` or an empty one (refused before any server is asked; ``-k``, kustomize, is not simulated),
    no such file, YAML it cannot read."""
    import yaml

    source = options.get("--filename", "")
    data = filename_data(ctx, source)
    if data is None:
        return ctx.fail(f'error: the path "{source}" does not exist\n' if source else
                        "error: must specify one of -f and -k\n")
    try:
        return [d for d in yaml.safe_load_all(data.decode()) if isinstance(d, dict)]
    except yaml.YAMLError as exc:
        return ctx.fail(f"error: error parsing {source}: error converting YAML to JSON: {exc}\n")


def remove_etcd_member(kube: dict[str, Any], host: str) -> None:
    """The etcd member of ``host``'s control plane leaves the cluster (kubeadm reset, etcdctl member remove)."""
    removed = kube.setdefault("etcd_removed", [])
    if host not in removed:
        removed.append(host)


def other_host(ctx: ToolContext, name: str) -> HostState:
    """Another host of the same mock cluster (its files: features.d for NFD)."""
    return HostState(ctx.host.folder.parent / name, name)


def cni_ready(kube: dict[str, Any]) -> bool:
    objects = kube.get("objects") or {}
    return any(key in objects for key in CNI_CONFLISTS)


def deployed(kube: dict[str, Any], names: tuple[str, ...]) -> dict[str, Any] | None:
    return next((dict(release) for key, release in (kube.get("releases") or {}).items()
                 if key.split("/", 1)[1] in names and release.get("status") == "deployed"), None)


def nfd_labels(ctx: ToolContext, node: str) -> dict[str, str]:
    """What NFD's worker publishes from the node's features.d files (labels only, ``# +no-label`` respected)."""
    labels: dict[str, str] = {}
    tree = other_host(ctx, node).fs
    try:
        names = tree.listdir(FEATURES_DIR) if tree.is_dir(FEATURES_DIR) else []
    except OSError:
        return labels
    for name in names:
        if name.startswith("."):
            continue  # NFD skips hidden files: a half-written dot-file is never read
        data = tree.read(f"{FEATURES_DIR}/{name}") or b""
        no_label = False
        for line in data.decode(errors="replace").splitlines():
            line = line.strip()
            if line == "# +no-label":
                no_label = True
            if not line or line.startswith("#") or no_label:
                continue
            key, _, value = line.partition("=")
            if "/" not in key:
                key = f"feature.node.kubernetes.io/{key}"
            if key.split("/", 1)[0].endswith("kubernetes.io") and not key.startswith("feature.node.kubernetes.io/"):
                continue  # denied namespace
            labels[key] = value or "true"
    return labels


def spread_cni(ctx: ToolContext, kube: dict[str, Any]) -> None:
    """Write the CNI's config file on every node (what its DaemonSet pod does)."""
    objects = kube.get("objects") or {}
    conflist = next((CNI_CONFLISTS[key] for key in CNI_CONFLISTS if key in objects), None)
    if conflist is None:
        return
    path, data = conflist
    for node in (kube.get("nodes") or {}).values():
        tree = other_host(ctx, str(node.get("host"))).fs
        if tree.read(path) is None:
            tree.write(path, data)


def gfd_labels(gpus: list[str]) -> dict[str, str]:
    """GPU Feature Discovery's labels for a node with these ``nvidia-smi -L`` lines."""
    if not gpus:
        return {}
    product = gpus[0].split(": ", 1)[1].split(" (UUID", 1)[0].replace(" ", "-")
    return {"nvidia.com/gpu.count": str(len(gpus)), "nvidia.com/gpu.product": product,
            "nvidia.com/gpu.present": "true"}


def fault(ctx: ToolContext, host: str, name: str) -> str | None:
    """A fault a test or profile set on a host (``values`` in its state: ``kubelet: not-ready``)."""
    value = (other_host(ctx, host).read().get("values") or {}).get(name)
    return str(value) if value is not None else None


def node_ready(ctx: ToolContext, kube: dict[str, Any], node: dict[str, Any]) -> bool:
    """Ready once a CNI runs, unless the host's kubelet is set to stay NotReady (``kubelet: not-ready``) or
    the host is switched off (``power: off``, ``clusterctl.mock.power``)."""
    host = str(node.get("host", ""))
    return cni_ready(kube) and fault(ctx, host, "kubelet") != "not-ready" and not powered_off(other_host(ctx, host))
