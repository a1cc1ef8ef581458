"""The kubeadm configuration clusterctl renders, checked against the v1beta4 types."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml
from cluster_builders import make_inventory, make_settings

from clusterctl.bootstrap.cluster import kubeadm
from clusterctl.mock.tools.kubeadm_config import schema
from clusterctl.secret import MASK, mask_text

#: The one list of kubeadm's fields, shared with the simulated kubeadm (clusterctl/mock/recordings/kube/README.md).
SCHEMA = schema()


def check_v1beta4(text: str) -> list[dict[str, Any]]:
    """Validate every document of ``text`` against the schema of its kind; return the documents."""
    docs = [d for d in yaml.safe_load_all(text) if d is not None]
    for doc in docs:
        jsonschema.validate(doc, {**SCHEMA, "$ref": f"#/$defs/{doc['kind']}"})
    return docs


def test_init_config_follows_v1beta4_with_list_shaped_extra_args_and_timeouts() -> None:
    inv = make_inventory(control_planes=3, workers=2)
    text = kubeadm.render_init_config(make_settings(), inv.hosts[0], inv)
    cluster, init, kubelet = check_v1beta4(text)
    assert cluster["kubernetesVersion"] == "v1.36.2"
    assert cluster["networking"] == {"podSubnet": "10.244.0.0/16", "serviceSubnet": "10.96.0.0/12"}
    assert {"name": "allocate-node-cidrs", "value": "true"} in cluster["controllerManager"]["extraArgs"]
    assert set(cluster["apiServer"]["certSANs"]) >= {"cp1", "cp2", "cp3", "10.0.0.2"}
    assert init["nodeRegistration"]["taints"] == [{"key": "node-role.kubernetes.io/control-plane",
                                                   "effect": "NoSchedule"}]
    assert init["nodeRegistration"]["kubeletExtraArgs"] == [
        {"name": "node-labels", "value": "clusterctl.dev/rack=a,topology.kubernetes.io/zone=zone-1"}]
    assert init["timeouts"]["controlPlaneComponentHealthCheck"] == "4m0s"
    assert kubelet["cgroupDriver"] == "systemd"


def test_the_schema_rejects_v1beta3_shapes() -> None:
    """The check can fail: extraArgs as a mapping and timeoutForControlPlane are v1beta3's."""
    old = {"apiVersion": "kubeadm.k8s.io/v1beta4", "kind": "ClusterConfiguration",
           "apiServer": {"extraArgs": {"audit-log-maxage": "30"}}}
    with pytest.raises(jsonschema.ValidationError):
        check_v1beta4(yaml.safe_dump(old))
    old = {"apiVersion": "kubeadm.k8s.io/v1beta4", "kind": "ClusterConfiguration",
           "apiServer": {"timeoutForControlPlane": "4m0s"}}
    with pytest.raises(jsonschema.ValidationError):
        check_v1beta4(yaml.safe_dump(old))


def test_a_control_plane_that_is_also_a_worker_gets_no_taint() -> None:
    inv = make_inventory(cp_is_worker=True)
    _, init, _ = check_v1beta4(kubeadm.render_init_config(make_settings(), inv.hosts[0], inv))
    assert init["nodeRegistration"]["taints"] == []


def test_the_file_kept_on_the_host_holds_no_secret_and_the_stdin_copy_does() -> None:
    inv = make_inventory()
    token, key = kubeadm.new_bootstrap_token(), kubeadm.new_certificate_key()
    on_disk = kubeadm.render_init_config(make_settings(), inv.hosts[0], inv)
    stdin = kubeadm.render_init_config(make_settings(), inv.hosts[0], inv, token=token, certificate_key=key)
    assert token.reveal() not in on_disk and key.reveal() not in on_disk
    _, init, _ = check_v1beta4(stdin)
    assert init["certificateKey"] == key.reveal()
    assert init["bootstrapTokens"][0]["token"] == token.reveal()
    assert init["bootstrapTokens"][0]["ttl"] == kubeadm.JOIN_TOKEN_TTL
    assert token.reveal() not in mask_text(stdin) and MASK in mask_text(stdin)


def test_worker_and_control_plane_join_configs() -> None:
    inv = make_inventory(control_planes=2, workers=1)
    token, key = kubeadm.new_bootstrap_token(), kubeadm.new_certificate_key()
    ca_hash = "sha256:" + "ab" * 32
    worker = kubeadm.render_join_config(make_settings(), inv.hosts[2], token=token, ca_hash=ca_hash)
    (join,) = check_v1beta4(worker.reveal())
    assert join["discovery"]["bootstrapToken"] == {"apiServerEndpoint": "10.0.0.1:6443", "token": token.reveal(),
                                                   "caCertHashes": [ca_hash]}
    assert "controlPlane" not in join
    assert str(worker) == MASK
    cp = kubeadm.render_join_config(make_settings(), inv.hosts[1], token=token, ca_hash=ca_hash, certificate_key=key)
    (join,) = check_v1beta4(cp.reveal())
    assert join["controlPlane"] == {"localAPIEndpoint": {"advertiseAddress": "10.0.0.2", "bindPort": 6443},
                                    "certificateKey": key.reveal()}
    with pytest.raises(ValueError, match="certificate key"):
        kubeadm.render_join_config(make_settings(), inv.hosts[1], token=token, ca_hash=ca_hash)


def test_token_and_upload_certs_configs_pin_the_version_so_kubeadm_stays_offline() -> None:
    token, key = kubeadm.new_bootstrap_token(), kubeadm.new_certificate_key()
    init, cluster = check_v1beta4(kubeadm.render_cluster_op_config(make_settings(), token=token).reveal())
    assert init["bootstrapTokens"][0]["token"] == token.reveal()
    assert cluster["kubernetesVersion"] == "v1.36.2"
    init, _ = check_v1beta4(kubeadm.render_cluster_op_config(make_settings(), certificate_key=key).reveal())
    assert init["certificateKey"] == key.reveal()


def test_tokens_and_keys_have_kubeadm_formats_and_are_masked() -> None:
    token = kubeadm.new_bootstrap_token()
    assert re.fullmatch(r"[a-z0-9]{6}\.[a-z0-9]{16}", token.reveal())
    assert mask_text(f"join with {token.reveal()}") == f"join with {MASK}"
    assert len(kubeadm.new_certificate_key().reveal()) == 64
    assert kubeadm.new_bootstrap_token() != token


def test_secrets_never_reach_argv() -> None:
    for command in (kubeadm.INIT_COMMAND, kubeadm.JOIN_COMMAND, kubeadm.TOKEN_CREATE_COMMAND,
                    kubeadm.UPLOAD_CERTS_COMMAND):
        assert "--config /dev/stdin" in command
        assert "--token " not in command and "--certificate-key " not in command


@pytest.mark.skipif(shutil.which("openssl") is None, reason="openssl is not installed")
def test_ca_hash_matches_the_openssl_pipeline_kubeadm_documents(tmp_path: Path) -> None:
    from datetime import datetime, timedelta, timezone

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import rsa
    from cryptography.x509.oid import NameOID

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "kubernetes")])
    now = datetime.now(timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(1).not_valid_before(now).not_valid_after(now + timedelta(days=1)).sign(key, hashes.SHA256()))
    pem = cert.public_bytes(serialization.Encoding.PEM)
    (tmp_path / "ca.crt").write_bytes(pem)
    # kubeadm's docs: openssl x509 -pubkey -in ca.crt | openssl rsa -pubin -outform der | openssl dgst -sha256 -hex
    pipeline = ("openssl x509 -pubkey -in ca.crt | openssl rsa -pubin -outform der 2>/dev/null"
                " | openssl dgst -sha256 -hex | sed 's/^.* //'")
    expected = subprocess.run(pipeline, shell=True, cwd=tmp_path, capture_output=True, text=True, check=True).stdout
    assert kubeadm.ca_cert_hash(pem) == "sha256:" + expected.strip()


def test_reset_config_carries_the_inventorys_cri_socket_and_forces_the_reset() -> None:
    (reset,) = check_v1beta4(kubeadm.render_reset_config("unix:///run/k3s/containerd/containerd.sock"))
    assert reset["kind"] == "ResetConfiguration"
    assert reset["criSocket"] == "unix:///run/k3s/containerd/containerd.sock"
    # clusterctl asked before (confirm rule); kubeadm refuses --force beside --config, so it is here.
    assert reset["force"] is True and reset["cleanupTmpDir"] is True
    assert kubeadm.RESET_COMMAND == "kubeadm reset --config /dev/stdin"


def test_a_hostile_cri_socket_stays_one_string_in_the_reset_config() -> None:
    from clusterctl.templating import TemplateError

    hostile = "unix:///run/x.sock\" force: false, cleanupTmpDir: false # '"
    (reset,) = check_v1beta4(kubeadm.render_reset_config(hostile))
    assert reset["criSocket"] == hostile
    assert reset["force"] is True and reset["cleanupTmpDir"] is True
    with pytest.raises(TemplateError, match="control character"):
        kubeadm.render_reset_config("unix:///run/x.sock\nforce: false")


def test_upgrade_config_names_the_target_in_every_section_that_reads_one() -> None:
    (upgrade,) = check_v1beta4(kubeadm.render_upgrade_config("v1.37.2"))
    assert upgrade["apply"]["kubernetesVersion"] == upgrade["plan"]["kubernetesVersion"] == "v1.37.2"
    assert "kubernetesVersion" not in upgrade["node"]  # upgrade node takes the cluster's version
    assert upgrade["apply"]["certificateRenewal"] is upgrade["node"]["certificateRenewal"] is True
    assert upgrade["apply"]["imagePullPolicy"] == upgrade["node"]["imagePullPolicy"] == "IfNotPresent"
    assert kubeadm.upgrade_command("apply", "v1.37.2") == "kubeadm upgrade apply v1.37.2 --config /dev/stdin --yes"
    assert kubeadm.upgrade_command("node") == "kubeadm upgrade node --config /dev/stdin"


def test_upgrade_config_skips_the_cgroup_v1_check_only_where_the_inventory_allows_cgroup_v1() -> None:
    """Real kubeadm 1.37's ``upgrade apply`` preflight refused the real nodes' cgroup v1 host
    (``[ERROR SystemVerification]: cgroups v1 support is deprecated``) as init's does; the
    simulated kubeadm never checked it."""
    (allowed,) = check_v1beta4(kubeadm.render_upgrade_config("v1.37.2", allow_cgroup_v1=True))
    for section in ("plan", "apply", "node"):
        assert allowed[section]["ignorePreflightErrors"] == ["SystemVerification"], section
    (default,) = check_v1beta4(kubeadm.render_upgrade_config("v1.37.2"))
    assert not any("ignorePreflightErrors" in default[section] for section in ("plan", "apply", "node"))


def test_the_schema_refuses_a_misspelt_upgrade_field() -> None:
    """The check can fail: the schema knows UpgradeConfiguration's sections field by field."""
    misspelt = kubeadm.render_upgrade_config("v1.37.2").replace("etcdUpgrade:", "etcdUpgrde:")
    with pytest.raises(jsonschema.ValidationError):
        check_v1beta4(misspelt)
