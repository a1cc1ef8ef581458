"""The container images kubeadm pulls for a Kubernetes version, as ``kubeadm config images list`` says.

kubeadm builds the list from its ``cmd/kubeadm/app/constants/constants.go`` (``PauseVersion``,
``CoreDNSVersion``, ``SupportedEtcdVersion`` keyed by minor) and ``app/images/images.go``
(``GetControlPlaneImage``, ``GetDNSImage``, ``GetEtcdImage``, ``GetPauseImage``):

* ``kube-apiserver``, ``kube-controller-manager``, ``kube-scheduler``, ``kube-proxy`` at the
  Kubernetes version itself (``v1.36.2``);
* ``coredns/coredns`` at ``CoreDNSVersion``: under the default ``registry.k8s.io`` the image
  sits in the ``coredns/`` sub-path; with a custom ``imageRepository`` it is ``<repo>/coredns``;
* ``pause`` at ``PauseVersion``; ``etcd`` at ``SupportedEtcdVersion[minor]`` (local etcd).

Tags per minor were read from kubeadm's constants at each release branch (kubernetes/kubernetes
``cmd/kubeadm/app/constants/constants.go``; etcd's own bump guide quotes the 1.34-1.36 map) and
from ``kubeadm config images list`` outputs in release notes; 1.35 to 1.37 are the real kubeadm
1.35.4, 1.36.3 and 1.37.2's answers, compared on every run of the real-tools tier
(``tests/upstream/test_contract_kubeadm.py``), as is the simulated kubeadm's table. Patch releases
can bump etcd: ``kubeadm config images list --kubernetes-version V`` of that very kubeadm is the
check.
"""

from __future__ import annotations

from dataclasses import dataclass

from clusterctl.bootstrap.matrix import parse_version
from clusterctl.errors import UsageError

DEFAULT_REPOSITORY = "registry.k8s.io"


@dataclass(frozen=True)
class KubeadmImageTags:
    pause: str
    etcd: str
    coredns: str


#: Kubernetes minor -> what kubeadm's constants say at that release branch.
TAGS_BY_MINOR: dict[int, KubeadmImageTags] = {
    31: KubeadmImageTags("3.10", "3.5.15-0", "v1.11.3"),
    32: KubeadmImageTags("3.10", "3.5.16-0", "v1.11.3"),
    33: KubeadmImageTags("3.10", "3.5.21-0", "v1.12.0"),
    34: KubeadmImageTags("3.10.1", "3.6.4-0", "v1.12.1"),
    35: KubeadmImageTags("3.10.1", "3.6.6-0", "v1.13.1"),
    36: KubeadmImageTags("3.10.2", "3.6.8-0", "v1.14.2"),
    37: KubeadmImageTags("3.10.2", "3.7.0-0", "v1.14.6"),
}

CONTROL_PLANE_COMPONENTS = ("kube-apiserver", "kube-controller-manager", "kube-scheduler", "kube-proxy")


def kubeadm_images(kubernetes: str, image_repository: str | None = None) -> list[str]:
    """``kubeadm config images list --kubernetes-version V [--image-repository R]``, in kubeadm's order."""
    version = parse_version(kubernetes)
    if version is None:
        raise UsageError(f"'{kubernetes}' is not a Kubernetes version", field="stack.kubernetes")
    tags = TAGS_BY_MINOR.get(version[1])
    if tags is None:
        known = ", ".join(f"1.{m}" for m in sorted(TAGS_BY_MINOR))
        raise UsageError(f"clusterctl does not know kubeadm's image tags for Kubernetes 1.{version[1]} "
                         f"(known: {known})", field="stack.kubernetes",
                         hint="Run 'kubeadm config images list --kubernetes-version ...' with that kubeadm.")
    repo = (image_repository or DEFAULT_REPOSITORY).rstrip("/")
    tag = "v" + ".".join(str(p) for p in version)
    dns = f"{repo}/coredns/coredns" if repo == DEFAULT_REPOSITORY else f"{repo}/coredns"
    return [*(f"{repo}/{name}:{tag}" for name in CONTROL_PLANE_COMPONENTS),
            f"{dns}:{tags.coredns}", f"{repo}/pause:{tags.pause}", f"{repo}/etcd:{tags.etcd}"]
