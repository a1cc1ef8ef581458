"""`nccl lint` on every settings file of the repository and every file tune-nccl renders (issue 25): no
false alarm. Each error or warning a recording gets is a true finding, reviewed once and listed here
with why it is true; anything else at those levels (a duplicate across containers, a script's own
variable taken for an unknown NCCL one, ...) fails the test."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from clirun import clusterctl
from fixture_files import FIXTURES

SETTINGS = FIXTURES / "nccl-settings"
GOLDEN = Path(__file__).resolve().parents[1] / "tune" / "golden"

#: (line, code, variable) of the true findings each file has, with the reason in a comment.
REVIEWED: dict[str, set[tuple[int, str, str]]] = {
    "aws-nccl-tests-mpijob.yaml": {(44, "DEBUG_IN_PRODUCTION", "NCCL_DEBUG")},  # NCCL_DEBUG=INFO in a job manifest
    "aws-nccl-tests.Dockerfile": set(),
    "bert-launch_docker_dist.sh": {(4, "DEBUG_IN_PRODUCTION", "NCCL_DEBUG")},
    "coreweave-nccl-test-distributed-h100-64.slurm": set(),
    "elvin-ma-run.sh": {(6, "UNKNOWN_VARIABLE", "NCCL_TIMEOUT"),  # no NCCL release reads it
                        (8, "PYTORCH_OLD_NAME", "NCCL_BLOCKING_WAIT")},  # PyTorch's pre-2.2 name
    "flagai-run_multi.sh": {(3, "NOT_IN_VERSION", "NCCL_IB_CUDA_SUPPORT"),  # removed in NCCL 2.4
                            (6, "INVALID_VALUE", "NCCL_DEBUG")},  # 'debug' is not a level
    "gke-tcpx-nccl-config.yaml": set(),
    "gke-tcpxo-mpi-nccl-test.yaml": {(39, "INVALID_VALUE", "NCCL_DEBUG_SUBSYS"),  # VERSION is no subsystem
                                     (40, "DEBUG_IN_PRODUCTION", "NCCL_DEBUG"),
                                     (55, "DEPRECATED", "NCCL_MIN_NCHANNELS")},  # NCCL_MIN_CTAS since 2.17
    # Two Pods, each with its own nccl-test container: NCCL_FASTRAK_LLCM_DEVICE_DIRECTORY once in each is no
    # duplicate; NCCL_LIB_DIR is the launch script's library path, not an NCCL setting.
    "gke-tcpxo-nccl-test-latest-two-pods.yaml": set(),
    "nccl.conf": set(),
    "oci-pytorchjob-etcd.yaml": {(29, "DEBUG_IN_PRODUCTION", "NCCL_DEBUG")},
    "pretrain-net-type-excerpt.sh": {
        (9, "INVALID_VALUE", "NCCL_IB_HCA"),  # mlx5_2:1 listed twice
        (11, "UNKNOWN_VARIABLE", "NCCL_CHECK_DISABLE"), (18, "UNKNOWN_VARIABLE", "NCCL_CHECK_DISABLE"),
        (13, "NOT_IN_VERSION", "NCCL_LL_THRESHOLD"), (21, "NOT_IN_VERSION", "NCCL_LL_THRESHOLD"),  # removed 2.5
        (14, "NOT_IN_VERSION", "NCCL_IB_CUDA_SUPPORT"), (22, "NOT_IN_VERSION", "NCCL_IB_CUDA_SUPPORT")},
    # NCCL_SOCKET_FAMILY=ipv4 is not AF_INET; NCCL_TEMP_DIR is read back by the script itself (info).
    "sc24-export_frontier_vars.sh": {(5, "INVALID_VALUE", "NCCL_SOCKET_FAMILY")},
    "tcpxo-nccl-env-profile.sh": {(52, "DEPRECATED", "NCCL_MIN_NCHANNELS")},
    "tcpxo-run-nccl-fastrak.sh": {(59, "DEBUG_IN_PRODUCTION", "NCCL_DEBUG")},
    # Round 4 (issue 36): $(cmd | pipe) values, an OFI_NCCL_PATH of the script's own (info), NAME: null values.
    "paddle-llama13b-socket-ifname-cmd-subst.sh": set(),
    "elmoe-setup-env-cuda-paths-excerpt.sh": set(),
    "nemo-launcher-config-env-vars-null.yaml": set(),
}
#: Hand-made files that exist to carry findings (their tests say which).
DERIVED = {"derived-configmap-and-deployment.yaml", "derived-h100-64-broken.slurm",
           "DERIVED-continued-export-with-expansions.sh"}


def alarms(path: Path) -> set[tuple[int, str, str]]:
    result = clusterctl("-o", "json", "nccl", "lint", str(path))
    assert result.exit_code in (0, 1), result.output
    return {(f.get("line"), f["code"], f.get("subject")) for f in json.loads(result.stdout)["findings"]
            if f["severity"] != "info"}


def test_every_recording_is_reviewed() -> None:
    files = {p.name for p in SETTINGS.iterdir() if p.name != "README.md"}
    assert files == set(REVIEWED) | DERIVED


@pytest.mark.parametrize("name", sorted(REVIEWED))
def test_a_recording_gets_only_its_true_findings(name: str) -> None:
    assert alarms(SETTINGS / name) == REVIEWED[name]


@pytest.mark.parametrize("name", sorted(p.name for p in GOLDEN.iterdir() if p.name != "nccl_tuner.conf"))
def test_what_tune_nccl_renders_lints_clean(name: str) -> None:
    # The envFrom snippet only points at the ConfigMap: no setting in it, and lint says so (issue 36).
    expected = {(None, "NO_SETTINGS_READ", None)} if name == "nccl-envfrom.yaml" else set()
    assert alarms(GOLDEN / name) == expected
