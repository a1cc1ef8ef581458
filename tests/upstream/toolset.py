"""The upstream tools the real-tools tier runs, at which versions, and where they live.

One list for the build script (``tests/upstream/build-tools``) and for the tests, so the two can
never disagree about a version. Standard library only: the build script runs before any venv.

Each tool is built from its published Go module (the Go module proxy serves them; ``go list -m
-versions MODULE`` shows which) into ``<cache>/<name>-<version>/``, where ``<cache>`` is
``$CLUSTERCTL_TOOLS_CACHE`` or ``~/.cache/clusterctl-tools``. Nothing fetched or built goes into
the repository.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

#: Kubernetes releases built: the pinned newest minor (``bootstrap.matrix.NEWEST_KUBERNETES``), the
#: demo inventory's minor (1.36; the proxy serves 1.36.1 and 1.36.3, not the demo's 1.36.2) and the
#: oldest one kubeadm still supports. Patch: the newest each minor has on the module proxy.
KUBERNETES_NEWEST = "1.37.2"
KUBERNETES_DEMO_MINOR = "1.36.3"
KUBERNETES_OLDEST = "1.35.4"
#: The etcd kubeadm 1.37 deploys (``constants.DefaultEtcdVersion`` = 3.7.0-0).
ETCD = "3.7.0"
#: The etcd kubeadm 1.36 deploys for Kubernetes 1.36 (``constants.SupportedEtcdVersion[36]`` =
#: 3.6.8-0): the real nodes' cluster comes up at 1.36 and is upgraded to 1.37, etcd with it.
ETCD_DEMO_MINOR = "3.6.8"
#: The demo's containerd pin (inventories/demo.yaml) and the newest 2.3 patch the proxy serves.
CONTAINERD_22 = "2.2.1"
CONTAINERD_23 = "2.3.7"
#: The CNI plugins the real nodes' pod network uses (bridge, host-local IPAM, loopback, portmap).
CNI_PLUGINS = "1.10.0"
#: The CNCF distribution registry the real nodes pull from (the air-gapped site's mirror).
REGISTRY = "3.1.2"
#: The CoreDNS kubeadm 1.37 deploys (constants.CoreDNSVersion).
COREDNS = "1.14.6"
#: The CoreDNS kubeadm 1.36 deploys (constants.CoreDNSVersion = v1.14.2), for the real nodes'
#: bring-up at 1.36 before their upgrade.
COREDNS_DEMO_MINOR = "1.14.2"


@dataclass(frozen=True)
class Tool:
    #: Folder name stem and how tests ask for it: ``kubeadm``, ``containerd``.
    name: str
    version: str
    #: Go module and the main package inside it.
    module: str
    package: str
    #: ``kubernetes``: a wrapper module pins every ``k8s.io/<staging>`` module to ``v0.<minor>.<patch>``.
    kind: str = "go"
    ldflags: tuple[str, ...] = ()
    tags: tuple[str, ...] = ()
    #: The binary's file name when it differs from ``name``.
    binary: str = ""
    #: Built only when ``build-tools --all`` (or CLUSTERCTL_TOOLS_ALL=1) asks: not needed by CI's tests.
    optional: bool = False
    env: dict[str, str] = field(default_factory=dict)
    #: Files of the module copied beside the binary (kwok's stage definitions), as module-relative paths.
    data: tuple[str, ...] = ()

    @property
    def key(self) -> str:
        return f"{self.name}-{self.version}"

    @property
    def file_name(self) -> str:
        return self.binary or self.name


def _kubernetes(name: str, version: str, *, optional: bool = False) -> Tool:
    major, minor, _ = version.split(".")
    stamp = {"gitVersion": f"v{version}", "gitMajor": major, "gitMinor": minor, "gitTreeState": "clean",
             "gitCommit": "0000000000000000000000000000000000000000", "buildDate": "2026-01-01T00:00:00Z"}
    flags = tuple(f"-X k8s.io/{pkg}/version.{key}={value}"
                  for pkg in ("component-base", "client-go/pkg") for key, value in stamp.items())
    return Tool(name, version, "k8s.io/kubernetes", f"k8s.io/kubernetes/cmd/{name}", kind="kubernetes",
                ldflags=flags, optional=optional)


def _containerd(version: str, *, shim: bool = False) -> tuple[Tool, ...]:
    """The daemon and its ``ctr`` (clusterctl reads ``ctr plugins ls``), from one release; with
    ``shim``, the runc shim too, which a containerd needs to run any container (the real nodes)."""
    module = "github.com/containerd/containerd/v2"
    stamp = (f"-X {module}/version.Version=v{version}",)
    tags = ("no_btrfs", "no_devmapper", "no_zfs")
    tools = (Tool("containerd", version, module, f"{module}/cmd/containerd", ldflags=stamp, tags=tags),
             Tool("ctr", version, module, f"{module}/cmd/ctr", ldflags=stamp, tags=tags))
    if shim:
        tools += (Tool("containerd-shim-runc-v2", version, module, f"{module}/cmd/containerd-shim-runc-v2",
                       ldflags=stamp, tags=tags),)
    return tools


def _cni_plugin(name: str, kind: str) -> Tool:
    """One of ``github.com/containernetworking/plugins``: ``kind`` is its folder (main, ipam, meta)."""
    module = "github.com/containernetworking/plugins"
    return Tool(f"cni-{name}", CNI_PLUGINS, module, f"{module}/plugins/{kind}/{name}", binary=name,
                ldflags=(f"-X {module}/pkg/utils/buildversion.BuildVersion=v{CNI_PLUGINS}",))


TOOLS: tuple[Tool, ...] = (
    # Order = build order, the most useful first, so a partial cold build is already worth something.
    # The tools of one module and version build together (build-tools joins them at the place of
    # the first): Kubernetes 1.37's five binaries are one build. Builds of little shared code
    # alternate, so that two at once (build-tools --jobs 2) seldom compile the same packages.
    _kubernetes("kubeadm", KUBERNETES_NEWEST),
    _kubernetes("kube-apiserver", KUBERNETES_NEWEST),
    _kubernetes("kube-controller-manager", KUBERNETES_NEWEST),
    _kubernetes("kube-scheduler", KUBERNETES_NEWEST),
    _kubernetes("kubectl", KUBERNETES_NEWEST),
    # The real nodes' kubelet (tests/realnodes): built with the control plane, sharing its packages.
    _kubernetes("kubelet", KUBERNETES_NEWEST),
    _kubernetes("kube-proxy", KUBERNETES_NEWEST),
    *_containerd(CONTAINERD_22),
    _kubernetes("kubeadm", KUBERNETES_DEMO_MINOR),
    # The real nodes' cluster comes up at 1.36 and is upgraded to 1.37 (tests/realnodes): 1.36's
    # control plane, kubelet, kube-proxy and kubectl, one build with 1.36's kubeadm.
    _kubernetes("kube-apiserver", KUBERNETES_DEMO_MINOR),
    _kubernetes("kube-controller-manager", KUBERNETES_DEMO_MINOR),
    _kubernetes("kube-scheduler", KUBERNETES_DEMO_MINOR),
    _kubernetes("kubectl", KUBERNETES_DEMO_MINOR),
    _kubernetes("kubelet", KUBERNETES_DEMO_MINOR),
    _kubernetes("kube-proxy", KUBERNETES_DEMO_MINOR),
    Tool("crictl", "1.37.0", "sigs.k8s.io/cri-tools", "sigs.k8s.io/cri-tools/cmd/crictl",
         ldflags=("-X sigs.k8s.io/cri-tools/pkg/version.Version=v1.37.0",)),
    _kubernetes("kubeadm", KUBERNETES_OLDEST),
    _kubernetes("kube-apiserver", KUBERNETES_OLDEST, optional=True),
    _kubernetes("kube-controller-manager", KUBERNETES_OLDEST, optional=True),
    _kubernetes("kube-scheduler", KUBERNETES_OLDEST, optional=True),
    Tool("etcd", ETCD, "go.etcd.io/etcd/server/v3", "go.etcd.io/etcd/server/v3"),
    # The etcd of the real nodes' 1.36 cluster (kubeadm 1.37's upgrade moves it to ETCD).
    Tool("etcd", ETCD_DEMO_MINOR, "go.etcd.io/etcd/server/v3", "go.etcd.io/etcd/server/v3"),
    # remove-node's etcd path runs etcdctl (in a control plane's etcd pod): its command lines are
    # proven against real etcd members (test_real_etcdctl.py).
    Tool("etcdctl", ETCD, "go.etcd.io/etcd/etcdctl/v3", "go.etcd.io/etcd/etcdctl/v3"),
    Tool("kwok", "0.8.0", "sigs.k8s.io/kwok", "sigs.k8s.io/kwok/cmd/kwok",
         ldflags=("-X sigs.k8s.io/kwok/pkg/consts.Version=v0.8.0",),
         # kwok runs no stage unless given some: nodes Ready with heartbeats, pods Running.
         data=("kustomize/stage/node/fast/node-initialize.yaml", "kustomize/stage/node/heartbeat/node-heartbeat.yaml",
               "kustomize/stage/pod/fast/pod-ready.yaml", "kustomize/stage/pod/fast/pod-complete.yaml",
               "kustomize/stage/pod/fast/pod-delete.yaml")),
    *_containerd(CONTAINERD_23, shim=True),
    _cni_plugin("bridge", "main"),
    _cni_plugin("host-local", "ipam"),
    _cni_plugin("loopback", "main"),
    _cni_plugin("portmap", "meta"),
    # The DNS add-on image kubeadm 1.37 deploys (constants.CoreDNSVersion), for the real nodes' mirror.
    Tool("coredns", COREDNS, "github.com/coredns/coredns", "github.com/coredns/coredns",
         ldflags=(f"-X github.com/coredns/coredns/coremain.GitCommit=v{COREDNS}",)),
    Tool("coredns", COREDNS_DEMO_MINOR, "github.com/coredns/coredns", "github.com/coredns/coredns",
         ldflags=(f"-X github.com/coredns/coredns/coremain.GitCommit=v{COREDNS_DEMO_MINOR}",)),
    Tool("registry", REGISTRY, "github.com/distribution/distribution/v3",
         "github.com/distribution/distribution/v3/cmd/registry",
         ldflags=(f"-X github.com/distribution/distribution/v3/version.version=v{REGISTRY}",)),
    Tool("nvidia-ctk", "1.20.0", "github.com/NVIDIA/nvidia-container-toolkit",
         "github.com/NVIDIA/nvidia-container-toolkit/cmd/nvidia-ctk",
         ldflags=("-X github.com/NVIDIA/nvidia-container-toolkit/internal/info.version=1.20.0",),
         # go-nvml loads libnvidia-ml with dlopen (cgo); nothing of it runs without a GPU.
         env={"CGO_ENABLED": "1"}),
    Tool("nfd-worker", "0.19.0", "sigs.k8s.io/node-feature-discovery",
         "sigs.k8s.io/node-feature-discovery/cmd/nfd-worker",
         ldflags=("-X sigs.k8s.io/node-feature-discovery/pkg/version.version=v0.19.0",)),
    Tool("helm", "3.22.0", "helm.sh/helm/v3", "helm.sh/helm/v3/cmd/helm",
         ldflags=("-X helm.sh/helm/v3/internal/version.version=v3.22.0",)),
)


def cache_folder() -> Path:
    configured = os.environ.get("CLUSTERCTL_TOOLS_CACHE")
    return Path(configured) if configured else Path.home() / ".cache" / "clusterctl-tools"


def tool_path(name: str, version: str, cache: Path | None = None) -> Path:
    for tool in TOOLS:
        if tool.name == name and tool.version == version:
            return (cache or cache_folder()) / tool.key / tool.file_name
    raise KeyError(f"{name} {version} is not in tests/upstream/toolset.py")


def kubeadm_for(kubernetes: str) -> str:
    """The built kubeadm release for a Kubernetes pin: the one of the same minor."""
    minor = kubernetes.lstrip("v").split(".")[:2]
    for version in (KUBERNETES_NEWEST, KUBERNETES_DEMO_MINOR, KUBERNETES_OLDEST):
        if version.split(".")[:2] == minor:
            return version
    raise KeyError(f"no kubeadm of Kubernetes {'.'.join(minor)} in tests/upstream/toolset.py")


@dataclass(frozen=True)
class ModuleFiles:
    """Files of a published Go module the tier needs as they are (CRDs, a Helm chart), not a build.

    ``tests/upstream/fetch-manifests`` copies them (``go mod download -json MODULE@VERSION``, its
    ``Dir``) into ``<cache>/<name>-<version>/``, keeping their module-relative paths; a folder is
    copied whole. Nothing of them goes into the repository.
    """

    name: str
    module: str
    version: str
    #: Module-relative files or folders.
    paths: tuple[str, ...]
    #: Why this version (the pin it stands for, or why not the pin).
    note: str

    @property
    def key(self) -> str:
        return f"{self.name}-{self.version}"


#: The module proxy this project's machines reach serves only some versions of these modules
#: (``go list -m -versions`` and ``@v/list`` answer 403 for the others); what is not served is
#: named in docs/testing.md.
MODULE_FILES: tuple[ModuleFiles, ...] = (
    ModuleFiles(
        "prometheus-operator-crds", "github.com/prometheus-operator/prometheus-operator", "v0.85.0",
        ("example/prometheus-operator-crd/monitoring.coreos.com_prometheusrules.yaml",
         "example/prometheus-operator-crd/monitoring.coreos.com_servicemonitors.yaml"),
        "clusterctl pins no Prometheus operator (the site's kube-prometheus-stack brings the CRDs); v0.85.0 is "
        "the newest version of the root module the proxy serves (monitoring.coreos.com/v1 since v0.18)"),
    ModuleFiles(
        "calico-operator-crds", "github.com/projectcalico/calico", "v1.11.0-cni-plugin.0.20250813170300-a0db560f0520",
        ("manifests/operator-crds.yaml",),
        "NOT the pin (Calico v3.31.7 with its Tigera operator): the proxy serves neither "
        "github.com/projectcalico/calico@v3.31.7 nor any github.com/tigera/operator version, only this "
        "release-v3.28 commit (Calico v3.28.5, operator v1.34.13); operator.tigera.io/v1 Installation and "
        "APIServer as that operator defines them"),
    ModuleFiles(
        "node-feature-discovery-chart", "sigs.k8s.io/node-feature-discovery", "v0.19.0",
        ("deployment/helm/node-feature-discovery",),
        "the chart of the pinned NFD 0.19.0 (pins.CHART_PINS), with its values.schema.json and CRDs"),
)


def module_files(name: str, cache: Path | None = None) -> Path:
    """The folder ``fetch-manifests`` copied ``name``'s files into (module-relative paths below it)."""
    for entry in MODULE_FILES:
        if entry.name == name:
            return (cache or cache_folder()) / entry.key
    raise KeyError(f"{name} is not in tests/upstream/toolset.py MODULE_FILES")
