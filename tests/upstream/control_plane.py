"""A real Kubernetes control plane on a private loopback, from the configuration clusterctl renders.

Everything runs inside one network and mount namespace (``unshare --net --mount``), so nothing of
the machine changes and no port can clash with anything outside:

* the network has only ``lo``, which also carries the demo's first control-plane address
  (10.0.0.11) and the default route, as a host's NIC would;
* ``/etc`` and ``/var/lib`` are overlays whose writes land in the test's folder, so kubeadm
  writes ``/etc/kubernetes`` (certificates, kubeconfigs, static pod manifests) and etcd its data
  where they would be on a host, and clusterctl's own ``kubectl --kubeconfig
  /etc/kubernetes/admin.conf`` lines work unchanged.

The steps are kubeadm's: ``init phase certs``, ``kubeconfig``, ``etcd local`` and
``control-plane`` with clusterctl's init configuration; then etcd, kube-apiserver,
kube-controller-manager and kube-scheduler start as plain processes with exactly the command
lines of the static pod manifests kubeadm wrote (no kubelet is needed); then kubeadm's API phases
(``upload-config``, ``upload-certs``, ``mark-control-plane``, ``bootstrap-token``, ``addon``).
kwok keeps fake nodes Ready. ``stop`` ends every process; the namespace and its mounts go with them.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import signal
import subprocess
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from clusterctl.inventory.model import Host
from clusterctl.transport.base import CommandResult, RunRequest
from clusterctl.transport.local import LocalTransport

ADDRESS = "10.0.0.11"
COMPONENTS = ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler")

SETUP = """set -e
ip link set lo up
ip addr add {address}/32 dev lo
# A default route, as a host has: kubeadm picks the API address from it where a config names none.
ip route add default dev lo src {address}
for dir in etc var-lib; do mkdir -p {folder}/$dir-upper {folder}/$dir-work; done
mount -t overlay overlay -o lowerdir=/etc,upperdir={folder}/etc-upper,workdir={folder}/etc-work /etc
mount -t overlay overlay -o lowerdir=/var/lib,upperdir={folder}/var-lib-upper,workdir={folder}/var-lib-work /var/lib
echo $$ > {folder}/holder.pid
exec sleep {lifetime}
"""


class ControlPlaneError(RuntimeError):
    pass


@dataclass
class ControlPlane:
    folder: Path
    #: Program name -> built binary (kubeadm, etcd, kube-*, kubectl, kwok).
    tools: dict[str, Path]
    #: clusterctl's init configuration (with the run's token and certificate key), as kubeadm reads it.
    init_config: str
    lifetime_s: int = 1800
    processes: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)
    holder: subprocess.Popen[bytes] | None = None
    pid: int = 0

    # -- the namespace ----------------------------------------------------------------------

    @property
    def bin(self) -> Path:
        return self.folder / "bin"

    def enter(self, argv: list[str]) -> list[str]:
        """``argv`` run inside the namespace, with the tools first on PATH and a private HOME."""
        path = f"{self.bin}:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
        return ["nsenter", f"--target={self.pid}", "--net", "--mount", "--", "env", f"PATH={path}",
                f"HOME={self.folder / 'home'}", *argv]

    def sh(self, line: str, *, stdin: bytes | None = None, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        return subprocess.run(self.enter(["sh", "-c", line]), input=stdin.decode() if stdin else None,
                              capture_output=True, text=True, timeout=timeout)

    def must(self, line: str, *, stdin: bytes | None = None, timeout: float = 120) -> str:
        done = self.sh(line, stdin=stdin, timeout=timeout)
        if done.returncode != 0:
            raise ControlPlaneError(f"{line}: exit {done.returncode}: {done.stderr.strip()[-2000:]}")
        return done.stdout

    def host_path(self, path: str) -> Path:
        """Where a file kubeadm wrote under /etc or /var/lib inside the namespace lies in the folder."""
        for prefix, upper in (("/etc/", "etc-upper"), ("/var/lib/", "var-lib-upper")):
            if path.startswith(prefix):
                return self.folder / upper / path[len(prefix):]
        raise ValueError(path)

    # -- start and stop ---------------------------------------------------------------------

    def start(self, deadline_s: float = 240) -> None:
        deadline = time.monotonic() + deadline_s
        self.bin.mkdir(parents=True, exist_ok=True)
        (self.folder / "home").mkdir(exist_ok=True)
        (self.folder / "logs").mkdir(exist_ok=True)
        for name, path in self.tools.items():
            link = self.bin / name
            if not link.exists():
                link.symlink_to(path)
        script = SETUP.format(address=ADDRESS, folder=self.folder, lifetime=self.lifetime_s)
        self.holder = subprocess.Popen(["unshare", "--net", "--mount", "--fork", "--", "sh", "-c", script],
                                       stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                       stderr=(self.folder / "logs" / "holder.log").open("wb"),
                                       start_new_session=True)
        pid_file = self.folder / "holder.pid"
        while not pid_file.exists() or not pid_file.read_text().strip():
            if self.holder.poll() is not None:
                raise ControlPlaneError("the namespace could not be set up: "
                                        + (self.folder / "logs" / "holder.log").read_text())
            if time.monotonic() > deadline:
                raise ControlPlaneError("the namespace was not ready in time")
            time.sleep(0.05)
        self.pid = int(pid_file.read_text())
        config = self.folder / "init.yaml"
        config.write_text(self.init_config)
        config.chmod(0o600)
        for phase in ("certs all", "kubeconfig all", "etcd local", "control-plane all"):
            self.must(f"kubeadm init phase {phase} --config {shlex.quote(str(config))}")
        for component in COMPONENTS:
            self._start_component(component)
        self.wait_ready(deadline)
        self.must(f"kubeadm init phase upload-config all --config {shlex.quote(str(config))}")
        self.must(f"kubeadm init phase upload-certs --upload-certs --skip-certificate-key-print "
                  f"--config {shlex.quote(str(config))}")
        self.must(f"kubeadm init phase bootstrap-token --config {shlex.quote(str(config))}")
        self.must(f"kubeadm init phase addon all --config {shlex.quote(str(config))}")

    def manifest_command(self, component: str) -> list[str]:
        """The command line of ``component``'s static pod, as kubeadm wrote it."""
        import yaml

        manifest = yaml.safe_load(self.host_path(f"/etc/kubernetes/manifests/{component}.yaml").read_text())
        container = manifest["spec"]["containers"][0]
        return [*container.get("command", []), *container.get("args", [])]

    def _start_component(self, component: str) -> None:
        argv = self.manifest_command(component)
        argv[0] = str(self.tools[component])
        log = (self.folder / "logs" / f"{component}.log").open("wb")
        self.processes[component] = subprocess.Popen(self.enter(argv), stdin=subprocess.DEVNULL, stdout=log,
                                                     stderr=subprocess.STDOUT, start_new_session=True)

    def start_process(self, name: str, argv: list[str]) -> None:
        log = (self.folder / "logs" / f"{name}.log").open("wb")
        self.processes[name] = subprocess.Popen(self.enter(argv), stdin=subprocess.DEVNULL, stdout=log,
                                                stderr=subprocess.STDOUT, start_new_session=True)

    def wait_ready(self, deadline: float) -> None:
        while time.monotonic() < deadline:
            for name, process in self.processes.items():
                if process.poll() is not None:
                    raise ControlPlaneError(f"{name} exited ({process.returncode}): {self.log_tail(name)}")
            done = self.sh("kubectl --kubeconfig /etc/kubernetes/admin.conf get --raw /readyz", timeout=30)
            if done.returncode == 0 and done.stdout.strip() == "ok":
                return
            time.sleep(1)
        raise ControlPlaneError(f"the API server was not ready in time: {self.log_tail('kube-apiserver')}")

    def log_tail(self, name: str, lines: int = 12) -> str:
        path = self.folder / "logs" / f"{name}.log"
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:]) if path.exists() else ""

    def stop(self, grace_s: float = 3.0) -> None:
        """SIGTERM to everything, SIGKILL to what is still there after ``grace_s``. Nothing of it outlives
        the test (a private namespace, a temporary folder), and kube-apiserver's graceful shutdown alone
        waits more than 20 s: a longer grace only made every session slower."""
        everything = [*self.processes.values(), *([self.holder] if self.holder else [])]
        for process in everything:
            if process.poll() is None:
                try:
                    os.killpg(process.pid, signal.SIGTERM)
                except ProcessLookupError:
                    continue
        deadline = time.monotonic() + grace_s
        for process in everything:
            try:
                process.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGKILL)
                process.wait(timeout=10)

    # -- clients ----------------------------------------------------------------------------

    def kubectl(self, args: str, *, stdin: bytes | None = None) -> subprocess.CompletedProcess[str]:
        return self.sh(f"kubectl --kubeconfig /etc/kubernetes/admin.conf {args}", stdin=stdin)

    def transport(self, host: Host) -> NamespaceTransport:
        return NamespaceTransport(host, self)


class NamespaceTransport(LocalTransport):
    """clusterctl's local transport, with every command run inside the control plane's namespace:
    clusterctl's own command lines (``kubectl --kubeconfig /etc/kubernetes/admin.conf ...``) reach
    the real API server unchanged."""

    def __init__(self, host: Host, plane: ControlPlane) -> None:
        super().__init__(host)
        self.plane = plane

    def execute(self, request: RunRequest) -> CommandResult:
        wrapped = " ".join(shlex.quote(a) for a in self.plane.enter(["sh", "-c", request.command]))
        result = super().execute(replace(request, command=wrapped))
        return replace(result, command=request.command)


def kwok_node(name: str, labels: dict[str, str], gpus: int, *, control_plane: bool,
              kubelet_version: str = "fake") -> dict[str, Any]:
    """A Node kwok keeps Ready, carrying what the device plugin and the kubelet would have set
    (``kubelet_version``: what ``kubectl get nodes`` shows as VERSION, as upgrade reads it)."""
    capacity = {"cpu": "128", "memory": "2Ti", "pods": "110", "nvidia.com/gpu": str(gpus)}
    node_labels = {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64",
                   "type": "kwok", **labels}
    if control_plane:
        node_labels["node-role.kubernetes.io/control-plane"] = ""
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": node_labels,
                         "annotations": {"kwok.x-k8s.io/node": "fake",
                                         "node.alpha.kubernetes.io/ttl": "0"}},
            "spec": {},
            "status": {"capacity": capacity, "allocatable": capacity,
                       "nodeInfo": {"kubeletVersion": kubelet_version, "architecture": "amd64",
                                    "operatingSystem": "linux"}}}
