"""What the simulated kubeadm knows of its images and static pod manifests (shared by init/join and upgrade)."""

from __future__ import annotations

from clusterctl.mock.tools.base import ToolContext
from clusterctl.mock.tools.kubeadm_config import minor_of

MANIFESTS = ("etcd.yaml", "kube-apiserver.yaml", "kube-controller-manager.yaml", "kube-scheduler.yaml")

#: Per Kubernetes minor: (pause, etcd, coredns) tags kubeadm lists (its ``constants`` package:
#: PauseVersion, DefaultEtcdVersion, CoreDNSVersion). 1.35 to 1.37 are the real kubeadm's answers
#: (tests/upstream/test_contract_kubeadm.py compares them on every run of the real-tools tier);
#: older minors from ``kubeadm config images list`` outputs quoted in release notes.
IMAGE_TAGS: dict[int, tuple[str, str, str]] = {
    31: ("3.10", "3.5.15-0", "v1.11.3"), 32: ("3.10", "3.5.16-0", "v1.11.3"), 33: ("3.10", "3.5.21-0", "v1.12.0"),
    34: ("3.10.1", "3.6.4-0", "v1.12.1"), 35: ("3.10.1", "3.6.6-0", "v1.13.1"), 36: ("3.10.2", "3.6.8-0", "v1.14.2"),
    37: ("3.10.2", "3.7.0-0", "v1.14.6"),
}


def image_tags(version: str) -> tuple[str, str, str]:
    """(pause, etcd, coredns) for Kubernetes ``version`` (``v1.37.2``); a minor not listed gets the newest's, as
    kubeadm's ``EtcdSupportedVersion`` does."""
    return IMAGE_TAGS.get(minor_of(version), IMAGE_TAGS[max(IMAGE_TAGS)])


def write_manifests(ctx: ToolContext, version: str) -> None:
    """The control plane's static pod manifests at ``version`` (images as kubeadm names them), cut to what
    clusterctl reads."""
    etcd = image_tags(version)[1]
    for name in MANIFESTS:
        component = name[:-len(".yaml")]
        image = f"registry.k8s.io/{component}:{etcd if component == 'etcd' else version}"
        manifest = (f"apiVersion: v1\nkind: Pod\nmetadata:\n  name: {component}\n  namespace: kube-system\n"
                    f"spec:\n  containers:\n  - name: {component}\n    image: {image}\n")
        ctx.fs.write(f"/etc/kubernetes/manifests/{name}", manifest.encode(), mode=0o600)
