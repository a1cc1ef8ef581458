"""Debian packages of the built upstream tools, made with ``dpkg-deb`` as a site would package them.

The packages carry the names, file layout and systemd units of the upstream packages clusterctl
installs (Docker's ``containerd.io``; pkgs.k8s.io's ``kubelet``, ``kubeadm``, ``kubectl``), so
that a node set up from them looks to clusterctl as one set up from those repositories. The
units are written here from the upstream ones' documented content (containerd's
``containerd.service``; kubeadm's ``10-kubeadm.conf`` drop-in), not copied.

Built into ``<tools cache>/realnodes-debs/`` (outside the repository), once per content.
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

CONTAINERD_SERVICE = """\
[Unit]
Description=containerd container runtime
Documentation=https://containerd.io
After=network.target local-fs.target

[Service]
ExecStartPre=-/sbin/modprobe overlay
ExecStart=/usr/bin/containerd
Type=notify
Delegate=yes
KillMode=process
Restart=always
RestartSec=5
LimitNPROC=infinity
LimitCORE=infinity
TasksMax=infinity
OOMScoreAdjust=-999

[Install]
WantedBy=multi-user.target
"""


@dataclass
class Package:
    name: str
    version: str
    description: str
    #: Path inside the package -> file on this machine (binaries) or text (units, configs).
    files: dict[str, Path | str] = field(default_factory=dict)
    depends: str = ""
    conflicts: str = ""
    provides: str = ""

    def control(self) -> str:
        lines = [f"Package: {self.name}", f"Version: {self.version}", "Architecture: amd64",
                 "Maintainer: clusterctl real-node tier <noreply@example.invalid>", "Section: admin",
                 "Priority: optional"]
        if self.depends:
            lines.append(f"Depends: {self.depends}")
        if self.conflicts:
            lines += [f"Conflicts: {self.conflicts}", f"Replaces: {self.conflicts}"]
        if self.provides:
            lines.append(f"Provides: {self.provides}")
        lines.append(f"Description: {self.description}")
        return "\n".join(lines) + "\n"

    def digest(self) -> str:
        h = hashlib.sha256(self.control().encode())
        for inside, source in sorted(self.files.items()):
            h.update(inside.encode())
            if isinstance(source, Path):
                stat = source.stat()
                h.update(f"{source}:{stat.st_size}:{stat.st_mtime_ns}".encode())
            else:
                h.update(source.encode())
        return h.hexdigest()[:12]


def build(package: Package, out_dir: Path) -> Path:
    """``<out_dir>/<name>_<version>_amd64.deb``, rebuilt only when its content changed."""
    out_dir.mkdir(parents=True, exist_ok=True)
    deb = out_dir / f"{package.name}_{package.version}_amd64.deb"
    stamp = deb.with_suffix(".digest")
    if deb.exists() and stamp.exists() and stamp.read_text() == package.digest():
        return deb
    root = out_dir / f".{package.name}.root"
    shutil.rmtree(root, ignore_errors=True)
    (root / "DEBIAN").mkdir(parents=True)
    (root / "DEBIAN" / "control").write_text(package.control())
    for inside, source in package.files.items():
        target = root / inside.lstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(source, Path):
            shutil.copyfile(source, target)
            target.chmod(0o755)
        else:
            target.write_text(source)
            target.chmod(0o644)
    partial = deb.with_suffix(".partial")
    subprocess.run(["dpkg-deb", "--root-owner-group", "-Zgzip", "-z1", "--build", str(root), str(partial)],
                   check=True, capture_output=True)
    partial.rename(deb)
    stamp.write_text(package.digest())
    shutil.rmtree(root, ignore_errors=True)
    return deb


def containerd_io(version: str, containerd: Path, ctr: Path, shim: Path) -> Package:
    """Docker's ``containerd.io`` layout: the daemon, ``ctr``, the runc shim and the unit; runc
    comes from Debian's package (Docker's bundles its own)."""
    return Package(
        "containerd.io", f"{version}-1", "An open and reliable container runtime (built from its Go module)",
        files={"/usr/bin/containerd": containerd, "/usr/bin/ctr": ctr, "/usr/bin/containerd-shim-runc-v2": shim,
               "/lib/systemd/system/containerd.service": CONTAINERD_SERVICE},
        depends="runc", conflicts="containerd", provides="containerd")


def cri_tools(version: str, crictl: Path) -> Package:
    """pkgs.k8s.io's ``cri-tools``: ``crictl``."""
    return Package("cri-tools", f"{version}-1.1", "Command-line utility for the Container Runtime Interface",
                   files={"/usr/bin/crictl": crictl})


def kubernetes_cni(version: str, plugins: dict[str, Path]) -> Package:
    """pkgs.k8s.io's ``kubernetes-cni``: the CNI plugins in ``/opt/cni/bin``."""
    return Package("kubernetes-cni", f"{version}-1.1", "Binaries required to provision kubernetes container networking",
                   files={f"/opt/cni/bin/{name}": path for name, path in plugins.items()})


#: pkgs.k8s.io's kubelet unit: kubelet with no flags, restarted forever (kubeadm's drop-in adds the flags).
KUBELET_SERVICE = """\
[Unit]
Description=kubelet: The Kubernetes Node Agent
Documentation=https://kubernetes.io/docs/
Wants=network-online.target
After=network-online.target

[Service]
ExecStart=/usr/bin/kubelet
Restart=always
StartLimitInterval=0
RestartSec=10

[Install]
WantedBy=multi-user.target
"""

#: kubeadm's drop-in (kubernetes.io, "Configuring each kubelet in your cluster using kubeadm"): the
#: kubeconfigs and config kubeadm writes, the flags file of its kubelet-start phase, the user's.
KUBEADM_DROPIN = """\
[Service]
Environment="KUBELET_KUBECONFIG_ARGS=--bootstrap-kubeconfig=/etc/kubernetes/bootstrap-kubelet.conf \
--kubeconfig=/etc/kubernetes/kubelet.conf"
Environment="KUBELET_CONFIG_ARGS=--config=/var/lib/kubelet/config.yaml"
EnvironmentFile=-/var/lib/kubelet/kubeadm-flags.env
EnvironmentFile=-/etc/default/kubelet
ExecStart=
ExecStart=/usr/bin/kubelet $KUBELET_KUBECONFIG_ARGS $KUBELET_CONFIG_ARGS $KUBELET_KUBEADM_ARGS $KUBELET_EXTRA_ARGS
"""


def kubernetes_packages(version: str, kubelet: Path, kubeadm: Path, kubectl: Path) -> list[Package]:
    """pkgs.k8s.io's ``kubelet``, ``kubeadm`` and ``kubectl`` (Debian revision ``-1.1``, as there)."""
    revision = f"{version}-1.1"
    return [
        Package("kubelet", revision, "Node agent for Kubernetes clusters",
                files={"/usr/bin/kubelet": kubelet, "/lib/systemd/system/kubelet.service": KUBELET_SERVICE},
                depends="kubernetes-cni"),
        Package("kubeadm", revision, "Command-line utility for administering a Kubernetes cluster",
                files={"/usr/bin/kubeadm": kubeadm,
                       "/usr/lib/systemd/system/kubelet.service.d/10-kubeadm.conf": KUBEADM_DROPIN},
                depends="kubelet, kubectl, cri-tools"),
        Package("kubectl", revision, "Command-line utility for interacting with a Kubernetes cluster",
                files={"/usr/bin/kubectl": kubectl}),
    ]
