"""The real control plane the tier shares: one per test session, for every module that needs one.

``start_cluster`` starts it (``control_plane.ControlPlane``) from the init configuration
clusterctl renders for the demo's first control plane (the demo at Kubernetes 1.37, the control
plane binaries' release), with the run's token and certificate key; kwok keeps the demo's six
hosts as Ready nodes carrying their kubelet labels, their kubelet version and eight allocatable
``nvidia.com/gpu`` each, as the device plugin would report them. ``conftest.control_plane`` is
the session fixture; it is always stopped at the end.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from control_plane import ADDRESS, ControlPlane, kwok_node
from demo_calls import SURVEY, VARIANTS
from real_tools import find_tool
from toolset import ETCD, KUBERNETES_NEWEST

from clusterctl.bootstrap.cluster import kubeadm
from clusterctl.bootstrap.cluster.settings import ClusterSettings, cluster_settings, kubelet_node_labels
from clusterctl.bootstrap.phase import PhaseContext
from clusterctl.inventory.loader import load_inventory
from clusterctl.inventory.model import Inventory

GPUS_PER_NODE = 8
#: kwok's own stage definitions (build-tools copies them beside the binary): Ready nodes, running pods.
KWOK_STAGES = ("node-initialize.yaml", "node-heartbeat.yaml", "pod-ready.yaml", "pod-complete.yaml", "pod-delete.yaml")
VARIANT = VARIANTS[2]  # the demo at Kubernetes 1.37 (the control plane binaries' release)


class Cluster:
    def __init__(self, plane: ControlPlane, inventory: Inventory, settings: ClusterSettings,
                 inventory_path: Path) -> None:
        self.plane, self.inventory, self.settings = plane, inventory, settings
        #: The inventory file (the demo at 1.37, mock hosts): what ``clusterctl -i`` reads.
        self.inventory_path = inventory_path

    def context(self) -> PhaseContext:
        from clusterctl.bootstrap.run_data import RunOptions

        first = self.inventory.hosts[0]
        return PhaseContext(first, self.plane.transport(first), self.inventory,
                            options=RunOptions(hosts=tuple(h.name for h in self.inventory.hosts), survey=str(SURVEY)))


@contextmanager
def start_cluster(folder: Path) -> Iterator[Cluster]:
    tools = {name: find_tool(name, KUBERNETES_NEWEST)
             for name in ("kubeadm", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubectl")}
    tools["etcd"] = find_tool("etcd", ETCD)
    tools["kwok"] = find_tool("kwok", "0.8.0")
    inventory_path = VARIANT.write_inventory(folder / "inventory")
    inventory = load_inventory(str(inventory_path))
    settings = cluster_settings(inventory)
    first = inventory.hosts[0]
    assert first.address == ADDRESS, "the namespace's address is the demo's first control plane's"
    init = kubeadm.render_init_config(settings, first, inventory, token=kubeadm.new_bootstrap_token(),
                                      certificate_key=kubeadm.new_certificate_key())
    plane = ControlPlane(folder / "plane", tools, init)
    (folder / "plane").mkdir()
    try:
        plane.start()
        stages = ",".join(str(tools["kwok"].parent / name) for name in KWOK_STAGES)
        plane.start_process("kwok", ["kwok", "--kubeconfig=/etc/kubernetes/admin.conf", f"--config={stages}",
                                     "--manage-all-nodes=false",
                                     "--manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake",
                                     f"--node-ip={ADDRESS}"])
        for host in inventory.hosts:
            node = kwok_node(host.name, kubelet_node_labels(host), GPUS_PER_NODE,
                             control_plane="control-plane" in host.roles, kubelet_version=f"v{KUBERNETES_NEWEST}")
            created = plane.kubectl("create -f -", stdin=json.dumps(node).encode())
            assert created.returncode == 0, created.stderr
        config = plane.folder / "init.yaml"
        plane.must(f"kubeadm init phase mark-control-plane --config {config}")
        # The controller-manager makes each namespace's default ServiceAccount; pods need it.
        deadline = time.monotonic() + 90
        while plane.kubectl("-n default get serviceaccount default").returncode != 0:
            assert time.monotonic() < deadline, plane.log_tail("kube-controller-manager")
            time.sleep(1)
        yield Cluster(plane, inventory, settings, inventory_path)
    finally:
        plane.stop()


def kubectl_json(cluster: Cluster, args: str) -> dict[str, object]:
    done = cluster.plane.kubectl(f"{args} -o json")
    assert done.returncode == 0, done.stderr
    loaded: dict[str, object] = json.loads(done.stdout)
    return loaded
