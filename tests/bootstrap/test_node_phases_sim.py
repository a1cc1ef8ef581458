"""The node phases end to end on the demo's simulated hosts (``clusterctl.mock``, state kept).

The Done-when scenarios of issue 11, in-process: a full apply of preflight, kernel, packages,
containerd and nvidia-runtime; a second apply that changes nothing and says so; ``--resume``
after a failure injected in the packages phase on one host while the others finish; a second
concurrent run refused by the lock; and a re-run after ``nvidia-ctk runtime configure`` wrote
its drop-in, which keeps the nvidia runtime.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Sequence
from pathlib import Path

import pytest

from clusterctl.bootstrap.containerd_config import effective_config, parse_toml
from clusterctl.bootstrap.registry import all_phases
from clusterctl.bootstrap.run import run_bootstrap
from clusterctl.engine.progress import ProgressStore
from clusterctl.engine.run import RunReport, RunSettings, Status
from clusterctl.fanout import Runner
from clusterctl.inventory.loader import load_inventory
from clusterctl.inventory.model import Inventory
from clusterctl.mock.transport import MockTransport

REPO = Path(__file__).resolve().parents[2]
DEMO = REPO / "inventories" / "demo.yaml"
NODE_PHASES = ("preflight", "kernel", "packages", "containerd", "nvidia-runtime")
LOCK = "/var/lib/clusterctl/bootstrap.lock"


class Lab:
    """Three demo hosts (gpu-a1..a3) on the simulated tools; their state lasts across runs."""

    def __init__(self, tmp_path: Path) -> None:
        demo = load_inventory(str(DEMO))
        self.hosts = tuple(h for h in demo.hosts if h.name in ("gpu-a1", "gpu-a2", "gpu-a3"))
        self.inventory = Inventory(name="lab", hosts=self.hosts, bootstrap=demo.bootstrap)
        self.progress = tmp_path / "progress.json"
        self.tmp = tmp_path

    def inject(self, host: str, rule: str) -> None:
        """Give ``host`` a profile that extends its own with ``rule`` (YAML of one command rule)."""
        index = next(i for i, h in enumerate(self.hosts) if h.name == host)
        folder = self.tmp / f"profile-{host}"
        folder.mkdir()
        (folder / "profile.yaml").write_text(f"extends: {self.hosts[index].profile}\ncommands:\n{rule}")
        changed = dataclasses.replace(self.hosts[index], profile=str(folder))
        self.hosts = (*self.hosts[:index], changed, *self.hosts[index + 1:])
        self.inventory = dataclasses.replace(self.inventory, hosts=self.hosts)

    def transport(self, name: str) -> MockTransport:
        return MockTransport(next(h for h in self.hosts if h.name == name))

    def run(self, *, resume: bool = False, phases: Sequence[str] = NODE_PHASES) -> RunReport:
        chosen = [p for p in all_phases() if p.name in phases]
        store = (ProgressStore.load if resume else ProgressStore)(self.progress, "lab")
        with Runner(lambda host, _t: MockTransport(host), parallel=8, timeout_s=60) as runner:
            return run_bootstrap(self.inventory, self.hosts, runner, chosen,
                                 RunSettings(apply=True, resume=resume, progress=store))


def statuses(report: RunReport, host: str) -> dict[str, Status]:
    return {r.phase: r.status for r in report.results if r.host == host}


@pytest.fixture
def lab(tmp_path: Path) -> Lab:
    return Lab(tmp_path)


def test_full_apply_then_a_second_apply_changes_nothing(lab: Lab) -> None:
    first = lab.run()
    assert first.ok, first.failed_hosts
    assert statuses(first, "gpu-a2") == {"preflight": Status.OK, "kernel": Status.CHANGED,
                                         "packages": Status.CHANGED, "containerd": Status.CHANGED,
                                         "nvidia-runtime": Status.OK}
    node = lab.transport("gpu-a2")
    assert "br_netfilter" in node.run("lsmod").stdout and node.run("swapon --show").stdout == ""
    assert "kubeadm\t1.36.2-1.1" in node.run("dpkg-query -W kubeadm").stdout
    assert "containerd.io" in node.run("apt-mark showhold").stdout.split()
    assert node.run("systemctl is-active containerd").stdout.strip() == "active"
    assert parse_toml(node.get("/etc/containerd/config.toml").decode(), "config")["version"] == 4
    assert "# clusterctl: swap off for the kubelet: /swap.img" in node.get("/etc/fstab").decode()
    second = lab.run()
    assert second.ok and not second.changed
    assert all(r.status is Status.OK and not r.changes for r in second.results)
    assert [(p.phase, p.counts[Status.OK]) for p in second.recap] == [(name, 3) for name in NODE_PHASES]
    assert not any("systemctl restart" in line for line in lab.transport("gpu-a2").history)


def test_resume_after_a_failure_injected_in_packages_on_one_host(lab: Lab) -> None:
    lab.inject("gpu-a2", "  - regex: 'apt-get install'\n    times: 1\n    exit: 100\n"
                         "    stderr_text: \"E: Failed to fetch https://pkgs.k8s.io/core:/stable:/v1.36/deb/amd64/"
                         "kubeadm_1.36.2-1.1_amd64.deb  Connection timed out\\n\"\n")
    first = lab.run()
    assert list(first.failed_hosts) == ["gpu-a2"] and "Connection timed out" in first.failed_hosts["gpu-a2"]
    assert statuses(first, "gpu-a2")["containerd"] is Status.SKIPPED  # left out of later phases
    assert statuses(first, "gpu-a1")["containerd"] is Status.CHANGED  # the others went on
    resumed = lab.run(resume=True)
    assert resumed.ok, resumed.failed_hosts
    assert set(statuses(resumed, "gpu-a1").values()) == {Status.SKIPPED}
    assert statuses(resumed, "gpu-a2") == {"preflight": Status.SKIPPED, "kernel": Status.SKIPPED,
                                           "packages": Status.CHANGED, "containerd": Status.CHANGED,
                                           "nvidia-runtime": Status.OK}
    assert all("earlier run" in r.message for r in resumed.results if r.status is Status.SKIPPED)


def test_a_second_concurrent_run_is_refused_by_the_lock(lab: Lab) -> None:
    # The first run spends a while in the packages probe: the second run comes in meanwhile.
    for host in ("gpu-a1", "gpu-a2", "gpu-a3"):
        lab.inject(host, "  - match: 'dpkg --print-architecture'\n    stdout_text: \"amd64\\n\"\n    delay: 1.5\n")
    results: dict[str, RunReport] = {}
    first = threading.Thread(target=lambda: results.setdefault("first", lab.run()))
    first.start()
    for _ in range(300):
        if all(lab.transport(h.name).get(LOCK) is not None for h in lab.hosts):
            break
        threading.Event().wait(0.02)
    second = lab.run(phases=("kernel",))
    first.join(60)
    assert set(second.failed_hosts) == {"gpu-a1", "gpu-a2", "gpu-a3"}
    assert all("another clusterctl run is working on this host" in why for why in second.failed_hosts.values())
    assert results["first"].ok, results["first"].failed_hosts
    assert all(lab.transport(h.name).get(LOCK) is None for h in lab.hosts)


def test_a_rerun_after_nvidia_ctk_wrote_its_drop_in_keeps_the_nvidia_runtime(lab: Lab) -> None:
    assert lab.run().ok
    node = lab.transport("gpu-a1")
    done = node.run("nvidia-ctk runtime configure --runtime=containerd --set-as-default", sudo=True)
    assert done.ok, done.stderr
    dropin = node.get("/etc/containerd/conf.d/99-nvidia.toml")
    again = lab.run(phases=("containerd", "nvidia-runtime"))
    assert again.ok, again.failed_hosts
    (result,) = [r for r in again.results if r.host == "gpu-a1" and r.phase == "containerd"]
    assert not any(f.severity.value == "error" for f in result.findings)
    assert node.get("/etc/containerd/conf.d/99-nvidia.toml") == dropin  # left alone
    root = parse_toml(node.get("/etc/containerd/config.toml").decode(), "root")
    assert root["imports"] == ["/etc/containerd/conf.d/*.toml"]
    effective = effective_config(root, [parse_toml(dropin.decode(), "dropin")], containerd_major=2)
    runtimes = effective["plugins"]["io.containerd.cri.v1.runtime"]["containerd"]["runtimes"]
    assert runtimes["nvidia"]["options"]["BinaryName"] == "/usr/bin/nvidia-container-runtime"
    assert runtimes["runc"]["options"]["SystemdCgroup"] is True
    assert not lab.run(phases=("containerd",)).changed


def test_a_stopped_containerd_with_the_right_config_is_started(lab: Lab) -> None:
    assert lab.run().ok
    node = lab.transport("gpu-a3")
    assert node.run("systemctl stop containerd", sudo=True).ok
    report = lab.run(phases=("containerd",))
    assert report.ok, report.failed_hosts
    (result,) = [r for r in report.results if r.host == "gpu-a3"]
    assert result.status is Status.CHANGED
    assert [c.summary for c in result.changes] == ["start containerd (it was inactive)"]
    assert node.run("systemctl is-active containerd").stdout.strip() == "active"
    assert statuses(report, "gpu-a1") == {"containerd": Status.OK}


def test_containerds_sandbox_image_comes_from_the_image_repository_the_artifacts_list_names(lab: Lab) -> None:
    """An air-gapped site that moves kubeadm's images (``image_repository``) gets containerd's sandbox
    image from there too, the pause image ``bootstrap artifacts`` tells it to mirror (kubeadm's preflight
    warns of any other); not registry.k8s.io, which the site cannot reach."""
    from clusterctl.bootstrap.artifacts import artifact_list
    from clusterctl.bootstrap.containerd_config import CONFIG_PATH

    bootstrap = dataclasses.replace(lab.inventory.bootstrap, image_repository="mirror.site:5000/k8s")
    lab.inventory = dataclasses.replace(lab.inventory, bootstrap=bootstrap)
    chosen = [p for p in all_phases() if p.name == "containerd"]
    with Runner(lambda host, _t: MockTransport(host), parallel=8, timeout_s=60) as runner:
        plan = run_bootstrap(lab.inventory, lab.hosts[:1], runner, chosen, RunSettings(apply=False))
    config = next(c for r in plan.results for c in r.changes if c.path == CONFIG_PATH)
    images = parse_toml((config.content or b"").decode(), CONFIG_PATH)["plugins"]["io.containerd.cri.v1.images"]
    pause = [a.reference for a in artifact_list(lab.inventory, lab.hosts).artifacts if "/pause:" in a.name + ":"]
    assert images["pinned_images"]["sandbox"].startswith("mirror.site:5000/k8s/pause:")
    assert pause == [images["pinned_images"]["sandbox"]]
