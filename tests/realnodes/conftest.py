"""The real-node tier: namespaced nodes with a real sshd each (``nodes.py``), reached by clusterctl.

``real_nodes`` brings up two nodes for a test module and always takes them down (the module's
end, an error, an interrupt; a killed run is cleaned up by the nodes' reaper); ``machines`` sets
them up as a site's machines with the site's mirror (``realnode_site.py``). Where this machine
cannot host such nodes (not root, no network namespaces, no overlayfs) the tier skips with the
exact reason.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "upstream"))

from nodes import RealNodes
from realnode_site import (
    apt_debs,
    cni_deb,
    containerd_deb,
    cri_tools_deb,
    mirror_images,
    push_images,
    skip_unless_possible,
    start_apt_repo,
    start_mirror,
    sudo_deb,
    write_inventory,
)


@pytest.fixture(scope="module")
def real_nodes() -> Iterator[RealNodes]:
    skip_unless_possible()
    with RealNodes(2) as nodes:
        yield nodes


@pytest.fixture(scope="module")
def machines() -> Iterator[RealNodes]:
    """Two nodes set up as fresh machines (sudo; Docker's containerd.io, cri-tools and
    kubernetes-cni, built from their modules; the site's bridge CNI) and the site's image mirror
    on the control namespace."""
    skip_unless_possible()
    packages = [sudo_deb(), containerd_deb(), cri_tools_deb(), cni_deb()]
    with RealNodes(2) as nodes:
        nodes.install(packages)
        nodes.write_site_cni()
        start_mirror(nodes)
        yield nodes


@pytest.fixture(scope="module")
def kubernetes_machines(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RealNodes]:
    """Two fresh air-gapped machines (sudo only; the site's bridge CNI) and the site: its apt
    repository holding the packages ``clusterctl bootstrap artifacts`` lists (Docker's containerd.io,
    pkgs.k8s.io's kubelet, kubeadm, kubectl and their dependencies, built from their modules with
    the upstream units), and its image mirror holding the images it lists for the control-plane
    phase. The packages phase installs them from there."""
    skip_unless_possible()
    with RealNodes(2) as nodes:
        nodes.install([sudo_deb()])
        nodes.write_site_cni()
        start_mirror(nodes)
        inventory = write_inventory(nodes, tmp_path_factory.mktemp("site") / "inventory.yaml")
        start_apt_repo(nodes, apt_debs(nodes, inventory))
        push_images(nodes, mirror_images(nodes, inventory))
        yield nodes
