"""Webhook bodies other people's software sent (tests/fixtures/alertmanager-webhook, sources in its README),
posted to the receiver as Alertmanager or Grafana posts them: which host is acted on, what is named and left."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from kube_sim import KubeSim
from test_remediate import decisions, http_receiver, post, remediator  # noqa: F401 (http_receiver: a fixture)

from clusterctl.quarantine.receiver import Remediator

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "alertmanager-webhook"


def body(name: str) -> bytes:
    return (FIXTURES / name).read_bytes()


@pytest.fixture
def sim(tmp_path: Path) -> KubeSim:
    """Four hosts; gpu-02's inventory address is the blackbox probe's target 172.29.254.50, gpu-03's the FQDN a
    node label carries, and the blackbox exporter's alert is one the inventory says to quarantine on."""
    sim = KubeSim(tmp_path, names=("gpu-01", "gpu-02", "gpu-03", "gpu-04"))
    text = sim.inventory.read_text().replace("address: 10.0.0.2,", "address: 172.29.254.50,")
    text = text.replace("address: 10.0.0.3,", "address: node.foo.example.com,")
    sim.inventory.write_text(text + "quarantine:\n  alerts: {ICMP ping failed: quarantine}\n")
    return sim


def answered(receiver: Remediator, name: str) -> tuple[int, list[dict[str, Any]]]:
    status, answer = receiver.handle(body(name))
    assert receiver.settle(300)
    return status, answer.get("decisions", [])


def test_a_blackbox_group_of_three_quarantines_the_one_inventory_host_and_names_the_others(sim: KubeSim) -> None:
    """Version 4, a groupKey with a regex matcher's quotes and brackets, ``instance`` a bare IP (no port)."""
    receiver, log = remediator(sim)
    status, answer = answered(receiver, "blackbox-icmp-firing.json")
    assert status == 200
    assert [(d["host"], d["decision"]) for d in answer] == [
        ("172.29.254.30", "ignored"), ("gpu-02", "accepted"), ("172.29.254.66", "ignored")]
    assert sim.node("gpu-02")["spec"]["unschedulable"] is True
    assert all("unschedulable" not in sim.node(n)["spec"] for n in ("gpu-01", "gpu-03", "gpu-04"))
    done = [d for d in decisions(log) if d.get("host") == "gpu-02"]
    assert [d["decision"] for d in done] == ["quarantine"] and done[0]["alert"] == "ICMP ping failed"
    skipped = {d["host"]: d["why"] for d in decisions(log) if d["decision"] == "ignored"}
    assert skipped == {ip: "not a host of the inventory: never acted on" for ip in ("172.29.254.30", "172.29.254.66")}


def test_the_same_group_resolved_changes_nothing_and_names_each_alert(sim: KubeSim) -> None:
    receiver, log = remediator(sim)
    before = sim.snapshot()
    status, answer = answered(receiver, "blackbox-icmp-resolved.json")
    assert status == 200 and sim.snapshot() == before
    assert [(d["host"], d["decision"]) for d in answer] == [
        ("172.29.254.30", "ignored"), ("gpu-02", "ignored"), ("172.29.254.66", "ignored")]
    assert all(d["why"].startswith("resolved") for d in decisions(log))


def test_grafanas_body_with_no_host_label_is_answered_200_and_says_its_alerts_name_no_host(sim: KubeSim) -> None:
    """Grafana's webhook contact point: version "1", orgId, state, title, message, values (floats), silenceURL,
    and labels that name no host: nothing is done, and the log says why in those words (not "not a host of
    the inventory" about an empty name)."""
    receiver, log = remediator(sim)
    before = sim.snapshot()
    status, answer = answered(receiver, "grafana-docs-two-firing.json")
    assert status == 200 and sim.snapshot() == before
    assert [(d["alert"], d["decision"]) for d in answer] == [("High memory usage", "ignored"),
                                                             ("High CPU usage", "ignored")]
    assert [d["why"] for d in decisions(log)] == [
        "names no host (Hostname, hostname, node, instance): never acted on"] * 2


def test_a_node_label_with_the_fqdn_the_inventory_gives_as_address_finds_that_host(sim: KubeSim) -> None:
    """``commonAnnotations: null`` and a ``node`` label carrying a fully qualified name."""
    receiver, _ = remediator(sim)
    status, answer = answered(receiver, "probe-failure-node-fqdn.json")
    assert status == 200
    assert answer == [{"host": "gpu-03", "alert": "ProbeFailure", "decision": "reported"}]
    assert "unschedulable" not in sim.node("gpu-03")["spec"]


def test_grafanas_test_notification_names_the_alerts_it_left_out(sim: KubeSim) -> None:
    """Grafana 8's "Test" of a webhook contact point: resolved, ``truncatedAlerts`` 1, ``instance`` "Grafana".
    The alert the sender cut from the POST is said (before: not a word, and no host ever acted on)."""
    receiver, log = remediator(sim)
    before = sim.snapshot()
    status, answer = answered(receiver, "grafana8-test-notification-resolved.json")
    assert status == 200 and sim.snapshot() == before
    assert answer == [{"host": "Grafana", "alert": "TestAlert", "decision": "ignored"},
                      {"host": "", "alert": "1 more alert", "decision": "ignored"}]
    assert decisions(log)[-1]["why"] == ("left out of this POST by the sender (truncatedAlerts: its max_alerts): "
                                         "never acted on")


def test_every_alertmanager_shaped_field_body_is_answered_200_over_http_and_grafana7s_legacy_body_400(
        http_receiver: tuple[str, Remediator]) -> None:  # noqa: F811 (the fixture imported above)
    """Alertmanager retries a 5xx and drops a 4xx: every real webhook body is a 200, whatever it asks; Grafana 7's
    legacy alerting body (no ``alerts``) is a 400 that says what is missing."""
    url, receiver = http_receiver
    for name in sorted(p.name for p in FIXTURES.glob("*.json")):
        status, answer = post(url + "/webhook", body(name))
        if "alerts" in json.loads(body(name)):
            assert status == 200 and answer["decisions"], (name, answer)
        else:
            assert (status, answer) == (400, {"error": "alerts: missing: not an Alertmanager webhook payload"})
    assert receiver.settle(300)


def test_a_node_exporter_group_named_in_chinese_quarantines_the_host_its_relabelled_instance_names(
        tmp_path: Path) -> None:
    """kube-prometheus-style relabelling: ``instance`` is the node's name without a port; the alert's name is not
    ASCII (``load5负载高于5``). Firing acts on the one inventory host and names the others; resolved changes nothing."""
    sim = KubeSim(tmp_path, names=("gpu-01", "gpu-02"))
    text = sim.inventory.read_text().replace("address: 10.0.0.2,", "address: test-k8s-node1,")
    sim.inventory.write_text(text + "quarantine:\n  alerts: {load5负载高于5: quarantine}\n")
    receiver, log = remediator(sim)
    status, answer = answered(receiver, "node-exporter-load5-cjk-firing.json")
    assert status == 200
    assert [(d["host"], d["alert"], d["decision"]) for d in answer] == [
        ("test-k8s-master", "load5负载高于5", "ignored"), ("gpu-02", "load5负载高于5", "accepted"),
        ("test-k8s-node2", "load5负载高于5", "ignored")]
    assert sim.node("gpu-02")["spec"]["unschedulable"] is True and "unschedulable" not in sim.node("gpu-01")["spec"]
    before = sim.snapshot()
    status, answer = answered(receiver, "node-exporter-load5-cjk-resolved.json")
    assert status == 200 and sim.snapshot() == before
    assert [d["decision"] for d in answer] == ["ignored"] * 3
    assert [d["why"] for d in decisions(log) if d.get("host") == "gpu-02"][-1].startswith("resolved")
