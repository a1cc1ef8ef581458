"""etcd as a kubeadm control plane runs it (stacked: one member per control-plane node), read with etcdctl.

etcdctl runs inside the healthy control plane's own etcd static pod (``kubectl exec etcd-NODE``): every
kubeadm control plane has it there (the etcd image ships etcdctl), with the etcd CA and the health-check
client certificate kubeadm made for the pod's liveness probe mounted, so nothing is installed on the host
and no key leaves it. docs/day2.md says why.

``member list -w json`` writes member IDs as decimal integers; ``member remove`` takes the hexadecimal
form (``%x``). A member added but not started has neither a name nor client URLs.
``endpoint health --cluster -w json`` asks every member's client URL and prints one object per endpoint
(``health`` false and an ``error`` for one that did not answer); it then exits 1 with "Error: unhealthy
cluster" on stderr when any is unhealthy, so its stdout is read whatever the exit code.
With an external etcd (kubeadm's ClusterConfiguration sets ``etcd.external``) no control plane runs a
member or an etcd pod: its members are not the cluster's to change.
"""

from __future__ import annotations

import json
import shlex
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from clusterctl.errors import ParseError, UsageError
from clusterctl.facts.kube import json_below, kubectl
from clusterctl.json_input import read_yaml

#: kubeadm's paths inside the etcd static pod (kubeadm's etcd manifest mounts /etc/kubernetes/pki/etcd).
ETCD_PKI = "/etc/kubernetes/pki/etcd"
ETCDCTL_TLS = (f"--endpoints=https://127.0.0.1:2379 --cacert={ETCD_PKI}/ca.crt "
               f"--cert={ETCD_PKI}/healthcheck-client.crt --key={ETCD_PKI}/healthcheck-client.key")


#: kubeadm's ClusterConfiguration as the cluster keeps it (``kubeadm init`` uploads it; reset and
#: upgrade read it back from there).
CLUSTER_CONFIGURATION = kubectl("-n kube-system get configmap kubeadm-config -o "
                                + shlex.quote("jsonpath={.data.ClusterConfiguration}"))


def etcdctl(node: str, args: str) -> str:
    """``etcdctl ARGS`` run in the etcd static pod of the control-plane node ``node``, from that node."""
    pod = shlex.quote(f"etcd-{node}")
    return kubectl(f"-n kube-system exec {pod} -- etcdctl {ETCDCTL_TLS} {args}")


@dataclass(frozen=True)
class EtcdMember:
    id: int
    name: str
    peer_urls: tuple[str, ...]
    client_urls: tuple[str, ...]
    learner: bool = False

    @property
    def hex_id(self) -> str:
        """The ID as ``member remove`` takes it."""
        return f"{self.id:x}"

    @property
    def started(self) -> bool:
        return bool(self.name)

    def to_json(self) -> dict[str, Any]:
        return {"id": self.hex_id, "name": self.name, "peer_urls": list(self.peer_urls),
                "client_urls": list(self.client_urls), "learner": self.learner, "started": self.started}


@dataclass(frozen=True)
class EndpointHealth:
    endpoint: str
    healthy: bool
    took: str
    error: str


def _strings(what: str, value: Any, field: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ParseError(what, f"{field} is not a list of URLs", line=1, text=json.dumps(value)[:120])
    return tuple(value)


def parse_member_list(text: str) -> list[EtcdMember]:
    """``etcdctl member list -w json`` -> the members, in etcdctl's order."""
    what = "etcdctl member list -w json"
    data = json_below(what, text)
    if not isinstance(data, dict) or not isinstance(data.get("members"), list):
        raise ParseError(what, "no 'members' list", line=1, text=text.splitlines()[0] if text else "")
    members = []
    for entry in data["members"]:
        raw_id = entry.get("ID") if isinstance(entry, dict) else None
        if isinstance(raw_id, bool) or not isinstance(raw_id, (int, str)):
            raise ParseError(what, "a member without an ID", line=1, text=json.dumps(entry)[:120])
        try:
            # Decimal integers; etcdctl --hex (3.6) writes hexadecimal strings.
            member_id = raw_id if isinstance(raw_id, int) else int(raw_id, 16)
        except ValueError:
            raise ParseError(what, f"member ID {raw_id!r} is not a number", line=1, text=json.dumps(entry)[:120]) \
                from None
        name = entry.get("name", "")
        if not isinstance(name, str):
            raise ParseError(what, "a member's name is not text", line=1, text=json.dumps(entry)[:120])
        members.append(EtcdMember(member_id, name, _strings(what, entry.get("peerURLs"), "peerURLs"),
                                  _strings(what, entry.get("clientURLs"), "clientURLs"),
                                  bool(entry.get("isLearner", False))))
    return members


def parse_endpoint_health(text: str) -> list[EndpointHealth]:
    """``etcdctl endpoint health --cluster -w json`` -> one health per endpoint."""
    what = "etcdctl endpoint health -w json"
    data = json_below(what, text)
    if not isinstance(data, list):
        raise ParseError(what, "not a list of endpoints", line=1, text=text.splitlines()[0] if text else "")
    found = []
    for entry in data:
        if not isinstance(entry, dict) or not isinstance(entry.get("endpoint"), str) \
                or not isinstance(entry.get("health"), bool):
            raise ParseError(what, "an entry without 'endpoint' and 'health'", line=1, text=json.dumps(entry)[:120])
        found.append(EndpointHealth(entry["endpoint"], entry["health"], str(entry.get("took", "")),
                                    str(entry.get("error", ""))))
    return found


def parse_external_etcd(text: str) -> bool:
    """kubeadm's ClusterConfiguration (YAML) -> whether its etcd is external (``etcd.external``)."""
    what = "kubeadm's ClusterConfiguration"
    lines = text.splitlines() or [""]
    try:
        data = read_yaml(text)
    except UsageError as exc:
        line = min(exc.line or 1, len(lines))
        raise ParseError(what, exc.message, line=line, text=lines[line - 1]) from None
    if not isinstance(data, dict) or data.get("kind") != "ClusterConfiguration":
        raise ParseError(what, "no ClusterConfiguration", line=1, text=lines[0])
    etcd = data.get("etcd")
    return isinstance(etcd, dict) and etcd.get("external") is not None


def url_host(url: str) -> str:
    """The host part of a peer or client URL (``https://10.0.0.13:2380`` -> ``10.0.0.13``)."""
    try:
        return urlsplit(url).hostname or ""
    except ValueError:
        return ""


def member_of(members: list[EtcdMember], node: str, address: str) -> EtcdMember | None:
    """The member of the control-plane node ``node``: kubeadm names each member after its node; a member
    whose name was lost (added, never started) is matched by its peer URL's host, the node's address."""
    return next((m for m in members if m.name == node), None) or next(
        (m for m in members if address and any(url_host(u) == address for u in m.peer_urls)), None)


def etcd_quorum(members: list[EtcdMember], health: list[EndpointHealth], leaving: EtcdMember) -> str:
    """The one quorum rule: why taking ``leaving`` out of etcd would break its quorum ("" when it would not).
    A member that stays is healthy when a client URL of its own answers healthy (etcd's health, not its
    node's Ready); the healthy ones must be a majority of them (etcd's quorum of n members: n // 2 + 1). As
    etcd's own check before a removal, only voting members count: a learner neither votes nor, leaving, matters."""
    healthy = {h.endpoint for h in health if h.healthy}
    left = {m.name or m.hex_id: any(u in healthy for u in m.client_urls) for m in members
            if m.id != leaving.id and not m.learner}
    name = leaving.name or leaving.hex_id
    needed, good = len(left) // 2 + 1, sum(left.values())
    if leaving.learner:
        return ""
    if not left:
        return f"member {name} is the last etcd member"
    if good >= needed:
        return ""
    sick = ", ".join(member for member, up in left.items() if not up)
    return (f"removing etcd member {name} would leave {good} healthy etcd member(s) of {len(left)}; quorum needs "
            f"{needed} (unhealthy: {sick}). Bring those back first")
