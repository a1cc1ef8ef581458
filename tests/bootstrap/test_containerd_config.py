"""containerd configs clusterctl renders, at each config version, and the drop-in rules.

Layout sources: containerd ``docs/cri/config.md`` (v2 CRI plugin ``io.containerd.grpc.v1.cri``
with ``sandbox_image``, ``containerd.runtimes.<name>.options``, ``registry.config_path``;
v3 ``io.containerd.cri.v1.runtime`` for ``containerd.runtimes`` / ``enable_cdi`` /
``cdi_spec_dirs`` and ``io.containerd.cri.v1.images`` for ``pinned_images.sandbox`` and
``registry.config_path``) and ``docs/man/containerd-config.toml.5.md`` (version 4: the same
CRI tables, server settings under ``io.containerd.server.v1.*``). Merge rules and version
refusal: containerd#5837, #7982, NVIDIA/aicr#1688 (``shared/reference/bootstrap-facts.md``).
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from refusals import refusal

from clusterctl.bootstrap.containerd_config import (
    WantedContainerd,
    carried_settings,
    check_dropins,
    config_version_for,
    effective_config,
    parse_toml,
    render_config,
    runtimes_of,
)
from clusterctl.errors import ParseError
from clusterctl.facts.containerd import (
    cri_status,
    parse_containerd_probe,
    parse_containerd_version,
    parse_ctr_plugins,
    parse_kubeadm_images,
    pause_image,
)
from clusterctl.findings import Severity

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "containerd"
GOLDEN = FIXTURES / "golden"
PAUSE = "registry.k8s.io/pause:3.10.1"


def fixture(name: str) -> str:
    return (FIXTURES / name).read_text()


@pytest.mark.parametrize("version, expected", [("1.6.20", 2), ("1.7.27", 2), ("2.0.0", 3), ("2.2.1", 3),
                                               ("2.3.0", 4), ("2.4.1", 4)])
def test_config_version_follows_the_installed_containerd(version: str, expected: int) -> None:
    assert config_version_for(version) == expected


def test_containerd_version_from_real_outputs() -> None:
    assert parse_containerd_version(fixture("containerd-version-debian12.txt")) == "1.6.20"
    assert parse_containerd_version(fixture("containerd-version-containerd.io-1.7.27.txt")) == "1.7.27"
    assert parse_containerd_version(fixture("containerd-version-containerd.io-2.2.1.txt")) == "2.2.1"
    with pytest.raises(ParseError):
        parse_containerd_version("Docker version 29.4.1, build 6c91b92\n")


def test_ctr_plugins_and_kubeadm_images_from_real_outputs() -> None:
    assert cri_status(parse_ctr_plugins(fixture("ctr-plugins-ls-debian12-1.6.20.txt"))) == "ok"
    assert cri_status(parse_ctr_plugins(fixture("ctr-plugins-ls-cri-error-1.6.20.txt"))) == "error"
    # containerd 2.x: CRI's settings are io.containerd.cri.v1 plugins; the CRI service is still grpc.v1 "cri", last.
    two = parse_ctr_plugins(fixture("ctr-plugins-ls-containerd-2.1.5.txt"))
    assert len(two) == 56 and cri_status(two) == "ok" and two[-1].id == "cri"
    assert [(p.id, p.platforms) for p in two if p.type == "io.containerd.cri.v1"] == [("images", "-"),
                                                                                      ("runtime", "linux/amd64")]
    assert pause_image(parse_kubeadm_images(fixture("kubeadm-config-images-list-1.23.0.txt"))) == "k8s.gcr.io/pause:3.6"


def test_kubeadms_klog_lines_among_the_images_are_skipped_not_taken_for_a_failure() -> None:
    """Unpinned, kubeadm logs to stderr that it could not reach dl.k8s.io; the probe merges stderr."""
    unpinned = fixture("kubeadm-config-images-list-1.37.2-unpinned.txt")
    assert unpinned.startswith("W1201 ")
    assert pause_image(parse_kubeadm_images(unpinned)) == "registry.k8s.io/pause:3.10.2"
    probe = f"@@clusterctl@@ version\ncontainerd containerd.io v2.2.1 abc\n@@clusterctl@@ kubeadm-images\n{unpinned}"
    facts = parse_containerd_probe(probe)
    assert facts.kubeadm_pause == "registry.k8s.io/pause:3.10.2"
    assert refusal(parse_kubeadm_images, unpinned.replace("registry.k8s.io/etcd:3.7.0-0", "etcd 3.7.0")).line == 9


GOLDEN_CASES = {
    "config-v2-containerd-1.6-default-runtime.toml": WantedContainerd("1.6.20", 2, PAUSE, "default", False),
    "config-v3-containerd-2.2-runtimeclass-cdi.toml": WantedContainerd("2.2.1", 3, PAUSE, "runtimeclass", True),
    "config-v4-containerd-2.3-default-runtime.toml": WantedContainerd("2.3.0", 4, "registry.k8s.io/pause:3.10.2",
                                                                      "default", False),
}


@pytest.mark.parametrize("name", sorted(GOLDEN_CASES))
def test_rendered_configs_match_the_golden_files(name: str) -> None:
    assert render_config(GOLDEN_CASES[name]) == (GOLDEN / name).read_text()


def test_v3_and_v4_use_the_plugin_layout_of_containerds_docs() -> None:
    for name in ("config-v3-containerd-2.2-runtimeclass-cdi.toml", "config-v4-containerd-2.3-default-runtime.toml"):
        doc = parse_toml((GOLDEN / name).read_text(), name)
        plugins = doc["plugins"]
        assert set(plugins) == {"io.containerd.cri.v1.images", "io.containerd.cri.v1.runtime"}, name
        runtime = plugins["io.containerd.cri.v1.runtime"]["containerd"]
        assert runtime["runtimes"]["nvidia"]["options"] == {"BinaryName": "/usr/bin/nvidia-container-runtime",
                                                            "SystemdCgroup": True}
        assert runtime["runtimes"]["runc"]["options"]["SystemdCgroup"] is True
        images = plugins["io.containerd.cri.v1.images"]
        assert images["pinned_images"]["sandbox"].startswith("registry.k8s.io/pause:")
        assert images["registry"]["config_path"] == "/etc/containerd/certs.d"
        assert "sandbox_image" not in str(doc) and "io.containerd.grpc.v1.cri" not in plugins
    v3 = parse_toml((GOLDEN / "config-v3-containerd-2.2-runtimeclass-cdi.toml").read_text(), "v3")
    assert v3["version"] == 3 and v3["plugins"]["io.containerd.cri.v1.runtime"]["enable_cdi"] is True
    assert v3["plugins"]["io.containerd.cri.v1.runtime"]["containerd"]["default_runtime_name"] == "runc"
    v4 = parse_toml((GOLDEN / "config-v4-containerd-2.3-default-runtime.toml").read_text(), "v4")
    assert v4["version"] == 4 and v4["imports"] == ["/etc/containerd/conf.d/*.toml"]
    assert v4["plugins"]["io.containerd.cri.v1.runtime"]["containerd"]["default_runtime_name"] == "nvidia"


def test_v4_root_with_a_v4_dropin_is_accepted_and_a_higher_dropin_refused() -> None:
    wanted = GOLDEN_CASES["config-v4-containerd-2.3-default-runtime.toml"]
    root = parse_toml(render_config(wanted), "root")
    v4 = parse_toml(fixture("dropin-99-nvidia-v4.toml"), "99-nvidia.toml")
    assert check_dropins(4, "2.3.0", root, {"/etc/containerd/conf.d/99-nvidia.toml": v4}, wanted, "h") == []
    # The same v4 drop-in beside a v3 root (containerd 2.2): refused, like containerd 2.3.0-2.3.4 do.
    wanted3 = GOLDEN_CASES["config-v3-containerd-2.2-runtimeclass-cdi.toml"]
    root3 = parse_toml(render_config(wanted3), "root")
    problems = check_dropins(3, "2.2.1", root3, {"/etc/containerd/conf.d/99-nvidia.toml": v4}, wanted3, "h")
    assert [(p.severity, p.code) for p in problems] == [(Severity.ERROR, "CONTAINERD_DROPIN_VERSION_HIGHER")]
    assert "version 4, higher than the root's 3" in problems[0].message


def test_on_1x_a_dropin_replaces_the_whole_cri_table() -> None:
    """The Debian 1.6.20 reproduction: a drop-in holding only runtimes.nvidia resets sandbox_image,
    clears config_path and drops the runc runtime."""
    wanted = GOLDEN_CASES["config-v2-containerd-1.6-default-runtime.toml"]
    root = parse_toml(render_config(wanted), "root")
    only_nvidia = parse_toml(fixture("config-nvidia-ctk-set-as-default-v2.toml"), "99-nvidia.toml")
    merged_1x = effective_config(root, [only_nvidia], containerd_major=1)
    cri = merged_1x["plugins"]["io.containerd.grpc.v1.cri"]
    assert "sandbox_image" not in cri and "registry" not in cri and set(cri["containerd"]["runtimes"]) == {"nvidia"}
    merged_2x = effective_config(root, [only_nvidia], containerd_major=2)
    assert merged_2x["plugins"]["io.containerd.grpc.v1.cri"]["sandbox_image"] == PAUSE
    problems = check_dropins(2, "1.6.20", root, {"/etc/containerd/conf.d/99-nvidia.toml": only_nvidia}, wanted, "h")
    assert [p.code for p in problems] == ["CONTAINERD_DROPIN_OVERRIDES"]
    assert "the sandbox image" in problems[0].message and "the runc runtime" in problems[0].message
    assert "containerd#5837" in problems[0].message


def test_an_existing_nvidia_runtime_is_carried_over_with_its_own_binary() -> None:
    operator = parse_toml(fixture("dropin-99-nvidia-v3-gpu-operator.toml"), "dropin")
    wanted = WantedContainerd("2.2.1", 3, PAUSE, "default", False, runtimes_of(operator))
    rendered = parse_toml(render_config(wanted), "root")
    nvidia = rendered["plugins"]["io.containerd.cri.v1.runtime"]["containerd"]["runtimes"]["nvidia"]
    assert nvidia["options"]["BinaryName"] == "/usr/local/nvidia/toolkit/nvidia-container-runtime"
    assert nvidia["privileged_without_host_devices"] is False and nvidia["options"]["SystemdCgroup"] is True


def test_local_settings_are_kept_and_cri_tweaks_reported() -> None:
    root = parse_toml('version = 2\nroot = "/data/containerd"\n[grpc]\n  address = "/run/c.sock"\n'
                      '[plugins."io.containerd.grpc.v1.cri"]\n  max_container_log_line_size = 16384\n', "old")
    carried, dropped = carried_settings(root, 2)
    assert carried == {"root": "/data/containerd", "grpc": {"address": "/run/c.sock"}}
    assert dropped == ["io.containerd.grpc.v1.cri: max_container_log_line_size = 16384"]
    carried4, _ = carried_settings(root, 4)
    assert carried4["plugins"] == {"io.containerd.server.v1.grpc": {"address": "/run/c.sock"}}


def test_probe_output_with_toml_comments_is_split_by_its_own_marker() -> None:
    text = ("@@clusterctl@@ version\ncontainerd containerd.io v2.2.1 dea7da59\n@@clusterctl@@ config\n"
            "### a comment a user wrote\nversion = 3\n@@clusterctl@@ dropins\n99-nvidia.toml\nREADME\n"
            "@@clusterctl@@ hosts:docker.io\ncat: /etc/containerd/certs.d/docker.io/hosts.toml: No such file or "
            "directory\n@@clusterctl@@ kubeadm-images\nsh: 1: kubeadm: not found\n")
    facts = parse_containerd_probe(text)
    assert facts.version == "2.2.1" and "### a comment" in (facts.config or "")
    assert list(facts.dropins) == ["99-nvidia.toml"] and facts.hosts_files == {}
    assert facts.kubeadm_pause is None


@pytest.mark.parametrize("said", ["sh: 1: {tool}: not found", "bash: line 1: {tool}: command not found",
                                  "sudo: {tool}: command not found", ""])
def test_a_host_without_containerd_or_kubeadm_reads_as_neither_installed(said: str) -> None:
    """The shell's words for a missing program are the facts package's one rule (``absent_reason``)."""
    text = (f"@@clusterctl@@ version\n{said.format(tool='containerd')}\n@@clusterctl@@ config\n"
            "cat: /etc/containerd/config.toml: No such file or directory\n@@clusterctl@@ kubeadm-images\n"
            f"{said.format(tool='kubeadm')}\n")
    facts = parse_containerd_probe(text)
    assert (facts.version, facts.config, facts.kubeadm_pause) == (None, None, None)


@pytest.mark.skipif(shutil.which("containerd") is None, reason="needs the containerd binary (Debian: containerd)")
def test_rendered_v2_config_is_accepted_by_a_real_containerd(tmp_path: Path) -> None:
    operator_runtime = runtimes_of(parse_toml(fixture("config-nvidia-ctk-set-as-default-v2.toml"), "x"))
    wanted = WantedContainerd("1.6.20", 2, PAUSE, "default", True, operator_runtime,
                              dropin_dir=str(tmp_path / "conf.d"))
    config = tmp_path / "config.toml"
    config.write_text(render_config(wanted))
    done = subprocess.run(["containerd", "--config", str(config), "config", "dump"], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    dumped = parse_toml(done.stdout, "config dump")
    cri = dumped["plugins"]["io.containerd.grpc.v1.cri"]
    assert cri["sandbox_image"] == PAUSE
    assert cri["containerd"]["default_runtime_name"] == "nvidia"
    assert cri["containerd"]["runtimes"]["nvidia"]["options"]["BinaryName"] == "/usr/bin/nvidia-container-runtime"
    assert cri["registry"]["config_path"] == "/etc/containerd/certs.d"
