"""The node phases end to end on simulated nodes (``simhost.SimNode``): apply, re-apply, resume, lock.

The Done-when scenarios of issue 11 in-process: a full apply of preflight, kernel, packages,
containerd and nvidia-runtime; a second apply that changes nothing and says so; ``--resume``
after a failure injected in the packages phase on one host while the others finish; a second
concurrent run refused by the lock; and a re-run on a host whose containerd config already has
an ``nvidia`` runtime (nvidia-ctk's config plus a GPU Operator drop-in) that keeps it.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from bootstrap.simhost import SimNode
from clusterctl.bootstrap.containerd_config import effective_config, parse_toml
from clusterctl.bootstrap.engine import BootstrapReport, RunSettings, Status, run_bootstrap
from clusterctl.bootstrap.progress import ProgressStore
from clusterctl.bootstrap.registry import all_phases
from clusterctl.fanout import Runner
from clusterctl.inventory.model import Host, Inventory, StackPin
from clusterctl.transport.mock import load_profile

NODE_PHASES = ("preflight", "kernel", "packages", "containerd", "nvidia-runtime")
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "containerd"


class Lab:
    def __init__(self, tmp_path: Path, names: Sequence[str] = ("n1", "n2", "n3")) -> None:
        base = tmp_path / "profile"
        base.mkdir()
        (base / "profile.yaml").write_text("commands: []\n")
        broken = tmp_path / "broken-apt"
        broken.mkdir()
        (broken / "profile.yaml").write_text(
            "extends: ../profile\ncommands:\n  - regex: '^apt-get install'\n    exit: 100\n"
            "    stderr_text: \"E: Failed to fetch https://pkgs.k8s.io/core:/stable:/v1.36/deb/amd64/kubeadm_1.36.2-1.1"
            "_amd64.deb  Connection timed out\\n\"\n  - regex: '^apt-get install'\n    delay: 0\n")
        self.base, self.broken = load_profile(str(base)), load_profile(str(broken))
        stack = StackPin(kubernetes="1.36.2", containerd="2.2.1")
        self.hosts = tuple(Host(name=n, transport="mock", profile=str(base), stack=stack,
                                roles=("control-plane", "worker") if n == "n1" else ("worker",)) for n in names)
        self.inventory = Inventory(name="lab", hosts=self.hosts)
        self.nodes = {h.name: _Kept(h, self.base) for h in self.hosts}
        self.progress = tmp_path / "progress.json"

    def run(self, *, resume: bool = False, phases: Sequence[str] = NODE_PHASES) -> BootstrapReport:
        chosen = [p for p in all_phases() if p.name in phases]
        store = (ProgressStore.load if resume else ProgressStore)(self.progress, "lab")
        with Runner(lambda host, _t: self.nodes[host.name], parallel=8, timeout_s=30) as runner:
            return run_bootstrap(self.inventory, self.hosts, runner, chosen,
                                 RunSettings(apply=True, resume=resume, progress=store))


class _Kept(SimNode):
    def close(self) -> None:  # the same machine for every run of a test
        pass


def statuses(report: BootstrapReport, host: str) -> dict[str, Status]:
    return {r.phase: r.status for r in report.results if r.host == host}


@pytest.fixture
def lab(tmp_path: Path) -> Lab:
    return Lab(tmp_path)


def test_full_apply_then_a_second_apply_changes_nothing(lab: Lab) -> None:
    first = lab.run()
    assert first.ok, first.failed_hosts
    assert statuses(first, "n2") == {"preflight": Status.OK, "kernel": Status.CHANGED, "packages": Status.CHANGED,
                                     "containerd": Status.CHANGED, "nvidia-runtime": Status.OK}
    node = lab.nodes["n2"]
    assert {"overlay", "br_netfilter"} <= node.modules and node.swaps == []
    assert node.packages["kubeadm"] == "1.36.2-1.1" and "containerd.io" in node.holds
    config = parse_toml(node.files["/etc/containerd/config.toml"].decode(), "config")
    assert config["version"] == 3
    assert b"# clusterctl: swap off for the kubelet: /swap.img" in node.files["/etc/fstab"]
    restarts = node.restarts
    second = lab.run()
    assert second.ok and not second.changed
    assert all(r.status is Status.OK and not r.changes for r in second.results)
    assert [(p.phase, p.counts[Status.OK]) for p in second.recap] == [(name, 3) for name in NODE_PHASES]
    assert node.restarts == restarts  # nothing restarted on a no-op run


def test_resume_after_a_failure_injected_in_packages_on_one_host(lab: Lab) -> None:
    lab.nodes["n2"].profile = lab.broken
    first = lab.run()
    assert list(first.failed_hosts) == ["n2"] and "Connection timed out" in first.failed_hosts["n2"]
    assert statuses(first, "n2")["containerd"] is Status.SKIPPED  # left out of later phases
    assert statuses(first, "n1")["containerd"] is Status.CHANGED  # the others went on
    lab.nodes["n2"].profile = lab.base  # the mirror is back
    resumed = lab.run(resume=True)
    assert resumed.ok, resumed.failed_hosts
    assert set(statuses(resumed, "n1").values()) == {Status.SKIPPED}
    assert statuses(resumed, "n2") == {"preflight": Status.SKIPPED, "kernel": Status.SKIPPED,
                                       "packages": Status.CHANGED, "containerd": Status.CHANGED,
                                       "nvidia-runtime": Status.OK}
    assert all("earlier run" in r.message for r in resumed.results if r.status is Status.SKIPPED)


def test_a_second_concurrent_run_is_refused_by_the_lock(lab: Lab) -> None:
    # The first run waits inside apt-get update until the second has tried its luck.
    gate = threading.Event()
    original = SimNode._tool_apt_get

    def slow_apt(self: SimNode, args: list[str]) -> Any:
        if args[:1] == ["update"]:
            gate.wait(10)
        return original(self, args)

    SimNode._tool_apt_get = slow_apt  # type: ignore[method-assign]
    try:
        results: dict[str, BootstrapReport] = {}
        first = threading.Thread(target=lambda: results.setdefault("first", lab.run()))
        first.start()
        for _ in range(200):
            if all("/var/lib/clusterctl/bootstrap.lock" in n.files for n in lab.nodes.values()):
                break
            threading.Event().wait(0.02)
        second = lab.run(phases=("kernel",))
        gate.set()
        first.join(20)
    finally:
        SimNode._tool_apt_get = original  # type: ignore[method-assign]
    assert set(second.failed_hosts) == {"n1", "n2", "n3"}
    assert all("another bootstrap run is working on this host" in why for why in second.failed_hosts.values())
    assert results["first"].ok
    assert all("/var/lib/clusterctl/bootstrap.lock" not in n.files for n in lab.nodes.values())


def test_an_nvidia_runtime_nvidia_ctk_and_the_gpu_operator_wrote_is_kept(lab: Lab) -> None:
    node = lab.nodes["n1"]
    node.packages.update({"containerd.io": "2.2.1-1~ubuntu.22.04~jammy"})
    node.files["/etc/containerd/config.toml"] = (FIXTURES / "config-nvidia-ctk-set-as-default-v2.toml").read_bytes()
    dropin = (FIXTURES / "dropin-99-nvidia-v3-gpu-operator.toml").read_bytes()
    node.files["/etc/containerd/conf.d/99-nvidia.toml"] = dropin
    report = lab.run(phases=("containerd",))
    assert report.ok, report.failed_hosts
    (result,) = [r for r in report.results if r.host == "n1"]
    assert [f.code for f in result.findings] == ["CONTAINERD_CONFIG_MIGRATED"]
    root = parse_toml(node.files["/etc/containerd/config.toml"].decode(), "root")
    runtimes = root["plugins"]["io.containerd.cri.v1.runtime"]["containerd"]["runtimes"]
    assert runtimes["nvidia"]["privileged_without_host_devices"] is False  # nvidia-ctk's entry carried over
    assert node.files["/etc/containerd/conf.d/99-nvidia.toml"] == dropin  # the drop-in is left alone
    effective = effective_config(root, [parse_toml(dropin.decode(), "dropin")], containerd_major=2)
    nvidia = effective["plugins"]["io.containerd.cri.v1.runtime"]["containerd"]["runtimes"]["nvidia"]
    assert nvidia["options"]["BinaryName"] == "/usr/local/nvidia/toolkit/nvidia-container-runtime"
    again = lab.run(phases=("containerd",))
    assert not again.changed and node.files["/etc/containerd/conf.d/99-nvidia.toml"] == dropin
