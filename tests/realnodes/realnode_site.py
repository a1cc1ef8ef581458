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

import apt_repo
import debs
import images
import registry
import yaml
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
        if fetched.returncode != 0:
            # A fresh machine may have no package lists yet.
            subprocess.run(["apt-get", "update", "-qq"], capture_output=True, timeout=600, check=False)
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



def write_inventory(nodes: RealNodes, path: Path, **bootstrap: object) -> Path:
    """The nodes as a site's inventory: root over SSH, the pinned Kubernetes and containerd, no GPUs
    (``gpus: false``), and once the site's apt repository is served (``start_apt_repo``) that
    repository as the nodes' only package source."""
    data = {
        "cluster": "realnodes",
        "defaults": {"user": "root", "transport": "ssh", "ssh": {"key_file": str(nodes.client_key)},
                     "gpus": False, "stack": {"kubernetes": KUBERNETES_NEWEST, "containerd": CONTAINERD_23}},
        "hosts": {node.name: {"address": node.address, "roles": ["control-plane"] if i == 0 else ["worker"]}
                  for i, node in enumerate(nodes.nodes)},
        "bootstrap": {"pod_subnet": "10.244.0.0/16", **apt_repo.served_settings(nodes), **bootstrap},
    }
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


#: Images this tier can make, by name: (tool, version, path of the binary in the upstream image).
BUILDABLE = {
    **{f"registry.k8s.io/{name}": (name, KUBERNETES_NEWEST, f"/usr/local/bin/{name}")
       for name in ("kube-apiserver", "kube-controller-manager", "kube-scheduler", "kube-proxy")},
    "registry.k8s.io/etcd": ("etcd", ETCD, "/usr/local/bin/etcd"),
    "registry.k8s.io/coredns/coredns": ("coredns", COREDNS, "/coredns"),
}


def mirror_images(nodes: RealNodes, inventory: Path,
                  phases: tuple[str, ...] = ("control-plane",)) -> list[dict[str, object]]:
    """What the site mirrors, as ``clusterctl bootstrap artifacts`` lists it (it reads each host's
    /etc/os-release over SSH) for the phases that run (pause is there already): each image made
    from its built binary. The list is proven by use: an image it leaves out is missing from the
    mirror and the air-gapped bring-up fails."""
    listed = nodes.clusterctl("-i", str(inventory), "-o", "json", "bootstrap", "artifacts", timeout=300)
    assert listed.returncode == 0, listed.stdout[-3000:] + listed.stderr[-3000:]
    out: list[dict[str, object]] = []
    for item in json.loads(listed.stdout)["artifacts"]:
        if item["kind"] != "image" or item["phase"] not in phases or item["name"] == "registry.k8s.io/pause":
            continue
        if item["name"] not in BUILDABLE:
            pytest.fail(f"bootstrap artifacts names {item['reference']}, which this tier cannot build", pytrace=False)
        tool, version, inside = BUILDABLE[item["name"]]
        out.append({"repository": item["name"].removeprefix("registry.k8s.io/"), "tag": item["version"],
                    "entrypoint": [inside], "files": {inside: str(find_tool(tool, version))}})
    return out


def site_debs() -> list[Path]:
    """Every package the site makes from the built tools: Docker's containerd.io and pkgs.k8s.io's
    kubelet, kubeadm, kubectl, cri-tools and kubernetes-cni."""
    return [containerd_deb(), *kubernetes_debs(), cri_tools_deb(), cni_deb()]


#: What pkgs.k8s.io's repository carries beside the packages bootstrap pins, which those depend on
#: (kubelet: kubernetes-cni; kubeadm: cri-tools): a site mirroring the repository has them too.
DEPENDENCIES = ("cri-tools", "kubernetes-cni")


def apt_debs(nodes: RealNodes, inventory: Path) -> list[Path]:
    """What the site's apt repository holds, as ``clusterctl bootstrap artifacts`` lists it: each
    ``apt-package`` item the site's .deb of that name and version, with the dependencies the
    upstream repository carries. The list is proven by use: a package it leaves out is missing
    from the repository and the packages phase fails; one the site cannot make fails here."""
    listed = nodes.clusterctl("-i", str(inventory), "-o", "json", "bootstrap", "artifacts", timeout=300)
    assert listed.returncode == 0, listed.stdout[-3000:] + listed.stderr[-3000:]
    made = {path.name.split("_")[0]: path for path in site_debs()}
    out: list[Path] = []
    for item in json.loads(listed.stdout)["artifacts"]:
        if item["kind"] != "apt-package":
            continue
        deb = made.get(item["name"])
        version = deb.name.split("_")[1] if deb else ""
        wanted = str(item["version"])
        if deb is None or not (version.startswith(wanted[:-1]) if wanted.endswith("*") else version == wanted):
            pytest.fail(f"bootstrap artifacts names {item['reference']}, which this site does not package "
                        f"(it makes {', '.join(sorted(p.name for p in made.values()))})", pytrace=False)
        out.append(deb)
    return out + [made[name] for name in DEPENDENCIES]


def start_apt_repo(nodes: RealNodes, packages: list[Path]) -> apt_repo.AptRepository:
    """The site's apt repository with ``packages``, served on the control namespace; the nodes'
    own apt sources moved aside, so it is the only one they have."""
    repo = apt_repo.build(packages, apt_repo.folder_of(nodes))
    apt_repo.serve(nodes, repo)
    apt_repo.air_gap(nodes)
    return repo


def kubernetes_debs() -> list[Path]:
    kubelet, kubeadm, kubectl = (find_tool(name, KUBERNETES_NEWEST) for name in ("kubelet", "kubeadm", "kubectl"))
    packages = debs.kubernetes_packages(KUBERNETES_NEWEST, kubelet, kubeadm, kubectl)
    return [debs.build(package, debs_folder()) for package in packages]
