"""The containerd phase against a REAL containerd daemon (Debian's 1.6), through the local transport.

The daemon runs with its own root, state and socket under a temporary folder; "restart" is a
small script that behaves like ``systemctl restart containerd`` (stop, start, wait until it
answers, fail when it does not come up). Skipped where containerd/ctr are missing or the
tests do not run as root.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from clusterctl.bootstrap.phases.containerd import Containerd
from clusterctl.bootstrap.run import run_bootstrap
from clusterctl.bootstrap.run_data import ContainerdPaths, RunOptions
from clusterctl.engine.run import RunSettings, Status
from clusterctl.fanout import Runner
from clusterctl.inventory.model import Host, Inventory, StackPin
from clusterctl.transport.local import LocalTransport

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "containerd"

pytestmark = pytest.mark.skipif(
    shutil.which("containerd") is None or shutil.which("ctr") is None or os.geteuid() != 0,
    reason="needs root and Debian's containerd package (containerd, ctr)",
)

RESTART = """#!/bin/sh
# Like 'systemctl restart containerd': stop, start, wait until it answers; fail if it does not.
D={d}
if [ -f $D/pid ]; then
  kill $(cat $D/pid) 2>/dev/null
  for i in $(seq 1 20); do kill -0 $(cat $D/pid) 2>/dev/null || break; sleep 0.1; done
  kill -9 $(cat $D/pid) 2>/dev/null
fi
containerd --config $D/etc/config.toml > $D/daemon.log 2>&1 &
echo $! > $D/pid
for i in $(seq 1 100); do
  # An exited daemon stays a zombie child of this script: look at its state, not just its PID.
  grep -qs '^State:[[:space:]]*[RSD]' /proc/$(cat $D/pid)/status || {{
    # Its fatal line, not its last: a plugin may still log ("Start streaming server", "Start
    # recovering state") after the failure. containerd 1.6 ends on its CLI's own error line
    # ("containerd: failed to get listener ..."), later ones on a level=fatal line.
    line=$(grep -E 'level=fatal|^containerd: ' $D/daemon.log | tail -n 1)
    [ -n "$line" ] || line=$(tail -n 1 $D/daemon.log)
    echo "containerd exited: $line" >&2; exit 1; }}
  ctr --address $D/ctd.sock --connect-timeout 1s version >/dev/null 2>&1 && exit 0
  sleep 0.1
done
echo "containerd did not answer" >&2
exit 1
"""


class Daemon:
    def __init__(self, base: Path) -> None:
        self.base = base
        (base / "etc" / "conf.d").mkdir(parents=True)
        self.config = base / "etc" / "config.toml"
        self.restart = base / "restart.sh"
        self.restart.write_text(RESTART.format(d=base))
        self.restart.chmod(0o755)
        self.local_paths = (f'root = "{base}/root"\nstate = "{base}/state"\n[grpc]\n  address = "{base}/ctd.sock"\n')

    def start(self, config: str) -> None:
        self.config.write_text(config)
        subprocess.run([str(self.restart)], check=True, timeout=30)

    def answers(self) -> bool:
        done = subprocess.run(["ctr", "--address", f"{self.base}/ctd.sock", "plugins", "ls"], capture_output=True,
                              text=True, timeout=20)
        return done.returncode == 0 and any(line.split()[:2] == ["io.containerd.grpc.v1", "cri"] and
                                            line.split()[-1] == "ok" for line in done.stdout.splitlines())

    def stop(self) -> None:
        pid_file = self.base / "pid"
        if pid_file.exists():
            subprocess.run(["sh", "-c", f"kill $(cat {pid_file}) 2>/dev/null; sleep 0.3"], timeout=10)

    def paths(self) -> ContainerdPaths:
        return ContainerdPaths(config=str(self.config), dropin_dir=f"{self.base}/etc/conf.d",
                               certs_dir=f"{self.base}/etc/certs.d", restart=str(self.restart),
                               ctr=f"ctr --address {self.base}/ctd.sock", wait_s=10.0)


@pytest.fixture
def daemon(tmp_path: Path) -> Iterator[Daemon]:
    d = Daemon(tmp_path)
    try:
        yield d
    finally:
        d.stop()


def run_phase(daemon: Daemon) -> object:
    host = Host(name="node", transport="local", stack=StackPin(kubernetes="1.36.2", containerd="1.6.20"))
    inventory = Inventory(name="lab", hosts=(host,))
    with Runner(lambda h, _t: LocalTransport(h), parallel=1, timeout_s=120) as runner:
        return run_bootstrap(inventory, (host,), runner, [Containerd()],
                             RunSettings(apply=True, options=RunOptions(containerd=daemon.paths()),
                                         lock_path=f"{daemon.base}/lock"))


def test_apply_keeps_the_nvidia_runtime_nvidia_ctk_wrote_and_a_rerun_changes_nothing(daemon: Daemon) -> None:
    daemon.start(daemon.local_paths + (FIXTURES / "config-nvidia-ctk-set-as-default-v2.toml").read_text()
                 .replace("version = 2\n", "", 1).replace("[plugins]\n", "", 1))
    first = run_phase(daemon)
    assert first.ok, first.failed_hosts  # type: ignore[attr-defined]
    written = daemon.config.read_text()
    assert "version = 2" in written and 'imports = ["' in written
    assert '[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia]' in written
    assert "privileged_without_host_devices = false" in written  # nvidia-ctk's own keys kept
    assert 'sandbox_image = "registry.k8s.io/pause:3.10.2"' in written  # kubeadm 1.36's pause (no kubeadm here)
    assert f'address = "{daemon.base}/ctd.sock"' in written  # the host's own settings kept
    assert daemon.answers()
    second = run_phase(daemon)
    assert second.ok and not second.changed  # type: ignore[attr-defined]
    assert [r.status for r in second.results] == [Status.OK]  # type: ignore[attr-defined]


def test_rollback_when_containerd_does_not_start_with_the_new_config(daemon: Daemon) -> None:
    """The old root had no ``imports`` line (as after a Kubespray re-run), so a leftover drop-in lay
    dormant; the new config imports it, containerd cannot bind its metrics port and exits. The
    phase restores the backup, restarts containerd again and reports both."""
    holder = socket.socket()
    holder.bind(("127.0.0.1", 0))
    holder.listen(1)
    port = holder.getsockname()[1]
    try:
        (daemon.base / "etc" / "conf.d" / "50-metrics.toml").write_text(
            f'version = 2\n[metrics]\n  address = "127.0.0.1:{port}"\n')
        original = (daemon.local_paths +
                    '[plugins."io.containerd.grpc.v1.cri"]\n  sandbox_image = "registry.k8s.io/pause:3.9"\n')
        daemon.start(original)
        report = run_phase(daemon)
    finally:
        holder.close()
    assert not report.ok  # type: ignore[attr-defined]
    (result,) = report.results  # type: ignore[attr-defined]
    assert result.status is Status.FAILED
    assert "restart containerd: exit 1" in result.message and "address already in use" in result.message
    assert any(line.startswith(f"restored {daemon.config} from ") for line in result.rollback)
    assert "restart containerd with the previous config: done" in result.rollback
    assert result.rollback[-1] == "after the rollback, verify passes again"  # containerd answers, CRI ok
    assert daemon.config.read_text() == original
    assert daemon.answers()
