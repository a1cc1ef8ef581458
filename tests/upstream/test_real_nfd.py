"""The real nfd-worker reads the feature file clusterctl writes into the labels clusterctl means.

The file is the one the demo's bootstrap left on gpu-a3 (phase topology-labels; that host lost
GPU3's NVLinks). nfd-worker reads ``features.d`` from a fixed path, so it runs in a private mount
namespace whose ``/etc`` is an overlay: the file lies where a host has it, and nothing of this
machine changes. ``-oneshot -no-publish`` discovers once and logs the labels it would publish.
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path

import yaml
from demo_calls import SURVEY, VARIANTS, DemoRecordings

from clusterctl.bootstrap.cluster.topology_labels import topology_labels
from clusterctl.saved_survey import load_saved_survey

Tool = Callable[[str, str], Path]
FEATURES_DIR = "/etc/kubernetes/node-feature-discovery/features.d"
NFD = "0.19.0"


def discovered_labels(nfd_worker: Path, feature_file: bytes, folder: Path) -> dict[str, str]:
    (folder / "upper").mkdir()
    (folder / "work").mkdir()
    (folder / "clusterctl-topology").write_bytes(feature_file)
    # 0.19 makes an API client even with -no-publish: one that never gets used (nothing listens there).
    (folder / "kubeconfig").write_text(
        "apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: 'https://127.0.0.1:9'}}]\n"
        "users: [{name: u, user: {token: none}}]\ncontexts: [{name: x, context: {cluster: c, user: u}}]\n"
        "current-context: x\n")
    script = (f"mount -t overlay overlay -o lowerdir=/etc,upperdir={folder}/upper,workdir={folder}/work /etc && "
              f"mkdir -p {FEATURES_DIR} && cp {folder}/clusterctl-topology {FEATURES_DIR}/ && "
              f"exec {nfd_worker} -oneshot -no-publish -kubeconfig={folder}/kubeconfig "
              "-feature-sources=local -label-sources=local -v=1")
    done = subprocess.run(["unshare", "--mount", "--", "sh", "-c", script], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    return parse_labels_line(done.stderr)


def parse_labels_line(log: str) -> dict[str, str]:
    """The ``labels=<...>`` block of nfd-worker's "feature discovery completed" klog line (YAML inside)."""
    lines = log.splitlines()
    start = next(i for i, line in enumerate(lines) if '"feature discovery completed"' in line)
    if lines[start].rstrip().endswith("labels=<"):
        block = []
        for line in lines[start + 1:]:
            if line.strip() == ">":
                break
            block.append(line[1:] if line.startswith("\t") else line)
        loaded = yaml.safe_load("\n".join(block)) or {}
    else:
        loaded = {}
    return {str(k): str(v) for k, v in loaded.items()}


def test_nfd_worker_reads_clusterctls_feature_file_into_the_topology_labels(
        demo_recordings: DemoRecordings, upstream_tool: Tool, tmp_path: Path) -> None:
    nfd_worker = upstream_tool("nfd-worker", NFD)
    recording = demo_recordings.get(VARIANTS[0])
    feature_file = recording.file("gpu-a3", f"{FEATURES_DIR}/clusterctl-topology")
    assert feature_file is not None, recording.listdir("gpu-a3", FEATURES_DIR)
    labels = discovered_labels(nfd_worker, feature_file, tmp_path)
    host = load_saved_survey(str(SURVEY)).hosts["gpu-a3"]
    wanted = topology_labels(host, "ib").as_dict()
    assert wanted and labels == wanted
    assert labels.get("clusterctl.dev/nvlink.degraded") == "true"
    # The kubelet's own labels are features only (`# +no-label`): NFD must not publish them.
    assert not any(name.startswith("topology.kubernetes.io/") for name in labels)
