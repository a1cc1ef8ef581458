#!/usr/bin/env python3
"""Real nodes on one machine: Linux namespaces, each running a real ``sshd``, reached over SSH.

A node is a set of private namespaces (mount, UTS, network, IPC, PID, cgroup) whose first
process is a real systemd (the host's own, ``--unit=clusterctl-node.target``), which starts the
node's OpenSSH ``sshd`` and D-Bus: clusterctl reaches it exactly as it reaches a machine, and
``systemctl`` in it is systemd's own. Inside a node:

* ``/etc``, ``/usr``, ``/var``, ``/opt``, ``/root`` and ``/home`` are overlays of the host's
  folders with a per-node upper folder, so anything the node installs or writes (apt, kubeadm,
  containerd's state) lands in ``<state>/<node>/upper`` and never on the host; ``/run`` is a
  tmpfs; ``/tmp`` a per-node folder; ``/dev`` a tmpfs with the few host devices a machine's
  daemons use; ``/proc`` and a read-only ``/sys`` are the node's own; ``/sys/fs/cgroup`` holds
  the node's cgroup namespace (its root is the node's cgroup);
* the host-global sysctls kubelet and systemd rewrite (``vm.overcommit_memory``,
  ``kernel.panic``, ``fs.nr_open`` ...) are masked by files holding the host's values,
  bind-mounted over ``/proc/sys`` in the node's mount namespace only: the host's values never
  change; systemd units that would change the host (sysctl, binfmt, time sync, udev, module
  loading) are masked in the node's ``/etc``;
* ``eth0`` is one end of a veth pair whose other end is on a bridge in the "control"
  namespace, a network namespace of its own (``10.250.0.254``) where clusterctl runs
  (``RealNodes.clusterctl``): the host's own network is never touched;
* every process of a node (sshd, what SSH sessions start, their children, containers) lives
  in the cgroup ``/clusterctl-realnodes/<node>`` of every hierarchy (the node's cgroup root for
  kubelet).

Tear-down kills every process in ``/clusterctl-realnodes`` (frozen first, so nothing forks
meanwhile) and removes the cgroups; the namespaces, and every mount made in them, go with their
last process. It runs at the end of the tier, from ``down``, at the start of the next ``up``,
and from a watcher process (``reap``) that outlives a killed test run: nothing is left on the
host after an interrupt, a failed test or a ``kill -9``. One set of nodes per machine at a time
(a lock file).

Usage: ``nodes.py up [--nodes 2]`` (prints the inventory path; nodes stay up), ``nodes.py down``,
``nodes.py status``.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import contextlib
import fcntl
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

HERE = Path(__file__).resolve().parent
REPO_ROOT = HERE.parents[1]
STATE_ROOT = Path(os.environ.get("CLUSTERCTL_REALNODES_STATE", "/tmp/clusterctl-realnodes"))
LOCK_FILE = STATE_ROOT.with_name(STATE_ROOT.name + ".lock")
CGROUP_NAME = "clusterctl-realnodes"
SSHD = Path("/usr/sbin/sshd")
#: The nodes' network: private to the control namespace and the nodes, never on the host.
SUBNET_PREFIX = "10.250.0."
CONTROL_ADDRESS = SUBNET_PREFIX + "254"
BRIDGE = "rn0"
#: Host folders each node sees through an overlay with a private upper folder.
OVERLAID = ("etc", "usr", "var", "opt", "root", "home")
#: Host-global sysctls (not per network namespace) that kubelet writes when they differ from
#: what it wants (container_manager_linux.go setupKernelTunables): masked in every node.
MASKED_SYSCTLS = ("vm/overcommit_memory", "vm/panic_on_oom", "kernel/panic", "kernel/panic_on_oops",
                  "kernel/keys/root_maxkeys", "kernel/keys/root_maxbytes",
                  # systemd as PID 1 raises these (bump_file_max_and_nr_open, pid_max)
                  "fs/file-max", "fs/nr_open", "kernel/pid_max")
SYSTEMD = Path("/lib/systemd/systemd")
#: Units of the host's systemd that would change the host from inside a node (host-global
#: sysctls, binfmt_misc, the clock, devices, kernel modules) or that a node has no use for.
MASKED_UNITS = ("systemd-sysctl.service", "systemd-binfmt.service", "proc-sys-fs-binfmt_misc.automount",
                "proc-sys-fs-binfmt_misc.mount", "systemd-timesyncd.service", "systemd-pstore.service",
                "systemd-modules-load.service", "kmod-static-nodes.service", "systemd-random-seed.service",
                "systemd-repart.service", "systemd-firstboot.service", "systemd-machine-id-commit.service",
                "systemd-pcrphase.service", "systemd-pcrphase-sysinit.service", "sys-kernel-config.mount",
                "sys-kernel-debug.mount", "sys-kernel-tracing.mount", "sys-fs-fuse-connections.mount",
                "systemd-udevd.service", "systemd-udev-trigger.service", "systemd-hwdb-update.service",
                "systemd-journald-audit.socket", "systemd-remount-fs.service", "dev-hugepages.mount")
#: Folders a node keeps on a plain file system of its own (bind mounts over its overlaid /var):
#: containerd's overlayfs snapshots cannot have an overlay as their upper folder.
DATA_DIRS = ("var/lib/containerd", "var/lib/kubelet", "var/lib/etcd")
#: Packages of the host that a fresh machine would not have and that clash with what a node
#: installs (the host's google-cloud-cli kubectl, Debian's containerd 1.6).
HOST_PACKAGES_REMOVED = ("kubectl", "containerd")
#: This machine's root may lack CAP_SYS_RESOURCE (a sandboxed VM): runc then cannot give a
#: container an oom_score_adj below its own, and every pod fails with "can't get final child's
#: PID from pipe: EOF". The site's containerd drop-in that a machine like this needs (clusterctl
#: keeps drop-ins under /etc/containerd/conf.d and checks them against its own config).
CONTAINERD_DROPIN = "/etc/containerd/conf.d/90-realnodes-oom.toml"
CONTAINERD_DROPIN_TEXT = ("# This machine's root lacks CAP_SYS_RESOURCE: containers may not lower oom_score_adj.\n"
                          "version = 4\n[plugins.\"io.containerd.cri.v1.runtime\"]\n  restrict_oom_score_adj = true\n")
CAP_SYS_RESOURCE = 24
#: Host devices a node gets (bind-mounted into its private /dev).
DEVICES = ("null", "zero", "full", "random", "urandom", "tty", "kmsg")
#: Inside a node: where the harness keeps the node's sshd files (on the node's /etc overlay).
NODE_SSH_DIR = "/etc/ssh/clusterctl-realnode"
NODE_TARGET = "clusterctl-node.target"
START_WAIT_S = 60.0


class NodesUnavailable(RuntimeError):
    """This machine cannot host namespaced nodes (the reason says which capability is missing)."""


# -- the machine --------------------------------------------------------------------------


def unavailable_reason() -> str | None:
    """Why nodes cannot run here (exact error), or None when they can."""
    if os.geteuid() != 0:
        return "real nodes need root (mount, network namespaces, cgroups)"
    if not SSHD.exists():
        return f"{SSHD} is missing (Debian package openssh-server)"
    if not SYSTEMD.exists():
        return f"{SYSTEMD} is missing (Debian package systemd)"
    for tool in ("unshare", "nsenter", "ip"):
        if shutil.which(tool) is None:
            return f"{tool} is missing (util-linux / iproute2)"
    if not cgroup_hierarchies():
        return "no cgroup file system is mounted under /sys/fs/cgroup"
    probe = subprocess.run(
        ["unshare", "--mount", "--uts", "--net", "--ipc", "--pid", "--fork", "--cgroup", "--propagation", "private",
         "sh", "-ec",
         "mount -t tmpfs tmpfs /mnt; mkdir /mnt/l /mnt/u /mnt/w /mnt/m; "
         "mount -t overlay overlay -o lowerdir=/mnt/l,upperdir=/mnt/u,workdir=/mnt/w /mnt/m; "
         "ip link add rnprobe0 type veth peer name rnprobe1; ip link add rnprobe2 type bridge; "
         "mount -t proc proc /proc; mount -t sysfs -o ro sysfs /sys"],
        capture_output=True, text=True, timeout=30, check=False)
    if probe.returncode != 0:
        return f"namespaces, overlayfs, veth or bridge not permitted here: {probe.stderr.strip()}"
    return None


def lacks_cap_sys_resource() -> bool:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("CapEff:"):
            return not int(line.split()[1], 16) & (1 << CAP_SYS_RESOURCE)
    return False


def cgroup_hierarchies() -> list[Path]:
    """Mount points of every cgroup hierarchy (v1 controllers, name=systemd, the v2 one)."""
    found: list[Path] = []
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/mountinfo").read_text().splitlines():
            before, _, after = line.partition(" - ")
            fstype = after.split()[0] if after else ""
            if fstype in ("cgroup", "cgroup2"):
                mount_point = Path(before.split()[4])
                if mount_point not in found:
                    found.append(mount_point)
    return found


def cgroup_mounts() -> list[tuple[Path, str, str]]:
    """(mount point, type, controllers) of every cgroup hierarchy, to mount the same in a node."""
    found: list[tuple[Path, str, str]] = []
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/mountinfo").read_text().splitlines():
            before, _, after = line.partition(" - ")
            fields = after.split()
            if fields and fields[0] in ("cgroup", "cgroup2"):
                options = ",".join(o for o in fields[2].split(",") if o not in ("rw", "ro")) if len(fields) > 2 else ""
                found.append((Path(before.split()[4]), fields[0], options))
    return found


def _cgroup_dirs(name: str = "") -> list[Path]:
    return [h / CGROUP_NAME / name if name else h / CGROUP_NAME for h in cgroup_hierarchies()]


def _make_cgroup(node: str) -> None:
    for hierarchy in cgroup_hierarchies():
        parent = hierarchy / CGROUP_NAME
        for folder in (parent, parent / node):
            folder.mkdir(exist_ok=True)
            # A v1 cpuset cgroup starts with no CPUs and no memory nodes: nothing could join it.
            for knob in ("cpuset.cpus", "cpuset.mems"):
                if (folder / knob).exists() and not (folder / knob).read_text().strip():
                    (folder / knob).write_text((folder.parent / knob).read_text())


def _pids_in(folder: Path) -> set[int]:
    pids: set[int] = set()
    for dirpath, _dirs, files in os.walk(folder):
        if "cgroup.procs" in files:
            with contextlib.suppress(OSError):
                pids.update(int(p) for p in (Path(dirpath) / "cgroup.procs").read_text().split())
    return pids


def _freeze(frozen: bool) -> None:
    for folder in _cgroup_dirs():
        for knob, value in (("freezer.state", "FROZEN" if frozen else "THAWED"),
                            ("cgroup.freeze", "1" if frozen else "0")):
            if (folder / knob).exists():
                with contextlib.suppress(OSError):
                    (folder / knob).write_text(value)


def kill_everything(timeout_s: float = 60.0) -> None:
    """SIGKILL every process in the tier's cgroups (frozen first), then remove the cgroups."""
    deadline = time.monotonic() + timeout_s
    while True:
        pids: set[int] = set()
        for folder in _cgroup_dirs():
            pids |= _pids_in(folder)
        pids.discard(os.getpid())
        if not pids:
            break
        if time.monotonic() > deadline:
            raise RuntimeError(f"processes of the real nodes would not die: {sorted(pids)}")
        _freeze(True)
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        _freeze(False)
        _reap_children()
        time.sleep(0.1)
    for folder in _cgroup_dirs():
        _remove_tree(folder, deadline)


def _reap_children() -> None:
    with contextlib.suppress(ChildProcessError):
        while os.waitpid(-1, os.WNOHANG)[0] > 0:
            pass


def _remove_tree(folder: Path, deadline: float) -> None:
    if not folder.is_dir():
        return
    for dirpath, _dirs, _files in sorted(os.walk(folder), key=lambda entry: -len(entry[0])):
        while True:
            try:
                os.rmdir(dirpath)
                break
            except FileNotFoundError:
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)


# -- nodes --------------------------------------------------------------------------------


@dataclass
class Node:
    name: str
    number: int
    folder: Path
    pid: int = 0
    host_pubkey: str = ""

    @property
    def address(self) -> str:
        return f"{SUBNET_PREFIX}{self.number}"

    def upper(self, path: str) -> Path:
        """Where a node path of an overlaid folder lives on the host while the node runs."""
        relative = path.lstrip("/")
        return self.folder / "upper" / relative

    def argv(self, command: Sequence[str]) -> list[str]:
        """Run ``command`` inside the node's namespaces (and, as a child of this process, in the
        host's cgroup: use ``sh`` for what must stay in the node, see ``RealNodes.sh``)."""
        return ["nsenter", "-t", str(self.pid), "-m", "-u", "-n", "-i", "-p", "-C", "--", *command]


@dataclass
class RealNodes:
    """Up to 200 namespaced nodes and their control namespace. ``with RealNodes(2) as nodes:``."""

    count: int = 2
    root: Path = STATE_ROOT
    names: Sequence[str] = ()
    nodes: list[Node] = field(default_factory=list)
    control_pid: int = 0
    _lock: IO[str] | None = field(default=None, repr=False)
    _processes: list[subprocess.Popen[bytes]] = field(default_factory=list, repr=False)

    # -- paths --------------------------------------------------------------------------

    @property
    def client_key(self) -> Path:
        return self.root / "client_ed25519"

    @property
    def known_hosts(self) -> Path:
        return self.root / "known_hosts"

    @property
    def inventory(self) -> Path:
        return self.root / "inventory.yaml"

    @property
    def state_file(self) -> Path:
        return self.root / "state.json"

    # -- life cycle ---------------------------------------------------------------------

    def __enter__(self) -> RealNodes:
        self.up()
        return self

    def __exit__(self, *_exc: object) -> None:
        self.down()

    def up(self, *, watch_pid: int | None = None) -> None:
        reason = unavailable_reason()
        if reason:
            raise NodesUnavailable(reason)
        self._take_lock()
        try:
            sweep(self.root)
            self.root.mkdir(parents=True, exist_ok=True)
            # The reaper first: whatever happens from here on, it cleans up once this process is gone.
            self._start_reaper(watch_pid or os.getpid())
            self._client_key()
            names = list(self.names) or [f"rn{i}" for i in range(1, self.count + 1)]
            self.nodes = [Node(name, i, self.root / name) for i, name in enumerate(names, start=1)]
            self._start_control()
            for node in self.nodes:
                self._prepare(node)
                self._start(node)
                self._connect(node)
            self._write_state()
            for node in self.nodes:
                self._wait_for_sshd(node)
            self._write_client_files()
        except BaseException:
            self.down()
            raise

    def down(self) -> None:
        """Stop everything (by cgroup), remove the cgroups and the state folder."""
        try:
            kill_everything()
            for process in self._processes:
                with contextlib.suppress(subprocess.TimeoutExpired):
                    process.wait(timeout=5)
            self._processes.clear()
            _stop_reaper(self.root)
            shutil.rmtree(self.root, ignore_errors=True)
        finally:
            if self._lock is not None:
                self._lock.close()
                self._lock = None

    def _take_lock(self) -> None:
        LOCK_FILE.parent.mkdir(parents=True, exist_ok=True)
        handle = open(LOCK_FILE, "a+")  # noqa: SIM115 - held for the nodes' lifetime
        deadline = time.monotonic() + 600
        while True:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    handle.close()
                    raise RuntimeError(f"another set of real nodes holds {LOCK_FILE} (10 minutes)") from None
                time.sleep(1)
        self._lock = handle

    def _start_reaper(self, watch_pid: int) -> None:
        reaper = subprocess.Popen(
            [sys.executable, str(Path(__file__)), "reap", "--watch", str(watch_pid), "--state", str(self.root)],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        (self.root / "reaper.pid").write_text(f"{reaper.pid}\n")

    def _client_key(self) -> None:
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "clusterctl-realnodes",
                        "-f", str(self.client_key)], check=True, capture_output=True)

    def _spawn(self, node_name: str, script: str, log: Path, *, machine: bool = False) -> subprocess.Popen[bytes]:
        """``sh -c script`` in new namespaces (``machine``: PID and cgroup ones too, the script
        being PID 1), its first step joining the node's cgroups."""
        _make_cgroup(node_name)
        procs = " ".join(shlex.quote(str(d / "cgroup.procs")) for d in _cgroup_dirs(node_name))
        join = f"for f in {procs}; do echo $$ > \"$f\"; done"
        more = "--pid --fork --cgroup " if machine else ""
        with open(log, "ab") as out:
            process = subprocess.Popen(
                ["sh", "-ec", f"{join}; exec unshare --mount --uts --net --ipc {more}--propagation private "
                              f"sh -ec {shlex.quote(script)}"],
                stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        self._processes.append(process)
        return process

    def _start_control(self) -> None:
        script = (f"ip link set lo up; ip link add {BRIDGE} type bridge; "
                  f"ip addr add {CONTROL_ADDRESS}/24 dev {BRIDGE}; ip link set {BRIDGE} up; "
                  "exec sleep infinity")
        process = self._spawn("control", script, self.root / "control.log")
        self.control_pid = _namespaced_pid(process, self.root / "control.log")

    def _prepare(self, node: Node) -> None:
        for sub in OVERLAID:
            (node.folder / "upper" / sub).mkdir(parents=True, exist_ok=True)
            (node.folder / "work" / sub).mkdir(parents=True, exist_ok=True)
        (node.folder / "tmp").mkdir(parents=True, exist_ok=True)
        (node.folder / "tmp").chmod(0o1777)
        for data in DATA_DIRS:
            (node.folder / "data" / data).mkdir(parents=True, exist_ok=True)
            node.upper(data).mkdir(parents=True, exist_ok=True)
        etc = node.folder / "upper" / "etc"
        (etc / "hostname").write_text(node.name + "\n")
        hosts = ["127.0.0.1 localhost", f"{CONTROL_ADDRESS} control"]
        hosts += [f"{n.address} {n.name}" for n in self.nodes]
        (etc / "hosts").write_text("\n".join(hosts) + "\n")
        ssh_dir = node.upper(NODE_SSH_DIR)
        ssh_dir.mkdir(parents=True, exist_ok=True)
        key = ssh_dir / "ssh_host_ed25519_key"
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", f"host-key-of-{node.name}",
                        "-f", str(key)], check=True, capture_output=True)
        node.host_pubkey = key.with_name(key.name + ".pub").read_text().strip()
        shutil.copyfile(self.client_key.with_name(self.client_key.name + ".pub"), ssh_dir / "authorized_keys")
        (ssh_dir / "sshd_config").write_text("\n".join([
            "Port 22",
            f"ListenAddress {node.address}",
            f"HostKey {NODE_SSH_DIR}/ssh_host_ed25519_key",
            f"AuthorizedKeysFile {NODE_SSH_DIR}/authorized_keys",
            "PidFile /run/sshd.pid",
            "PubkeyAuthentication yes",
            "PasswordAuthentication no",
            "KbdInteractiveAuthentication no",
            "PermitRootLogin prohibit-password",
            "UsePAM no",
            "UseDNS no",
            "PrintMotd no",
            "X11Forwarding no",
            "MaxStartups 200",
            "MaxSessions 100",
            "LogLevel ERROR",
            "Subsystem sftp internal-sftp",
        ]) + "\n")
        units = etc / "systemd" / "system"
        units.mkdir(parents=True, exist_ok=True)
        for unit in MASKED_UNITS:
            (units / unit).unlink(missing_ok=True)
            (units / unit).symlink_to("/dev/null")
        (units / NODE_TARGET).write_text(
            "[Unit]\nDescription=clusterctl real node\n"
            "Wants=clusterctl-realnode-sshd.service dbus.service\nAllowIsolate=yes\n")
        (units / "clusterctl-realnode-sshd.service").write_text(
            "[Unit]\nDescription=the node's OpenSSH server (clusterctl real nodes)\n"
            f"[Service]\nExecStart={SSHD} -D -e -f {NODE_SSH_DIR}/sshd_config\n"
            "KillMode=process\nRestart=on-failure\n")
        # A machine has one: journald, dbus and kubeadm read it.
        (etc / "machine-id").write_text(os.urandom(16).hex() + "\n")

    def _start(self, node: Node) -> None:
        mounts = [f"mount -t overlay clusterctl-realnode -o lowerdir=/{sub},"
                  f"upperdir={node.folder}/upper/{sub},workdir={node.folder}/work/{sub} /{sub}" for sub in OVERLAID]
        cgroups = []
        for mount_point, fstype, options in cgroup_mounts():
            if mount_point == Path("/sys/fs/cgroup"):
                cgroups.append(f"mount -t {fstype} {fstype} /sys/fs/cgroup")
            else:
                cgroups.append(f"mkdir -p {mount_point}; mount -t {fstype} "
                               f"{'-o ' + options + ' ' if options else ''}{fstype} {mount_point}")
        if cgroups and not any(fstype == "cgroup2" and point == Path("/sys/fs/cgroup")
                               for point, fstype, _ in cgroup_mounts()):
            cgroups.insert(0, "mount -t tmpfs -o mode=0755 clusterctl-realnode-cgroup /sys/fs/cgroup")
        devices = ["mount -t tmpfs -o mode=0755,nosuid clusterctl-realnode-dev /dev"]
        devices += [f"touch /dev/{d}; mount --bind /run/clusterctl-realnode/hostdev/{d} /dev/{d}" for d in DEVICES]
        devices += ["mkdir -p /dev/pts /dev/shm /dev/mqueue",
                    "mount -t devpts -o newinstance,ptmxmode=0666,mode=0620 devpts /dev/pts",
                    "ln -s pts/ptmx /dev/ptmx", "mount -t tmpfs -o mode=1777 shm /dev/shm",
                    "ln -s /proc/self/fd /dev/fd", "ln -s /proc/self/fd/0 /dev/stdin",
                    "ln -s /proc/self/fd/1 /dev/stdout", "ln -s /proc/self/fd/2 /dev/stderr"]
        masks = []
        for sysctl in MASKED_SYSCTLS:
            held = "/run/clusterctl-realnode/sysctl/" + sysctl.replace("/", ".")
            masks.append(f"cat /proc/sys/{sysctl} > {held}; mount --bind {held} /proc/sys/{sysctl}")
        script = "; ".join([
            *mounts,
            *[f"mount --bind {node.folder}/data/{data} /{data}" for data in DATA_DIRS],
            "mount -t tmpfs -o mode=0755 clusterctl-realnode-run /run",
            "mkdir -p /run/sshd /run/clusterctl-realnode/sysctl /run/clusterctl-realnode/hostdev",
            # The host's device nodes, reachable before /dev is replaced.
            *[f"touch /run/clusterctl-realnode/hostdev/{d}; mount --bind /dev/{d} "
              f"/run/clusterctl-realnode/hostdev/{d}" for d in DEVICES],
            "mount -t proc proc /proc",
            "mount -t sysfs -o ro sysfs /sys",
            *cgroups,
            *devices,
            *masks,
            f"mount --bind {node.folder}/tmp /tmp",
            f"hostname {node.name}",
            "ip link set lo up",
            # sshd listens on eth0's address, which the host adds once the namespaces exist.
            "n=0; until ip -o -4 addr show dev eth0 2>/dev/null | grep -q inet; do n=$((n+1)); "
            "[ $n -lt 1200 ] || { echo 'eth0 never got its address' >&2; exit 1; }; sleep 0.05; done",
            f"exec env container=clusterctl-realnode {SYSTEMD} --unit={NODE_TARGET} --log-target=console "
            "--log-level=warning",
        ])
        log = node.folder.with_name(node.name + ".log")
        process = self._spawn(node.name, script, log, machine=True)
        node.pid = _namespaced_pid(process, log, init=True)

    def _connect(self, node: Node) -> None:
        """A veth pair: eth0 in the node, rn-<node> on the control namespace's bridge."""
        peer = f"rnv{node.number}"
        control = ["nsenter", "-t", str(self.control_pid), "-n", "--"]
        _run([*control, "ip", "link", "add", peer, "type", "veth", "peer", "name", "eth0", "netns", str(node.pid)])
        _run([*control, "ip", "link", "set", peer, "master", BRIDGE, "up"])
        _run(["nsenter", "-t", str(node.pid), "-n", "--", "sh", "-ec",
              f"ip addr add {node.address}/24 dev eth0; ip link set eth0 up; "
              f"ip route add default via {CONTROL_ADDRESS}"])

    def _wait_for_sshd(self, node: Node) -> None:
        probe = (f"import socket,sys,time\nd=time.monotonic()+{START_WAIT_S}\n"
                 "while time.monotonic()<d:\n"
                 " try:\n"
                 f"  s=socket.create_connection(('{node.address}',22),2)\n"
                 "  sys.exit(0 if s.recv(4)==b'SSH-' else 1)\n"
                 " except OSError: time.sleep(0.1)\n"
                 "sys.exit(1)\n")
        result = subprocess.run(self.in_control([sys.executable, "-c", probe]), capture_output=True, check=False,
                                timeout=START_WAIT_S + 30)
        if result.returncode != 0:
            log = node.folder.with_name(node.name + ".log")
            raise RuntimeError(f"sshd of {node.name} did not answer on {node.address}:22; "
                               f"{log}: {log.read_text(errors='replace')[-2000:] if log.exists() else ''}")

    def _write_client_files(self) -> None:
        self.known_hosts.write_text("".join(f"{n.address} {' '.join(n.host_pubkey.split()[:2])}\n"
                                            for n in self.nodes))
        lines = ["cluster: realnodes", "hosts:"]
        for node in self.nodes:
            lines += [f"  {node.name}:", f"    address: {node.address}", "    port: 22", "    user: root",
                      "    transport: ssh", f"    ssh: {{key_file: {json.dumps(str(self.client_key))}}}"]
        self.inventory.write_text("\n".join(lines) + "\n")

    def _write_state(self) -> None:
        self.state_file.write_text(json.dumps({
            "control_pid": self.control_pid,
            "nodes": [{"name": n.name, "number": n.number, "pid": n.pid, "folder": str(n.folder)}
                      for n in self.nodes],
        }, indent=1))

    # -- using the nodes ------------------------------------------------------------------

    def node(self, name: str) -> Node:
        for node in self.nodes:
            if node.name == name:
                return node
        raise KeyError(name)

    def in_control(self, command: Sequence[str]) -> list[str]:
        """``command`` in the control namespace's network (the host's files, as a control machine)."""
        return ["nsenter", "-t", str(self.control_pid), "-n", "--", *command]

    def clusterctl(self, *args: str, timeout: float = 600, env: dict[str, str] | None = None,
                   stdin: str | None = None) -> subprocess.CompletedProcess[str]:
        """Run this checkout's clusterctl on the control namespace against the nodes' inventory."""
        command = [str(REPO_ROOT / ".venv" / "bin" / "clusterctl"), "-i", str(self.inventory),
                   "--known-hosts", str(self.known_hosts), *args]
        return subprocess.run(self.in_control(command), capture_output=True, text=True, timeout=timeout,
                              env={**os.environ, **(env or {})}, input=stdin, check=False)

    def sh(self, name: str, script: str, *, timeout: float = 120,
           check: bool = True) -> subprocess.CompletedProcess[str]:
        """A shell script inside a node, in the node's cgroup (so tear-down stops what it starts)."""
        node = self.node(name)
        procs = " ".join(shlex.quote(str(d / "cgroup.procs")) for d in _cgroup_dirs(node.name))
        join = f"for f in {procs}; do echo $$ > \"$f\"; done"
        inside = shlex.join(node.argv(["sh", "-c", script]))
        result = subprocess.run(["sh", "-c", f"{join}; exec {inside}"], capture_output=True, text=True,
                                timeout=timeout, check=False)
        if check and result.returncode != 0:
            raise RuntimeError(f"{name}: {script!r} exited {result.returncode}: {result.stderr[-2000:]}")
        return result

    def start_in_control(self, argv: Sequence[str], log: Path) -> subprocess.Popen[bytes]:
        """A daemon of the control machine (the site's mirror), in the control namespace's network
        and cgroup (tear-down stops it with everything else)."""
        procs = " ".join(shlex.quote(str(d / "cgroup.procs")) for d in _cgroup_dirs("control"))
        join = f"for f in {procs}; do echo $$ > \"$f\"; done"
        with open(log, "ab") as out:
            process = subprocess.Popen(
                ["sh", "-c", f"{join}; exec {shlex.join(self.in_control(list(argv)))}"],
                stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        self._processes.append(process)
        return process

    def install(self, debs: Sequence[Path]) -> None:
        """Make every node a fresh machine with these packages: the host's clashing packages
        purged, then ``dpkg -i`` (all nodes at once; the files land in each node's overlay)."""
        purge = " ".join(HOST_PACKAGES_REMOVED)
        # A node's /tmp is its own folder: packages kept under the host's /tmp (a tools cache
        # there, as CLUSTERCTL_TOOLS_CACHE may say) are not visible in the node, so each node gets
        # its own link (or copy) in its /tmp.
        for node in self.nodes:
            inbox = node.folder / "tmp" / "site-debs"
            inbox.mkdir(parents=True, exist_ok=True)
            for deb in debs:
                placed = inbox / deb.name
                placed.unlink(missing_ok=True)
                try:
                    os.link(deb, placed)
                except OSError:
                    shutil.copy2(deb, placed)
        script = (f"for p in {purge}; do dpkg -s $p >/dev/null 2>&1 && dpkg --purge --force-depends $p; done "
                  f">/dev/null 2>&1; dpkg -i {' '.join(shlex.quote('/tmp/site-debs/' + d.name) for d in debs)}"
                  " >/dev/null && systemctl daemon-reload")
        if lacks_cap_sys_resource():
            script += (f" && mkdir -p {CONTAINERD_DROPIN.rsplit('/', 1)[0]} && "
                       f"printf %s {shlex.quote(CONTAINERD_DROPIN_TEXT)} > {CONTAINERD_DROPIN}")
        with concurrent.futures.ThreadPoolExecutor(len(self.nodes)) as pool:
            for done in [pool.submit(self.sh, node.name, script, timeout=600) for node in self.nodes]:
                done.result()

    def write_site_cni(self) -> None:
        """The site's pod network (what a CNI add-on would write): a bridge with this node's
        podCIDR-sized slice of 10.244.0.0/16, and routes to the other nodes' slices."""
        for node in self.nodes:
            conflist = json.dumps({
                "cniVersion": "1.0.0", "name": "realnodes",
                "plugins": [{"type": "bridge", "bridge": "cni0", "isGateway": True, "ipMasq": False,
                             "hairpinMode": True,
                             "ipam": {"type": "host-local", "ranges": [[{"subnet": f"10.244.{node.number - 1}.0/24"}]],
                                      "routes": [{"dst": "0.0.0.0/0"}]}},
                            {"type": "portmap", "capabilities": {"portMappings": True}}]})
            routes = "; ".join(f"ip route replace 10.244.{other.number - 1}.0/24 via {other.address}"
                               for other in self.nodes if other is not node)
            self.sh(node.name, f"mkdir -p /etc/cni/net.d && printf %s {shlex.quote(conflist)} > "
                               f"/etc/cni/net.d/10-realnodes.conflist; sysctl -qw net.ipv4.ip_forward=1; {routes}")

    def processes(self) -> set[int]:
        pids: set[int] = set()
        for folder in _cgroup_dirs():
            pids |= _pids_in(folder)
        return pids


def _run(argv: Sequence[str]) -> None:
    result = subprocess.run(list(argv), capture_output=True, text=True, check=False, timeout=60)
    if result.returncode != 0:
        raise RuntimeError(f"{shlex.join(argv)} exited {result.returncode}: {result.stderr.strip()}")


def _namespaced_pid(process: subprocess.Popen[bytes], log: Path, *, init: bool = False) -> int:
    """The PID (host view) once ``unshare`` has made the new namespaces (``sh -ec`` -> unshare ->
    sh); ``init``: of the first process in the new PID namespace (unshare --fork's child)."""
    deadline = time.monotonic() + START_WAIT_S
    host_net = os.readlink("/proc/self/ns/net")
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"a node process exited {process.returncode}: "
                               f"{log.read_text(errors='replace')[-2000:] if log.exists() else ''}")
        with contextlib.suppress(OSError, ValueError):
            if os.readlink(f"/proc/{process.pid}/ns/net") != host_net:
                if not init:
                    return process.pid
                children = Path(f"/proc/{process.pid}/task/{process.pid}/children").read_text().split()
                if children:
                    return int(children[0])
        time.sleep(0.02)
    raise RuntimeError("a node's namespaces were not made in time")


# -- clean-up from anywhere -----------------------------------------------------------------


def sweep(root: Path = STATE_ROOT) -> None:
    """Remove whatever a previous set of nodes left (processes, cgroups, the state folder)."""
    kill_everything()
    _stop_reaper(root)
    shutil.rmtree(root, ignore_errors=True)


def _stop_reaper(root: Path) -> None:
    try:
        pid = int((root / "reaper.pid").read_text())
    except (OSError, ValueError):
        return
    if pid != os.getpid() and f"{Path(__file__).name}\0reap" in _cmdline(pid):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_text(errors="replace")
    except OSError:
        return ""


def _start_time(pid: int) -> str | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat[stat.rfind(")") + 2:].split()[19]


def reap(watch_pid: int, root: Path) -> None:
    """Wait for ``watch_pid`` to end (however it ends), then clean up, unless it did so itself."""
    started = _start_time(watch_pid)
    while started is not None and _start_time(watch_pid) == started:
        time.sleep(0.5)
    if not root.exists():
        return
    with open(LOCK_FILE, "a+") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        if root.exists():
            kill_everything()
            shutil.rmtree(root, ignore_errors=True)


@contextlib.contextmanager
def running(count: int = 2, root: Path = STATE_ROOT) -> Iterator[RealNodes]:
    nodes = RealNodes(count, root)
    nodes.up()
    try:
        yield nodes
    finally:
        nodes.down()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="nodes.py", description=__doc__.split("\n\n")[0] if __doc__ else None)
    sub = parser.add_subparsers(dest="command", required=True)
    up = sub.add_parser("up", help="start nodes and leave them running (print the inventory)")
    up.add_argument("--nodes", type=int, default=2)
    sub.add_parser("down", help="stop every node and remove what they left")
    sub.add_parser("status", help="the processes of the nodes")
    reap_cmd = sub.add_parser("reap", help=argparse.SUPPRESS)
    reap_cmd.add_argument("--watch", type=int, required=True)
    reap_cmd.add_argument("--state", type=Path, required=True)
    args = parser.parse_args(argv)
    if args.command == "reap":
        reap(args.watch, args.state)
        return 0
    if args.command == "down":
        with open(LOCK_FILE, "a+") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            sweep()
        return 0
    if args.command == "status":
        state: dict[str, Any] = json.loads((STATE_ROOT / "state.json").read_text()) if (
            STATE_ROOT / "state.json").exists() else {}
        print(json.dumps(state, indent=1))
        return 0
    nodes = RealNodes(args.nodes)
    # Left running: the reaper watches init (PID 1), i.e. it waits for `nodes.py down`.
    nodes.up(watch_pid=1)
    if nodes._lock is not None:
        nodes._lock.close()
    print(nodes.inventory)
    return 0


if __name__ == "__main__":
    sys.exit(main())
