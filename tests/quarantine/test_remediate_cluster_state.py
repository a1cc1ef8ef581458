"""remediate serve decides from the cluster, not from its memory: released hosts that fail again,
half-finished quarantines, two receivers sharing one cap, and a hung host beside a healthy one.

Each receiver acts on a simulated cluster (``kube_sim``), whose kubectl keeps nodes, pods, budgets and
the ``coordination.k8s.io`` Lease the receivers coordinate through.
"""

from __future__ import annotations

import io
import json
import os
import signal
import socket
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from clirun import clusterctl
from kube_sim import KubeSim

from clusterctl.fanout import Runner
from clusterctl.inventory.loader import load_inventory
from clusterctl.quarantine import node_ops
from clusterctl.quarantine.cluster_lease import ClusterLease
from clusterctl.quarantine.drain import DrainOptions
from clusterctl.quarantine.receiver import Remediator
from clusterctl.transport.factory import ConnectOptions, make_connector

NAMES = [f"gpu-{i:02d}" for i in range(1, 9)]


def payload(*alerts: tuple[str, str]) -> bytes:
    return json.dumps({"version": "4", "status": "firing", "alerts": [
        {"status": "firing", "labels": {"alertname": name, "Hostname": host}} for name, host in alerts]}).encode()


def receiver(sim: KubeSim, **options: Any) -> tuple[Remediator, io.StringIO]:
    log = io.StringIO()
    connect = make_connector(ConnectOptions())
    return Remediator(load_inventory(str(sim.inventory)), lambda: Runner(connect, parallel=8, timeout_s=120), log,
                      state_dir=str(sim.root), **options), log


def decided(log: io.StringIO, host: str) -> list[str]:
    lines = [json.loads(line) for line in log.getvalue().splitlines()]
    return [d["decision"] for d in lines if d.get("host") == host and d["decision"] not in ("accepted", "journal")]


def out_of_service(sim: KubeSim) -> list[str]:
    return [n for n in sim.names if sim.node(n)["spec"].get("unschedulable")
            or any(t["key"] == node_ops.TAINT_KEY for t in sim.node(n)["spec"].get("taints", []))]


def put_back(sim: KubeSim, name: str) -> None:
    """What 'clusterctl release' leaves: no taint, not cordoned, no quarantine annotations."""
    for line in (f"taint nodes {name} {node_ops.TAINT_KEY}-", f"uncordon {name}",
                 f"annotate node {name} " + " ".join(f"{node_ops.annotation(k)}-" for k in node_ops.ANNOTATION_KEYS)):
        sim.kubectl(line)


@pytest.fixture
def sim(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> KubeSim:
    monkeypatch.chdir(tmp_path)
    return KubeSim(tmp_path, names=NAMES)


def test_a_released_host_that_fails_again_is_quarantined_again(sim: KubeSim) -> None:
    remediator, log = receiver(sim)
    remediator.handle(payload(("GPUXidError", "gpu-03")))
    assert remediator.settle(300)
    assert sim.node("gpu-03")["spec"]["unschedulable"] is True
    released = clusterctl("-i", sim.inventory, "release", "gpu-03", "--skip-checks", "--yes")
    assert released.exit_code == 0, released.output
    assert out_of_service(sim) == []
    remediator.handle(payload(("GPUXidError", "gpu-03")))
    assert remediator.settle(300)
    assert sim.node("gpu-03")["spec"]["unschedulable"] is True
    assert decided(log, "gpu-03") == ["quarantine", "quarantine"]


def test_a_half_finished_quarantine_is_finished_and_counts_against_the_cap(sim: KubeSim) -> None:
    # A receiver stopped between the taint and the cordon; the cap (1) is taken by that node already.
    code, _, err = sim.kubectl(f"taint nodes gpu-05 --overwrite {node_ops.TAINT_KEY}=GPUXidError:NoSchedule")
    assert code == 0, err
    remediator, log = receiver(sim, max_unavailable="1")
    remediator.handle(payload(("GPUXidError", "gpu-05"), ("GPUXidError", "gpu-06")))
    assert remediator.settle(300)
    node = sim.node("gpu-05")
    assert node["spec"]["unschedulable"] is True
    assert node["metadata"]["annotations"][node_ops.annotation("codes")] == "GPUXidError"
    assert decided(log, "gpu-05") == ["quarantine"] and "half-finished" in log.getvalue()
    assert decided(log, "gpu-06") == ["held"] and out_of_service(sim) == ["gpu-05"]


def test_two_receivers_with_cap_1_never_take_two_hosts_out(sim: KubeSim) -> None:
    """An HA pair: both get an alert for a different host at the same moment, round after round."""
    first, first_log = receiver(sim, max_unavailable="1")
    second, second_log = receiver(sim, max_unavailable="1")
    assert first.lease.holder != second.lease.holder
    rounds = 12
    for round_ in range(rounds):
        one, other = NAMES[round_ % len(NAMES)], NAMES[(round_ + 3) % len(NAMES)]
        go = threading.Barrier(2)

        def post(remediator: Remediator, host: str, go: threading.Barrier = go) -> None:
            go.wait(30)
            remediator.handle(payload(("GPUXidError", host)))

        threads = [threading.Thread(target=post, args=(first, one)),
                   threading.Thread(target=post, args=(second, other))]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
        assert first.settle(300) and second.settle(300)
        out = out_of_service(sim)
        assert len(out) == 1, f"round {round_}: {out} out of service with a cap of 1"
        verdicts = sorted(decided(first_log, one)[-1:] + decided(second_log, other)[-1:])
        assert verdicts == ["held", "quarantine"], f"round {round_}: {verdicts}"
        put_back(sim, out[0])
    lease = json.loads(sim.kubectl("get lease clusterctl-remediate -n kube-system -o json")[1])
    assert "holderIdentity" not in lease["spec"]  # given back after every decision


def test_a_hung_host_does_not_hold_up_another_hosts_decision(sim: KubeSim) -> None:
    """gpu-01's drain waits on a budget that allows no disruption (up to its 60 s drain timeout); an alert
    for gpu-02 meanwhile is answered at once and gpu-02 is out of service within 20 s."""
    sim.deploy("trainer", len(NAMES), min_available=len(NAMES))
    remediator, log = receiver(sim, max_unavailable="3", drain_options=DrainOptions(timeout_s=60))
    remediator.handle(payload(("GPUFellOffTheBus", "gpu-01")))
    deadline = time.monotonic() + 60
    while not sim.node("gpu-01")["spec"].get("unschedulable"):
        assert time.monotonic() < deadline, log.getvalue()
        time.sleep(0.2)
    assert not remediator.settle(0)  # gpu-01's drain is waiting on the budget
    began = time.monotonic()
    status, answer = remediator.handle(payload(("GPUXidError", "gpu-02")))
    answered_s = time.monotonic() - began
    assert status == 200 and answer["decisions"][0]["decision"] == "accepted"
    while not sim.node("gpu-02")["spec"].get("unschedulable") or not decided(log, "gpu-02"):
        assert time.monotonic() - began < 20, f"gpu-02 waited on gpu-01: {log.getvalue()}"
        time.sleep(0.1)
    assert answered_s < 5 and decided(log, "gpu-02") == ["quarantine"]
    assert not remediator.settle(0) and decided(log, "gpu-01") == []  # gpu-01 still draining
    assert remediator.settle(300)
    (gpu_01,) = [json.loads(line) for line in log.getvalue().splitlines()
                 if '"gpu-01"' in line and '"drain"' in line]
    assert "not evicted: default/trainer-" in gpu_01["why"]


def test_a_lease_left_by_a_crashed_receiver_is_taken_over_after_its_duration(sim: KubeSim) -> None:
    crashed = ClusterLease(holder="gone/pid-1/dead", duration_s=2)
    crashed.acquire(sim.transport(), 5)  # and never given back
    remediator, log = receiver(sim)
    began = time.monotonic()
    remediator.handle(payload(("GPUXidError", "gpu-04")))
    assert remediator.settle(300)
    assert decided(log, "gpu-04") == ["quarantine"] and time.monotonic() - began >= 2


def test_accepted_alerts_outlive_a_receiver_that_could_not_act(sim: KubeSim, tmp_path: Path) -> None:
    """The first receiver answers, then cannot reach the cluster (its work fails); the next one started
    with the same pending-work file acts on the alert Alertmanager will not send again for hours."""
    pending = tmp_path / "remediate-pending.json"

    def unreachable() -> Runner:
        raise OSError("connection refused")

    log = io.StringIO()
    first = Remediator(load_inventory(str(sim.inventory)), unreachable, log, pending_file=str(pending))
    status, _ = first.handle(payload(("GPUFellOffTheBus", "gpu-02")))
    assert status == 200 and json.loads(pending.read_text())["hosts"]["gpu-02"]["action"] == "drain"
    assert first.settle(60) and decided(log, "gpu-02") == ["failed"] and out_of_service(sim) == []
    second, second_log = receiver(sim, pending_file=str(pending))
    assert second.resume() == 1 and second.settle(300)
    assert out_of_service(sim) == ["gpu-02"] and decided(second_log, "gpu-02") == ["drain"]
    assert json.loads(pending.read_text())["hosts"] == {}
    third, _ = receiver(sim, pending_file=str(pending))
    assert third.resume() == 0


def test_a_host_that_does_not_answer_does_not_hold_up_another_hosts_decision(tmp_path: Path) -> None:
    """gpu-03 answers no command (its Slurm check waits out its 30 s); an alert for gpu-02 meanwhile is
    decided, and gpu-02 out of service, within 20 s."""
    sim = KubeSim(tmp_path, names=NAMES, hung=("gpu-03",))
    remediator, log = receiver(sim, max_unavailable="3")
    remediator.handle(payload(("GPUXidError", "gpu-03")))
    deadline = time.monotonic() + 60
    while not sim.node("gpu-03")["spec"].get("unschedulable"):  # marked through the control plane
        assert time.monotonic() < deadline, log.getvalue()
        time.sleep(0.2)
    began = time.monotonic()
    remediator.handle(payload(("GPUXidError", "gpu-02")))
    while not decided(log, "gpu-02"):
        assert time.monotonic() - began < 20, f"gpu-02 waited on gpu-03: {log.getvalue()}"
        time.sleep(0.1)
    assert decided(log, "gpu-02") == ["quarantine"] and sim.node("gpu-02")["spec"]["unschedulable"] is True
    assert not remediator.settle(0) and decided(log, "gpu-03") == []  # gpu-03's work goes on
    assert remediator.settle(300)
    assert decided(log, "gpu-03") == ["failed"] and "timed out" in log.getvalue()


def test_a_damaged_pending_file_is_a_usage_error_naming_it(sim: KubeSim, tmp_path: Path) -> None:
    from clusterctl.errors import UsageError

    pending = tmp_path / "remediate-pending.json"
    for text in ("{not json", '{"kind": "something else", "hosts": {}}', "[]"):
        pending.write_text(text)
        with pytest.raises(UsageError) as caught:
            receiver(sim, pending_file=str(pending))
        assert str(pending) in str(caught.value)


@pytest.mark.parametrize(("taint", "cordoned", "noted", "verdict"), [
    (False, False, False, "act"),         # in service (a released host too)
    (True, True, True, "duplicate"),      # quarantined
    (False, True, False, "duplicate"),    # cordoned by someone else: left alone
    (True, False, False, "complete"),     # stopped after the taint
    (True, True, False, "complete"),      # stopped before the annotations
    (False, False, True, "complete"),     # only the annotations
])
def test_the_verdict_reads_the_node_as_it_is(taint: bool, cordoned: bool, noted: bool, verdict: str) -> None:
    from clusterctl.facts.kube_nodes import KubeNode, Taint
    from clusterctl.quarantine.cluster_marker import judge

    node = KubeNode("gpu-05", unschedulable=cordoned,
                    taints=(Taint(node_ops.TAINT_KEY, "NoSchedule", "XID_79"),) if taint else (),
                    annotations={node_ops.annotation("at"): "2026-12-06T03:00:00Z"} if noted else {})
    assert judge(node, set(), 1)[0] == verdict
    full = judge(node, {"gpu-01"}, 1)[0]  # the cap is reached: only a node in service is held
    assert full == ("held" if verdict == "act" else verdict)
    assert judge(None, set(), 1)[0] == "failed"


@pytest.mark.parametrize("sig", (signal.SIGINT, signal.SIGTERM), ids=("SIGINT", "SIGTERM"))
def test_a_receiver_stopped_while_it_holds_the_lease_gives_it_back(sig: signal.Signals, sim: KubeSim,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """Ctrl-C or SIGTERM to ``remediate serve`` while it marks a node under the cluster's Lease: the marks in
    flight end, the Lease is given back at once and the stop is logged, so the next receiver decides right
    away instead of waiting out the hold (60 s). The Lease is coordination, never in the undo journal."""
    from clusterctl.quarantine import cluster_marker

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    original = cluster_marker.quarantine_node
    holders: list[str] = []

    def marks_under_the_lease(*args: Any, **kwargs: Any) -> Any:
        lease = json.loads(sim.kubectl("get lease clusterctl-remediate -n kube-system -o json")[1])
        holders.append(str(lease["spec"].get("holderIdentity") or ""))
        os.kill(os.getpid(), sig)
        time.sleep(1.0)  # the marks take a moment: the stop waits for them, then gives the Lease back
        return original(*args, **kwargs)

    def alert() -> None:
        deadline = time.monotonic() + 120
        while True:
            try:
                request = urllib.request.Request(f"http://127.0.0.1:{port}/webhook",
                                                 data=payload(("GPUXidError", "gpu-03")),
                                                 headers={"Content-Type": "application/json"})
                with urllib.request.urlopen(request, timeout=60):
                    return
            except OSError:
                if time.monotonic() > deadline:
                    return
                time.sleep(0.2)

    threading.Thread(target=alert, daemon=True).start()
    with monkeypatch.context() as patched:
        patched.setattr(cluster_marker, "quarantine_node", marks_under_the_lease)
        run = clusterctl("-i", sim.inventory, "remediate", "serve", "--listen", f"127.0.0.1:{port}", "--yes")
    assert run.exit_code == (130 if sig is signal.SIGINT else 143), run.output
    assert holders and holders[0], "the signal came while the receiver held the Lease"
    lease = json.loads(sim.kubectl("get lease clusterctl-remediate -n kube-system -o json")[1])
    assert "holderIdentity" not in lease["spec"], lease  # given back, not left to expire
    log = [json.loads(line) for line in run.stderr.splitlines() if line.startswith("{")]
    (stopped,) = [d for d in log if d["decision"] == "stopped"]
    assert "Lease is given back" in stopped["why"]
    assert sim.node("gpu-03")["spec"].get("unschedulable") is True  # the marks in flight ended
    # The next receiver decides at once: a Lease left held would keep it waiting past its 5 s here.
    nxt, nxt_log = receiver(sim, max_unavailable="3")
    nxt._marker.lease_wait_s = 5.0
    began = time.monotonic()
    nxt.handle(payload(("GPUXidError", "gpu-05")))
    assert nxt.settle(120)
    assert decided(nxt_log, "gpu-05") == ["quarantine"], nxt_log.getvalue()
    assert time.monotonic() - began < 30
