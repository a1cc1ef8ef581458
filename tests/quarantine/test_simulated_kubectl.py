"""The simulated kubectl on nodes and pods, as an engineer would type it on the control-plane host."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from kube_sim import KubeSim


@pytest.fixture
def sim(tmp_path: Path) -> KubeSim:
    return KubeSim(tmp_path)


def test_taint_twice_is_refused_without_overwrite_and_removal_of_a_missing_taint_fails(sim: KubeSim) -> None:
    assert sim.kubectl("taint nodes gpu-a3 clusterctl.dev/unhealthy=nvlink:NoSchedule")[:2] == \
        (0, "node/gpu-a3 tainted\n")
    code, _, err = sim.kubectl("taint nodes gpu-a3 clusterctl.dev/unhealthy=xid:NoSchedule")
    assert code == 1 and "already has clusterctl.dev/unhealthy taint(s) with same effect(s) and --overwrite is " \
                         "false" in err
    taints = sim.node("gpu-a3")["spec"]["taints"]
    assert taints == [{"key": "clusterctl.dev/unhealthy", "value": "nvlink", "effect": "NoSchedule"}]
    assert sim.kubectl("taint nodes gpu-a3 clusterctl.dev/unhealthy:NoSchedule-")[:2] == \
        (0, "node/gpu-a3 untainted\n")
    code, _, err = sim.kubectl("taint nodes gpu-a3 clusterctl.dev/unhealthy:NoSchedule-")
    assert code == 1 and 'taint "clusterctl.dev/unhealthy:NoSchedule" not found' in err
    code, _, err = sim.kubectl("taint nodes gpu-zz a=b:NoSchedule")
    assert code == 1 and err == 'Error from server (NotFound): nodes "gpu-zz" not found\n'


def test_cordon_shows_as_unschedulable_with_the_controllers_taint(sim: KubeSim) -> None:
    assert sim.kubectl("cordon gpu-a2")[1] == "node/gpu-a2 cordoned\n"
    assert sim.kubectl("cordon gpu-a2")[1] == "node/gpu-a2 already cordoned\n"
    spec = sim.node("gpu-a2")["spec"]
    assert spec["unschedulable"] is True
    assert {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"} in spec["taints"]
    assert sim.kubectl("uncordon gpu-a2")[1] == "node/gpu-a2 uncordoned\n"
    assert sim.node("gpu-a2")["spec"] == {}


def test_annotate_refuses_to_overwrite_silently(sim: KubeSim) -> None:
    assert sim.kubectl("annotate node gpu-a1 team=ml")[1] == "node/gpu-a1 annotated\n"
    code, _, err = sim.kubectl("annotate node gpu-a1 team=hpc")
    assert code == 1 and "'team' already has a value (ml)" in err
    assert sim.kubectl("annotate --overwrite node gpu-a1 team=hpc")[0] == 0
    assert sim.node("gpu-a1")["metadata"]["annotations"] == {"team": "hpc"}
    assert sim.kubectl("annotate node gpu-a1 team-")[0] == 0
    assert "annotations" not in sim.node("gpu-a1")["metadata"]


def test_daemonset_pods_are_on_every_node_and_a_deployment_spreads(sim: KubeSim) -> None:
    sim.deploy("web", 3)
    for node in sim.names:
        pods = sim.pods_on(node)
        assert any(p.startswith("kube-system/kube-proxy-") for p in pods)
        assert any(p.startswith("nvidia-device-plugin/nvidia-device-plugin-") for p in pods)
        assert sum(p.startswith("default/web-") for p in pods) == 1


def _evict(sim: KubeSim, pod: str) -> tuple[int, str, str]:
    namespace, name = pod.split("/")
    body = json.dumps({"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": name,
                                                                                   "namespace": namespace}})
    return sim.kubectl(f"create --raw /api/v1/namespaces/{namespace}/pods/{name}/eviction -f -", body)


def test_an_eviction_the_budget_forbids_is_a_429_and_changes_nothing(sim: KubeSim) -> None:
    sim.deploy("db", 3, min_available=3)
    pod = next(p for p in sim.pods_on("gpu-a3") if p.startswith("default/db-"))
    before = sim.kube()["pods"]
    code, out, err = _evict(sim, pod)
    assert (code, out) == (1, "")
    assert err == ("Error from server (TooManyRequests): Cannot evict pod as it would violate the pod's "
                   "disruption budget.\n")
    assert sim.kube()["pods"] == before


def test_an_allowed_eviction_moves_the_pod_off_a_cordoned_node(sim: KubeSim) -> None:
    sim.deploy("web", 3, min_available=2)
    sim.kubectl("cordon gpu-a3")
    pod = next(p for p in sim.pods_on("gpu-a3") if p.startswith("default/web-"))
    code, out, _ = _evict(sim, pod)
    assert code == 0 and json.loads(out)["status"] == "Success"
    assert not any(p.startswith("default/web-") for p in sim.pods_on("gpu-a3"))
    web = [p for p in sim.kube()["pods"].values() if p["labels"] == {"app": "web"}]
    assert len(web) == 3 and all(p["node"] in ("gpu-a1", "gpu-a2") for p in web)


def test_eviction_of_a_missing_pod_and_a_mismatched_body(sim: KubeSim) -> None:
    code, _, err = _evict(sim, "default/nope")
    assert code == 1 and err == 'Error from server (NotFound): pods "nope" not found\n'
    code, _, err = sim.kubectl("create --raw /api/v1/namespaces/default/pods/a/eviction -f -",
                               '{"kind": "Eviction", "metadata": {"name": "b"}}')
    assert code == 1 and "(BadRequest): name in URL does not match name in Eviction object" in err
    code, _, err = sim.kubectl("create --raw /api/v1/namespaces/default/pods/a/eviction -f -", "not json")
    assert code == 1 and "(BadRequest)" in err


def test_two_budgets_on_one_pod_are_a_500(sim: KubeSim) -> None:
    sim.deploy("web", 2, min_available=1)
    manifest = ("apiVersion: policy/v1\nkind: PodDisruptionBudget\nmetadata: {name: second, namespace: default}\n"
                "spec: {maxUnavailable: 1, selector: {matchLabels: {app: web}}}\n")
    assert sim.kubectl("apply -f -", manifest)[0] == 0
    pod = next(p for p in sim.kube()["pods"] if p.startswith("default/web-"))
    code, _, err = _evict(sim, pod)
    assert code == 1 and err.startswith("Error from server (InternalError): This pod has more than one "
                                        "PodDisruptionBudget")


def test_scontrol_drain_needs_a_reason_and_resume_clears_it(sim: KubeSim) -> None:
    code, _, err = sim.sh("scontrol update nodename=gpu-a3 state=drain")
    assert code == 1 and "You must specify a reason" in err
    assert sim.sh("scontrol update nodename=gpu-a3 state=drain reason='clusterctl: nvlink'")[0] == 0
    code, out, _ = sim.sh("scontrol -o show node gpu-a3")
    assert code == 0 and "State=IDLE+DRAIN" in out and "Reason=clusterctl: nvlink [root@" in out
    assert sim.sh("scontrol update nodename=gpu-a3 state=resume")[0] == 0
    assert "State=IDLE " in sim.sh("scontrol -o show node gpu-a3")[1]
    assert sim.sh("scontrol -o show node gpu-zz")[1:] == ("", "Node gpu-zz not found\n")


def test_apply_without_a_file_refuses_as_the_real_kubectl_does(sim: KubeSim) -> None:
    """The real kubectl 1.37.2 and 1.36.3 (built into the tools cache, tests/upstream/toolset.py), asked
    ``kubectl --kubeconfig CONFIG apply`` (its server unreachable), ``apply -f ""`` and ``kubectl apply
    --dry-run=client``, said this on stderr, nothing on stdout, exit 1: it refuses before it reaches any server."""
    for args in ("apply", "apply --server-side", 'apply -f ""', "apply --dry-run=client"):
        assert sim.kubectl(args) == (1, "", "error: must specify one of -f and -k\n"), args


def test_a_missing_or_unreadable_file_is_refused_before_any_server_is_asked(sim: KubeSim) -> None:
    """The real kubectl 1.37.2 and 1.36.3 read ``-f`` before they reach a server: with no kubeconfig (nothing
    listens at localhost:8080) and with one whose server is down, they said this on stderr, exit 1."""
    must = "error: must specify one of -f and -k\n"
    eviction = "create --raw /api/v1/namespaces/default/pods/p/eviction"
    sim.state.host(sim.names[0]).fs.write("/tmp/bad.yaml", b"a: [\n")
    for args, said in (("apply", must), ("create", must), ("replace", must), (eviction, must),
                       ("apply -f /nonexist", 'error: the path "/nonexist" does not exist\n'),
                       ("replace -f /nonexist", 'error: the path "/nonexist" does not exist\n'),
                       (f"{eviction} -f /nonexist", "error: open /nonexist: no such file or directory\n")):
        assert sim.sh(f"kubectl {args}") == (1, "", said), args
        assert sim.kubectl(args) == (1, "", said), args
    code, out, err = sim.sh("kubectl create -f /tmp/bad.yaml")
    assert (code, out) == (1, "") and err.startswith("error: error parsing /tmp/bad.yaml: error converting YAML")


def test_a_short_option_takes_its_value_attached_as_in_the_real_kubectl(sim: KubeSim) -> None:
    """kubectl's flag parser (pflag) reads ``-nNS`` and ``-n=NS`` as ``-n NS`` (the real kubectl 1.37.2's
    ``create configmap c -nfoo --dry-run=client -ojson`` put it in namespace foo)."""
    for namespace in ("-nkube-system", "-n=kube-system"):
        assert sim.kubectl(f"rollout status daemonset/kube-proxy {namespace}") == \
            (0, 'daemon set "kube-proxy" successfully rolled out\n', ""), namespace


def test_short_kind_names_and_create_from_a_file_read_as_the_real_kubectl_does(sim: KubeSim) -> None:
    """``po``, ``no``, ``cm`` are kubectl's short names; ``create -f`` creates once, then AlreadyExists (both as
    the real kubectl 1.37 answers: tests/upstream/test_contract_kubectl_nodes.py)."""
    sim.bare_pod("p", "gpu-a2")
    assert sim.kubectl("get po p -o jsonpath={.status.phase}") == (0, "Running", "")
    assert sim.kubectl("delete po p") == (0, 'pod "p" deleted from default namespace\n', "")
    assert sim.kubectl("delete no gpu-a3") == (0, 'node "gpu-a3" deleted\n', "")
    made = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\n"
    assert sim.kubectl("create -f -", made) == (0, "configmap/c created\n", "")
    assert sim.kubectl("create -f -", made) == (1, "", 'Error from server (AlreadyExists): error when creating '
                                                        '"STDIN": configmaps "c" already exists\n')
    assert sim.kubectl("delete cm/c") == (0, 'configmap "c" deleted from default namespace\n', "")


def test_delete_of_kind_slash_name_deletes_nodes_and_pods_as_the_real_kubectl_does(sim: KubeSim) -> None:
    """``delete node/N`` and ``delete pod/N`` are ``delete node N`` and ``delete pod N`` (the real kubectl 1.37:
    tests/upstream/test_contract_kubectl_nodes.py); a kind and several names delete each."""
    sim.bare_pod("p", "gpu-a2")
    assert sim.kubectl("delete node/gpu-a3") == (0, 'node "gpu-a3" deleted\n', "")
    assert sim.kubectl("delete pod/p") == (0, 'pod "p" deleted from default namespace\n', "")
    assert sim.kubectl("get po p -o jsonpath={.status.phase}") == (1, "", 'Error from server (NotFound): pods "p" '
                                                                          'not found\n')
    assert "gpu-a3" not in sim.kube()["nodes"]
    assert sim.kubectl("delete node gpu-a1 gpu-a2") == (0, 'node "gpu-a1" deleted\nnode "gpu-a2" deleted\n', "")
    assert sim.kube()["nodes"] == {}
