"""What the real-node tier's machines are set up with (packages, the site's mirror), and the
tier's skip rule: where this machine cannot host nodes (not root, no network namespaces, no
overlayfs, no systemd) the tier skips with the exact reason."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "upstream"))

import debs
import images
import registry
from nodes import CONTROL_ADDRESS, RealNodes, unavailable_reason
from real_tools import find_tool
from toolset import CNI_PLUGINS, CONTAINERD_23, COREDNS, ETCD, KUBERNETES_NEWEST, REGISTRY, cache_folder

#: The sandbox image clusterctl's containerd config names for Kubernetes 1.37 (kubeadm's PauseVersion).
PAUSE = "3.10.2"
MIRROR = f"http://{CONTROL_ADDRESS}:{registry.PORT}"


def skip_unless_possible() -> None:
    reason = unavailable_reason()
    if reason:
        pytest.skip(f"real nodes cannot run on this machine: {reason}")


def sudo_deb() -> Path:
    """Debian's sudo package (a machine clusterctl reaches has sudo), fetched once into the cache."""
    folder = debs_folder()
    folder.mkdir(parents=True, exist_ok=True)
    found = sorted(folder.glob("sudo_*.deb"))
    if not found:
        fetched = subprocess.run(["apt-get", "download", "sudo"], cwd=folder, capture_output=True, text=True,
                                 timeout=300, check=False)
        found = sorted(folder.glob("sudo_*.deb"))
        if not found:
            pytest.fail(f"apt-get download sudo failed: {fetched.stderr.strip()}", pytrace=False)
    return found[-1]


def debs_folder() -> Path:
    return cache_folder() / "realnodes-debs"


def cri_tools_deb() -> Path:
    return debs.build(debs.cri_tools("1.37.0", find_tool("crictl", "1.37.0")), debs_folder())


def cni_deb() -> Path:
    plugins = {name: find_tool(f"cni-{name}", CNI_PLUGINS) for name in ("bridge", "host-local", "loopback", "portmap")}
    return debs.build(debs.kubernetes_cni(CNI_PLUGINS, plugins), debs_folder())


def containerd_deb() -> Path:
    package = debs.containerd_io(CONTAINERD_23, find_tool("containerd", CONTAINERD_23),
                                 find_tool("ctr", CONTAINERD_23), find_tool("containerd-shim-runc-v2", CONTAINERD_23))
    return debs.build(package, cache_folder() / "realnodes-debs")


def start_mirror(nodes: RealNodes) -> None:
    """The registry on the control namespace, holding the pause image made from Kubernetes' source."""
    folder = nodes.root / "registry"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.yml").write_text(registry.config_yaml(folder / "data", CONTROL_ADDRESS))
    nodes.start_in_control([str(find_tool("registry", REGISTRY)), "serve", str(folder / "config.yml")],
                           folder / "registry.log")
    wait = ("import time, urllib.request\nd = time.monotonic() + 60\nwhile True:\n try:\n"
            f"  urllib.request.urlopen('{MIRROR}/v2/', timeout=2); break\n"
            " except Exception:\n  assert time.monotonic() < d, 'the registry did not answer'; time.sleep(0.2)\n")
    subprocess.run(nodes.in_control([sys.executable, "-c", wait]), check=True, timeout=120)
    pause = images.pause_binary(KUBERNETES_NEWEST, PAUSE, cache_folder() / "realnodes-images")
    push_images(nodes, [{"repository": "pause", "tag": PAUSE, "entrypoint": ["/pause"], "user": "65535:65535",
                         "files": {"/pause": str(pause)}}])


def push_images(nodes: RealNodes, spec: list[dict[str, object]]) -> None:
    """Images into the mirror (``registry.py push``), from the control namespace."""
    spec_file = nodes.root / f"images-{len(list(nodes.root.glob('images-*.json')))}.json"
    spec_file.write_text(json.dumps(spec))
    pushed = subprocess.run(nodes.in_control([sys.executable, str(Path(registry.__file__)), "push", MIRROR,
                                              str(spec_file)]), capture_output=True, text=True, timeout=900,
                            check=False)
    assert pushed.returncode == 0, pushed.stderr



def control_plane_images() -> list[dict[str, object]]:
    """The images ``kubeadm config images list`` names for the pinned release (but pause, already
    there), each one layer holding its built binary where the upstream image has it."""
    def one(repository: str, tag: str, binary: Path, inside: str) -> dict[str, object]:
        return {"repository": repository, "tag": tag, "entrypoint": [inside], "files": {inside: str(binary)}}

    version = f"v{KUBERNETES_NEWEST}"
    out = [one(name, version, find_tool(name, KUBERNETES_NEWEST), f"/usr/local/bin/{name}")
           for name in ("kube-apiserver", "kube-controller-manager", "kube-scheduler", "kube-proxy")]
    out.append(one("etcd", f"{ETCD}-0", find_tool("etcd", ETCD), "/usr/local/bin/etcd"))
    out.append(one("coredns/coredns", f"v{COREDNS}", find_tool("coredns", COREDNS), "/coredns"))
    return out


def kubernetes_debs() -> list[Path]:
    kubelet, kubeadm, kubectl = (find_tool(name, KUBERNETES_NEWEST) for name in ("kubelet", "kubeadm", "kubectl"))
    packages = debs.kubernetes_packages(KUBERNETES_NEWEST, kubelet, kubeadm, kubectl)
    return [debs.build(package, debs_folder()) for package in packages]
