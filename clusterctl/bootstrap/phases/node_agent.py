"""node-agent-access and node-agent: clusterctl's node health agent on every host, as a systemd timer.

Why a systemd timer and not a DaemonSet: the checks read the host itself (``nvidia-smi``, the
kernel log, sysfs, ``lspci``), which a container does only privileged, with the host's PID and
mount namespaces; a timer keeps checking when the kubelet, containerd or the CNI is what broke
(when a DaemonSet's pod is gone too); it needs no image in a registry (air-gapped sites), and the
same unit serves Slurm-only hosts, which have no kubelet at all. node-exporter's textfile
collector reads a host folder anyway.

``node-agent-access`` (first control plane) applies, for every node, a ServiceAccount, a token
Secret, and a ClusterRole + binding allowing ``get`` and ``patch`` of that node's ``nodes/status``
only (``resourceNames``), and reads the tokens back. ``node-agent`` (every host) writes the bundle
(``agent/bundle.py``), its JSON config, its kubeconfig (0600: the token), the service and the
timer, and enables the timer. Every write and the enable are journaled, so ``clusterctl reset``
removes them all (and disables the timer); the API objects go with the cluster.
"""

from __future__ import annotations

import base64
import binascii
import json
import shlex
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import yaml

from clusterctl.agent.bundle import BUNDLE_PATH, DIGEST_PATH, PYTHON, build, digest_line
from clusterctl.agent.main import CONFIG_PATH
from clusterctl.agent.metrics import TEXTFILE_NAME
from clusterctl.bootstrap.phase import ClusterWidePhase, Phase, PhaseContext
from clusterctl.bootstrap.phases import cluster_common as cc
from clusterctl.changes import MAKES_IN_CLUSTER, Change, GateRecord, HostGate
from clusterctl.facts.kube import kubectl
from clusterctl.findings import Finding, Severity
from clusterctl.inventory.model import Fabric
from clusterctl.secret import Secret, register_secret
from clusterctl.templating import render

NAMESPACE = "kube-system"
RBAC_PATH = "/etc/kubernetes/clusterctl/node-agent/rbac.yaml"
KUBECONFIG_PATH = "/etc/clusterctl/node-agent.kubeconfig"
SERVICE = "clusterctl-node-agent.service"
TIMER = "clusterctl-node-agent.timer"
SERVICE_PATH = f"/etc/systemd/system/{SERVICE}"
#: For slurm.conf's HealthCheckProgram (and Prolog/Epilog), which take a program without arguments.
SLURM_HEALTH_PATH = "/usr/local/sbin/clusterctl-slurm-health"
TIMER_PATH = f"/etc/systemd/system/{TIMER}"
#: Debian's and Ubuntu's prometheus-node-exporter read this folder (``--collector.textfile.directory``).
TEXTFILE_DIR = "/var/lib/prometheus/node-exporter"
#: The agent's metrics file (written by the agent; the timer's undo removes it).
METRICS_PATH = f"{TEXTFILE_DIR}/{TEXTFILE_NAME}"
INTERVAL_S = 60
RUN_LIMIT_S = 300
#: How long node-agent-access waits for the token controller to fill new token Secrets.
TOKEN_WAIT_S = 60.0
LABEL = "clusterctl.dev/node-agent"


def node_names(ctx: PhaseContext) -> list[str]:
    return [h.name for h in ctx.inventory.hosts]


def read_tokens(ctx: PhaseContext, identities: set[str] | None = None) -> dict[str, Secret]:
    """Node -> token of its agent's ServiceAccount, from the token Secrets the token controller filled;
    ``identities`` gets every node that has one, token or not yet."""
    result = ctx.reader.run(kubectl(f"get secrets -n {NAMESPACE} -l {LABEL} -o json"), sudo=True, timeout=60)
    if not result.ok:
        return {}
    try:
        items = json.loads(result.stdout).get("items") or []
    except (json.JSONDecodeError, AttributeError):
        return {}
    tokens = {}
    for item in items:
        node = ((item.get("metadata") or {}).get("labels") or {}).get(LABEL)
        data = (item.get("data") or {}).get("token")
        if node and identities is not None:
            identities.add(str(node))
        if not node or not data:
            continue
        try:
            value = base64.b64decode(data, validate=True).decode("ascii")
        except (binascii.Error, UnicodeDecodeError):
            continue
        register_secret(value)  # never printed, even inside a diff of the kubeconfig
        tokens[str(node)] = Secret(value, f"node agent token of {node}")
    return tokens


def remove_identity_command(node: str) -> str:
    """``kubectl delete`` of the four objects ``rbac.yaml.j2`` makes for ``node``."""
    account = shlex.quote(f"serviceaccount/clusterctl-node-agent-{node}")
    secret = shlex.quote(f"secret/clusterctl-node-agent-{node}")
    role = shlex.quote(f"clusterrole/clusterctl:node-agent:{node}")
    binding = shlex.quote(f"clusterrolebinding/clusterctl:node-agent:{node}")
    namespaced = kubectl(f"delete -n {NAMESPACE} {account} {secret} --ignore-not-found")
    cluster_wide = kubectl(f"delete {role} {binding} --ignore-not-found")
    return f"{namespaced} && {cluster_wide}"


@dataclass
class AccessState:
    manifest: bytes | None
    tokens: dict[str, Secret]
    #: This host runs the cluster (kubeadm's admin.conf is there).
    cluster: bool = True
    #: Nodes that have an identity in the cluster (token filled or not).
    identities: frozenset[str] = frozenset()


class NodeAgentAccess(ClusterWidePhase[AccessState]):
    name = "node-agent-access"
    description = "node health agent identities: per node, get/patch of its own nodes/status only"

    def check(self, ctx: PhaseContext) -> AccessState:
        cluster = cc.has_cluster(ctx)
        identities: set[str] = set()
        tokens = read_tokens(ctx, identities) if cluster else {}
        with ctx.shared.lock:
            ctx.shared.node_agent_tokens.update(tokens)
        return AccessState(ctx.reader.get(RBAC_PATH, sudo=True), tokens, cluster, frozenset(identities))

    def findings(self, ctx: PhaseContext, state: AccessState) -> list[Finding]:
        if not state.cluster and ctx.options.applying:
            return [Finding(Severity.INFO, "NODE_AGENT_NO_CLUSTER", "no cluster on this host yet (no "
                            "/etc/kubernetes/admin.conf): the node agents get their identities once it runs",
                            host=ctx.host.name)]
        return []

    def plan(self, ctx: PhaseContext, state: AccessState) -> list[Change]:
        if not state.cluster and ctx.options.applying:
            return []
        nodes = node_names(ctx)
        manifest = render("bootstrap/node-agent/rbac.yaml.j2", nodes=nodes, namespace=NAMESPACE)
        write = Change.write_file(ctx.host.name, RBAC_PATH, manifest, current=state.manifest,
                                  summary="node agent identities (ServiceAccount, token, role per node)")
        changes = [] if write.is_noop else [write]
        if changes or any(n not in state.tokens for n in nodes):
            changes.append(cc.apply_manifest(ctx.host.name, RBAC_PATH, "apply the node agent identities"))
        # A node gone from the inventory keeps no identity: its token could patch a new node of that name.
        for gone in sorted(state.identities - set(nodes)):
            changes.append(Change.run(ctx.host.name, remove_identity_command(gone),
                                      summary=f"remove the node agent identity of {gone} (not in the inventory)",
                                      makes=(MAKES_IN_CLUSTER,), cannot_undo="a host gone from the inventory "
                                      "gets no identity back"))
        return cc.with_folders(ctx, changes)

    def apply(self, ctx: PhaseContext, gate: HostGate, changes: Sequence[Change]) -> list[GateRecord]:
        records = gate.submit_all(changes)
        if not ctx.options.applying:
            return records
        wanted = set(node_names(ctx))
        deadline = time.monotonic() + TOKEN_WAIT_S
        tokens = read_tokens(ctx)
        while not wanted <= set(tokens) and time.monotonic() < deadline:
            time.sleep(1.0)  # the token controller fills a new Secret within a second or two
            tokens = read_tokens(ctx)
        with ctx.shared.lock:
            ctx.shared.node_agent_tokens.update(tokens)
        return records

    def verify(self, ctx: PhaseContext) -> list[Finding]:
        missing = sorted(set(node_names(ctx)) - set(ctx.shared.node_agent_tokens))
        if not missing or not cc.has_cluster(ctx):
            return []
        return [Finding(Severity.ERROR, "NODE_AGENT_NO_TOKEN", f"no token for the node agent of {', '.join(missing)} "
                        f"(Secrets clusterctl-node-agent-NODE in {NAMESPACE} are not filled)", host=ctx.host.name,
                        fix="Check that kube-controller-manager runs (its token controller fills them), then run "
                            "'clusterctl bootstrap phase node-agent-access' again.")]


@dataclass
class AgentState:
    files: dict[str, bytes | None]
    enabled: bool
    active: bool
    #: The token in the kubeconfig on the host now (kept when this run has none).
    token_on_host: Secret | None


def _token_in(kubeconfig: bytes | None) -> Secret | None:
    if not kubeconfig:
        return None
    try:
        doc: Any = yaml.safe_load(kubeconfig.decode("utf-8", errors="replace"))
        value = doc["users"][0]["user"]["token"]
    except (yaml.YAMLError, KeyError, IndexError, TypeError):
        return None
    if not isinstance(value, str) or not value:
        return None
    register_secret(value)
    return Secret(value, "node agent token")


def agent_config(node: str, kubernetes: bool = True, fabric: Fabric = Fabric()) -> str:
    """The agent's config; without a Kubernetes identity (``kubernetes`` False) it writes metrics only. The host's
    fabric as the inventory gives it (type, rate, HCAs): alone, the agent holds a port to that rate."""
    config: dict[str, Any] = {"node": node, "kubeconfig": KUBECONFIG_PATH if kubernetes else None,
                              "textfile_dir": TEXTFILE_DIR, "since": "1h", "probe_timeout_s": 30}
    if fabric.rate_gbps:
        config["fabric"] = {key: value for key, value in {"type": fabric.type, "rate_gbps": fabric.rate_gbps,
                                                          "hcas": list(fabric.hcas)}.items() if value}
    return json.dumps(config, indent=2, sort_keys=True) + "\n"


def slurm_health_script() -> str:
    return ("#!/bin/sh\n"
            "# Slurm's HealthCheckProgram, Prolog or Epilog (slurm.conf): clusterctl's level-0 checks on this\n"
            "# node; drains it with a 'clusterctl: ' reason on failure, resumes only what clusterctl drained.\n"
            "# Written by clusterctl bootstrap (phase node-agent).\n"
            f"exec {PYTHON} {BUNDLE_PATH} slurm-health \"$@\"\n")


class NodeAgent(Phase[AgentState]):
    name = "node-agent"
    description = f"node health agent: a systemd timer (every {INTERVAL_S} s) -> NodeConditions, node-exporter metrics"
    uses_cluster_settings = True
    timeout_s = 300.0
    # Its plan comes from its reads (the files, the timer, the token in the kubeconfig there), the
    # inventory and clusterctl's version (the bundle): a re-run may confirm the host in one read.
    confirmable = True

    def check(self, ctx: PhaseContext) -> AgentState:
        paths = (DIGEST_PATH, CONFIG_PATH, KUBECONFIG_PATH, SERVICE_PATH, TIMER_PATH, SLURM_HEALTH_PATH)
        files = {path: ctx.reader.get(path, sudo=True) for path in paths}
        bundle = build()
        # The digest beside the bundle says it is this clusterctl's: the 600 KB are read only when it does not.
        current = files[DIGEST_PATH] == digest_line(bundle).encode()
        files[BUNDLE_PATH] = bundle if current else ctx.reader.get(BUNDLE_PATH, sudo=True)
        enabled = ctx.reader.run(f"systemctl is-enabled --quiet {TIMER}", sudo=True, timeout=30).exit_code == 0
        active = ctx.reader.run(f"systemctl is-active --quiet {TIMER}", sudo=True, timeout=30).exit_code == 0
        return AgentState(files, enabled, active, _token_in(files[KUBECONFIG_PATH]))

    def _token(self, ctx: PhaseContext, state: AgentState) -> Secret | None:
        return ctx.shared.node_agent_tokens.get(ctx.host.name) or state.token_on_host

    def findings(self, ctx: PhaseContext, state: AgentState) -> list[Finding]:
        if self._token(ctx, state) is None:
            # A host that is no Kubernetes node yet (or a run without node-agent-access): the agent
            # still checks and writes its metrics; its conditions come once it has an identity.
            return [Finding(Severity.WARNING, "NODE_AGENT_NO_TOKEN", "no Kubernetes identity for this node's agent "
                            "(phase node-agent-access did not run, or its Secret is not filled): the agent writes "
                            "metrics only, no NodeConditions", host=ctx.host.name,
                            fix="Run 'clusterctl bootstrap phase node-agent-access', then 'clusterctl bootstrap "
                                "phase node-agent' again.")]
        return []

    def plan(self, ctx: PhaseContext, state: AgentState) -> list[Change]:
        host, node = ctx.host.name, ctx.host.name
        token = self._token(ctx, state)
        if token is None and not ctx.options.applying and ctx.shared.node_agent_tokens:
            token = Secret("<the token node-agent-access reads>")  # a plan before the Secret is filled
        endpoint = ctx.settings().control_plane_endpoint
        kubeconfig = render("bootstrap/node-agent/kubeconfig.yaml.j2", node=node, endpoint=endpoint,
                            token=token.reveal()) if token else None
        service = render("bootstrap/node-agent/clusterctl-node-agent.service.j2", python=PYTHON, bundle=BUNDLE_PATH,
                         config=CONFIG_PATH, timeout_s=RUN_LIMIT_S)
        timer = render("bootstrap/node-agent/clusterctl-node-agent.timer.j2", interval_s=INTERVAL_S)
        wanted: list[tuple[str, bytes | str, int, str]] = [
            (BUNDLE_PATH, build(), 0o644, "node agent bundle (clusterctl's checks + prometheus-client)"),
            (DIGEST_PATH, digest_line(build()), 0o644, "node agent bundle's sha256"),
            (CONFIG_PATH, agent_config(node, kubeconfig is not None, ctx.host.fabric), 0o644, "node agent config"),
            *([(KUBECONFIG_PATH, kubeconfig, 0o600, "node agent kubeconfig (its node's ServiceAccount token)")]
              if kubeconfig is not None else []),
            (SERVICE_PATH, service, 0o644, f"systemd unit {SERVICE}"),
            (TIMER_PATH, timer, 0o644, f"systemd unit {TIMER}"),
            (SLURM_HEALTH_PATH, slurm_health_script(), 0o755, "Slurm health check program (HealthCheckProgram)"),
        ]
        changes = [Change.write_file(host, path, content, current=state.files[path], mode=mode, summary=summary)
                   for path, content, mode, summary in wanted]
        if any(c.path in (SERVICE_PATH, TIMER_PATH) and not c.is_noop for c in changes):
            changes.append(Change.run(host, "systemctl daemon-reload", summary="systemd: load the agent's units",
                                      undo="systemctl daemon-reload"))
        if not (state.enabled and state.active):
            # Its undo also takes away the metrics the agent published: stale findings must not outlive it.
            stop = f"systemctl disable --now {TIMER} && rm -f {shlex.quote(METRICS_PATH)}"
            changes.append(Change.run(host, f"systemctl enable --now {TIMER}", summary=f"enable and start {TIMER}",
                                      undo="sh -c " + shlex.quote(stop)))
        return cc.with_folders(ctx, changes)

    def verify(self, ctx: PhaseContext) -> list[Finding]:
        if ctx.reader.run(f"test -s {shlex.quote(BUNDLE_PATH)}", sudo=True, timeout=30).exit_code != 0:
            return [Finding(Severity.ERROR, "NODE_AGENT_BUNDLE_MISSING", f"{BUNDLE_PATH} is missing or empty",
                            host=ctx.host.name, fix=f"rm -f {DIGEST_PATH}, then run this phase again.")]
        if ctx.reader.run(f"systemctl is-active --quiet {TIMER}", sudo=True, timeout=30).exit_code != 0:
            return [Finding(Severity.ERROR, "NODE_AGENT_TIMER_INACTIVE", f"{TIMER} is not active", host=ctx.host.name,
                            fix=f"systemctl status {TIMER}; journalctl -u {SERVICE}")]
        return []
