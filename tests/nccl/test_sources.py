"""Reading settings from env files, shell/Slurm scripts and Kubernetes manifests, with line numbers."""

from __future__ import annotations

import pytest
from fixture_files import fixture_dir, read_settings_file

from clusterctl.errors import UsageError
from clusterctl.nccl.sources import Setting, detect_format, read_settings

FIXTURES = fixture_dir("nccl-settings")


def pairs(settings: list[Setting]) -> list[tuple[str, str, int]]:
    return [(s.name, s.value, s.line) for s in settings]


def test_nccl_conf_keeps_the_exact_match_prefix() -> None:
    assert pairs(read_settings_file(FIXTURES / "nccl.conf")) == [
        ("NCCL_DEBUG", "WARN", 1), ("NCCL_SOCKET_IFNAME", "=ens1f0", 2)]


def test_shell_exports_quotes_comments_and_several_per_line() -> None:
    text = ('#!/bin/bash\nexport NCCL_DEBUG=WARN  # quiet\nexport A=1 NCCL_IB_HCA="mlx5_0:1,mlx5_1:1"\n'
            "NCCL_SOCKET_IFNAME='=eth0'\n# export NCCL_P2P_DISABLE=1\nNCCL_ALGO=Ring python train.py\n")
    assert pairs(read_settings(text)) == [
        ("NCCL_DEBUG", "WARN", 2), ("NCCL_IB_HCA", "mlx5_0:1,mlx5_1:1", 3), ("NCCL_SOCKET_IFNAME", "=eth0", 4),
        ("NCCL_ALGO", "Ring", 6)]


def test_shell_defaults_and_computed_values() -> None:
    text = ("export NCCL_SOCKET_IFNAME=${NCCL_SOCKET_IFNAME:-^lo,docker}\n"
            "export NCCL_IB_HCA=$(ls /sys/class/infiniband)\n"
            "if [ -z ${NCCL_IB_TC+x} ]; then export NCCL_IB_TC=106;fi\n")
    settings = read_settings(text)
    assert pairs(settings)[0] == ("NCCL_SOCKET_IFNAME", "^lo,docker", 1)
    assert settings[1].name == "NCCL_IB_HCA" and settings[1].dynamic
    assert pairs(settings)[2] == ("NCCL_IB_TC", "106", 3)


def test_slurm_sbatch_lines_are_comments_and_srun_export_is_read() -> None:
    text = ("#!/bin/bash\n#SBATCH --export=NCCL_DEBUG=INFO\nexport NCCL_IB_HCA=ibp\n"
            "srun --mpi=pmix \\\n  --export=ALL,NCCL_ALGO=Ring,NCCL_PROTO=Simple ./a.out\n"
            "mpirun -np 16 -x NCCL_MIN_NCHANNELS=4 ./a.out\n")
    assert detect_format("job.sh", text) == "slurm"
    assert pairs(read_settings(text)) == [
        ("NCCL_IB_HCA", "ibp", 3), ("NCCL_ALGO", "Ring", 5), ("NCCL_PROTO", "Simple", 5),
        ("NCCL_MIN_NCHANNELS", "4", 6)]


def test_real_slurm_script_only_nccl_names() -> None:
    settings = read_settings_file(FIXTURES / "coreweave-nccl-test-distributed-h100-64.slurm")
    assert pairs(settings) == [("NCCL_SOCKET_IFNAME", "eth0", 22), ("NCCL_IB_HCA", "ibp", 23)]


def test_pytorchjob_env_with_line_numbers() -> None:
    settings = read_settings_file(FIXTURES / "oci-pytorchjob-etcd.yaml")
    assert pairs(settings)[:2] == [("NCCL_DEBUG", "INFO", 29), ("NCCL_IB_SPLIT_DATA_ON_QPS", "0", 31)]
    assert [s.name for s in settings][-1] == "NCCL_IB_TIMEOUT"


def test_configmap_data_and_multi_document() -> None:
    text = ("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\ndata:\n  NCCL_DEBUG: WARN\n"
            "  nccl.conf: |\n    NCCL_IB_HCA=mlx5_0\n    NCCL_IB_TIMEOUT=22\n---\n"
            "apiVersion: v1\nkind: Pod\nspec:\n  containers:\n  - name: c\n    env:\n    - name: NCCL_ALGO\n"
            "      value: Ring\n")
    assert pairs(read_settings(text)) == [
        ("NCCL_DEBUG", "WARN", 5), ("NCCL_IB_HCA", "mlx5_0", 7), ("NCCL_IB_TIMEOUT", "22", 8),
        ("NCCL_ALGO", "Ring", 16)]


def test_broken_yaml_and_env_lines_name_the_line() -> None:
    with pytest.raises(UsageError, match=r"m\.yaml:4: not valid YAML"):
        read_settings("apiVersion: v1\nkind: Pod\nspec: [\n", "k8s", name="m.yaml")
    # a file that cannot be read is a usage error (exit 2) naming the line, never "nothing checked"
    with pytest.raises(UsageError, match=r"<text>:2: cannot read it as env: expected NAME=VALUE "
                                         r"\('this is not a setting'\)"):
        read_settings("NCCL_DEBUG=WARN\nthis is not a setting\n", "env")


def test_format_detection() -> None:
    assert detect_format("nccl.conf", "NCCL_DEBUG=WARN\n") == "env"
    assert detect_format("job.yaml", "") == "k8s"
    assert detect_format("-", "apiVersion: v1\nkind: Pod\n") == "k8s"
    assert detect_format("run", "export NCCL_DEBUG=WARN\n") == "shell"
