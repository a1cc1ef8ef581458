"""etcdctl's member list and endpoint health (``clusterctl.facts.etcd``), on recorded real outputs
(tests/fixtures/etcdctl/README.md), and the choice of the member and the quorum check built on them."""

from __future__ import annotations

from dataclasses import replace

import pytest
from fixture_files import read_fixture
from refusals import refusal

from clusterctl.errors import ParseError
from clusterctl.facts.etcd import (
    EndpointHealth,
    etcd_quorum,
    etcdctl,
    member_of,
    parse_endpoint_health,
    parse_external_etcd,
    parse_member_list,
)


def test_member_list_reads_decimal_ids_names_and_urls() -> None:
    members = parse_member_list(read_fixture("etcdctl", "member-list-three.json"))
    assert [m.name for m in members] == ["etcd2", "etcd3", "etcd1"]
    assert members[2].id == 13919521250792505000 and members[2].hex_id == f"{13919521250792505000:x}"
    assert members[0].peer_urls == ("https://10.200.18.14:2380",)
    assert members[0].client_urls == ("https://10.200.18.14:2379",)
    assert members[0].to_json()["id"] == members[0].hex_id


def test_a_member_never_started_has_no_name_and_is_found_by_its_peer_url() -> None:
    members = parse_member_list(read_fixture("etcdctl", "member-list-unstarted.json"))
    unstarted = members[0]
    assert unstarted.hex_id == "5d3ef35c349993e4" and unstarted.name == "" and not unstarted.started
    assert unstarted.client_urls == ()
    assert member_of(members, "cp-3", "127.0.0.1") is unstarted
    assert member_of(members, "default", "10.9.9.9") is members[1]  # the name first
    assert member_of(members, "cp-9", "10.9.9.9") is None


def test_member_list_in_hex_reads_the_same_ids() -> None:
    (member,) = parse_member_list(read_fixture("etcdctl", "member-list-hex.json"))
    assert member.hex_id == "8e9e05c52164694d" and member.name == "default"


def test_endpoint_health_reads_each_endpoint() -> None:
    healthy = parse_endpoint_health(read_fixture("etcdctl", "endpoint-health-healthy.json"))
    assert [h.endpoint for h in healthy] == ["http://127.0.0.1:2379", "http://127.0.0.1:32379",
                                             "http://127.0.0.1:22379"]
    assert all(h.healthy and h.error == "" for h in healthy) and healthy[0].took == "520.835µs"
    recorded = parse_endpoint_health(read_fixture("etcdctl", "endpoint-health-one-down-etcd-3.7.json"))
    assert [h.healthy for h in recorded] == [True, True, False]
    assert recorded[2].error == "context deadline exceeded" and recorded[2].took == "5.001754516s"
    sick = parse_endpoint_health(read_fixture("etcdctl", "endpoint-health-unhealthy.json"))
    assert not any(h.healthy for h in sick) and sick[0].error == "etcdserver: user name is empty"


@pytest.mark.parametrize("text, line", [
    ("Error: context deadline exceeded\n", 1),
    ('{"header": {}}\n', 1),
    ('{"members": [{"name": "a"}]}\n', 1),
    ('{"members": [{"ID": "zz", "name": "a"}]}\n', 1),
    ('{"members": [\n  {"ID": 1,\n  "name": }', 3),
])
def test_member_list_that_cannot_be_read_names_the_line(text: str, line: int) -> None:
    assert refusal(parse_member_list, text).line == line


def test_endpoint_health_that_cannot_be_read_is_an_error() -> None:
    with pytest.raises(ParseError):
        parse_endpoint_health('[{"endpoint": "https://a:2379"}]')
    with pytest.raises(ParseError):
        parse_endpoint_health('{"endpoint": "https://a:2379", "health": true}')


def test_quorum_counts_the_healthy_members_left() -> None:
    members = parse_member_list(read_fixture("etcdctl", "member-list-three.json"))
    dead = members[1]  # etcd3
    up = [EndpointHealth(u, True, "1ms", "") for m in members if m is not dead for u in m.client_urls]
    assert etcd_quorum(members, up, dead) == ""
    one_down = [*up[:1], EndpointHealth(up[1].endpoint, False, "5s", "context deadline exceeded")]
    refused = etcd_quorum(members, one_down, dead)
    assert "quorum needs 2" in refused and "unhealthy: etcd1" in refused
    assert "last etcd member" in etcd_quorum(members[:1], up, members[0])


def test_quorum_counts_only_voting_members_as_etcd_does() -> None:
    # etcd refuses a voting member's removal unless the started VOTING members left are a majority of them;
    # a learner (kubeadm joins a control plane's member as one first) neither votes nor, removed, costs quorum.
    voters = parse_member_list(read_fixture("etcdctl", "member-list-three.json"))
    learner = replace(voters[2], id=1, name="cp-4", client_urls=("https://10.200.18.99:2379",), learner=True)
    members, leaving = [*voters, learner], voters[1]  # etcd3 leaves; etcd2 is down, etcd1 and the learner up
    health = [EndpointHealth(voters[0].client_urls[0], False, "5s", "context deadline exceeded"),
              EndpointHealth(voters[2].client_urls[0], True, "1ms", ""),
              EndpointHealth(learner.client_urls[0], True, "1ms", "")]
    refused = etcd_quorum(members, health, leaving)  # counting the learner: 2 healthy of 3, let through
    assert "would leave 1 healthy etcd member(s) of 2; quorum needs 2 (unhealthy: etcd2)" in refused
    assert etcd_quorum(members, health, learner) == ""  # the learner itself may always go


def test_etcdctl_runs_in_the_healthy_control_planes_etcd_pod_with_kubeadms_certificates() -> None:
    line = etcdctl("cp 1", "member list -w json")
    assert line.startswith("kubectl --kubeconfig /etc/kubernetes/admin.conf -n kube-system exec 'etcd-cp 1' -- ")
    assert "--cacert=/etc/kubernetes/pki/etcd/ca.crt" in line and line.endswith(" member list -w json")


def test_the_cluster_configuration_says_whether_etcd_is_external() -> None:
    assert parse_external_etcd(read_fixture("kubeadm-config", "cluster-configuration-external.yaml")) is True
    assert parse_external_etcd(read_fixture("kubeadm-config", "cluster-configuration-local.yaml")) is False
    assert parse_external_etcd("kind: ClusterConfiguration\nclusterName: kubernetes\n") is False  # stacked: the default


@pytest.mark.parametrize("text, line", [
    ("Error from server (NotFound): configmaps \"kubeadm-config\" not found\n", 1),
    ("kind: InitConfiguration\n", 1),
    ("kind: ClusterConfiguration\netcd:\n  external: [\n", 3),  # the last line, where the list never closed
])
def test_a_cluster_configuration_that_cannot_be_read_names_the_line(text: str, line: int) -> None:
    assert refusal(parse_external_etcd, text).line == line
