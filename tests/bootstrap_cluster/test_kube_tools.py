"""The simulated kubeadm, kubectl and helm on their own, as an engineer would type them on a host."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cluster_builders import make_inventory, make_settings
from sim_cluster import SimCluster

from clusterctl.bootstrap.cluster import kubeadm


@pytest.fixture
def sim(tmp_path: Path) -> SimCluster:
    return SimCluster(tmp_path, ["gpu-a1", "gpu-a2"])


def sh(sim: SimCluster, host: str, line: str, stdin: str = "") -> tuple[int, str, str]:
    result = sim.machine(host).run_line(line, stdin.encode())
    return result.exit_code, result.stdout, result.stderr


def init(sim: SimCluster) -> tuple[int, str, str]:
    inv = make_inventory(workers=1)
    token = kubeadm.new_bootstrap_token()
    config = kubeadm.render_init_config(make_settings(), inv.hosts[0], inv, token=token,
                                        certificate_key=kubeadm.new_certificate_key())
    return sh(sim, "gpu-a1", kubeadm.INIT_COMMAND, config)


def test_a_second_init_is_refused_by_preflight(sim: SimCluster) -> None:
    code, out, _ = init(sim)
    assert code == 0 and "Your Kubernetes control-plane has initialized successfully!" in out
    assert "<value withheld>" in out
    code, _, err = init(sim)
    assert code == 1
    assert "[ERROR FileAvailable--etc-kubernetes-manifests-kube-apiserver.yaml]" in err


def test_config_validate_is_strict_and_refuses_v1beta3_from_1_37(tmp_path: Path) -> None:
    sim = SimCluster(tmp_path, ["gpu-a1"])
    good = kubeadm.render_init_config(make_settings(), make_inventory().hosts[0], make_inventory())
    assert sh(sim, "gpu-a1", "kubeadm config validate --config /dev/stdin", good)[:2] == (0, "ok\n")
    typo = good.replace("controlPlaneEndpoint:", "controlPlaneEndpiont:")
    code, _, err = sh(sim, "gpu-a1", "kubeadm config validate --config /dev/stdin", typo)
    assert code == 1 and 'unknown field "controlPlaneEndpiont"' in err
    with sim.machine("gpu-a1").host.edit() as data:
        data["packages"]["kubeadm"]["version"] = "1.37.0-1.1"
    old = good.replace("kubeadm.k8s.io/v1beta4", "kubeadm.k8s.io/v1beta3")
    code, _, err = sh(sim, "gpu-a1", "kubeadm config validate --config /dev/stdin", old)
    assert code == 1 and 'old API spec: "kubeadm.k8s.io/v1beta3"' in err
    nested = good.replace("  certSANs:", "  timeoutForControlPlane: 4m0s\n  certSANs:")
    code, _, err = sh(sim, "gpu-a1", "kubeadm config validate --config /dev/stdin", nested)
    assert code == 1 and 'unknown field "apiServer.timeoutForControlPlane"' in err


def test_tokens_expire_after_their_ttl(sim: SimCluster) -> None:
    assert init(sim)[0] == 0
    token = kubeadm.new_bootstrap_token()
    config = kubeadm.render_cluster_op_config(make_settings(), token=token).reveal()
    code, out, _ = sh(sim, "gpu-a1", kubeadm.TOKEN_CREATE_COMMAND, config)
    assert code == 0 and out.strip() == token.reveal()
    ca = kubeadm.ca_cert_hash(sim.file("gpu-a1", "/etc/kubernetes/pki/ca.crt") or b"")
    host = make_inventory(workers=1).hosts[1]
    join = kubeadm.render_join_config(make_settings(), host, token=token, ca_hash=ca).reveal()
    with sim.machine("gpu-a1").cluster.edit() as data:
        data["kubernetes"]["clock_offset_s"] = 31 * 60  # TTL 30 minutes
    code, _, err = sh(sim, "gpu-a2", kubeadm.JOIN_COMMAND, join)
    assert code == 1 and f'token ID "{token.reveal()[:6]}"' in err
    with sim.machine("gpu-a1").cluster.edit() as data:
        data["kubernetes"]["clock_offset_s"] = 0
    wrong_ca = kubeadm.render_join_config(make_settings(), host, token=token, ca_hash="sha256:" + "1" * 64).reveal()
    code, _, err = sh(sim, "gpu-a2", kubeadm.JOIN_COMMAND, wrong_ca)
    assert code == 1 and "are pinned" in err
    code, out, _ = sh(sim, "gpu-a2", kubeadm.JOIN_COMMAND, join)
    assert code == 0 and "This node has joined the cluster" in out


def test_kubectl_before_and_after_init_and_helm_status(sim: SimCluster) -> None:
    code, _, err = sh(sim, "gpu-a1", "kubectl get nodes -o json")
    assert code == 1 and "localhost:8080 was refused" in err
    assert init(sim)[0] == 0
    code, out, _ = sh(sim, "gpu-a1", "kubectl --kubeconfig /etc/kubernetes/admin.conf get nodes -o json")
    assert code == 0 and '"KubeletNotReady"' in out  # no CNI yet
    code, _, err = sh(sim, "gpu-a1", "helm upgrade --install x x --repo https://charts.example --namespace x "
                                     "--wait --kubeconfig /etc/kubernetes/admin.conf")
    assert code == 1 and "context deadline exceeded" in err  # --wait with no Ready node
    code, _, err = sh(sim, "gpu-a1", "helm status nope -n x --kubeconfig /etc/kubernetes/admin.conf")
    assert code == 1 and "release: not found" in err
    # Helm's flags may stand anywhere, before the command and its release too.
    admin = "--kubeconfig /etc/kubernetes/admin.conf"
    assert sh(sim, "gpu-a1", f"helm {admin} -n x upgrade --install rel x --repo https://charts.example")[0] == 0
    code, out, _ = sh(sim, "gpu-a1", f"helm status -n x {admin} rel")
    assert code == 0 and "NAMESPACE: x\n" in out
    code, out, _ = sh(sim, "gpu-a1", f"helm {admin} -o json list -n x")
    assert code == 0 and [r["name"] for r in json.loads(out)] == ["rel"]
