"""``bootstrap artifacts``: the air-gapped site's mirror list, and the probe of the mirrors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from clirun import DEMO, clusterctl
from fixture_files import read_fixture
from sim_cluster import SimCluster

from clusterctl.bootstrap.apt_sources import packages_index_url
from clusterctl.bootstrap.artifacts import Artifact, split_image
from clusterctl.bootstrap.artifacts_probe import chart_versions, judge_status, parse_packages_index
from clusterctl.bootstrap.cluster.kubeadm_images import TAGS_BY_MINOR, kubeadm_images
from clusterctl.errors import ParseError
from clusterctl.inventory.model import AptRepo

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


def test_the_demo_lists_every_image_kubeadm_pulls_and_every_chart_and_package() -> None:
    done = clusterctl("-i", DEMO, "-o", "json", "bootstrap", "artifacts")
    assert done.exit_code == 0, done.output
    listed = done.json()
    refs = {a["reference"] for a in listed["artifacts"]}
    for image in ("kube-apiserver", "kube-controller-manager", "kube-scheduler", "kube-proxy"):
        assert f"registry.k8s.io/{image}:v1.36.2" in refs
    assert {"registry.k8s.io/coredns/coredns:v1.14.2", "registry.k8s.io/pause:3.10.2",
            "registry.k8s.io/etcd:3.6.8-0"} <= refs
    charts = {(a["name"], a["version"], a["source"]) for a in listed["artifacts"] if a["kind"] == "chart"}
    assert charts == {
        ("node-feature-discovery", "0.19.0", "https://kubernetes-sigs.github.io/node-feature-discovery/charts"),
        ("nvidia-device-plugin", "0.20.0", "https://nvidia.github.io/k8s-device-plugin"),
        ("dcgm-exporter", "4.8.2", "https://nvidia.github.io/dcgm-exporter/helm-charts"),
    }
    assert {"kubeadm=1.36.2-*", "kubelet=1.36.2-*", "kubectl=1.36.2-*", "containerd.io=2.3.7-*",
            "nvidia-container-toolkit=1.20.2-*"} <= refs
    assert {"nvcr.io/nvidia/k8s-device-plugin:v0.20.0", "registry.k8s.io/nfd/node-feature-discovery:v0.19.0",
            "quay.io/calico/node:v3.31.7"} <= refs
    kubelet = next(a for a in listed["artifacts"] if a["name"] == "kubelet")
    assert len(kubelet["hosts"]) == 6 and kubelet["source"] == "https://pkgs.k8s.io/core:/stable:/v1.36/deb/"


@pytest.mark.parametrize("minor", sorted(TAGS_BY_MINOR))
def test_the_image_list_is_what_the_simulated_kubeadm_answers(tmp_path: Path, minor: int) -> None:
    sim = SimCluster(tmp_path, ["gpu-a1"])
    result = sim.machine("gpu-a1").run_line(f"kubeadm config images list --kubernetes-version v1.{minor}.3", b"")
    assert result.exit_code == 0
    assert result.stdout.split() == sorted(kubeadm_images(f"1.{minor}.3"), key=result.stdout.split().index)
    assert sorted(result.stdout.split()) == sorted(kubeadm_images(f"1.{minor}.3"))


@pytest.mark.parametrize("version", ["v1", "v1.3x.0", "vnext"])
def test_the_simulated_kubeadm_refuses_a_version_it_cannot_read(tmp_path: Path, version: str) -> None:
    host = SimCluster(tmp_path, ["gpu-a1"]).machine("gpu-a1")
    result = host.run_line(f"kubeadm config images list --kubernetes-version {version}", b"")
    assert (result.exit_code, result.stdout) == (1, "")
    assert result.stderr == f'couldn\'t parse Kubernetes version "{version}"\n'


def test_a_site_registry_rehomes_images_and_coredns_loses_its_sub_path() -> None:
    images = kubeadm_images("1.36.2", "mirror.site:5000/k8s")
    assert "mirror.site:5000/k8s/coredns:v1.14.2" in images
    assert "mirror.site:5000/k8s/kube-apiserver:v1.36.2" in images


@pytest.mark.parametrize("reference", ["mirror.site:5000/pause", "pause:3.10.2", f"pause@sha256:{'c' * 64}",
                                       f"mirror.site:5000/k8s/pause:3.10.2@sha256:{'c' * 64}"])
def test_an_image_reference_is_listed_as_given(reference: str) -> None:
    name, version = split_image(reference)
    assert "@" not in name and name.count(":") <= 1 and Artifact("image", name, version, "", "").reference == \
        (reference if version != "latest" else f"{reference}:latest")


def test_mirrors_of_the_inventory_are_applied_and_out_writes_plain_lists(tmp_path: Path) -> None:
    text = Path(DEMO).read_text().replace("profile: demo/", f"profile: {Path(DEMO).parent}/demo/")
    text += """
bootstrap:
  mirror: https://mirror.site/repos
  image_repository: mirror.site:5000/k8s
  network: {image_registry: mirror.site:5000}
  addons:
    image_registry: mirror.site:5000
    charts:
      dcgm-exporter: {repository: https://mirror.site/charts}
"""
    inventory = tmp_path / "site.yaml"
    inventory.write_text(text)
    done = clusterctl("-i", inventory, "-o", "json", "bootstrap", "artifacts", "--out", tmp_path / "lists")
    assert done.exit_code == 0, done.output
    sources = {a["name"]: a["source"] for a in done.json()["artifacts"]}
    assert sources["kubeadm"] == "https://mirror.site/repos/pkgs.k8s.io/core:/stable:/v1.36/deb/"
    assert sources["dcgm-exporter"] == "https://mirror.site/charts"
    images = (tmp_path / "lists" / "images.txt").read_text().splitlines()
    assert "mirror.site:5000/k8s/etcd:3.6.8-0" in images
    assert "mirror.site:5000/calico/node:v3.31.7" in images
    assert "mirror.site:5000/nvidia/k8s-device-plugin:v0.20.0" in images
    assert not any(i.startswith(("registry.k8s.io", "nvcr.io", "quay.io")) for i in images)
    assert "kubeadm=1.36.2-*" in (tmp_path / "lists" / "packages.txt").read_text().splitlines()
    assert json.loads((tmp_path / "lists" / "artifacts.json").read_text())["kubernetes"] == "v1.36.2"


def test_a_real_packages_index_reads_with_epochs_and_continuation_lines() -> None:
    text = (FIXTURES / "apt-packages-index" / "bookworm-updates-main-amd64.txt").read_text()
    offered = parse_packages_index(text)
    assert offered == {"ca-certificates": ["20230311+deb12u1"], "openssh-client": ["1:9.2p1-2+deb12u7"],
                       "openssh-server": ["1:9.2p1-2+deb12u7"]}
    with pytest.raises(ParseError) as caught:
        parse_packages_index("Package: x\n<html>not an index</html>\n")
    assert caught.value.line == 2


def test_a_real_helm_index_lists_the_chart_versions() -> None:
    text = (FIXTURES / "helm-index" / "nvidia-device-plugin-index.yaml").read_text()
    assert chart_versions(text, "nvidia-device-plugin") == ["0.14.0", "0.14.0-rc.3"]
    assert chart_versions(text, "dcgm-exporter") == []
    with pytest.raises(ParseError):
        chart_versions("<html>404</html>", "x")


def test_http_answers_are_judged() -> None:
    assert judge_status("200", 0, "")[0] == "present"
    assert judge_status("404", 0, "")[0] == "missing"
    assert judge_status("401", 0, "")[0] == "unknown"
    status, detail = judge_status("000", 6, "curl: (6) Could not resolve host: mirror.site\n")
    assert status == "unknown" and "Could not resolve host" in detail


def test_the_probe_names_what_the_site_mirror_lacks(tmp_path: Path) -> None:
    profiles = Path(DEMO).parent / "demo" / "profiles" / "net"
    profile = tmp_path / "mirrored"
    profile.mkdir()
    index = "apiVersion: v1\nentries:\n  nvidia-device-plugin:\n  - name: nvidia-device-plugin\n    version: 0.20.0\n"
    served = {
        "https://mirror.site/repos/pkgs.k8s.io/core:/stable:/v1.36/deb/Packages":
            {"body": "Package: kubeadm\nVersion: 1.36.2-1.1\n\nPackage: kubelet\nVersion: 1.36.2-1.1\n"},
        "https://mirror.site/charts/index.yaml": {"body": index},
        "https://mirror.site:5000/v2/k8s/kube-apiserver/manifests/v1.36.2": {"status": 200},
        f"https://mirror.site:5000/v2/k8s/pause/manifests/sha256:{'a' * 64}": {"status": 200},
    }
    (profile / "profile.yaml").write_text(json.dumps({"extends": str(profiles / "gpu-a1"),
                                                      "machine": {"http": served}}))
    inventory = tmp_path / "site.yaml"
    inventory.write_text(f"""
cluster: site
defaults: {{transport: mock, stack: {{kubernetes: "1.36.2", containerd: "2.2.1"}}}}
hosts:
  cp1: {{profile: {profile}, address: 10.0.0.1, roles: [control-plane, worker]}}
bootstrap:
  mirror: https://mirror.site/repos
  image_repository: mirror.site:5000/k8s
  registry_mirrors: {{"mirror.site:5000": ["https://mirror.site:5000"]}}
  sandbox_image: mirror.site:5000/k8s/pause:3.10.2@sha256:{'a' * 64}
  addons:
    charts:
      nvidia-device-plugin: {{repository: https://mirror.site/charts}}
""")
    done = clusterctl("-i", inventory, "-o", "json", "bootstrap", "artifacts", "--probe")
    assert done.exit_code == 1, done.output
    probed = {r["reference"]: r["status"] for r in done.json()["probe"]}
    assert probed["kubeadm=1.36.2-*"] == "present" and probed["kubectl=1.36.2-*"] == "missing"
    assert probed["mirror.site:5000/k8s/kube-apiserver:v1.36.2"] == "present"
    assert probed["mirror.site:5000/k8s/etcd:3.6.8-0"] == "missing"
    assert probed["https://mirror.site/charts nvidia-device-plugin 0.20.0"] == "present"
    # An image pinned by digest is asked for by its digest, and listed under its name (not 'pause:3.10.2@sha256').
    pause = next(a for a in done.json()["artifacts"] if a["phase"] == "containerd")
    assert (pause["name"], pause["version"]) == ("mirror.site:5000/k8s/pause", f"3.10.2@sha256:{'a' * 64}")
    assert probed[f"mirror.site:5000/k8s/pause:3.10.2@sha256:{'a' * 64}"] == "present"
    assert "kubectl=1.36.2-*" in done.json()["missing"]
    human = clusterctl("-i", inventory, "bootstrap", "artifacts", "--probe")
    assert "MISSING mirror.site:5000/k8s/etcd:3.6.8-0" in human.stdout


def test_the_probe_looks_for_each_chart_archive_at_its_whole_path(tmp_path: Path) -> None:
    archive = tmp_path / "site charts" / "dcgm-exporter-4.8.2.tgz"
    archive.parent.mkdir()
    archive.write_bytes(b"\x1f\x8b")
    gone = tmp_path / "site charts" / "nvidia-device-plugin-0.20.0.tgz"
    inventory = tmp_path / "site.yaml"
    inventory.write_text(Path(DEMO).read_text().replace("profile: demo/", f"profile: {Path(DEMO).parent}/demo/")
                         + f'bootstrap:\n  addons: {{charts: {{dcgm-exporter: {{archive: "{archive}"}}, '
                         f'nvidia-device-plugin: {{archive: "{gone}"}}}}}}\n')
    done = clusterctl("-i", inventory, "-o", "json", "bootstrap", "artifacts", "--probe")
    assert done.exit_code == 1, done.output
    charts = {r["name"]: (r["status"], r["probed"]) for r in done.json()["probe"] if r["kind"] == "chart"}
    assert charts["dcgm-exporter"] == ("present", str(archive))
    assert charts["nvidia-device-plugin"] == ("missing", str(gone))


def test_a_site_repository_with_suites_is_probed_where_apt_reads_it(tmp_path: Path) -> None:
    """An air-gapped site's reprepro/aptly mirror (suite and component, not flat) is probed at its
    dists/ index, as apt and 'upgrade plan' read it (the probe used to ask for URI/Packages: 404)."""
    profiles = Path(DEMO).parent / "demo" / "profiles" / "net"
    profile = tmp_path / "site-repo"
    profile.mkdir()
    index = "https://repo.lan/k8s/dists/jammy/main/binary-amd64/Packages"
    served = {index: {"body": "Package: kubeadm\nVersion: 1.36.2-1.1\n\nPackage: kubelet\nVersion: 1.36.2-1.1\n"}}
    (profile / "profile.yaml").write_text(json.dumps({"extends": str(profiles / "gpu-a1"),
                                                      "machine": {"http": served}}))
    inventory = tmp_path / "site.yaml"
    inventory.write_text(f"""
cluster: site
defaults: {{transport: mock, gpus: false, stack: {{kubernetes: "1.36.2", containerd: "2.2.1"}}}}
hosts:
  cp1: {{profile: {profile}, address: 10.0.0.1, roles: [control-plane, worker]}}
bootstrap:
  apt_repos_only: true
  apt_repos:
    - {{name: kubernetes, url: "https://repo.lan/k8s", suites: [jammy], components: [main]}}
""")
    done = clusterctl("-i", inventory, "-o", "json", "bootstrap", "artifacts", "--probe")
    probed = {r["reference"]: r for r in done.json()["probe"]}
    assert probed["kubeadm=1.36.2-*"]["status"] == "present", probed["kubeadm=1.36.2-*"]
    assert probed["kubeadm=1.36.2-*"]["probed"] == index
    assert probed["kubectl=1.36.2-*"]["status"] == "missing" and probed["kubectl=1.36.2-*"]["probed"] == index
    assert packages_index_url(AptRepo("k8s", "https://repo.lan/k8s/", ("jammy",), ("main",))) == index


# --- honest lists (issue 37) ------------------------------------------------------------------

DEBIAN_12_OS_RELEASE = """PRETTY_NAME="Debian GNU/Linux 12 (bookworm)"
NAME="Debian GNU/Linux"
VERSION_ID="12"
VERSION="12 (bookworm)"
VERSION_CODENAME=bookworm
ID=debian
HOME_URL="https://www.debian.org/"
SUPPORT_URL="https://www.debian.org/support"
BUG_REPORT_URL="https://bugs.debian.org/"
"""


def _demo_on(tmp_path: Path, os_release: str | None) -> Path:
    """The demo inventory and profiles, its hosts running the OS of ``os_release`` (None: the demo's own,
    Ubuntu 22.04)."""
    import shutil

    folder = tmp_path / "os"
    shutil.copytree(Path(DEMO).parent, folder / "inventories")
    if os_release is not None:
        (folder / "inventories" / "demo" / "profiles" / "dgx-a100" / "os-release.txt").write_text(os_release)
    return folder / "inventories" / "demo.yaml"


def _planned_sources(review: Path, host: str) -> dict[str, tuple[str, str]]:
    """The apt sources the plan writes on ``host``: name -> (URIs, Suites)."""
    found = {}
    for path in (review / host / "etc" / "apt" / "sources.list.d").glob("clusterctl-*.sources"):
        fields = dict(line.split(": ", 1) for line in path.read_text().splitlines()
                      if ": " in line and not line.startswith("#"))
        found[path.name.removeprefix("clusterctl-").removesuffix(".sources")] = (fields["URIs"], fields["Suites"])
    return found


@pytest.mark.parametrize(("os_release", "distro", "codename"), [
    (None, "ubuntu", "jammy"), (DEBIAN_12_OS_RELEASE, "debian", "bookworm"),
    # Ubuntu's derivatives get Docker's Ubuntu repository, at their UBUNTU_CODENAME (Mint's own is "xia").
    (read_fixture("node", "os-release-linuxmint-22.1.txt"), "ubuntu", "noble"),
    (read_fixture("node", "os-release-pop-22.04.txt"), "ubuntu", "jammy")])
def test_the_list_is_the_plans_own_per_distribution(tmp_path: Path, os_release: str | None, distro: str,
                                                    codename: str) -> None:
    inventory = _demo_on(tmp_path, os_release)
    plan = clusterctl("-i", inventory, "-l", "gpu-a1", "bootstrap", "plan", "--out", tmp_path / "review")
    assert plan.exit_code == 0, plan.output
    planned = _planned_sources(tmp_path / "review", "gpu-a1")
    listed = clusterctl("-i", inventory, "-l", "gpu-a1", "-o", "json", "bootstrap", "artifacts").json()
    packages = {a["name"]: a["source"] for a in listed["artifacts"] if a["kind"] == "apt-package"}
    # Every package's source is one the plan writes, and every source the plan writes is listed.
    assert set(packages.values()) == {uri for uri, _ in planned.values()}
    assert planned["docker"] == (f"https://download.docker.com/linux/{distro}", codename)
    assert packages["containerd.io"] == f"https://download.docker.com/linux/{distro}"
    keys = {a["source"] for a in listed["artifacts"] if a["kind"] == "apt-key"}
    assert f"https://download.docker.com/linux/{distro}/gpg" in keys
    assert any(f"suite {codename} (dists/{codename}/stable)" in note for note in listed["notes"])


def test_no_image_reference_has_an_unknown_tag_and_the_operator_left_out_is_said() -> None:
    listed = clusterctl("-i", DEMO, "-o", "json", "bootstrap", "artifacts").json()
    images = [a["reference"] for a in listed["artifacts"] if a["kind"] == "image"]
    assert images and not any(ref.endswith(":?") or ":" not in ref.rsplit("/", 1)[-1] for ref in images)
    assert not any("tigera/operator" in ref for ref in images)
    assert any("quay.io/tigera/operator is left out" in note and "v3.31.7" in note for note in listed["notes"])


@pytest.mark.parametrize("columns", ["80", "120"])
def test_the_table_cuts_no_name_or_url(monkeypatch: pytest.MonkeyPatch, columns: str) -> None:
    monkeypatch.setenv("COLUMNS", columns)
    listed = clusterctl("-i", DEMO, "-o", "json", "bootstrap", "artifacts").json()
    table = clusterctl("-i", DEMO, "bootstrap", "artifacts").stdout
    assert "…" not in table
    for artifact in listed["artifacts"]:
        assert artifact["source"] in table
        assert (artifact["reference"] if artifact["kind"] != "chart" else artifact["name"]) in table


def test_a_probe_that_verifies_nothing_fails_in_json_and_in_the_table(tmp_path: Path) -> None:
    profiles = Path(DEMO).parent / "demo" / "profiles" / "net"
    inventory = tmp_path / "down.yaml"
    inventory.write_text(f"""
cluster: down
defaults: {{transport: mock, stack: {{kubernetes: "1.36.2", containerd: "2.2.1"}}}}
hosts:
  cp1: {{profile: {profiles / "gpu-a1"}, address: 10.0.0.1, roles: [control-plane, worker]}}
bootstrap:
  mirror: https://mirror.down/repos
  image_repository: mirror.down:5000/k8s
""")
    done = clusterctl("-i", inventory, "-o", "json", "bootstrap", "artifacts", "--probe")
    assert done.exit_code == 1, done.output
    probed = done.json()["probe"]
    unverified = [r["reference"] for r in probed if r["status"] == "unknown"]
    assert unverified and not done.json()["missing"]  # nothing found missing: only not verified
    assert done.json()["not_verified"] == [r["reference"] for r in probed if r["status"] != "present"]
    human = clusterctl("-i", inventory, "bootstrap", "artifacts", "--probe")
    assert human.exit_code == 1
    assert f"0 missing, {len(unverified)} not verified; exit 1" in human.stdout
    assert f"NOT VERIFIED {unverified[0]}" in human.stdout
