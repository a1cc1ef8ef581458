"""A small simulated node for in-process bootstrap tests, until the shared simulated hosts land.

``SimNode`` is a ``MockTransport`` (files in memory, profile rules first) that also runs the
simple commands the node phases send: the compound probe lines (``echo 'M name'; cmd 2>&1;
...``) piece by piece, ``cat``/``ls -1`` on its files, and the tools with state that lasts for
the life of the object: ``lsmod``/``modprobe``, ``sysctl``, ``swapon --show``/``swapoff``,
``dpkg-query``/``apt-get``/``apt-mark``, ``systemctl restart containerd``, ``ctr plugins ls``,
``containerd --version``, ``nvidia-ctk``. Output formats are the recorded ones of
``tests/fixtures/`` (kernel, apt, containerd, nvidia-ctk). A profile rule still wins, which is
how a test injects a failure (``apt-get install`` exiting 100 on one host).
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

from clusterctl.inventory.model import Host
from clusterctl.transport.base import CommandResult
from clusterctl.transport.mock import MockTransport, Profile

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
CTR_PLUGINS_OK = (FIXTURES / "containerd" / "ctr-plugins-ls-debian12-1.6.20.txt").read_text()
#: What the repository offers: package -> Debian version of the pinned upstream release.
REPOSITORY = {"containerd.io": "2.2.1-1~ubuntu.22.04~jammy", "kubelet": "1.36.2-1.1", "kubeadm": "1.36.2-1.1",
              "kubectl": "1.36.2-1.1", "nvidia-container-toolkit": "1.20.0-1",
              "nvidia-container-toolkit-base": "1.20.0-1", "libnvidia-container-tools": "1.20.0-1",
              "libnvidia-container1": "1.20.0-1"}
OS_RELEASE = ('PRETTY_NAME="Ubuntu 22.04.5 LTS"\nNAME="Ubuntu"\nVERSION_ID="22.04"\nVERSION_CODENAME=jammy\n'
              "ID=ubuntu\nID_LIKE=debian\n")


class SimNode(MockTransport):
    def __init__(self, host: Host, profile: Profile) -> None:
        super().__init__(host, profile)
        self.files.setdefault("/etc/os-release", OS_RELEASE.encode())
        self.files.setdefault("/etc/fstab", b"/dev/md0 / ext4 defaults 0 1\n/swap.img\tnone\tswap\tsw\t0\t0\n")
        self.files.setdefault("/sys/module/nvidia/version", b"535.154.05\n")
        uuid = f"4c4c4544-0047-4d10-8052-{abs(hash(host.name)) % 10**12:012d}"
        self.files.setdefault("/sys/class/dmi/id/product_uuid", (uuid + "\n").encode())
        self.modules = {"overlay", "nvidia"}
        self.sysctl = {"net.ipv4.ip_forward": "0"}
        self.swaps = ["/swap.img"]
        self.packages: dict[str, str] = {}
        self.holds: set[str] = set()
        self.restarts = 0

    # A compound probe runs piece by piece, each through run() so rules and tools answer.
    def run(self, command: str, *, sudo: bool = False, timeout: float | None = None,
            env: object = None, stdin: bytes | None = None) -> CommandResult:  # type: ignore[override]
        if command.startswith("echo '") and "; " in command:
            out = []
            for piece in command.split("; "):
                if piece.startswith("echo '") and piece.endswith("'"):
                    out.append(piece[6:-1] + "\n")
                elif piece != "true":
                    result = super().run(piece.removesuffix(" 2>&1"), sudo=sudo, timeout=timeout)
                    out.append(result.stdout + result.stderr)
            return CommandResult(command, "".join(out), "", 0, 0.0)
        # The environment (DEBIAN_FRONTEND) changes nothing here; rules match the command itself.
        return super().run(command, sudo=sudo, timeout=timeout, stdin=stdin)

    def _builtin(self, command: str) -> tuple[str, str, int]:
        words = shlex.split(command)
        if not words:
            return "", "", 0
        tool, args = words[0], words[1:]
        handler = getattr(self, "_tool_" + re.sub(r"[^a-z]", "_", tool), None)
        if handler is not None:
            return handler(args)  # type: ignore[no-any-return]
        return super()._builtin(command)

    def _tool_cat(self, args: list[str]) -> tuple[str, str, int]:
        path = args[0]
        if path in self.files:
            return self.files[path].decode(errors="replace"), "", 0
        return "", f"cat: {path}: No such file or directory\n", 1

    def _tool_ls(self, args: list[str]) -> tuple[str, str, int]:
        path = args[-1].rstrip("/")
        if path in self.files:
            return path + "\n", "", 0
        names = sorted({p[len(path) + 1:].split("/")[0] for p in self.files if p.startswith(path + "/")})
        if not names:
            return "", f"ls: cannot access '{path}': No such file or directory\n", 2
        return "".join(n + "\n" for n in names), "", 0

    def _tool_mkdir(self, args: list[str]) -> tuple[str, str, int]:
        return "", "", 0

    _tool_install = _tool_mkdir

    def _tool_curl(self, args: list[str]) -> tuple[str, str, int]:
        self.files[args[args.index("-o") + 1]] = b"-----BEGIN PGP PUBLIC KEY BLOCK-----\n(key)\n"
        return "", "", 0

    def _tool_uname(self, args: list[str]) -> tuple[str, str, int]:
        return "5.15.0-113-generic\n", "", 0

    def _tool_nproc(self, args: list[str]) -> tuple[str, str, int]:
        return "64\n", "", 0

    def _tool_grep(self, args: list[str]) -> tuple[str, str, int]:
        return "MemTotal:       527958028 kB\nMemAvailable:   519283412 kB\n", "", 0

    def _tool_ss(self, args: list[str]) -> tuple[str, str, int]:
        return 'LISTEN 0      128          0.0.0.0:22        0.0.0.0:*    users:(("sshd",pid=1514,fd=3))\n', "", 0

    def _tool_timedatectl(self, args: list[str]) -> tuple[str, str, int]:
        return "yes\n", "", 0

    def _tool_nvidia_smi(self, args: list[str]) -> tuple[str, str, int]:
        return "".join(f"GPU {i}: NVIDIA H100 80GB HBM3 (UUID: GPU-{self.host.name}-{i})\n" for i in range(8)), "", 0

    def _tool_df(self, args: list[str]) -> tuple[str, str, int]:
        return ("Filesystem     1024-blocks     Used Available Capacity Mounted on\n"
                "/dev/md0        1844244904 61372044 1689279852       4% /\n"), "", 0

    def _tool_lsmod(self, args: list[str]) -> tuple[str, str, int]:
        rows = "".join(f"{m:<24}{16384:>8}  0\n" for m in sorted(self.modules))
        return "Module                  Size  Used by\n" + rows, "", 0

    def _tool_modprobe(self, args: list[str]) -> tuple[str, str, int]:
        self.modules.add(args[-1])
        return "", "", 0

    def _tool_sysctl(self, args: list[str]) -> tuple[str, str, int]:
        out, err = "", ""
        for arg in args:
            if arg == "-w":
                continue
            key, sep, value = arg.partition("=")
            if key.startswith("net.bridge.") and "br_netfilter" not in self.modules:
                err += f"sysctl: cannot stat /proc/sys/{key.replace('.', '/')}: No such file or directory\n"
                continue
            if sep:
                self.sysctl[key] = value
            out += f"{key} = {self.sysctl.get(key, '0')}\n"
        return out, err, 1 if err else 0

    def _tool_swapon(self, args: list[str]) -> tuple[str, str, int]:
        if not self.swaps:
            return "", "", 0
        return "NAME      TYPE  SIZE USED PRIO\n" + "".join(f"{s} file    8G   0B   -2\n" for s in self.swaps), "", 0

    def _tool_swapoff(self, args: list[str]) -> tuple[str, str, int]:
        self.swaps = []
        return "", "", 0

    def _tool_dpkg(self, args: list[str]) -> tuple[str, str, int]:
        return "amd64\n", "", 0

    def _tool_dpkg_query(self, args: list[str]) -> tuple[str, str, int]:
        names = [a for a in args if not a.startswith("-")]
        err = "".join(f"dpkg-query: no packages found matching {n}\n" for n in names if n not in self.packages)
        out = "".join(f"{n}\t{self.packages[n]}\tii \n" for n in names if n in self.packages)
        return out, err, 1 if err else 0

    def _tool_apt_get(self, args: list[str]) -> tuple[str, str, int]:
        if args and args[0] == "install":
            specs = [a for i, a in enumerate(args[1:], start=1) if not a.startswith("-") and args[i - 1] != "-o"]
            for spec in specs:
                name = spec.partition("=")[0]
                if name not in REPOSITORY:
                    return "", f"E: Unable to locate package {name}\n", 100
                if True:
                    if name in self.holds:
                        return "", "E: Held packages were changed and -y was used without " \
                                   "--allow-change-held-packages.\n", 100
                    self.packages[name] = REPOSITORY[name]
                    if name == "nvidia-container-toolkit":
                        self.files.setdefault("/usr/bin/nvidia-container-runtime", b"")
        return "Reading package lists...\n", "", 0

    def _tool_apt_mark(self, args: list[str]) -> tuple[str, str, int]:
        if args[0] == "showhold":
            return "".join(f"{n}\n" for n in sorted(self.holds)), "", 0
        if args[0] == "hold":
            self.holds.update(args[1:])
            return "".join(f"{n} set on hold.\n" for n in args[1:]), "", 0
        self.holds.difference_update(args[1:])
        return "", "", 0

    def _tool_containerd(self, args: list[str]) -> tuple[str, str, int]:
        if "containerd.io" not in self.packages:
            return "", "sh: 1: containerd: not found\n", 127
        return "containerd containerd.io v2.2.1 dea7da592f5d1d2b7755e3a161be07f43fad8f75\n", "", 0

    def _tool_systemctl(self, args: list[str]) -> tuple[str, str, int]:
        if args[:2] == ["restart", "containerd"]:
            self.restarts += 1
        return "", "", 0

    def _tool_ctr(self, args: list[str]) -> tuple[str, str, int]:
        return CTR_PLUGINS_OK, "", 0

    def _tool_kubeadm(self, args: list[str]) -> tuple[str, str, int]:
        if "kubeadm" not in self.packages:
            return "", "sh: 1: kubeadm: not found\n", 127
        return "registry.k8s.io/kube-apiserver:v1.36.2\nregistry.k8s.io/pause:3.10.1\n", "", 0

    def _tool_nvidia_ctk(self, args: list[str]) -> tuple[str, str, int]:
        if "nvidia-container-toolkit" not in self.packages:
            return "", "sh: 1: nvidia-ctk: not found\n", 127
        if args[:1] == ["--version"]:
            return "NVIDIA Container Toolkit CLI version 1.20.0\ncommit: 0000000\n", "", 0
        return "", "", 0
