"""THE drain: pods leave a node as with 'kubectl drain --ignore-daemonsets', budgets honoured, leftovers named."""

from __future__ import annotations

from pathlib import Path

import pytest
from kube_sim import KubeSim

from clusterctl.changes import Gate
from clusterctl.quarantine.drain import DrainOptions, DrainReport, drain_node


class FakeTime:
    """A clock for the drain and the simulated cluster together: sleeping moves both forward."""

    def __init__(self, sim: KubeSim) -> None:
        self.sim = sim
        self.now = 0.0
        self.sleeps = 0

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps += 1
        self.now += seconds
        with self.sim.edit_kube() as kube:
            kube["clock_offset_s"] = float(kube.get("clock_offset_s", 0)) + seconds


@pytest.fixture
def sim(tmp_path: Path) -> KubeSim:
    return KubeSim(tmp_path)


def drain(sim: KubeSim, node: str, *, apply: bool = True, **options: object) -> tuple[DrainReport, FakeTime]:
    time = FakeTime(sim)
    sim.kubectl(f"cordon {node}")
    report = drain_node(sim.transport(), Gate(apply=apply), node, DrainOptions(**options),  # type: ignore[arg-type]
                        sleep=time.sleep, clock=time.clock)
    return report, time


def test_replicated_pods_move_daemonset_pods_stay(sim: KubeSim) -> None:
    sim.deploy("web", 3)
    report, _ = drain(sim, "gpu-a3")
    assert report.complete and len(report.evicted) == 1 and report.evicted[0].startswith("default/web-")
    assert {p.reason.split(" (")[0] for p in report.ignored} == {"DaemonSet-managed"}
    left = sim.pods_on("gpu-a3")
    assert left and all(p.startswith(("kube-system/", "kube-flannel/", "nvidia-device-plugin/")) for p in left)
    assert len([p for p in sim.kube()["pods"] if p.startswith("default/web-")]) == 3


def test_a_budget_that_never_allows_is_retried_until_the_timeout_and_named(sim: KubeSim) -> None:
    sim.deploy("db", 3, min_available=3)
    report, time = drain(sim, "gpu-a3", timeout_s=30, retry_every_s=5)
    assert not report.complete and report.evicted == []
    (left,) = report.not_evicted
    assert left.pod.startswith("default/db-") and "PodDisruptionBudget allowed no eviction within 30 s" in left.reason
    assert 4 <= time.sleeps <= 6  # retried every 5 s for 30 s, never deleted around the budget
    assert any(p.startswith("default/db-") for p in sim.pods_on("gpu-a3"))


def test_a_budget_that_frees_up_lets_the_retry_through(sim: KubeSim) -> None:
    with sim.edit_kube() as kube:
        kube["pod_startup_s"] = 12  # a replacement is Ready 12 s after its predecessor went
    sim.deploy("web", 3, min_available=2)
    with sim.edit_kube() as kube:  # two web pods on gpu-a3: the second must wait for the first's replacement
        for key, pod in kube["pods"].items():
            pod["node"], pod["ready_at"] = ("gpu-a3" if key != sorted(kube["pods"])[0] else "gpu-a1"), 0
    report, time = drain(sim, "gpu-a3", timeout_s=120, retry_every_s=5)
    assert report.complete and len(report.evicted) == 2
    assert time.sleeps >= 2


def test_unmanaged_and_emptydir_pods_need_their_flags(sim: KubeSim) -> None:
    sim.deploy("cache", 3, emptydir=True)
    sim.bare_pod("debug-shell", "gpu-a3")
    report, _ = drain(sim, "gpu-a3", offers_force=True)
    reasons = {p.pod.split("-")[0]: p.reason for p in report.not_evicted}
    # In kubectl drain's words, the switch of the command that lets the pod through named.
    assert reasons["default/debug"] == "declares no controller: nothing would recreate it (use --force to override)"
    assert reasons["default/cache"] == ("has local storage (emptyDir) that eviction deletes "
                                        "(use --delete-emptydir-data to override)")
    report, _ = drain(sim, "gpu-a3")  # a command without --force (heal, remediate serve) names none
    assert {p.reason for p in report.not_evicted if p.pod == "default/debug-shell"} == \
        {"declares no controller: nothing would recreate it"}
    assert "default/debug-shell" in sim.pods_on("gpu-a3")
    report, _ = drain(sim, "gpu-a3", force=True, delete_emptydir_data=True)
    assert report.complete and "default/debug-shell" in report.evicted
    assert any("declares no controller" in w for w in report.warnings)
    assert not any(p.startswith("default/") for p in sim.pods_on("gpu-a3"))


def test_finished_pods_go_without_force(sim: KubeSim) -> None:
    sim.bare_pod("job-done", "gpu-a3")
    with sim.edit_kube() as kube:
        kube["pods"]["default/job-done"]["phase"] = "Succeeded"
    report, _ = drain(sim, "gpu-a3")
    assert report.complete and report.evicted == ["default/job-done"]


def test_a_dry_run_lists_the_evictions_and_evicts_nothing(sim: KubeSim) -> None:
    sim.deploy("web", 3, min_available=2)
    before = sim.pods_on("gpu-a3")
    gate = Gate(apply=False)
    time = FakeTime(sim)
    report = drain_node(sim.transport(), gate, "gpu-a3", DrainOptions(), sleep=time.sleep, clock=time.clock)
    assert report.dry_run and len(report.evicted) == 1
    assert [r.change.summary for r in gate.records] == [f"evict pod {report.evicted[0]} from node gpu-a3"]
    assert not any(r.applied for r in gate.records)
    assert sim.pods_on("gpu-a3") == before


def test_a_refusal_that_only_quotes_too_many_requests_is_named_at_once_not_waited_on(sim: KubeSim) -> None:
    # An admission webhook refuses the evictions (InternalError) and quotes an upstream 429 in its message:
    # the server's reason is not a budget's, nothing is retried and the pod is named with what the server said.
    with (sim.root / "profiles" / "plain" / "profile.yaml").open("a") as profile:
        profile.write('commands:\n  - regex: "/eviction"\n    exit: 1\n    stderr_text: "Error from server '
                      '(InternalError): Internal error occurred: failed calling webhook \\"evict.example.com\\": '
                      'upstream answered TooManyRequests"\n')
    sim.deploy("web", 3)
    report, time = drain(sim, "gpu-a3", timeout_s=30, retry_every_s=5)
    (left,) = report.not_evicted
    assert left.reason.startswith("eviction refused: Error from server (InternalError): ") and time.sleeps == 0
    assert "PodDisruptionBudget" not in left.reason
