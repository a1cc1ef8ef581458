"""clusterctl against a real control plane: kubeadm's phases, etcd and the API server, kwok nodes.

One control plane per test session (the ``control_plane`` fixture, ``real_cluster``), shared
with the other modules of the tier, started from the init configuration clusterctl renders for
the demo's first control plane (Kubernetes 1.37 variant), with the run's token and certificate
key, and always stopped at the end. The demo's six hosts are kwok nodes carrying their kubelet
labels and eight allocatable ``nvidia.com/gpu`` each, as the device plugin would report them.
What is checked is clusterctl's: its kubeadm command lines, the manifests it applies (through a
real server-side dry-run, then applied), and its verify phase's node checks reading the real API
server's answers.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import time
from pathlib import Path

import pytest
import yaml
from contract import SimulatedHost
from demo_calls import SURVEY, VARIANTS
from real_cluster import GPUS_PER_NODE, Cluster, kubectl_json
from real_tools import find_tool, missing
from toolset import KUBERNETES_NEWEST, module_files

from clusterctl.bootstrap.cluster import kubeadm
from clusterctl.bootstrap.cluster.addons import addon_plan, render_test_pod
from clusterctl.bootstrap.cluster.network import network_plan
from clusterctl.bootstrap.cluster.settings import ClusterSettings, cluster_settings
from clusterctl.bootstrap.cluster.topology_labels import topology_labels
from clusterctl.bootstrap.phases import cluster_common
from clusterctl.bootstrap.phases.verify import _node_findings
from clusterctl.cluster_access import read_nodes
from clusterctl.findings import Severity
from clusterctl.inventory.loader import load_inventory
from clusterctl.saved_survey import load_saved_survey
from clusterctl.secret import mask_text


def test_kubeadm_phases_stored_clusterctls_configuration_in_the_cluster(control_plane: Cluster) -> None:
    stored = kubectl_json(control_plane, "-n kube-system get configmap kubeadm-config")
    cluster_config = yaml.safe_load(stored["data"]["ClusterConfiguration"])  # type: ignore[index]
    assert cluster_config["kubernetesVersion"] == f"v{KUBERNETES_NEWEST}"
    assert cluster_config["networking"]["podSubnet"] == control_plane.settings.pod_subnet
    assert cluster_config["controlPlaneEndpoint"] == control_plane.settings.control_plane_endpoint
    assert {"name": "allocate-node-cidrs", "value": "true"} in cluster_config["controllerManager"]["extraArgs"]
    assert control_plane.plane.kubectl("-n kube-system get secret kubeadm-certs").returncode == 0
    assert control_plane.plane.kubectl("-n kube-public get configmap cluster-info").returncode == 0
    assert control_plane.plane.kubectl("-n kube-system get deployment coredns").returncode == 0
    assert control_plane.plane.kubectl("-n kube-system get daemonset kube-proxy").returncode == 0


def test_the_first_control_plane_is_marked_without_a_taint_as_it_also_runs_gpu_work(control_plane: Cluster) -> None:
    node = kubectl_json(control_plane, "get node gpu-a1")
    assert "node-role.kubernetes.io/control-plane" in node["metadata"]["labels"]  # type: ignore[index]
    taints = node["spec"].get("taints") or []  # type: ignore[attr-defined]
    assert not [t for t in taints if t["key"] == "node-role.kubernetes.io/control-plane"]


def test_token_create_and_upload_certs_lines_agree_with_the_simulated_kubeadm(control_plane: Cluster,
                                                                              tmp_path: Path) -> None:
    """clusterctl's own lines (adding nodes later), on the real cluster and on a simulated one."""
    token, key = kubeadm.new_bootstrap_token(), kubeadm.new_certificate_key()
    token_config = kubeadm.render_cluster_op_config(control_plane.settings, token=token).reveal().encode()
    real = control_plane.plane.sh(kubeadm.TOKEN_CREATE_COMMAND, stdin=token_config)
    assert real.returncode == 0, mask_text(real.stderr)
    assert real.stdout.strip() == token.reveal()
    secret = f"-n kube-system get secret bootstrap-token-{token.reveal().split('.')[0]}"
    assert control_plane.plane.kubectl(secret).returncode == 0
    certs_config = kubeadm.render_cluster_op_config(control_plane.settings, certificate_key=key).reveal().encode()
    real_certs = control_plane.plane.sh(kubeadm.UPLOAD_CERTS_COMMAND, stdin=certs_config)
    assert real_certs.returncode == 0, mask_text(real_certs.stderr)
    assert key.reveal() not in real_certs.stdout + real_certs.stderr
    # The simulated cluster: the same lines after a simulated init.
    sim = SimulatedHost(tmp_path / "sim", {"kubeadm": f"{KUBERNETES_NEWEST}-1.1"})
    init = sim.run(kubeadm.INIT_COMMAND, control_plane.plane.init_config.encode())
    assert init.exit_code == 0, init.output
    simulated = sim.run(kubeadm.TOKEN_CREATE_COMMAND, token_config)
    assert (simulated.exit_code, simulated.stdout) == (real.returncode, real.stdout)
    simulated_certs = sim.run(kubeadm.UPLOAD_CERTS_COMMAND, certs_config)
    assert simulated_certs.exit_code == real_certs.returncode
    assert [line for line in simulated_certs.stdout.splitlines() if "certificate key" in line] == \
        [line for line in real_certs.stdout.splitlines() if "certificate key" in line] == []


def manifests(settings: ClusterSettings) -> dict[str, str]:
    """Every manifest clusterctl applies itself with kubectl for one inventory (Helm charts aside)."""
    from dataclasses import replace

    from clusterctl.bootstrap.cluster.alerts import render_prometheus_rule

    out: dict[str, str] = {}
    for runtime_class in (False, True):
        for item in addon_plan(settings, runtime_class=runtime_class, service_monitor=False).manifests:
            out[item.path] = item.text
    out["network:" + settings.network.cni] = network_plan(settings).rendered
    # An air-gapped site: Calico's images from the site registry (the Installation's registry field).
    mirrored = replace(settings, network=replace(settings.network, image_registry="registry.example:5000/mirror"))
    out["network-mirrored:" + settings.network.cni] = network_plan(mirrored).rendered
    out["prometheus rule"] = render_prometheus_rule(settings.alerts, ["gpu-a1", "gpu-a2"])
    out["gpu test pod"] = render_test_pod("gpu-a2", runtime_class=True)
    return out


def every_variants_manifests(folder: Path) -> dict[str, str]:
    """The manifests of every demo variant (device plugin and GPU Operator, Calico and Flannel, one and
    three control planes, each Kubernetes minor), the same text once."""
    seen: dict[str, str] = {}
    for variant in VARIANTS:
        inventory = load_inventory(str(variant.write_inventory(folder / variant.name)))
        for name, text in manifests(cluster_settings(inventory)).items():
            if text not in seen.values():
                seen[f"{variant.name}: {name}"] = text
    return seen


#: The upstream CRDs the manifests need (tests/upstream/fetch-manifests), as (module files, path in them).
UPSTREAM_CRDS = (
    ("calico-operator-crds", "manifests/operator-crds.yaml"),
    ("prometheus-operator-crds", "example/prometheus-operator-crd/monitoring.coreos.com_prometheusrules.yaml"),
    ("prometheus-operator-crds", "example/prometheus-operator-crd/monitoring.coreos.com_servicemonitors.yaml"),
)


def upstream_file(name: str, relative: str) -> Path:
    path = module_files(name) / relative
    if not path.exists():
        missing(f"{path} is not there: run tests/upstream/fetch-manifests", what=name)
    return path


@pytest.fixture(scope="session")
def upstream_crds(control_plane: Cluster) -> list[str]:
    """Calico's operator CRDs and the Prometheus operator's, applied for real (server-side: Calico's are
    larger than client-side apply's annotation allows), and Established."""
    names: list[str] = []
    for name, relative in UPSTREAM_CRDS:
        text = upstream_file(name, relative).read_bytes()
        done = control_plane.plane.kubectl("apply --server-side -f -", stdin=text)
        assert done.returncode == 0, done.stderr
        names += [doc["metadata"]["name"] for doc in yaml.safe_load_all(text) if doc]
    waited = control_plane.plane.kubectl("wait --for condition=established --timeout=120s "
                                         + " ".join(f"crd/{n}" for n in names))
    assert waited.returncode == 0, waited.stderr
    # The namespace kube-prometheus-stack runs in (the PrometheusRule's), as the site's stack would have made it.
    namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": control_plane.settings.alerts.namespace}}
    assert control_plane.plane.kubectl("apply --server-side -f -", stdin=json.dumps(namespace).encode()) \
        .returncode == 0
    return names


def test_every_manifest_clusterctl_applies_passes_a_server_side_dry_run(control_plane: Cluster,
                                                                       upstream_crds: list[str],
                                                                       tmp_path: Path) -> None:
    rendered = every_variants_manifests(tmp_path)
    assert any("kind: Installation" in text for text in rendered.values())
    assert any("kind: PrometheusRule" in text for text in rendered.values())
    # clusterctl creates its namespaces and the nvidia RuntimeClass first (a dry-run creates nothing,
    # and objects in a namespace or pods naming a RuntimeClass need them): apply those for real, then
    # dry-run everything.
    namespaces = [doc for text in rendered.values() for doc in yaml.safe_load_all(text)
                  if doc and doc.get("kind") in ("Namespace", "RuntimeClass")]
    assert namespaces
    for doc in namespaces:
        applied = control_plane.plane.kubectl("apply --server-side -f -", stdin=json.dumps(doc).encode())
        assert applied.returncode == 0, applied.stderr
    # One kubectl for all (it answers object by object); one per manifest only to name a refused one.
    everything = "\n---\n".join(rendered.values())
    done = control_plane.plane.kubectl("apply --server-side --dry-run=server -f -", stdin=everything.encode())
    if done.returncode != 0:
        for name, text in rendered.items():
            one = control_plane.plane.kubectl("apply --server-side --dry-run=server -f -", stdin=text.encode())
            assert one.returncode == 0, f"{name}: {one.stderr}"
    assert done.returncode == 0, done.stderr
    objects = [doc for text in rendered.values() for doc in yaml.safe_load_all(text) if doc]
    assert done.stdout.count("(server dry run)") == len(objects), done.stdout


def test_the_custom_resources_are_checked_against_their_crds(control_plane: Cluster,
                                                             upstream_crds: list[str]) -> None:
    """The check can fail: the CRDs' schemas refuse a value and a field clusterctl's manifests could get wrong."""
    calico = network_plan(control_plane.settings).rendered
    for wrong, said in ((calico.replace("VXLANCrossSubnet", "VXLANCrossSubnett"), "VXLANCrossSubnett"),
                        (calico.replace("natOutgoing:", "natOutgoin:"), "natOutgoin")):
        done = control_plane.plane.kubectl("apply --server-side --dry-run=server -f -", stdin=wrong.encode())
        assert done.returncode != 0 and said in done.stderr, done.stdout + done.stderr
    from clusterctl.bootstrap.cluster.alerts import render_prometheus_rule

    rule = render_prometheus_rule(control_plane.settings.alerts).replace("    expr:", "    exp:", 1)
    done = control_plane.plane.kubectl("apply --server-side --dry-run=server -f -", stdin=rule.encode())
    assert done.returncode != 0 and "exp" in done.stderr, done.stdout + done.stderr


def test_clusterctls_crd_probes_see_the_real_crds(control_plane: Cluster, upstream_crds: list[str]) -> None:
    """alert-rules and gpu-addons decide from these reads whether kube-prometheus-stack is there."""
    from clusterctl.bootstrap.phases.alert_rules import PROMETHEUS_RULE_CRD
    from clusterctl.bootstrap.phases.gpu_addons import SERVICE_MONITOR_CRD

    ctx = control_plane.context()
    assert cluster_common.object_exists(ctx, PROMETHEUS_RULE_CRD)
    assert cluster_common.object_exists(ctx, SERVICE_MONITOR_CRD)
    assert not cluster_common.object_exists(ctx, "crd/podmonitors.monitoring.coreos.com")


def test_clusterctls_nfd_values_render_the_pinned_chart_and_pass_the_server(control_plane: Cluster,
                                                                           tmp_path: Path) -> None:
    """The real helm renders NFD 0.19.0's own chart (its values.schema.json checks the values) with
    clusterctl's values; its CRDs go in for real and every object passes a server-side dry-run."""
    helm = find_tool("helm", "3.22.0")
    chart = upstream_file("node-feature-discovery-chart", "deployment/helm/node-feature-discovery")
    (release,) = [r for r in addon_plan(control_plane.settings, runtime_class=False, service_monitor=False).releases
                  if r.chart.release == "node-feature-discovery"]
    values = tmp_path / "values.yaml"
    values.write_text(release.values)
    rendered = subprocess.run([str(helm), "template", release.chart.release, str(chart), "--namespace",
                               release.chart.namespace, "--values", str(values), "--include-crds"],
                              capture_output=True, text=True, timeout=120, env={**os.environ, "HOME": str(tmp_path)})
    assert rendered.returncode == 0, rendered.stderr
    docs = [d for d in yaml.safe_load_all(rendered.stdout) if d]
    crds = [d for d in docs if d["kind"] == "CustomResourceDefinition"]
    assert crds
    for doc in [*crds, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": release.chart.namespace}}]:
        done = control_plane.plane.kubectl("apply --server-side -f -", stdin=json.dumps(doc).encode())
        assert done.returncode == 0, done.stderr
    names = " ".join(f"crd/{d['metadata']['name']}" for d in crds)
    assert control_plane.plane.kubectl(f"wait --for condition=established --timeout=120s {names}").returncode == 0
    for doc in docs:
        if doc["kind"] == "CustomResourceDefinition":
            continue
        done = control_plane.plane.kubectl(f"apply --server-side --dry-run=server -n {release.chart.namespace} -f -",
                                           stdin=json.dumps(doc).encode())
        assert done.returncode == 0, f"{doc['kind']}/{doc['metadata']['name']}: {done.stderr}"
    # The worker reads clusterctl's label namespaces from the master's config, as rendered.
    master = next(d for d in docs if d["kind"] == "ConfigMap" and "master" in d["metadata"]["name"])
    assert "clusterctl.dev" in json.dumps(master["data"])


def test_the_check_can_fail_a_misspelt_field_is_refused_by_the_server(control_plane: Cluster) -> None:
    pod = render_test_pod("gpu-a2", runtime_class=False).replace("nodeSelector:", "nodeSelectr:")
    done = control_plane.plane.kubectl("apply --server-side --dry-run=server -f -", stdin=pod.encode())
    assert done.returncode != 0 and "nodeSelectr" in done.stderr


def label_nodes_as_nfd_would(cluster: Cluster) -> None:
    """The topology labels clusterctl's feature files carry, set on the nodes as NFD's master sets them."""
    survey = load_saved_survey(str(SURVEY))
    for host in cluster.inventory.hosts:
        saved = survey.hosts[host.name]
        labels = topology_labels(saved, host.fabric.type).as_dict()
        pairs = " ".join(f"{k}={v}" for k, v in sorted(labels.items()))
        done = cluster.plane.kubectl(f"label node {host.name} --overwrite {pairs}")
        assert done.returncode == 0, done.stderr


def wait_ready(cluster: Cluster, deadline_s: float = 60) -> None:
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        nodes = read_nodes(cluster.context().reader)
        if len(nodes) == len(cluster.inventory.hosts) and all(n.ready for n in nodes.values()):
            return
        time.sleep(1)
    pytest.fail(f"kwok did not make the nodes Ready: {cluster.plane.log_tail('kwok')}")


def test_verify_reads_the_real_nodes_and_finds_them_ready_with_their_gpus(control_plane: Cluster) -> None:
    wait_ready(control_plane)
    label_nodes_as_nfd_would(control_plane)
    ctx = control_plane.context()
    nodes = read_nodes(ctx.reader)
    assert {n.allocatable_gpus for n in nodes.values()} == {GPUS_PER_NODE}
    assert cluster_common.api_ready(ctx)
    findings = _node_findings(ctx, nodes)
    assert [f for f in findings if f.severity is Severity.ERROR] == []
    # ... and it can fail: a node whose device plugin reports one GPU less than the survey saw.
    patch = json.dumps({"status": {"allocatable": {"nvidia.com/gpu": str(GPUS_PER_NODE - 1)}}})
    done = control_plane.plane.kubectl(f"patch node gpu-b2 --subresource=status --type=merge -p {patch!r}")
    assert done.returncode == 0, done.stderr
    findings = [f for f in _node_findings(ctx, read_nodes(ctx.reader))
                if f.severity is Severity.ERROR]
    assert [(f.code, f.host) for f in findings] == [("GPU_ALLOCATABLE_MISMATCH", "gpu-b2")]
    assert re.search(r"offers 7 nvidia.com/gpu", findings[0].message)
    restore = json.dumps({"status": {"allocatable": {"nvidia.com/gpu": str(GPUS_PER_NODE)}}})
    assert control_plane.plane.kubectl(f"patch node gpu-b2 --subresource=status --type=merge -p {restore!r}") \
        .returncode == 0


def test_clusterctls_helm_lines_install_a_chart_archive_and_read_the_release_back(control_plane: Cluster,
                                                                                  tmp_path: Path) -> None:
    """An air-gapped site's chart archive, installed with clusterctl's own helm line, listed with its parser."""
    from clusterctl.bootstrap.cluster.addons import HelmRelease
    from clusterctl.facts.kube import HELM_LIST_COMMAND, parse_helm_list
    from clusterctl.inventory.cluster_sections import ChartSource

    helm = find_tool("helm", "3.22.0")
    plane = control_plane.plane
    if not (plane.bin / "helm").exists():
        (plane.bin / "helm").symlink_to(helm)
    chart = tmp_path / "site-probe"
    (chart / "templates").mkdir(parents=True)
    (chart / "Chart.yaml").write_text("apiVersion: v2\nname: site-probe\nversion: 0.1.0\n")
    (chart / "templates" / "configmap.yaml").write_text(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: site-probe\ndata:\n  said: {{ .Values.said | quote }}\n")
    packaged = plane.sh(f"helm package {chart} --destination {tmp_path}")
    assert packaged.returncode == 0, packaged.stderr
    release = HelmRelease(ChartSource("site-probe", "site-probe", "0.1.0", "", "site-probe",
                                      archive=str(tmp_path / "site-probe-0.1.0.tgz")), "said: hello\n")
    assert release.archive_path is not None
    for path, data in ((release.archive_path, (tmp_path / "site-probe-0.1.0.tgz").read_bytes()),
                       (release.values_path, release.values.encode())):
        target = plane.host_path(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
    installed = plane.sh(release.command(), timeout=300)
    assert installed.returncode == 0, installed.stderr
    listed = plane.sh(HELM_LIST_COMMAND)
    assert listed.returncode == 0, listed.stderr
    (found,) = parse_helm_list(listed.stdout)
    assert (found.name, found.namespace, found.status, found.revision) == ("site-probe", "site-probe", "deployed", 1)
    assert found.chart_version("site-probe") == "0.1.0"
    said = control_plane.plane.kubectl("-n site-probe get configmap site-probe -o jsonpath={.data.said}")
    assert said.stdout == "hello"


#: The step lines of a dry-run upgrade that the simulated kubeadm models (``[dryrun] Would ...``; one
#: of them is printed without a line end by kubeadm itself, so they are found, not split on lines).
DRY_RUN_STEP = re.compile(r'\[dryrun\] Would (?:pull|upgrade|upload|write|configure)[^\[\n]*|'
                          r'\[upgrade/successful\] Finished dryrunning successfully!')


def mirror_static_pods(cluster: Cluster, node: str) -> None:
    """What a kubelet does with kubeadm's static pod manifests: a mirror pod of each in kube-system
    (kubeadm's upgrade finds the API server's advertised endpoint in its annotation); kwok runs them."""
    plane = cluster.plane
    for manifest in sorted(plane.host_path("/etc/kubernetes/manifests").iterdir()):
        pod = yaml.safe_load(manifest.read_text())
        name = f"{pod['metadata']['name']}-{node}"
        if plane.kubectl(f"-n kube-system get pod {name}").returncode == 0:
            continue
        pod["metadata"]["name"] = name
        pod["metadata"].setdefault("annotations", {})["kubernetes.io/config.mirror"] = "clusterctl-test"
        pod["spec"]["nodeName"] = node
        created = plane.kubectl("-n kube-system create -f -", stdin=json.dumps(pod).encode())
        assert created.returncode == 0, created.stderr


def test_upgrade_dry_runs_agree_with_the_simulated_kubeadm_and_change_nothing(control_plane: Cluster,
                                                                              tmp_path: Path) -> None:
    """clusterctl's upgrade lines with ``--dry-run`` on the real control plane and on a simulated one:
    the same exit, every step the simulator announces announced by the real kubeadm, nothing changed.
    (This control plane has no kubelet, whose checks kubeadm makes before an upgrade: they are ignored
    on both sides.)"""
    plane = control_plane.plane
    mirror_static_pods(control_plane, "gpu-a1")
    # The kubelets' own version, as kubelets of the release report it (kwok's nodes say "fake"): kubeadm
    # checks every node's against the target.
    version = json.dumps({"status": {"nodeInfo": {"kubeletVersion": f"v{KUBERNETES_NEWEST}"}}})
    for host in control_plane.inventory.hosts:
        patched = plane.kubectl(f"patch node {host.name} --subresource=status --type=merge -p {version!r}")
        assert patched.returncode == 0, patched.stderr
    config = kubeadm.render_upgrade_config(f"v{KUBERNETES_NEWEST}").encode()
    manifests_before = {p.name: p.read_bytes() for p in plane.host_path("/etc/kubernetes/manifests").iterdir()}
    stored = kubectl_json(control_plane, "-n kube-system get configmap kubeadm-config")
    sim = SimulatedHost(tmp_path / "sim", {"kubeadm": f"{KUBERNETES_NEWEST}-1.1"})
    assert sim.run(kubeadm.INIT_COMMAND, plane.init_config.encode()).exit_code == 0
    for verb in ("apply", "node"):
        line = kubeadm.upgrade_command(verb, f"v{KUBERNETES_NEWEST}" if verb == "apply" else None) + \
            " --dry-run --ignore-preflight-errors=all"
        real = plane.sh(line, stdin=config, timeout=300)
        simulated = sim.run(line, config)
        assert (simulated.exit_code, real.returncode) == (0, 0), f"{line}\nreal: {real.stdout[-3000:]}" \
            f"{real.stderr[-3000:]}\nsimulated: {simulated.output}"
        announced = DRY_RUN_STEP.findall(simulated.stdout)
        assert announced and announced[-1].startswith("[upgrade/successful]")
        for step in announced:
            assert step.strip() in real.stdout, f"{verb}: {step!r} is not in the real dry run:\n{real.stdout[-4000:]}"
    assert {p.name: p.read_bytes() for p in plane.host_path("/etc/kubernetes/manifests").iterdir()} == \
        manifests_before
    after = kubectl_json(control_plane, "-n kube-system get configmap kubeadm-config")
    assert after["metadata"]["resourceVersion"] == stored["metadata"]["resourceVersion"]  # type: ignore[index]
