"""clusterctl's containerd configs read by the containerd they are written for.

The 2.2 config (version 3) is the demo's, the 2.3 one (version 4) the Kubernetes 1.37 variant's,
both as the bootstrap left them on the mock hosts; the 1.6 one (version 2) is rendered for
Debian's package. ``containerd config dump`` shows what containerd makes of the file; a
short-lived daemon on temporary folders shows that its CRI plugin loads with it, as clusterctl's
own ``ctr plugins ls`` check reads it, and ``crictl info`` what the CRI plugin runs with.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
from containerd_cases import CASES, Case, Tool, binaries, clusterctl_config, cri_tables
from containerd_daemon import ContainerdDaemon, relocated
from demo_calls import DemoRecordings

from clusterctl.bootstrap.containerd_config import parse_toml
from clusterctl.facts.containerd import cri_status, parse_ctr_plugins


def assert_clusterctls_settings(runtime: dict[str, Any], registry: dict[str, Any], sandbox: str, case: Case) -> None:
    assert runtime["default_runtime_name"] == "nvidia"
    nvidia, runc = runtime["runtimes"]["nvidia"], runtime["runtimes"]["runc"]
    assert nvidia["runtime_type"] == runc["runtime_type"] == "io.containerd.runc.v2"
    assert nvidia["options"]["BinaryName"] == "/usr/bin/nvidia-container-runtime"
    assert nvidia["options"]["SystemdCgroup"] is True and runc["options"]["SystemdCgroup"] is True
    assert registry["config_path"] == "/etc/containerd/certs.d"
    assert sandbox == case.sandbox


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"containerd-{c.containerd}")
def test_config_dump_of_the_matching_containerd_keeps_every_clusterctl_setting(
        case: Case, demo_recordings: DemoRecordings, upstream_tool: Tool, tmp_path: Path) -> None:
    containerd, _ = binaries(case, upstream_tool)
    config = tmp_path / "config.toml"
    config.write_text(relocated(clusterctl_config(case, demo_recordings), tmp_path))
    (tmp_path / "conf.d").mkdir()
    done = subprocess.run([str(containerd), "--config", str(config), "config", "dump"], capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    dumped = parse_toml(done.stdout, "containerd config dump")
    assert dumped["version"] == case.version
    assert_clusterctls_settings(*cri_tables(dumped, case.version), case)


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"containerd-{c.containerd}")
def test_a_daemon_started_with_the_config_loads_its_cri_plugin(
        case: Case, demo_recordings: DemoRecordings, upstream_tool: Tool, tmp_path: Path) -> None:
    containerd, ctr = binaries(case, upstream_tool)
    crictl = upstream_tool("crictl", "1.37.0")
    with ContainerdDaemon(containerd, ctr, tmp_path, clusterctl_config(case, demo_recordings)) as daemon:
        plugins = daemon.run_ctr("plugins", "ls")
        assert plugins.returncode == 0, plugins.stderr
        # clusterctl's own reading of `ctr plugins ls`, on the real output.
        assert cri_status(parse_ctr_plugins(plugins.stdout)) == "ok", daemon.log_tail()
        info = subprocess.run([str(crictl), "--runtime-endpoint", f"unix://{daemon.socket}", "--timeout", "10s",
                               "info"], capture_output=True, text=True, timeout=60)
        assert info.returncode == 0, info.stderr
    config = json.loads(info.stdout)["config"]
    runtime = config["containerd"]
    assert runtime["defaultRuntimeName"] == "nvidia"
    assert runtime["runtimes"]["nvidia"]["options"]["BinaryName"] == "/usr/bin/nvidia-container-runtime"
    assert runtime["runtimes"]["runc"]["options"]["SystemdCgroup"] is True
