"""Isolated sshd mock hosts: private /etc, /var/lib, /opt, /run and hostname; a real containerd.

Each host runs in its own mount and UTS namespaces (``unshare``), so what clusterctl writes over
real SSH lands in that host's tree only, and the simulated ``systemctl`` starts a real
containerd with the config that was written. Skipped, with the reason, where unshare is not
permitted or containerd is not installed.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from sshd_hosts import SSHDHosts, descendants

from clusterctl.inventory.model import Host, SSHOptions
from clusterctl.transport.ssh import SSHTransport

pytestmark = pytest.mark.sshd

PROFILE = """\
simulate: true
commands:
  - match: "nvidia-smi -L"
    stdout_text: "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-1)\\n"
"""


def _profile(tmp_path: Path) -> Path:
    folder = tmp_path / "profile"
    folder.mkdir()
    (folder / "profile.yaml").write_text(PROFILE)
    return folder


def _connect(farm: SSHDHosts, host: object, known: Path, tmp_path: Path) -> SSHTransport:
    config = tmp_path / "ssh_config"
    config.write_text("")
    h = host  # an SSHDHost
    return SSHTransport(
        Host(name=h.name, address=h.address, port=h.port, user=farm.user,  # type: ignore[attr-defined]
             ssh=SSHOptions(key_file=str(farm.client_key))),
        known_hosts_path=str(known), ssh_config_path=str(config),
    )


@pytest.mark.usefixtures("needs_isolation")
def test_files_land_in_each_hosts_own_tree_and_hostname_is_its_own(sshd_hosts: SSHDHosts, tmp_path: Path) -> None:
    a, b = sshd_hosts(2, profile=_profile(tmp_path), names=["iso-a", "iso-b"], isolated=True)
    known = sshd_hosts.write_known_hosts(tmp_path / "kh", [a, b])
    marker = "/etc/clusterctl-isolation-check.conf"
    assert not Path(marker).exists()
    with _connect(sshd_hosts, a, known, tmp_path) as ta, _connect(sshd_hosts, b, known, tmp_path) as tb:
        assert ta.run("hostname").stdout == "iso-a\n"
        assert tb.run("hostname").stdout == "iso-b\n"
        assert ta.put(marker, b"written on iso-a\n").changed
        # The shell over SSH, get() and the host's tree agree; nothing reached the other host
        # or this machine's own /etc.
        assert ta.run(f"cat {marker}").stdout == "written on iso-a\n"
        assert ta.get(marker) == b"written on iso-a\n"
        assert (a.tree / marker.lstrip("/")).read_bytes() == b"written on iso-a\n"
        assert tb.get(marker) is None
        assert not (b.tree / marker.lstrip("/")).exists()
        assert not Path(marker).exists()
        # Simulated tools write the same tree the real shell reads.
        ta.run("echo 'vm.swappiness = 10' > /etc/sysctl.d/60-test.conf")
        assert "* Applying /etc/sysctl.d/60-test.conf ...\nvm.swappiness = 10\n" in ta.run("sysctl --system").stdout
        assert ta.run("nvidia-smi -L").stdout.startswith("GPU 0: NVIDIA H100")


@pytest.mark.usefixtures("needs_containerd")
def test_real_containerd_starts_with_a_good_config_and_fails_with_a_broken_one(
    sshd_hosts: SSHDHosts, tmp_path: Path
) -> None:
    (host,) = sshd_hosts(1, profile=_profile(tmp_path), names=["ctrd"], containerd=True)
    known = sshd_hosts.write_known_hosts(tmp_path / "kh", [host])
    with _connect(sshd_hosts, host, known, tmp_path) as t:
        assert t.run("systemctl is-active containerd").stdout == "inactive\n"
        started = t.run("systemctl restart containerd", timeout=30)
        assert started.ok, started.stderr + host.state.folder.joinpath("containerd.log").read_text()
        assert t.run("systemctl is-active containerd").stdout == "active\n"
        version = t.run("ctr version", timeout=20)
        assert version.ok and "Server:" in version.stdout, version.stderr
        # The daemon's socket, root and state are the host's private ones.
        assert (host.tree / "run/containerd/containerd.sock").exists()
        assert not Path("/run/containerd/containerd.sock").exists()
        good = t.get("/etc/containerd/config.toml")
        assert good is not None
        t.put("/etc/containerd/config.toml", b"version = 2\n[plugins\n")
        broken = t.run("systemctl restart containerd", timeout=30)
        assert broken.exit_code == 1
        assert broken.stderr.startswith("Job for containerd.service failed because the control process exited")
        assert t.run("systemctl is-active containerd").stdout == "failed\n"
        t.put("/etc/containerd/config.toml", good)
        assert t.run("systemctl restart containerd", timeout=30).ok
        pids = host.daemon_pids()
        assert pids
    sshd = host.pid
    children = descendants(sshd)
    sshd_hosts.stop_all()
    # A killed process takes a moment to go; none may outlive that.
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and any(_running(p) for p in [sshd, *children, *pids]):
        time.sleep(0.1)
    for pid in [sshd, *children, *pids]:
        assert not _running(pid), f"process {pid} ({_cmdline(pid)}) still runs after teardown"


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def _running(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"
