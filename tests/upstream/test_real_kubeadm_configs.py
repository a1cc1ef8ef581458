"""Every kubeadm configuration clusterctl hands kubeadm, checked by the real kubeadm of that minor.

The inputs are not re-rendered here: they are what the demo's bootstrap (and its variants) passed
to kubeadm on its mock hosts, stdin copies with their token and certificate key included
(``demo_calls``). The real ``kubeadm config validate`` decodes them strictly (unknown fields at any
depth, API versions the release no longer reads) and runs kubeadm's own validation.
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml
from demo_calls import VARIANTS, DemoRecordings, Variant
from sandbox import Sandbox
from toolset import KUBERNETES_NEWEST, KUBERNETES_OLDEST, kubeadm_for

from clusterctl.bootstrap.cluster import kubeadm as kubeadm_config
from clusterctl.bootstrap.cluster.settings import settings_from_mapping
from clusterctl.secret import mask_text

Tool = Callable[[str, str], Path]


def validate(kubeadm: Path, config: bytes, folder: Path) -> subprocess.CompletedProcess[str]:
    path = folder / "config.yaml"
    path.write_bytes(config)
    path.chmod(0o600)
    return subprocess.run([str(kubeadm), "config", "validate", "--config", str(path)], capture_output=True,
                          text=True, timeout=60)


def kinds(config: bytes) -> set[str]:
    return {str(doc.get("kind")) for doc in yaml.safe_load_all(config) if doc}


@pytest.mark.parametrize("variant", VARIANTS, ids=lambda v: v.name)
def test_every_config_clusterctl_hands_kubeadm_passes_the_real_kubeadm(
        variant: Variant, demo_recordings: DemoRecordings, upstream_tool: Tool, tmp_path: Path) -> None:
    kubeadm = upstream_tool("kubeadm", kubeadm_for(variant.kubernetes))
    recording = demo_recordings.get(variant)
    configs = [call for call in recording.of("kubeadm") if call.config is not None]
    seen: set[str] = set()
    for call in configs:
        assert call.config is not None
        done = validate(kubeadm, call.config, tmp_path)
        assert done.returncode == 0, f"{call.host}: {call.line}: {mask_text(done.stderr)}"
        seen |= {f"{call.argv[1]}:{kind}" for kind in kinds(call.config)}
        if call.argv[1] == "join" and b"controlPlane:" in call.config:
            seen.add("join:control-plane")
    # The run handed kubeadm the file it keeps, the init copy on stdin, and worker joins on stdin.
    assert {"config:InitConfiguration", "init:InitConfiguration", "init:ClusterConfiguration",
            "init:KubeletConfiguration", "join:JoinConfiguration"} <= seen
    if variant.control_planes > 1:
        assert "join:control-plane" in seen


@pytest.mark.parametrize("kubernetes", [KUBERNETES_OLDEST, kubeadm_for("1.36"), KUBERNETES_NEWEST])
def test_token_and_certificate_upload_configs_pass_the_real_kubeadm(kubernetes: str, upstream_tool: Tool,
                                                                    tmp_path: Path) -> None:
    """The configs ``kubeadm token create`` and ``init phase upload-certs`` read on stdin (adding nodes later)."""
    kubeadm = upstream_tool("kubeadm", kubernetes)
    settings = settings_from_mapping({}, kubernetes_pin=kubernetes, first_control_plane="10.0.0.11")
    token, key = kubeadm_config.new_bootstrap_token(), kubeadm_config.new_certificate_key()
    for config in (kubeadm_config.render_cluster_op_config(settings, token=token),
                   kubeadm_config.render_cluster_op_config(settings, certificate_key=key)):
        done = validate(kubeadm, config.reveal().encode(), tmp_path)
        assert done.returncode == 0, mask_text(done.stderr)


def test_the_real_kubeadm_refuses_what_the_check_is_for(demo_recordings: DemoRecordings, upstream_tool: Tool,
                                                        tmp_path: Path) -> None:
    """The check can fail: a nested unknown field, a v1beta3 shape, v1beta3 itself on 1.37."""
    kubeadm = upstream_tool("kubeadm", KUBERNETES_NEWEST)
    recording = demo_recordings.get(VARIANTS[0])
    kept = next(c for c in recording.of("kubeadm", "config", "validate")).config
    assert kept is not None
    nested = kept.replace(b"  certSANs:", b"  timeoutForControlPlane: 4m0s\n  certSANs:")
    done = validate(kubeadm, nested, tmp_path)
    assert done.returncode != 0 and 'unknown field "apiServer.timeoutForControlPlane"' in done.stderr
    v1beta3 = kept.replace(b"kubeadm.k8s.io/v1beta4", b"kubeadm.k8s.io/v1beta3")
    done = validate(kubeadm, v1beta3, tmp_path)
    assert done.returncode != 0 and "v1beta3" in done.stderr


RELEASES = (KUBERNETES_OLDEST, kubeadm_for("1.36"), KUBERNETES_NEWEST)


def reset_and_upgrade_configs(kubernetes: str) -> tuple[bytes, bytes]:
    """clusterctl's ResetConfiguration (the demo's CRI socket) and UpgradeConfiguration (to this release)."""
    settings = settings_from_mapping({}, kubernetes_pin=kubernetes, first_control_plane="10.0.0.11")
    return (kubeadm_config.render_reset_config(settings.cri_socket).encode(),
            kubeadm_config.render_upgrade_config(f"v{kubernetes}").encode())


@pytest.mark.parametrize("kubernetes", RELEASES)
def test_reset_and_upgrade_configs_pass_the_real_kubeadm(kubernetes: str, upstream_tool: Tool,
                                                         tmp_path: Path) -> None:
    """``config validate``, and the commands' own reading of them: kubeadm reset and upgrade decode
    their configuration leniently (an unknown field is only a klog warning), and 1.35's ``config
    validate`` does not decode an UpgradeConfiguration at all, so the command's stderr is read too."""
    kubeadm = upstream_tool("kubeadm", kubernetes)
    reset, upgrade = reset_and_upgrade_configs(kubernetes)
    # bootstrap.allow_cgroup_v1's upgrade configuration: SystemVerification skipped in every section.
    cgroup_v1 = kubeadm_config.render_upgrade_config(f"v{kubernetes}", allow_cgroup_v1=True).encode()
    for config in (reset, upgrade, cgroup_v1):
        done = validate(kubeadm, config, tmp_path)
        assert done.returncode == 0, done.stderr
    sandbox = Sandbox(tmp_path / "host", {"kubeadm": kubeadm})
    done = sandbox.run(f"{kubeadm_config.RESET_COMMAND} --dry-run", reset)
    assert done.exit_code == 0, done.stderr
    assert "strict decoding" not in done.stderr
    # The reset configuration's fields reached kubeadm: kubeadm's tmp folder is among what it would empty.
    assert "[dryrun] Would delete contents of directories: [/etc/kubernetes/manifests /etc/kubernetes/pki " \
        "/etc/kubernetes/tmp]" in done.stdout
    for verb, config in (("node", upgrade), ("apply", upgrade), ("node", cgroup_v1), ("apply", cgroup_v1)):
        line = kubeadm_config.upgrade_command(verb, f"v{kubernetes}" if verb == "apply" else None)
        done = sandbox.run(f"{line} --dry-run", config)
        assert "can not mix" not in done.stderr and "strict decoding" not in done.stderr, done.stderr
        assert "unknown field" not in done.stderr, done.stderr
        # It got as far as the node's own checks (this sandbox has no kubelet): the configuration was taken.
        assert re.search(r"\[upgrade/preflight\] Running pre-?flight checks", done.stdout), done.output


@pytest.mark.parametrize("kubernetes", RELEASES)
def test_the_real_kubeadm_tells_a_misspelt_reset_or_upgrade_field(kubernetes: str, upstream_tool: Tool,
                                                                   tmp_path: Path) -> None:
    """The check can fail: a misspelt field is refused (``config validate``) or warned about (the command)."""
    kubeadm = upstream_tool("kubeadm", kubernetes)
    reset, upgrade = reset_and_upgrade_configs(kubernetes)
    done = validate(kubeadm, reset.replace(b"cleanupTmpDir:", b"cleanupTmpDri:"), tmp_path)
    assert done.returncode != 0 and 'unknown field "cleanupTmpDri"' in done.stderr
    misspelt = upgrade.replace(b"etcdUpgrade:", b"etcdUpgrde:")
    done = validate(kubeadm, misspelt, tmp_path)
    if int(kubernetes.split(".")[1]) >= 36:
        assert done.returncode != 0 and 'unknown field "apply.etcdUpgrde"' in done.stderr
    sandbox = Sandbox(tmp_path / "host", {"kubeadm": kubeadm})
    done = sandbox.run(f"{kubeadm_config.upgrade_command('node')} --dry-run", misspelt)
    assert 'unknown field "node.etcdUpgrde"' in done.stderr
