"""A small simulated Kubernetes cluster for the quarantine tests, ready without running bootstrap.

Three (or more) mock hosts replaying the demo's DGX A100 recordings with kubectl installed,
an inventory file (``inventory``) the CLI reads, and the cluster state as ``kubeadm init`` and
``join`` leave it: every host a Ready node, a CNI DaemonSet and the device plugin deployed, the
admin kubeconfig on the first host. ``kubectl(LINE)`` runs on the first control plane as an
engineer would type it there. Hosts named in ``slurmd`` run slurmd; hosts named in ``hung`` answer
no command within any time limit (their nodes are in the cluster all the same).
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from host_state import snapshot

from clusterctl.mock.state import MockCluster

REPO = Path(__file__).resolve().parents[2]
ADMIN = "/etc/kubernetes/admin.conf"
KUBECTL = f"kubectl --kubeconfig {ADMIN}"
GPUS = [f"GPU {i}: NVIDIA A100-SXM4-80GB (UUID: GPU-{i:08d}-0000-0000-0000-000000000000)" for i in range(8)]


def _profile(slurmd: bool) -> str:
    services = "\n  services:\n    slurmd: {active: true, enabled: true}" if slurmd else ""
    return (f"extends: {REPO / 'inventories' / 'demo' / 'profiles' / 'dgx-a100'}\nmachine:\n  packages:\n"
            f"    installed:\n      kubectl: \"1.36.2-1.1\"\n      slurm-client: \"23.02.6-1\"{services}\n")


class KubeSim:
    def __init__(self, root: Path, names: Sequence[str] = ("gpu-a1", "gpu-a2", "gpu-a3"),
                 slurmd: Sequence[str] = (), hung: Sequence[str] = ()) -> None:
        self.root = root
        self.names = list(names)
        self._transports: dict[str, Any] = {}
        # A hung host answers nothing within any caller's time limit (its node stays in the cluster).
        hung_profile = _profile(False) + 'commands:\n  - regex: "."\n    delay: 3600\n'
        for kind, text in (("plain", _profile(False)), ("slurm", _profile(True)), ("hung", hung_profile)):
            (root / "profiles" / kind).mkdir(parents=True, exist_ok=True)
            (root / "profiles" / kind / "profile.yaml").write_text(text)
        lines = ["cluster: qsim", "defaults:", "  transport: mock", "  mock_state: state", "hosts:"]
        for index, name in enumerate(self.names):
            roles = "[control-plane, worker]" if index == 0 else "[worker]"
            kind = "slurm" if name in slurmd else "hung" if name in hung else "plain"
            lines.append(f"  {name}: {{address: 10.0.0.{index + 1}, rack: a, roles: {roles}, "
                         f"profile: profiles/{kind}}}")
        self.inventory = root / "inventory.yaml"
        self.inventory.write_text("\n".join(lines) + "\n")
        self.state = MockCluster(root / "state")
        self.state.host(self.names[0]).fs.write(ADMIN, b"apiVersion: v1\nkind: Config\n")
        with self.state.cluster.edit() as data:
            data["kubernetes"] = {
                "initialized": True, "version": "v1.36.2", "endpoint": "10.0.0.1:6443",
                "nodes": {n: {"host": n, "control_plane": i == 0, "labels": {"kubernetes.io/hostname": n},
                              "gpus": GPUS, "kubelet_version": "v1.36.2"} for i, n in enumerate(self.names)},
                "objects": {"daemonset/kube-system/kube-proxy": {"spec": "{}"},
                            "daemonset/kube-flannel/kube-flannel-ds": {"spec": "{}"}},
                "releases": {"nvidia-device-plugin/nvidia-device-plugin": {"status": "deployed", "revision": 1,
                                                                           "chart": "nvidia-device-plugin-0.20.0"}},
                "pods": {}}

    def transport(self, name: str | None = None) -> Any:
        """The mock transport of one host (the first control plane by default), made once."""
        from clusterctl.inventory.loader import load_inventory
        from clusterctl.mock.transport import MockTransport

        name = name or self.names[0]
        if name not in self._transports:
            self._transports[name] = MockTransport(load_inventory(str(self.inventory)).host(name))
        return self._transports[name]

    def sh(self, line: str, stdin: str = "", host: str | None = None) -> tuple[int, str, str]:
        result = self.transport(host).run(line, stdin=stdin.encode() if stdin else None)
        return result.exit_code, result.stdout, result.stderr

    def kubectl(self, args: str, stdin: str = "") -> tuple[int, str, str]:
        return self.sh(f"{KUBECTL} {args}", stdin)

    def kube(self) -> dict[str, Any]:
        data = self.state.cluster.read().get("kubernetes")
        return data if isinstance(data, dict) else {}

    @contextlib.contextmanager
    def edit_kube(self) -> Iterator[dict[str, Any]]:
        with self.state.cluster.edit() as data:
            kube: dict[str, Any] = data.setdefault("kubernetes", {})
            yield kube

    def node(self, name: str) -> dict[str, Any]:
        code, out, err = self.kubectl(f"get node {name} -o json")
        assert code == 0, err
        result: dict[str, Any] = json.loads(out)
        return result

    def pods_on(self, node: str) -> list[str]:
        code, out, err = self.kubectl(f"get pods -A --field-selector spec.nodeName={node} -o json")
        assert code == 0, err
        return [f"{p['metadata']['namespace']}/{p['metadata']['name']}" for p in json.loads(out)["items"]]

    def deploy(self, name: str, replicas: int, *, min_available: int | str | None = None,
               namespace: str = "default", emptydir: bool = False) -> None:
        volumes = "\n      volumes: [{name: scratch, emptyDir: {}}]" if emptydir else ""
        manifest = (f"apiVersion: apps/v1\nkind: Deployment\nmetadata: {{name: {name}, namespace: {namespace}}}\n"
                    f"spec:\n  replicas: {replicas}\n  selector: {{matchLabels: {{app: {name}}}}}\n"
                    f"  template:\n    metadata: {{labels: {{app: {name}}}}}\n    spec:\n"
                    f"      containers: [{{name: main, image: busybox}}]{volumes}\n")
        if min_available is not None:
            manifest += (f"---\napiVersion: policy/v1\nkind: PodDisruptionBudget\n"
                         f"metadata: {{name: {name}, namespace: {namespace}}}\n"
                         f"spec:\n  minAvailable: {min_available}\n  selector: {{matchLabels: {{app: {name}}}}}\n")
        code, _, err = self.kubectl("apply -f -", manifest)
        assert code == 0, err

    def bare_pod(self, name: str, node: str, namespace: str = "default") -> None:
        manifest = (f"apiVersion: v1\nkind: Pod\nmetadata: {{name: {name}, namespace: {namespace}}}\n"
                    f"spec:\n  nodeSelector: {{kubernetes.io/hostname: {node}}}\n"
                    f"  containers: [{{name: main, image: busybox}}]\n")
        code, _, err = self.kubectl("apply -f -", manifest)
        assert code == 0, err
        with self.state.cluster.edit() as data:
            data["kubernetes"]["pods"][f"{namespace}/{name}"]["phase"] = "Running"

    def snapshot(self, *, leases: bool = True) -> dict[str, bytes]:
        """The mock state as ``host_state.snapshot`` sees it (the simulator's bookkeeping left out). Every
        host is brought up first: a mock host writes its first-boot state when first used, which is no
        change of any command. ``leases=False`` leaves the cluster's Leases out (a receiver takes and gives
        back its Lease to decide even when it then changes nothing)."""
        for name in self.names:
            self.sh("true", host=name)
        state = snapshot(self.root / "state")
        if not leases and "cluster.json" in state:
            data = json.loads(state["cluster.json"])
            for key in ("leases", "resource_version"):
                data.get("kubernetes", {}).pop(key, None)
            state["cluster.json"] = json.dumps(data, sort_keys=True).encode()
        return state
