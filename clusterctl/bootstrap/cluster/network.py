"""The CNI: Calico through its pinned operator (default) or Flannel from clusterctl's own manifest.

Calico's operator manifests are applied from the pinned release (or a site mirror) as they are;
clusterctl renders only the ``Installation`` with the pod subnet. Flannel is small enough that
clusterctl renders all of it, with the pod subnet in ``net-conf.json`` and images from the
site registry when one is set. Either way the pod subnet is the kubeadm config's ``podSubnet``.
"""

from __future__ import annotations

from dataclasses import dataclass

from clusterctl.bootstrap.cluster.settings import ClusterSettings, site_image
from clusterctl.inventory.cluster_sections import NetworkSettings
from clusterctl.inventory.pins import CNI_PINS
from clusterctl.templating import render

MANIFEST_DIR = "/etc/kubernetes/clusterctl/network"


@dataclass(frozen=True)
class NetworkPlan:
    cni: str
    version: str
    #: URLs of pinned upstream manifests applied first, in order (server-side apply: Calico's CRDs are large).
    remote_manifests: tuple[str, ...]
    #: Manifest clusterctl renders, and where it is kept on the first control-plane host.
    rendered_path: str
    rendered: str
    #: Object that says the CNI runs: (namespace, kind/name) for ``kubectl rollout status``.
    rollout: tuple[str, str]


def cni_images(net: NetworkSettings) -> list[str]:
    """The images of a CNI clusterctl renders whole (Flannel), as the nodes pull them: the first (the
    CNI's own) at the inventory's version, each under the site registry when one is set."""
    pin = CNI_PINS[net.cni]
    return [site_image(image.replace(pin.version, net.version, 1) if i == 0 else image, net.image_registry)
            for i, image in enumerate(pin.images)]


def network_plan(settings: ClusterSettings) -> NetworkPlan:
    net = settings.network
    pin = CNI_PINS[net.cni]
    if net.cni == "calico":
        text = render("bootstrap/cni/calico-installation.yaml.j2", version=net.version, pod_subnet=settings.pod_subnet,
                      image_registry=net.image_registry)
        return NetworkPlan(
            "calico", net.version, tuple(f"{net.manifest_base}/{name}" for name in pin.manifests),
            f"{MANIFEST_DIR}/calico-installation.yaml", text, ("calico-system", "daemonset/calico-node"),
        )
    flannel, cni_plugin = cni_images(net)
    text = render("bootstrap/cni/flannel.yaml.j2", version=net.version, pod_subnet=settings.pod_subnet,
                  image_registry=net.image_registry, flannel_image=flannel, cni_plugin_image=cni_plugin)
    return NetworkPlan("flannel", net.version, (), f"{MANIFEST_DIR}/kube-flannel.yaml", text,
                       ("kube-flannel", "daemonset/kube-flannel-ds"))
