"""remediate serve: the webhook receiver's decisions, its HTTP answers, and a bounded burst."""

from __future__ import annotations

import io
import json
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kube_sim import KubeSim

from clusterctl.bootstrap.cluster.alerts import render_alertmanager_receiver
from clusterctl.fanout import Runner
from clusterctl.inventory.loader import load_inventory
from clusterctl.quarantine.drain import DrainOptions
from clusterctl.quarantine.receiver import REJECTED_NAMED, Remediator, serve
from clusterctl.quarantine.webhook_payload import parse_payload
from clusterctl.quarantine.webhook_server import ListenAddress, Security
from clusterctl.transport.factory import ConnectOptions, make_connector


def payload(*alerts: tuple[str, str], status: str = "firing") -> bytes:
    return json.dumps({"version": "4", "status": status, "receiver": "clusterctl-remediate", "alerts": [
        {"status": status, "labels": {"alertname": name, "Hostname": host, "gpu": "3", "severity": "critical"},
         "annotations": {}, "startsAt": "2026-12-01T20:00:00Z"} for name, host in alerts]}).encode()


def remediator(sim: KubeSim, **options: Any) -> tuple[Remediator, io.StringIO]:
    inventory = load_inventory(str(sim.inventory))
    log = io.StringIO()
    connect = make_connector(ConnectOptions())
    return Remediator(inventory, lambda: Runner(connect, parallel=16, timeout_s=60), log,
                      state_dir=str(sim.root), **options), log


def decisions(log: io.StringIO, *, accepted: bool = False) -> list[dict[str, Any]]:
    """The log's decisions (the work's, without the 'accepted' of each alert unless asked)."""
    lines = [json.loads(line) for line in log.getvalue().splitlines()]
    return [d for d in lines if accepted or d["decision"] not in ("accepted", "journal")]


def handled(receiver: Remediator, body: bytes) -> int:
    """POST ``body`` and wait for the work it queued."""
    status, _ = receiver.handle(body)
    assert receiver.settle(300)
    return status


@pytest.fixture
def sim(tmp_path: Path) -> KubeSim:
    return KubeSim(tmp_path, names=[f"gpu-{i:02d}" for i in range(1, 11)])


def test_an_alert_quarantines_and_drains_the_host_it_names_once(sim: KubeSim) -> None:
    sim.deploy("web", 10)
    receiver, log = remediator(sim)
    status, answer = receiver.handle(payload(("GPUFellOffTheBus", "gpu-03")))
    assert status == 200 and answer["decisions"] == [{"host": "gpu-03", "alert": "GPUFellOffTheBus",
                                                      "decision": "accepted"}]
    assert receiver.settle(300)
    assert any(d["decision"] == "journal" for d in decisions(log, accepted=True))
    spec = sim.node("gpu-03")["spec"]
    assert {"key": "clusterctl.dev/unhealthy", "value": "GPUFellOffTheBus", "effect": "NoSchedule"} in spec["taints"]
    assert not any(p.startswith("default/web-") for p in sim.pods_on("gpu-03"))
    before = sim.snapshot(leases=False)
    status = handled(receiver, payload(("GPUFellOffTheBus", "gpu-03"), ("GPUXidError", "gpu-03")))
    assert status == 200 and sim.snapshot(leases=False) == before
    seen = [d["decision"] for d in decisions(log) if d.get("host") == "gpu-03"]
    assert seen[0] == "drain" and set(seen[1:]) == {"duplicate"}, seen
    # One undo journal: the repeats changed nothing and left none.
    assert len([p for p in (sim.root / "undo").iterdir() if p.suffix == ".json"]) == 1


def test_a_quarantined_host_whose_evictions_are_refused_again_is_a_duplicate(sim: KubeSim) -> None:
    """A budget that allows no disruption refuses every eviction: the repeat alert changed nothing (a refused
    eviction did not happen), so it is logged as a duplicate, not as a second drain."""
    sim.deploy("web", 10, min_available=10)
    receiver, log = remediator(sim, drain_options=DrainOptions(timeout_s=0.5, retry_every_s=0.1))
    handled(receiver, payload(("GPUFellOffTheBus", "gpu-03")))
    handled(receiver, payload(("GPUFellOffTheBus", "gpu-03")))
    seen = [d["decision"] for d in decisions(log) if d.get("host") == "gpu-03"]
    assert seen == ["drain", "duplicate"], seen


def test_hosts_outside_the_inventory_reports_and_resolved_alerts_change_nothing(sim: KubeSim) -> None:
    receiver, log = remediator(sim)
    before = sim.snapshot()
    status, _ = receiver.handle(payload(("GPUFellOffTheBus", "db-7"), ("GPUTemperatureHigh", "gpu-01")))
    assert status == 200
    status, _ = receiver.handle(payload(("GPUFellOffTheBus", "gpu-02"), status="resolved"))
    assert status == 200 and sim.snapshot() == before
    seen = {(d.get("host"), d["decision"]) for d in decisions(log)}
    assert {("db-7", "ignored"), ("gpu-01", "reported"), ("gpu-02", "ignored")} <= seen


def test_a_bad_body_is_a_400_and_changes_nothing(sim: KubeSim) -> None:
    receiver, log = remediator(sim)
    before = sim.snapshot()
    for body in (b"not json", b"\xff\xfe", b"[]", b'{"alerts": {}}', b'{"alerts": [{"labels": {}}]}',
                 b'{"alerts": [{"status": "maybe", "labels": {"alertname": "x"}}]}',
                 b'{"alerts": [{"labels": {"alertname": "x"}}], "truncatedAlerts": "some"}'):
        status, answer = receiver.handle(body)
        assert status == 400 and answer["error"], body
    assert sim.snapshot() == before
    assert {d["decision"] for d in decisions(log)} == {"rejected"}


@pytest.mark.parametrize(("label", "value"), [
    ("instance", "https://" + "probe.example.net/" * 16 + "health:443"),  # a blackbox exporter's target: 300 chars
    ("Hostname", "h" * 900_000),
    ("Hostname", "gpu-01\x1b]0;owned\x07"),
])
def test_an_alert_it_cannot_read_is_rejected_alone_and_its_groups_other_alerts_are_acted_on(
        sim: KubeSim, label: str, value: str) -> None:
    receiver, log = remediator(sim)
    body = json.loads(payload(("GPUFellOffTheBus", "gpu-03"), ("GPUXidError", "gpu-04")))
    del body["alerts"][1]["labels"]["Hostname"]
    body["alerts"][1]["labels"][label] = value
    status, answer = receiver.handle(json.dumps(body).encode())
    # Not a 400: Alertmanager would drop the whole group, the readable alert with it.
    assert status == 200, answer
    first, second = answer["decisions"]
    assert first == {"host": "gpu-03", "alert": "GPUFellOffTheBus", "decision": "accepted"}
    assert (second["alert"], second["decision"]) == ("alerts[1] ('GPUXidError')", "rejected")
    assert second["why"].startswith(f"alerts[1].labels.{label}: ") and len(json.dumps(answer)) < 1000
    assert receiver.settle(300)
    assert sim.node("gpu-03")["spec"]["unschedulable"] is True
    assert not sim.node("gpu-04")["spec"].get("unschedulable")
    lines = log.getvalue().splitlines()
    assert all(len(line) < 1000 and "\x1b" not in line for line in lines)
    assert [json.loads(line)["why"] for line in lines if json.loads(line)["decision"] == "rejected"] == [second["why"]]


def test_many_unreadable_alerts_beside_a_good_one_write_a_bounded_log_and_answer(sim: KubeSim) -> None:
    receiver, log = remediator(sim)
    body = json.loads(payload(("GPUFellOffTheBus", "gpu-03")))
    body["alerts"] += [{}] * 50_000  # an authenticated caller's 1 MiB body: one good alert, the rest unreadable
    status, answer = receiver.handle(json.dumps(body).encode())
    assert status == 200 and answer["decisions"][0]["decision"] == "accepted"
    rejected = [d for d in answer["decisions"] if d["decision"] == "rejected"]
    assert len(rejected) == REJECTED_NAMED + 1 and rejected[-1]["alert"] == f"{50_000 - REJECTED_NAMED} more alerts"
    assert len(json.dumps(answer)) < 10_000
    assert len([line for line in log.getvalue().splitlines() if '"rejected"' in line]) == REJECTED_NAMED + 1
    assert receiver.settle(300) and sim.node("gpu-03")["spec"]["unschedulable"] is True


def test_the_cap_counts_nodes_already_out_of_service(sim: KubeSim) -> None:
    sim.kubectl("cordon gpu-10")
    receiver, log = remediator(sim, max_unavailable="2")
    handled(receiver, payload(("GPUXidError", "gpu-01"), ("GPUXidError", "gpu-02"), ("GPUXidError", "gpu-03")))
    taken = [n for n in sim.names if sim.node(n)["spec"].get("unschedulable")]
    assert len(taken) == 2 and "gpu-10" in taken
    assert sorted(d["decision"] for d in decisions(log) if d.get("host") in ("gpu-01", "gpu-02", "gpu-03")) == \
        ["held", "held", "quarantine"]


def test_a_dry_run_decides_logs_and_touches_nothing(sim: KubeSim) -> None:
    receiver, log = remediator(sim, dry_run=True)
    before = sim.snapshot()
    status = handled(receiver, payload(("GPUFellOffTheBus", "gpu-04")))
    assert status == 200 and sim.snapshot() == before  # no Lease written either
    assert [d["decision"] for d in decisions(log) if d.get("host") == "gpu-04"] == ["would drain"]


@pytest.mark.parametrize(("instance", "host"), [
    ("10.0.0.4:9400", "10.0.0.4"), ("[fd00::4]:9400", "fd00::4"), ("gpu-01", "gpu-01"),
    # A bare IPv6 address (a blackbox ICMP probe's target) was cut at its last colon: "fd00:".
    ("fd00::4", "fd00::4"),
    # The blackbox exporter's documented relabelling puts the probed URL in instance; it read as "https".
    ("https://gpu-01.lab:8443/healthz", "gpu-01.lab"), ("http://10.0.0.4/probe?module=http_2xx", "10.0.0.4"),
    ("http://[fd00::4]:9115/", "fd00::4"),
])
def test_an_instance_label_gives_its_host_without_port_or_url(instance: str, host: str) -> None:
    body = json.dumps({"alerts": [{"labels": {"alertname": "GPUXidError", "instance": instance}}]}).encode()
    assert parse_payload(body)[0][0].host_label == host


def test_a_body_that_is_not_json_is_refused_saying_where_and_what() -> None:
    """The 400 a sender (or whoever misconfigured it) reads names line, column and what is wrong, in words."""
    from clusterctl.quarantine.webhook_payload import BadPayload

    with pytest.raises(BadPayload) as refused:
        parse_payload(b'{"alerts": [\n  {"labels": {"alertname": "GPUXidError",}}]}')
    assert str(refused.value) == "not JSON at line 2, column 42: a ',' before the '}' or ']' that ends the entries " \
                                 "is one too many"


@pytest.fixture
def http_receiver(sim: KubeSim) -> Iterator[tuple[str, Remediator]]:
    receiver, _ = remediator(sim)
    bound: list[int] = []
    started = threading.Event()

    def ready(port: int) -> None:
        bound.append(port)
        started.set()

    thread = threading.Thread(target=serve, args=(receiver, ListenAddress("127.0.0.1", 0), Security()),
                              kwargs={"ready": ready}, daemon=True)
    thread.start()
    assert started.wait(30)
    yield f"http://127.0.0.1:{bound[0]}", receiver


def post(url: str, body: bytes) -> tuple[int, dict[str, Any]]:
    request = urllib.request.Request(url, data=body, headers={"Content-Type": "application/json"}, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=60) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def test_over_http_bad_bodies_get_400_and_alerts_act(sim: KubeSim,
                                                     http_receiver: tuple[str, Remediator]) -> None:
    url, receiver = http_receiver
    with urllib.request.urlopen(url + "/healthz", timeout=30) as answer:
        assert answer.status == 200
    assert post(url + "/webhook", b"{nope")[0] == 400
    assert "unschedulable" not in sim.node("gpu-05")["spec"]
    status, answer = post(url + "/webhook", payload(("NVLinkCRCErrors", "gpu-05")))
    assert status == 200 and receiver.settle(300) and sim.node("gpu-05")["spec"]["unschedulable"] is True


def test_the_alertmanager_snippet_names_the_receiver() -> None:
    import yaml

    config = yaml.safe_load(render_alertmanager_receiver("http://10.0.0.5:9095/webhook"))
    assert config["route"]["receiver"] == "clusterctl-remediate"
    assert config["receivers"][0]["webhook_configs"][0]["url"] == "http://10.0.0.5:9095/webhook"


def test_a_burst_of_1000_alerts_for_100_hosts_respects_the_cap_and_acts_once(tmp_path: Path) -> None:
    sim = KubeSim(tmp_path, names=[f"node-{i:03d}" for i in range(100)])
    receiver, log = remediator(sim)
    names = ("GPUXidError", "GPUFellOffTheBus", "NVLinkCRCErrors", "GPUTemperatureHigh", "GPURowRemapFailure")
    bodies = [payload(*[(names[(batch + i) % len(names)], f"node-{(batch * 7 + i * 13) % 100:03d}")
                        for i in range(10)]) for batch in range(100)]
    answers: list[int] = []

    def send(chunk: list[bytes]) -> None:
        for body in chunk:
            answers.append(receiver.handle(body)[0])

    threads = [threading.Thread(target=send, args=(bodies[i::8],)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=600)
    assert answers.count(200) == 100
    assert receiver.settle(600)
    acted = [d for d in decisions(log) if d["decision"] in ("drain", "quarantine")]
    assert len(acted) == 10 and len({d["host"] for d in acted}) == 10  # 10% of 100 hosts, each once
    out = [n for n in sim.names if sim.node(n)["spec"].get("unschedulable")]
    assert sorted(out) == sorted(d["host"] for d in acted)
    assert sum(1 for d in decisions(log) if d["decision"] == "held") > 0


def test_the_receivers_undo_journal_names_its_cluster_and_fleet_as_the_clis_do(
        sim: KubeSim, monkeypatch: pytest.MonkeyPatch) -> None:
    """A journal the receiver wrote and one `clusterctl quarantine` wrote on the same inventory name the same
    cluster and fleet (the inventory's name and ``RunPlace``'s key, as bootstrap's journals do): whoever runs
    `undo` on it can tell which cluster it is for."""
    from clirun import clusterctl

    from clusterctl.engine.progress import RunPlace

    monkeypatch.chdir(sim.root)
    receiver, _ = remediator(sim)
    assert handled(receiver, payload(("GPUXidError", "gpu-03"))) == 200
    (made,) = (json.loads(p.read_text()) for p in (sim.root / "undo").glob("*.json"))
    done = clusterctl("-i", sim.inventory, "-o", "json", "quarantine", "gpu-04", "--reason", "xid", "--yes")
    assert done.exit_code == 0, done.output
    by_cli = json.loads(Path(json.loads(done.stdout)["undo_journal"]).read_text())
    inventory = load_inventory(str(sim.inventory))
    expected = {"cluster": "qsim", "fleet": RunPlace.of(inventory, "bootstrap").key}
    assert {k: made.get(k) for k in expected} == expected, made
    assert {k: by_cli.get(k) for k in expected} == expected, by_cli


def test_work_that_asks_for_its_runner_after_the_stop_began_gets_none(sim: KubeSim,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """A host's work and ``stop`` racing: the work passed its last look at the stop and asks for its runner just
    after the stop began. No runner starts, so nothing is drained behind the stop's back (before, that drain ran
    to its end, bounded only by the stop's wait for the work in flight)."""
    sim.deploy("web", 10)
    receiver, log = remediator(sim)
    on_node = [p for p in sim.pods_on("gpu-03") if p.startswith("default/web-")]
    at_runner, stop_began = threading.Event(), threading.Event()
    factory = receiver.runner_factory

    def late_runner() -> Runner:
        at_runner.set()
        assert stop_began.wait(120)
        return factory()

    receiver.runner_factory = late_runner  # the node marks keep theirs: only the drain's runner comes late
    marker_stop = receiver._marker.stop

    def stop_marks(timeout_s: float) -> bool:  # stop() calls it once the stop has begun
        stop_began.set()
        return marker_stop(timeout_s)

    monkeypatch.setattr(receiver._marker, "stop", stop_marks)
    receiver.handle(payload(("GPUFellOffTheBus", "gpu-03")))
    assert at_runner.wait(120), log.getvalue()
    receiver.stop()
    assert receiver.settle(300)  # the refused work has logged, however loaded the machine
    assert on_node and [p for p in sim.pods_on("gpu-03") if p.startswith("default/web-")] == on_node
    (last,) = [d for d in decisions(log) if d.get("host") == "gpu-03"]
    assert last["decision"] == "failed" and "receiver stopped in the middle" in last["why"], last


def test_work_that_cannot_start_is_logged_in_words_not_python_class_names(sim: KubeSim) -> None:
    """The undo journal's folder cannot be made (a file stands in its place): the host's work fails, logged as
    clusterctl's own error says it, without the exception's class name."""
    receiver, log = remediator(sim)
    (sim.root / "undo").write_text("not a folder\n")
    assert handled(receiver, payload(("GPUFellOffTheBus", "gpu-03"))) == 200
    (failed,) = [d for d in decisions(log) if d.get("host") == "gpu-03"]
    assert failed["decision"] == "failed" and "cannot make the undo journal's folder" in failed["why"], failed
    assert "Error" not in failed["why"], failed
