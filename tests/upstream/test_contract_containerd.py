"""The simulated containerd, ctr and crictl answer as the real ones of the same release.

The same files (clusterctl's root config and a GPU Operator style drop-in) on a mock host with
that containerd package installed and under a temporary root for the real binaries; the same
command lines. Compared: exit codes, and what clusterctl reads (the CRI runtimes and sandbox
image containerd ends up with; ``containerd --version`` and ``ctr plugins ls`` through
clusterctl's own parsers).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from containerd_cases import CASES, Case, Tool, binaries, clusterctl_config
from containerd_daemon import ContainerdDaemon
from contract import RealHost, SimulatedHost
from demo_calls import DemoRecordings

from clusterctl.bootstrap.containerd_config import parse_toml
from clusterctl.facts.containerd import cri_status, parse_containerd_version, parse_ctr_plugins

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "containerd"
#: A drop-in that only swaps the nvidia runtime's binary (the GPU Operator's), at the root's version.
DROPIN_TABLE = {2: "io.containerd.grpc.v1.cri", 3: "io.containerd.cri.v1.runtime", 4: "io.containerd.cri.v1.runtime"}


def dropin(version: int) -> bytes:
    table = DROPIN_TABLE[version]
    return (f'version = {version}\n\n[plugins."{table}".containerd.runtimes.nvidia]\n'
            f'  runtime_type = "io.containerd.runc.v2"\n'
            f'[plugins."{table}".containerd.runtimes.nvidia.options]\n'
            f'  BinaryName = "/usr/local/nvidia/toolkit/nvidia-container-runtime"\n'
            f"  SystemdCgroup = true\n").encode()


def package(case: Case) -> dict[str, str]:
    if case.containerd.startswith("1."):
        return {"containerd": "1.6.20~ds1-1+deb12u3"}
    return {"containerd.io": f"{case.containerd}-1"}


def summary(config: dict[str, Any], version: int, case: Case) -> tuple[object, ...]:
    """What clusterctl checks of an effective config: default runtime, runtimes and their binaries,
    whether its sandbox image and registry folder are kept (containerd fills lost ones with its
    built-in defaults, which the simulated one does not print)."""
    plugins = config.get("plugins") or {}
    if version == 2:
        cri = plugins.get("io.containerd.grpc.v1.cri") or {}
        runtime, registry, sandbox = cri.get("containerd") or {}, cri.get("registry") or {}, cri.get("sandbox_image")
    else:
        images = plugins.get("io.containerd.cri.v1.images") or {}
        runtime = (plugins.get("io.containerd.cri.v1.runtime") or {}).get("containerd") or {}
        registry, sandbox = images.get("registry") or {}, (images.get("pinned_images") or {}).get("sandbox")
    binaries_ = {name: (body.get("options") or {}).get("BinaryName") or None
                 for name, body in (runtime.get("runtimes") or {}).items()}
    return (runtime.get("default_runtime_name") or "runc", binaries_, sandbox == case.sandbox,
            registry.get("config_path") == "/etc/containerd/certs.d")


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"containerd-{c.containerd}")
def test_config_dump_with_a_drop_in_merges_as_the_real_containerd_merges(
        case: Case, demo_recordings: DemoRecordings, upstream_tool: Tool, tmp_path: Path) -> None:
    containerd, _ = binaries(case, upstream_tool)
    root = clusterctl_config(case, demo_recordings).replace('"/etc/containerd/conf.d/*.toml"',
                                                            '"{root}/etc/containerd/conf.d/*.toml"')
    files = {"{root}/etc/containerd/config.toml": root.encode(),
             "{root}/etc/containerd/conf.d/99-nvidia.toml": dropin(case.version)}
    sim = SimulatedHost(tmp_path / "sim", package(case), files)
    real = RealHost(tmp_path / "real", {"containerd": containerd}, files)
    simulated = sim.run("containerd --config {root}/etc/containerd/config.toml config dump")
    actual = real.run("containerd --config {root}/etc/containerd/config.toml config dump")
    assert simulated.exit_code == actual.exit_code == 0, simulated.output + actual.output
    ours = summary(parse_toml(simulated.stdout, "simulated dump"), case.version, case)
    theirs = summary(parse_toml(actual.stdout, "real dump"), case.version, case)
    assert ours == theirs


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"containerd-{c.containerd}")
def test_version_and_plugin_listing_read_the_same_through_clusterctls_parsers(
        case: Case, demo_recordings: DemoRecordings, upstream_tool: Tool, tmp_path: Path) -> None:
    containerd, ctr = binaries(case, upstream_tool)
    config = clusterctl_config(case, demo_recordings)
    sim = SimulatedHost(tmp_path / "sim", package(case), {"/etc/containerd/config.toml": config.encode()},
                        services=("containerd",))
    real = RealHost(tmp_path / "real", {"containerd": containerd})
    simulated, actual = sim.run("containerd --version"), real.run("containerd --version")
    assert simulated.exit_code == actual.exit_code == 0
    assert parse_containerd_version(simulated.stdout) == parse_containerd_version(actual.stdout)
    with ContainerdDaemon(containerd, ctr, tmp_path / "daemon", config) as daemon:
        listed = daemon.run_ctr("plugins", "ls")
    plugins = sim.run("ctr plugins ls")
    assert plugins.exit_code == listed.returncode == 0
    assert cri_status(parse_ctr_plugins(plugins.stdout)) == cri_status(parse_ctr_plugins(listed.stdout)) == "ok"


def error_lines(output: str, socket: str) -> list[str]:
    """crictl's ``level=error`` lines with their time and the daemon's socket path made comparable
    (its warnings about where its own config file is depend on where crictl is installed)."""
    lines = output.replace(socket, "/run/containerd/containerd.sock").splitlines()
    return [re.sub(r'^time="\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ" ', 'time="T" ', line)
            for line in lines if "level=error" in line]


@pytest.mark.parametrize("cri", ["down", "disabled"])
def test_crictl_info_without_a_cri_service_fails_as_the_real_crictl_does(
        cri: str, upstream_tool: Tool, tmp_path: Path) -> None:
    config = 'version = 3\ndisabled_plugins = ["io.containerd.grpc.v1.cri"]\n'
    sim = SimulatedHost(tmp_path / "sim", {"containerd.io": "2.2.1-1", "cri-tools": "1.37.0-1.1"},
                        {"/etc/containerd/config.toml": config.encode()},
                        services=("containerd",) if cri == "disabled" else ())
    simulated = sim.run("crictl info" if cri == "disabled" else "systemctl stop containerd && crictl info")
    real = RealHost(tmp_path / "real", {"crictl": upstream_tool("crictl", "1.37.0")})
    line = "crictl --runtime-endpoint unix://{socket} --timeout 2s info"
    if cri == "down":
        socket = f"/tmp/{tmp_path.name}.sock"  # no socket there; a longer path is too long for one
        actual = real.run(line.format(socket=socket))
    else:
        containerd, ctr = binaries(CASES[0], upstream_tool)
        with ContainerdDaemon(containerd, ctr, tmp_path / "daemon", config) as daemon:
            socket = str(daemon.socket)
            actual = real.run(line.format(socket=socket))
    assert simulated.exit_code == actual.exit_code == 1
    assert error_lines(simulated.stderr, socket) == error_lines(actual.stderr, socket) != []
