"""The simulated kubeadm answers clusterctl's kubeadm command lines as the real kubeadm does.

Each line runs twice: on a mock host (``clusterctl/mock/tools/kubeadm.py``) with the Debian
package of that release installed, and as the real kubeadm of the release under ``dash``. The
two must agree on the exit code and on what clusterctl reads from the output, through
clusterctl's own command lines and parsers where it has them (the stack and containerd probes).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path

import pytest
from contract import Answer, RealHost, SimulatedHost
from demo_calls import VARIANTS, DemoRecordings
from sandbox import Sandbox
from toolset import KUBERNETES_DEMO_MINOR, KUBERNETES_NEWEST, KUBERNETES_OLDEST

from clusterctl.bootstrap.cluster.kubeadm import RESET_COMMAND, render_reset_config
from clusterctl.bootstrap.cluster.kubeadm_images import kubeadm_images
from clusterctl.facts.containerd import containerd_probe, parse_containerd_probe, parse_kubeadm_images
from clusterctl.facts.sections import section_command
from clusterctl.facts.stack import parse_stack

Tool = Callable[[str, str], Path]
RELEASES = (KUBERNETES_NEWEST, KUBERNETES_DEMO_MINOR, KUBERNETES_OLDEST)


class Pair:
    """A mock host and the real kubeadm of one release, for the same lines."""

    def __init__(self, release: str, folder: Path, upstream_tool: Tool) -> None:
        self.release = release
        self.sim = SimulatedHost(folder / "sim", {"kubeadm": f"{release}-1.1"})
        self.real = RealHost(folder / "real", {"kubeadm": upstream_tool("kubeadm", release)})

    def run(self, line: str, stdin: bytes = b"") -> tuple[Answer, Answer]:
        sim, real = self.sim.run(line, stdin), self.real.run(line, stdin)
        assert sim.exit_code == real.exit_code, f"{line}: exit {sim.exit_code} simulated, {real.exit_code} real\n" \
            f"simulated: {sim.output}\nreal: {real.output}"
        return sim, real


@pytest.fixture(params=RELEASES)
def pair(request: pytest.FixtureRequest, tmp_path: Path, upstream_tool: Tool) -> Pair:
    return Pair(str(request.param), tmp_path, upstream_tool)


def test_version_answers_agree_in_every_form_clusterctl_reads(pair: Pair) -> None:
    sim, real = pair.run("kubeadm version -o short")
    assert sim.stdout == real.stdout == f"v{pair.release}\n"
    sim, real = pair.run("kubeadm version -o json")
    simulated, actual = json.loads(sim.stdout), json.loads(real.stdout)
    assert simulated.keys() == actual.keys()
    for key in ("major", "minor", "gitVersion", "platform"):
        assert simulated["clientVersion"][key] == actual["clientVersion"][key], key
    for line in ("kubeadm version -o json -o short", "kubeadm version -o json --output short"):
        sim, real = pair.run(line)  # a repeated flag: cobra keeps the last one given
        assert sim.stdout == real.stdout == f"v{pair.release}\n", line
    sim, real = pair.run("kubeadm version")
    shown = re.compile(r'GitVersion:"(v[^"]+)"')
    assert shown.findall(sim.stdout) == shown.findall(real.stdout) == [f"v{pair.release}"]
    # The survey's stack probe: its own line and parser.
    probe = section_command([("kubeadm", "kubeadm version -o short 2>&1")])
    sim, real = pair.run(probe)
    assert parse_stack(sim.stdout).kubeadm == parse_stack(real.stdout).kubeadm == pair.release


def image_lists(pair: Pair, line: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    sim, real = pair.run(line)
    return parse_kubeadm_images(sim.stdout), parse_kubeadm_images(real.stdout)


def test_image_lists_agree(pair: Pair) -> None:
    simulated, actual = image_lists(pair, f"kubeadm config images list --kubernetes-version v{pair.release}")
    assert simulated == actual
    assert any(image.startswith("registry.k8s.io/pause:") for image in actual)
    # The product's own table (day-2 artifacts for air-gapped mirrors) says the same.
    assert tuple(kubeadm_images(pair.release)) == actual


def test_the_containerd_probe_reads_the_same_pause_image_pinned_or_not(pair: Pair) -> None:
    """Unpinned, the real kubeadm writes klog lines to stderr; the probe merges it (``2>&1``)."""
    for kubernetes in (pair.release, None):
        probe = containerd_probe("/nonexistent/config.toml", "/nonexistent/conf.d", "/nonexistent/certs.d",
                                 kubernetes)
        sim, real = pair.run(probe)
        simulated, actual = parse_containerd_probe(sim.stdout), parse_containerd_probe(real.stdout)
        assert actual.kubeadm_pause is not None, real.stdout
        assert simulated.kubeadm_pause == actual.kubeadm_pause, f"kubernetes={kubernetes}"


def test_a_mismatch_in_the_simulated_kubeadm_is_caught(pair: Pair, monkeypatch: pytest.MonkeyPatch) -> None:
    """The contract can fail: a simulated kubeadm that lists another pause tag is told apart."""
    from clusterctl.mock.tools import kubeadm_manifests as simulated_kubeadm

    minor = int(pair.release.split(".")[1])
    _pause, etcd, coredns = simulated_kubeadm.IMAGE_TAGS[minor]
    monkeypatch.setitem(simulated_kubeadm.IMAGE_TAGS, minor, ("3.9", etcd, coredns))
    simulated, actual = image_lists(pair, f"kubeadm config images list --kubernetes-version v{pair.release}")
    assert simulated != actual


def test_token_and_certificate_key_generators_exist_and_agree_on_formats(pair: Pair) -> None:
    sim, real = pair.run("kubeadm token generate")
    for answer in (sim, real):
        assert re.fullmatch(r"[a-z0-9]{6}\.[a-z0-9]{16}\n", answer.stdout), answer.output
    sim, real = pair.run("kubeadm certs certificate-key")
    for answer in (sim, real):
        assert re.fullmatch(r"[0-9a-f]{64}\n", answer.stdout), answer.output


def unknown_field(answer: Answer) -> str | None:
    found = re.search(r'unknown field "([^"]+)"', answer.stderr)
    return found.group(1) if found else None


def test_config_validate_accepts_and_refuses_the_same_configs(pair: Pair, demo_recordings: DemoRecordings) -> None:
    kept = next(c for c in demo_recordings.get(VARIANTS[0]).of("kubeadm", "config", "validate")).config
    assert kept is not None
    version = f'kubernetesVersion: "v{pair.release}"'.encode()
    config = re.sub(rb'kubernetesVersion: "v[0-9.]+"', version, kept)
    cases = {
        "as clusterctl writes it": config,
        "unknown top-level field": config.replace(b"clusterName:", b"clusterNmae:"),
        "unknown nested field": config.replace(b"  certSANs:", b"  timeoutForControlPlane: 4m0s\n  certSANs:"),
        "v1beta3": config.replace(b"kubeadm.k8s.io/v1beta4", b"kubeadm.k8s.io/v1beta3"),
    }
    for name, text in cases.items():
        sim, real = pair.run("kubeadm config validate --config /dev/stdin", text)
        assert unknown_field(sim) == unknown_field(real), name
        if name == "as clusterctl writes it":
            assert real.exit_code == 0, real.stderr
        elif name != "v1beta3":
            assert real.exit_code != 0 and unknown_field(real) is not None, name


#: A control plane's kubeadm files, a kubelet's and etcd's state, an upgrade's backup in kubeadm's
#: tmp folder, and one file of clusterctl's own that kubeadm must leave alone.
HOST_FILES = {
    "/etc/kubernetes/manifests/kube-apiserver.yaml": b"apiVersion: v1\nkind: Pod\n",
    "/etc/kubernetes/pki/ca.crt": b"(certificate)\n",
    "/etc/kubernetes/scheduler.conf": b"apiVersion: v1\nkind: Config\n",
    "/etc/kubernetes/tmp/kubeadm-backup-manifests-2026-12-01-10-00-00/kube-apiserver.yaml": b"kind: Pod\n",
    "/etc/kubernetes/clusterctl/kubeadm-config.yaml": b"kind: ClusterConfiguration\n",
    "/var/lib/kubelet/config.yaml": b"kind: KubeletConfiguration\n",
    "/var/lib/etcd/member/snap/db": b"(etcd data)\n",
}
FOLDERS = ("/etc/kubernetes", "/var/lib/kubelet", "/var/lib/etcd")


def simulated_files(host: SimulatedHost) -> list[str]:
    fs = host.machine.host.fs
    root = fs.local("/")
    return sorted("/" + str(p.relative_to(root)) for folder in FOLDERS if fs.is_dir(folder)
                  for p in fs.local(folder).rglob("*") if p.is_file())


def kubeadm_lines(answer: Answer) -> list[str]:
    """kubeadm's own step lines (``[reset] ...``, ``[dryrun] Would ...``): what a user reads of a reset."""
    return [line for line in answer.stdout.splitlines() if line.startswith("[")]


class ResetPair:
    """The simulated kubeadm on a mock host and the real one in a private namespace, with HOST_FILES."""

    def __init__(self, release: str, folder: Path, upstream_tool: Tool) -> None:
        self.sim = SimulatedHost(folder / "sim", {"kubeadm": f"{release}-1.1"}, HOST_FILES)
        self.real = Sandbox(folder / "real", {"kubeadm": upstream_tool("kubeadm", release)}, HOST_FILES)

    def run(self, line: str, stdin: bytes) -> tuple[Answer, Answer]:
        sim, real = self.sim.run(line, stdin), self.real.run(line, stdin)
        assert sim.exit_code == real.exit_code, f"{line}: exit {sim.exit_code} simulated, {real.exit_code} real\n" \
            f"simulated: {sim.output}\nreal: {real.output}"
        return sim, real

    def files(self) -> tuple[list[str], list[str]]:
        return simulated_files(self.sim), self.real.files(*FOLDERS)


@pytest.fixture(params=RELEASES)
def reset_pair(request: pytest.FixtureRequest, tmp_path: Path, upstream_tool: Tool) -> ResetPair:
    return ResetPair(str(request.param), tmp_path, upstream_tool)


def test_reset_dry_run_changes_nothing_and_says_what_it_would_do(reset_pair: ResetPair) -> None:
    """clusterctl's reset line and configuration with ``--dry-run``: the same steps announced, nothing gone."""
    before = sorted(HOST_FILES)
    assert reset_pair.files() == (before, before)
    config = render_reset_config("unix:///run/containerd/containerd.sock").encode()
    sim, real = reset_pair.run(f"{RESET_COMMAND} --dry-run", config)
    assert real.exit_code == 0, real.output
    assert kubeadm_lines(sim) == kubeadm_lines(real)
    assert any(line.startswith("[dryrun] Would delete contents of directories:") for line in kubeadm_lines(real))
    assert reset_pair.files() == (before, before)


def test_reset_removes_the_same_files_with_the_same_lines(reset_pair: ResetPair) -> None:
    config = render_reset_config("unix:///run/containerd/containerd.sock").encode()
    sim, real = reset_pair.run(RESET_COMMAND, config)
    assert real.exit_code == 0, real.output
    assert kubeadm_lines(sim) == kubeadm_lines(real)
    simulated, actual = reset_pair.files()
    assert simulated == actual == ["/etc/kubernetes/clusterctl/kubeadm-config.yaml"]


def test_reset_refuses_force_beside_its_configuration_as_the_real_one_does(reset_pair: ResetPair) -> None:
    """kubeadm 1.31+ will not mix ``--config`` with ``--force``/``--cri-socket``: clusterctl's old line."""
    config = render_reset_config("unix:///run/containerd/containerd.sock").encode()
    sim, real = reset_pair.run(f"{RESET_COMMAND} --force --cri-socket unix:///run/containerd/containerd.sock",
                               config)
    assert real.exit_code != 0
    assert "can not mix '--config' with arguments [cri-socket force]" in sim.stderr
    assert "can not mix '--config' with arguments [cri-socket force]" in real.stderr
    assert reset_pair.files() == (sorted(HOST_FILES), sorted(HOST_FILES))


def test_a_simulated_reset_that_ignores_dry_run_is_caught(reset_pair: ResetPair,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """The contract can fail: a simulated kubeadm that drops ``--dry-run`` is told apart from the real one."""
    from clusterctl.mock.tools import kubeadm_reset as simulated_reset

    monkeypatch.setattr(simulated_reset, "dry_run", lambda args, section=None: False)
    config = render_reset_config("unix:///run/containerd/containerd.sock").encode()
    sim, real = reset_pair.run(f"{RESET_COMMAND} --dry-run", config)
    assert kubeadm_lines(sim) != kubeadm_lines(real)
    simulated, actual = reset_pair.files()
    assert simulated != actual


def test_a_misspelt_reset_field_is_only_a_warning_for_both(reset_pair: ResetPair) -> None:
    """kubeadm's commands decode their configuration leniently (``config validate`` does not): the reset
    goes on, with kubeadm's strict-decoding warning on stderr, on the real kubeadm and the simulated one."""
    config = render_reset_config("unix:///run/containerd/containerd.sock").replace("cleanupTmpDir:", "cleanupTmpDri:")
    sim, real = reset_pair.run(f"{RESET_COMMAND} --dry-run", config.encode())
    assert real.exit_code == 0, real.output
    for answer in (sim, real):
        assert 'strict decoding error: unknown field "cleanupTmpDri"' in answer.stderr, answer.stderr
    # The misspelt field was not read: kubeadm's tmp folder is not among what it would empty.
    assert kubeadm_lines(sim) == kubeadm_lines(real)
    assert not any("/etc/kubernetes/tmp" in line for line in kubeadm_lines(real))


def test_remove_etcd_member_without_a_cluster_empties_the_default_data_folder_alike(reset_pair: ResetPair) -> None:
    """No etcd manifest and no cluster configuration (before init, after a reset, a resumed removal):
    kubeadm falls back to /var/lib/etcd and empties it, saying so; run again, it has nothing to say."""
    said = []
    for _ in range(2):
        sim, real = reset_pair.run("kubeadm reset phase remove-etcd-member", b"")
        assert real.exit_code == 0, real.output
        assert kubeadm_lines(sim) == kubeadm_lines(real), f"simulated: {sim.output}\nreal: {real.output}"
        assert "No kubeadm config, using etcd pod spec" in sim.stderr and "No kubeadm config" in real.stderr
        said.append(kubeadm_lines(real))
    assert said == [["[reset] Deleted contents of the etcd data directory: /var/lib/etcd"], []]
    simulated, actual = reset_pair.files()
    assert simulated == actual and "/var/lib/etcd/member/snap/db" not in actual


@pytest.mark.parametrize("skip", ["--skip-phases remove-etcd-member", "--skip-phases=remove-etcd-member"])
def test_a_skipped_etcd_phase_keeps_the_etcd_data_in_either_flag_form(reset_pair: ResetPair, skip: str) -> None:
    """kubeadm's flags are cobra's: ``--skip-phases=X`` is ``--skip-phases X``; either keeps etcd's data."""
    config = render_reset_config("unix:///run/containerd/containerd.sock").encode()
    sim, real = reset_pair.run(f"{RESET_COMMAND} {skip}", config)
    assert real.exit_code == 0, real.output
    assert kubeadm_lines(sim) == kubeadm_lines(real)
    simulated, actual = reset_pair.files()
    assert simulated == actual and "/var/lib/etcd/member/snap/db" in actual
