"""``kubectl`` against the simulated cluster (``kube_state``), as root on a control-plane host.

Supported: ``get --raw /readyz``; ``get nodes [NAME] -o json``; ``get [-n NS] KIND/NAME -o name``;
``get pod -n NS NAME -o jsonpath={.status.phase}``;
``get -n kube-system configmap kubeadm-config -o jsonpath={.data.ClusterConfiguration}``;
``apply [--server-side]`` and ``create`` ``-f FILE|URL|-``;
``rollout status KIND/NAME -n NS``; ``wait --for=jsonpath={.status.phase}=PHASE pod/NAME``;
``logs``; ``delete`` (nodes, pods, Leases, applied objects); ``patch node N --subresource=status`` and token Secrets
(``kubectl_status``); Leases (``kubectl_lease``: get, create and replace with compare-and-swap on
``resourceVersion``); and on nodes and their pods (``kubectl_nodes``): ``taint``, ``cordon``,
``uncordon``, ``annotate``, ``get pods -A --field-selector spec.nodeName=N -o json``, evictions
through ``create --raw .../eviction -f -``; applied Deployments, StatefulSets and
PodDisruptionBudgets run and guard pods (``kube_workloads``); ``-n kube-system exec etcd-NODE -- etcdctl``
(``etcdctl_exec``). Messages are kubectl's
(recordings/kube/, recordings/README.md).
Pinned upstream manifests are known by name (Calico's ``operator-crds.yaml`` and
``tigera-operator.yaml``); any other URL answers 404, as for a mirror that lacks the file.
"""

from __future__ import annotations

import json
from typing import Any

from clusterctl.mock.tools import etcdctl_exec, kubectl_lease
from clusterctl.mock.tools import kube_state as ks
from clusterctl.mock.tools import kube_workloads as kw
from clusterctl.mock.tools import kubectl_nodes as kn
from clusterctl.mock.tools import kubectl_status as ks_status
from clusterctl.mock.tools.base import ToolContext, ToolResult, split_args

PACKAGES = ("kubectl",)
READS_STDIN = True
CLUSTER_SCOPED = {"namespace", "clusterrole", "clusterrolebinding", "runtimeclass", "customresourcedefinition",
                  "installation", "apiserver", "priorityclass", "node"}
BUILTIN_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")
#: kind -> (resource, group suffix) for ``-o name`` and messages.
RESOURCES = {"daemonset": ("daemonsets", "apps"), "deployment": ("deployments", "apps"),
             "customresourcedefinition": ("customresourcedefinitions", "apiextensions.k8s.io"),
             "prometheusrule": ("prometheusrules", "monitoring.coreos.com"), "pod": ("pods", ""),
             "configmap": ("configmaps", ""), "namespace": ("namespaces", ""),
             "runtimeclass": ("runtimeclasses", "node.k8s.io"), "installation": ("installations", "operator.tigera.io"),
             "apiserver": ("apiservers", "operator.tigera.io"), "statefulset": ("statefulsets", "apps"),
             "poddisruptionbudget": ("poddisruptionbudgets", "policy"), "node": ("nodes", ""),
             "lease": ("leases", "coordination.k8s.io"), "secret": ("secrets", "")}
#: kubectl's short names, of the kinds simulated.
ALIASES = {"crd": "customresourcedefinition", "ds": "daemonset", "deploy": "deployment", "ns": "namespace",
           "po": "pod", "cm": "configmap", "sts": "statefulset", "pdb": "poddisruptionbudget", "no": "node"}
PLURALS = {resource: kind for kind, (resource, _) in RESOURCES.items()}
CRD_FOR_KIND = {"installation": "installations.operator.tigera.io", "apiserver": "apiservers.operator.tigera.io",
                "prometheusrule": "prometheusrules.monitoring.coreos.com",
                "servicemonitor": "servicemonitors.monitoring.coreos.com"}
#: What applying a pinned upstream manifest creates (by file name).
KNOWN_MANIFESTS: dict[str, list[tuple[str, str, str]]] = {
    "operator-crds.yaml": [("customresourcedefinition", "", n) for n in (
        "installations.operator.tigera.io", "apiservers.operator.tigera.io", "tigerastatuses.operator.tigera.io",
        "imagesets.operator.tigera.io")],
    "tigera-operator.yaml": [("namespace", "", "tigera-operator"),
                             ("deployment", "tigera-operator", "tigera-operator")],
}
#: Options that take the next word as their value.
TAKES_VALUE = frozenset({"-n", "--namespace", "-o", "--output", "-f", "--filename", "--kubeconfig", "--timeout",
                         "--for", "--field-selector", "--selector", "-l", "-p", "--patch", "--type", "--subresource"})
#: The options with a short name: each is read by its long one.
LONG_NAMES = {"-n": "--namespace", "-o": "--output", "-f": "--filename", "-l": "--selector", "-p": "--patch"}
NOT_READY = ("container runtime network not ready: NetworkReady=false reason:NetworkPluginNotReady message:Network "
             "plugin returns error: cni plugin not initialized")


def _key(kind: str, namespace: str, name: str) -> str:
    return f"{kind}/{namespace}/{name}"


def _resource(kind: str, *, singular: bool = False) -> str:
    """``deployments.apps`` (``singular``: ``deployment.apps``, as kubectl names an object it changed)."""
    resource, group = RESOURCES.get(kind, (kind + "s", ""))
    name = kind if singular else resource
    return f"{name}.{group}" if group else name


def _type_name(text: str) -> tuple[str, str]:
    """``KIND[/NAME]`` as kubectl reads it: the kind in any case, plural, short or with its group
    (``daemonset.apps``) -> (its singular, NAME)."""
    kind, _, name = text.partition("/")
    kind = kind.lower().split(".", 1)[0]
    kind = ALIASES.get(kind, kind)
    return PLURALS.get(kind, kind), name


def _not_found(kind: str, name: str) -> ToolResult:
    return ks.not_found(_resource(kind), name)


def _kept(kube: dict[str, Any], kind: str, namespace: str, name: str) -> tuple[dict[str, Any], str]:
    """Where the simulated cluster keeps an object, and its key there: nodes, pods and Leases apart from the
    applied objects (a pod also when a workload made it)."""
    if kind in ("node", "pod", "lease"):
        return kube.setdefault(kind + "s", {}), f"{namespace}/{name}" if namespace else name
    return kube.setdefault("objects", {}), _key(kind, namespace, name)


def _nodes_json(ctx: ToolContext, kube: dict[str, Any], only: str | None = None) -> str:
    """All nodes as a ``List``, or the node ``only`` (one the cluster has) as an object."""
    plugin = ks.deployed(kube, ks.DEVICE_PLUGIN_RELEASES)
    nfd = ks.deployed(kube, ks.NFD_RELEASES)
    items = []
    for name, node in sorted((kube.get("nodes") or {}).items()):
        labels = dict(node.get("labels") or {})
        gpus = list(node.get("gpus") or [])
        allocatable = {"cpu": "128", "memory": "2113373940Ki", "pods": "110"}
        if plugin is not None and gpus:
            allocatable["nvidia.com/gpu"] = str(len(gpus))
            labels.update(ks.gfd_labels(gpus))
        if nfd is not None:
            labels.update(ks.nfd_labels(ctx, str(node.get("host", name))))
        condition = {"type": "Ready", "status": "True", "reason": "KubeletReady",
                     "message": "kubelet is posting ready status"} if ks.node_ready(ctx, kube, node) else \
            {"type": "Ready", "status": "False", "reason": "KubeletNotReady", "message": NOT_READY}
        status = {"allocatable": allocatable, "capacity": dict(allocatable),
                  "conditions": [condition, *ks_status.extra_conditions(node)],
                  "nodeInfo": {"kubeletVersion": node.get("kubelet_version", ""), "operatingSystem": "linux",
                               "architecture": "amd64"}}
        items.append(kn.node_object(name, node, labels, status))
    if only is not None:
        return json.dumps(next(item for item in items if item["metadata"]["name"] == only), indent=4) + "\n"
    return ks.object_list(items)


def _schedule_pod(ctx: ToolContext, kube: dict[str, Any], doc: dict[str, Any]) -> dict[str, Any]:
    spec = doc.get("spec") or {}
    node = str((spec.get("nodeSelector") or {}).get("kubernetes.io/hostname", ""))
    record = (kube.get("nodes") or {}).get(node)
    gpus = list((record or {}).get("gpus") or [])
    offered = len(gpus) if ks.deployed(kube, ks.DEVICE_PLUGIN_RELEASES) else 0
    if record is None or not ks.cni_ready(kube) or offered < kw.gpus_asked(spec):
        return {"node": node, "phase": "Pending", "logs": ""}
    if ks.fault(ctx, str(record.get("host", node)), "gpu-pod") == "fail":
        # What a container prints when the NVIDIA runtime gave it no working GPU (toolkit#48).
        return {"node": node, "phase": "Failed", "logs": "Failed to initialize NVML: Unknown Error\n"}
    first = gpus[0].split(": ", 1)[1] if gpus else ""
    return {"node": node, "phase": "Succeeded", "logs": f"GPU 0: {first}\n"}


def _apply_docs(ctx: ToolContext, docs: list[dict[str, Any]], source: str, verb: str) -> ToolResult:
    """``apply`` (``verb`` "apply", or "serverside-applied" with ``--server-side``) or ``create -f`` ("created")."""
    out: list[str] = []

    def failed(message: str) -> ToolResult:
        return ToolResult("".join(line + "\n" for line in out), message, 1)

    with ks.edit(ctx) as kube:
        objects = kube.setdefault("objects", {})
        for doc in docs:
            kind = str(doc.get("kind", "")).lower()
            meta = doc.get("metadata") or {}
            name = str(meta.get("name", ""))
            crd = CRD_FOR_KIND.get(kind)
            if crd and _key("customresourcedefinition", "", crd) not in objects:
                return failed(f'error: resource mapping not found for name: "{name}" namespace: "" from "{source}": '
                              f'no matches for kind "{doc.get("kind")}" in version "{doc.get("apiVersion")}"\n'
                              "ensure CRDs are installed first\n")
            namespace = "" if kind in CLUSTER_SCOPED else str(meta.get("namespace") or "default")
            if namespace and namespace not in BUILTIN_NAMESPACES and \
                    _key("namespace", "", namespace) not in objects:
                return failed(f'Error from server (NotFound): error when creating "{source}": namespaces '
                              f'"{namespace}" not found\n')
            key = _key(kind, namespace, name)
            body = json.dumps(doc, sort_keys=True)
            before = objects.get(key)
            if verb == "created" and before is not None:
                return failed(f'Error from server (AlreadyExists): error when creating "{source}": '
                              f'{_resource(kind)} "{name}" already exists\n')
            objects[key] = {"spec": body}
            if kind == "pod":
                kube.setdefault("pods", {})[f"{namespace}/{name}"] = _schedule_pod(ctx, kube, doc)
            elif kind in ("deployment", "statefulset"):
                kw.apply_workload(kube, kind, namespace, doc)
            elif kind == "poddisruptionbudget":
                kw.apply_pdb(kube, namespace, doc)
            if kind == "installation" and _key("deployment", "tigera-operator", "tigera-operator") in objects:
                objects[_key("namespace", "", "calico-system")] = {"spec": "{}"}
                objects[_key("daemonset", "calico-system", "calico-node")] = {"spec": "{}"}
            said = verb if verb != "apply" else \
                "created" if before is None else ("unchanged" if before.get("spec") == body else "configured")
            out.append(f"{_resource(kind, singular=True)}/{name} {said}")
        ks.spread_cni(ctx, kube)
    return ctx.ok("\n".join(out) + "\n")


def _filename_objects(ctx: ToolContext, options: dict[str, str]) -> list[dict[str, Any]] | ToolResult:
    """The objects ``-f`` names: a pinned upstream manifest by its URL, or what ``ks.filename_objects`` reads."""
    source = options.get("--filename", "")
    if source.startswith(("http://", "https://")):
        known = KNOWN_MANIFESTS.get(source.rsplit("/", 1)[-1])
        if known is None:
            return ctx.fail(f'error: unable to read URL "{source}", server reported 404 Not Found, status code=404\n')
        return [{"kind": k, "metadata": {"name": n, "namespace": ns}} for k, ns, n in known]
    return ks.filename_objects(ctx, options)


def run(ctx: ToolContext) -> ToolResult:
    if "--" in ctx.args:  # kubectl exec POD -- COMMAND...: only the command's own words follow "--"
        cut = ctx.args.index("--")
        words, options, flags = split_args(ctx.args[:cut], TAKES_VALUE, LONG_NAMES)
        command = ctx.args[cut + 1:]
    else:
        words, options, flags = split_args(ctx.args, TAKES_VALUE, LONG_NAMES)
        command = []
    if words[:1] in (["get"], ["delete"], ["patch"], ["taint"], ["annotate"]) and len(words) >= 2 \
            and "--raw" not in flags:
        # From here on each kind is named one way, its singular, and KIND/NAME is KIND NAME (but for delete: each
        # of its KIND/NAME words may name another kind).
        kind, name = _type_name(words[1])
        words[1:2] = [kind, name] if name and words[0] != "delete" else [f"{kind}/{name}" if name else kind]
    kubeconfig = options.get("--kubeconfig")
    if kubeconfig and not ctx.fs.exists(kubeconfig):
        return ctx.fail(f"error: stat {kubeconfig}: no such file or directory\n")
    # kubectl reads -f before it asks any server (the real 1.36.3 and 1.37.2): no -f, no such file or
    # YAML it cannot read is refused even where no server answers.
    docs = _filename_objects(ctx, options) if words[:1] in (["apply"], ["replace"]) or words == ["create"] else []
    body = kn.raw_body(ctx, options) if words[:1] == ["create"] and "--raw" in flags else b""
    if isinstance(docs, ToolResult):
        return docs
    if isinstance(body, ToolResult):
        return body
    kube = ks.read(ctx)
    if not kube.get("initialized") or not kubeconfig:
        endpoint = "localhost:8080" if not kubeconfig else str(kube.get("endpoint") or "127.0.0.1:6443")
        return ctx.fail(ks.recording("kubectl-refused.txt", endpoint=endpoint))
    namespace = options.get("--namespace", "default")
    pods = kube.get("pods") or {}
    if words[:1] == ["exec"] and len(words) == 2 and namespace == "kube-system":
        return etcdctl_exec.run(ctx, words[1], command)
    if words[:3] == ["get", "configmap", "kubeadm-config"] and namespace == "kube-system" \
            and options.get("--output") == "jsonpath={.data.ClusterConfiguration}":
        import yaml

        return ctx.ok(yaml.safe_dump({"kind": "ClusterConfiguration", **(kube.get("cluster_configuration") or {})}))
    source = "STDIN" if options.get("--filename") == "-" else options.get("--filename", "")
    if kubectl_lease.handles(words, docs):
        return kubectl_lease.run(ctx, words, options, docs, source)
    if words[:1] == ["get"] and "--raw" in flags:
        return ctx.ok("ok") if words[1:] == ["/readyz"] else _not_found("path", " ".join(words[1:]))
    if words == ["get", "node"]:
        return ctx.ok(_nodes_json(ctx, kube))
    if words[:2] == ["get", "pod"] and len(words) == 2:
        return kn.pods_list(ctx, options, flags)
    if words[:2] == ["patch", "node"] and len(words) >= 3:
        return ks_status.patch_node_status(ctx, words[2], options)
    if words[:2] == ["get", "secret"] and len(words) == 2 and options.get("--selector"):
        return ks_status.secrets_list(ctx, namespace, options["--selector"])
    if words[:1] == ["taint"]:
        return kn.update_node(ctx, words[1:], flags, "taint", kn.taint)
    if words[:1] in (["cordon"], ["uncordon"]):
        return kn.cordon(ctx, words[0], words[1:])
    if words[:1] == ["annotate"]:
        return kn.update_node(ctx, words[1:], flags, "annotation", kn.annotate)
    if words[:1] == ["create"] and "--raw" in flags and len(words) >= 2:
        return kn.create_raw(ctx, words[1], body)
    if words[:1] == ["apply"] or words == ["create"]:
        verb = "created" if words == ["create"] else "serverside-applied" if "--server-side" in flags else "apply"
        return _apply_docs(ctx, docs, source, verb)
    if words[:1] == ["get"] and len(words) >= 2:  # one object
        kind, name = words[1], words[2] if len(words) > 2 else ""
        store, key = _kept(kube, kind, "" if kind in CLUSTER_SCOPED else namespace, name)
        if key not in store:
            return _not_found(kind, name)
        if options.get("--output") == "name" or kind not in ("node", "pod"):
            return ctx.ok(f"{_resource(kind, singular=True)}/{name}\n")
        # -o json of a node, -o jsonpath={.status.phase} of a pod: what clusterctl asks
        return ctx.ok(_nodes_json(ctx, kube, only=name) if kind == "node" else str(store[key].get("phase", "")))
    if words[:2] == ["rollout", "status"] and len(words) >= 3:
        kind, name = _type_name(words[2])
        if _key(kind, namespace, name) not in (kube.get("objects") or {}):
            return _not_found(kind, name)
        return ctx.ok(f'daemon set "{name}" successfully rolled out\n')
    if words[:1] == ["wait"] and len(words) >= 2:
        kind, name = _type_name(words[1])
        pod = pods.get(f"{namespace}/{name}")
        if pod is None:
            return _not_found("pod", name)
        if pod.get("phase") == options.get("--for", "").rsplit("=", 1)[-1]:
            return ctx.ok(f"pod/{name} condition met\n")
        return ctx.fail(f"error: timed out waiting for the condition on pods/{name}\n")
    if words[:1] == ["logs"] and len(words) >= 2:
        pod = pods.get(f"{namespace}/{words[1]}")
        return _not_found("pod", words[1]) if pod is None else ctx.ok(str(pod.get("logs", "")))
    if words[:1] == ["delete"] and len(words) >= 2:
        return _delete(ctx, words[1:], namespace, flags)
    return ctx.fail(f'error: unknown command "{" ".join(words[:2])}" for "kubectl"\n')


def _delete(ctx: ToolContext, words: list[str], namespace: str, flags: set[str]) -> ToolResult:
    """``delete [-n NS] KIND NAME...`` or ``delete KIND/NAME...``: Nodes, pods and applied objects, each in turn
    (``--ignore-not-found``: a missing one silently)."""
    targets = [_type_name(word) for word in words] if "/" in words[0] else [(words[0], name) for name in words[1:]]
    if not targets:
        return ctx.fail("error: resource(s) were provided, but no name was specified\n")
    out, missing = [], []
    with ks.edit(ctx) as kube:
        for kind, name in targets:
            ns = "" if kind in CLUSTER_SCOPED else namespace
            store, key = _kept(kube, kind, ns, name)
            gone = store.pop(key, None)
            kube.setdefault("objects", {}).pop(_key(kind, ns, name), None)  # an applied pod's manifest with it
            if gone is None:
                missing.append((kind, name))
            else:  # kubectl 1.37 names the namespace of what it deleted
                out.append(f'{_resource(kind, singular=True)} "{name}" deleted'
                           + (f" from {ns} namespace" if ns else ""))
    if missing and not ks.ignores_not_found(ctx, flags):
        kind, name = missing[0]
        return ks.not_found(_resource(kind), name, "".join(line + "\n" for line in out))
    return ctx.ok("".join(line + "\n" for line in out))
