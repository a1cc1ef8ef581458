"""Which Kubernetes upgrades are allowed: kubeadm's version policy, as a pure function.

kubeadm upgrades one minor at a time (``MaximumAllowedMinorVersionUpgradeSkew = 1`` in
``cmd/kubeadm/app/phases/upgrade/policy.go``) and the kubeadm upgrade documentation says
"skipping MINOR versions when upgrading is unsupported"; a downgrade is not an upgrade. The
static pod manifests name the running control plane's version in their image tag, which is
what ``kubeadm upgrade plan`` compares with too.
"""

from __future__ import annotations

from clusterctl.bootstrap.artifacts import image_parts
from clusterctl.bootstrap.cluster.settings import KubernetesVersion
from clusterctl.errors import ParseError, UsageError


def parse(text: str, *, where: str = "--to") -> KubernetesVersion:
    version = KubernetesVersion.parse(text)
    if version is None:
        raise UsageError(f"{text!r} is not a Kubernetes version (MAJOR.MINOR.PATCH, e.g. 1.37.2).", field=where)
    return version


def check_upgrade(current: KubernetesVersion, target: KubernetesVersion, *, where: str = "--to") -> None:
    """Refuse what kubeadm refuses: a skipped minor, a downgrade, another major (exit 2: why, and ``where``)."""
    if target.major != current.major:
        raise UsageError(f"the cluster runs {current.text}; {target.text} is another major version.", field=where)
    if target < current:
        raise UsageError(f"the cluster runs {current.text}; {target.text} would be a downgrade, which kubeadm "
                         "does not do.", field=where, hint=f"Pick {current.text} or later.")
    if target.minor > current.minor + 1:
        step = KubernetesVersion(current.major, current.minor + 1, 0)
        raise UsageError(
            f"the cluster runs {current.text}; {target.text} skips the minor version(s) between. kubeadm "
            f"upgrades one minor at a time (skipping MINOR versions is unsupported).", field=where,
            hint=f"Upgrade to the newest 1.{step.minor}.x first (clusterctl upgrade apply --to 1.{step.minor}.N), "
                 f"then to {target.text}.")


def static_pod_version(text: str) -> str:
    """The image tag of a static pod manifest's container (``kube-apiserver.yaml`` -> ``v1.36.2``), that of an
    image pinned by digest too (``...:v1.36.2@sha256:...``); the digest is no version."""
    for number, line in enumerate(text.splitlines(), 1):
        stripped = line.strip().lstrip("- ")
        if stripped.startswith("image:"):
            _name, tag, digest = image_parts(stripped.split(":", 1)[1].strip().strip("'\""))
            if not tag:
                raise ParseError("a static pod manifest", "the image is pinned by digest, without a tag naming its "
                                 "version" if digest else "the image has no tag", line=number, text=line)
            return tag
    raise ParseError("a static pod manifest", "no 'image:' line")
