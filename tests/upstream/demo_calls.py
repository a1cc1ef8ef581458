"""What clusterctl hands the tools when it bootstraps the demo: every simulated-tool call, recorded.

The demo inventory is bootstrapped on its mock hosts in this process while ``MockMachine`` keeps a
copy of every program call (argv, the bytes on stdin, the ``--config`` file it names) and every
command line clusterctl sent. The real-tools tests hand those very inputs to the real programs,
so a config clusterctl only ever passes on stdin is checked as well as the files it writes.

Variants of the demo (``Variant``) change the inventory the way a user would: a CNI, the GPU
Operator instead of the device plugin, three control planes, another Kubernetes pin.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DEMO = REPO / "inventories" / "demo.yaml"
SURVEY = REPO / "tests" / "bootstrap_cluster" / "fixtures" / "demo-survey.json"


@dataclass(frozen=True)
class Variant:
    name: str
    cni: str = "calico"
    addons: str = "device-plugin"
    control_planes: int = 1
    kubernetes: str = "1.36.2"
    containerd: str = "2.2.1"

    def write_inventory(self, folder: Path) -> Path:
        """The demo inventory as this variant; its hosts' package repositories offer the pinned versions."""
        text = DEMO.read_text()
        for host in re.findall(r"profile: demo/profiles/net/([\w-]+)", text):
            profile = folder / "profiles" / host
            profile.mkdir(parents=True, exist_ok=True)
            (profile / "profile.yaml").write_text(self._profile(DEMO.parent / "demo" / "profiles" / "net" / host))
            text = text.replace(f"profile: demo/profiles/net/{host}\n", f"profile: {profile}\n")
        # The variant's own pins (the demo's containerd 2.2 patch may be one the module proxy lacks).
        text = re.sub(r'(\n    kubernetes: )"[^"]+"', rf'\g<1>"{self.kubernetes}"', text, count=1)
        text = re.sub(r'(\n    containerd: )"[^"]+"', rf'\g<1>"{self.containerd}"', text, count=1)
        for name in ("gpu-a2", "gpu-a3")[: self.control_planes - 1]:
            text = re.sub(rf"(  {name}:\n(?:    .*\n)*?    rack: a\n)", r"\1    roles: [control-plane, worker]\n",
                          text)
        text = text.replace("defaults:\n", f"defaults:\n  mock_state: {folder / 'mock-state'}\n", 1)
        section = f"\nbootstrap:\n  network:\n    cni: {self.cni}\n  addons:\n    mode: {self.addons}\n"
        inventory = folder / f"{self.name}.yaml"
        inventory.write_text(text + section)
        return inventory

    def _profile(self, parent: Path) -> str:
        minor = ".".join(self.kubernetes.split(".")[:2])
        source = f'source: "pkgs.k8s.io/core:/stable:/v{minor}/deb"'
        docker = "source: download.docker.com/linux/ubuntu"
        return (f"extends: {parent}\nmachine:\n  packages:\n    repository:\n"
                f'      containerd.io: {{versions: ["{self.containerd}-1"], {docker}}}\n'
                + "".join(f'      {name}: {{versions: ["{self.kubernetes}-1.1"], {source}}}\n'
                          for name in ("kubeadm", "kubelet", "kubectl"))
                + f'      cri-tools: {{versions: ["{minor}.0-1.1"], {source}}}\n')


#: The demo and the variants the issue names (device plugin / GPU Operator, Calico / Flannel, one / three
#: control planes); each Kubernetes minor kubeadm supports is covered by the demo at that pin.
VARIANTS = (
    Variant("demo"),
    Variant("flannel-gpu-operator-3cp", cni="flannel", addons="gpu-operator", control_planes=3),
    Variant("k8s-1.37", kubernetes="1.37.2", containerd="2.3.7"),
    Variant("k8s-1.35", kubernetes="1.35.4", containerd="2.2.1"),
)


@dataclass(frozen=True)
class ToolCall:
    host: str
    argv: tuple[str, ...]
    stdin: bytes
    #: The file ``--config PATH`` named, as the host had it when the tool ran.
    config_file: bytes | None
    exit_code: int
    stdout: str
    stderr: str

    @property
    def line(self) -> str:
        return " ".join(self.argv)

    @property
    def config(self) -> bytes | None:
        """The configuration the tool read: stdin for ``--config /dev/stdin``, else the file."""
        path = config_option(self.argv)
        if path in ("/dev/stdin", "-"):
            return self.stdin
        return self.config_file


@dataclass
class Recording:
    variant: Variant
    calls: list[ToolCall] = field(default_factory=list)
    #: Command lines clusterctl sent (what a host's shell runs), in order.
    lines: list[str] = field(default_factory=list)
    #: The run's output, for failure messages.
    output: str = ""
    #: The mock hosts' state folder (``mock_state:``): what the run left on each host.
    state: Path | None = None

    def file(self, host: str, path: str) -> bytes | None:
        """A file as the run left it on a mock host."""
        from clusterctl.mock.state import MockCluster

        assert self.state is not None
        return MockCluster(self.state).host(host).fs.read(path)

    def listdir(self, host: str, path: str) -> list[str]:
        from clusterctl.mock.state import MockCluster

        assert self.state is not None
        tree = MockCluster(self.state).host(host).fs
        return sorted(tree.listdir(path)) if tree.is_dir(path) else []

    def of(self, tool: str, *prefix: str) -> list[ToolCall]:
        return [c for c in self.calls if c.argv[:1] == (tool,) and c.argv[1:1 + len(prefix)] == prefix]


def config_option(argv: tuple[str, ...] | list[str]) -> str | None:
    for i, arg in enumerate(argv):
        if arg == "--config" and i + 1 < len(argv):
            return argv[i + 1]
        if arg.startswith("--config="):
            return arg.split("=", 1)[1]
    return None


def record_bootstrap(variant: Variant, tmp: Path, monkeypatch: pytest.MonkeyPatch) -> Recording:
    """Bootstrap ``variant`` of the demo on mock hosts; every tool call and command line recorded."""
    from clirun import clusterctl

    from clusterctl.mock.machine import MockMachine

    recording = Recording(variant, state=tmp / "mock-state")
    original_tool = MockMachine.run_tool
    original_line = MockMachine.run_line

    def run_tool(self: MockMachine, argv: list[str], stdin: bytes = b"", env: dict[str, str] | None = None,
                 cwd: str = "/root") -> object:
        path = config_option(argv)
        before = self.host.fs.read(path) if path and path.startswith("/") and path != "/dev/stdin" else None
        result = original_tool(self, argv, stdin, env, cwd)
        if result is not None:
            recording.calls.append(ToolCall(self.host_name, tuple(argv), stdin, before, result.exit_code,
                                            result.stdout, result.stderr))
        return result

    def run_line(self: MockMachine, line: str, stdin: bytes = b"", env: dict[str, str] | None = None,
                 **options: object) -> object:
        if getattr(self._call, "counted", None) is None:  # clusterctl's own line, not a tool's inner one
            recording.lines.append(line)
        return original_line(self, line, stdin, env, **options)  # type: ignore[arg-type]

    tmp.mkdir(parents=True, exist_ok=True)
    inventory = variant.write_inventory(tmp)
    with monkeypatch.context() as patch:
        patch.setattr(MockMachine, "run_tool", run_tool)
        patch.setattr(MockMachine, "run_line", run_line)
        done = clusterctl("-i", str(inventory), "bootstrap", "--yes", "--survey", str(SURVEY),
                          "--state-dir", str(tmp / f"{variant.name}-progress"))
    recording.output = done.output
    assert done.exit_code == 0, done.output
    return recording


class DemoRecordings:
    """Each demo variant bootstrapped once per test session on mock hosts, its tool calls kept."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self._done: dict[str, Recording] = {}

    def get(self, variant: Variant) -> Recording:
        if variant.name not in self._done:
            work = self.folder / variant.name
            work.mkdir()
            with pytest.MonkeyPatch.context() as patch:
                # The session fixture runs before the per-test autouse ones: private state here too.
                patch.setenv("CLUSTERCTL_MOCK_STATE", str(work / "mock-state"))
                patch.setenv("XDG_STATE_HOME", str(work / "xdg-state"))
                self._done[variant.name] = record_bootstrap(variant, work, patch)
        return self._done[variant.name]
