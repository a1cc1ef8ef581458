"""NCCL lint knows whose variable a line sets (issue 25): one environment per Kubernetes container, a
script's own variables, names that only resemble NCCL's, and PyTorch's TORCH_NCCL_* names by version."""

from __future__ import annotations

import json

from clirun import clusterctl
from fixture_files import FIXTURES, read_settings_file

from clusterctl.nccl.lint import lint_settings
from clusterctl.nccl.sources import read_settings

TWO_PODS = FIXTURES / "nccl-settings" / "gke-tcpxo-nccl-test-latest-two-pods.yaml"


def codes(text: str, fmt: str, **kwargs: object) -> list[tuple[int | None, str, str | None]]:
    findings = lint_settings(read_settings(text, fmt, name="t"), **kwargs)  # type: ignore[arg-type]
    return [(f.line, f.code, f.subject) for f in findings]


def test_each_pod_s_container_has_its_own_environment() -> None:
    settings = read_settings_file(TWO_PODS)
    scopes = {s.scope for s in settings if s.name == "NCCL_FASTRAK_LLCM_DEVICE_DIRECTORY"}
    assert scopes == {"container 'nccl-test' (line 96)", "container 'nccl-test' (line 215)"}
    assert "DUPLICATE" not in [code for _, code, _ in codes(TWO_PODS.read_text(), "k8s")]


def test_the_launch_script_s_library_path_is_not_an_unknown_nccl_variable() -> None:
    result = clusterctl("-o", "json", "nccl", "lint", str(TWO_PODS))
    lib = [f for f in json.loads(result.stdout)["findings"] if f["subject"] == "NCCL_LIB_DIR"]
    assert result.exit_code == 0 and {f["severity"] for f in lib} == {"info"}
    assert "build systems and install scripts" in lib[0]["message"]


#: One replica's pod template: Master and Worker each have it, and so each has its own environment.
REPLICA = """\
      template:
        spec:
          containers:
            - name: pytorch
              env:
                - name: NCCL_IB_HCA
                  value: "=mlx5_1,mlx5_2"
"""
PYTORCHJOB = ("apiVersion: kubeflow.org/v1\nkind: PyTorchJob\nspec:\n  pytorchReplicaSpecs:\n    Master:\n" + REPLICA
              + "    Worker:\n" + REPLICA + '                - name: NCCL_IB_HCA\n                  value: "=mlx5_3"\n')


def test_master_and_worker_are_two_environments_but_a_repeat_inside_one_is_a_duplicate() -> None:
    assert [c for c in codes(PYTORCHJOB, "k8s") if c[1] == "DUPLICATE"] == [(21, "DUPLICATE", "NCCL_IB_HCA")]


def test_a_script_variable_read_back_is_the_script_s_own_but_a_typo_is_still_an_error() -> None:
    script = ('export NCCL_INSTALL_PREFIX=/opt/nccl\n'
              'export LD_LIBRARY_PATH="$NCCL_INSTALL_PREFIX/lib:$LD_LIBRARY_PATH"\n'
              'export NCCL_SOCKET_IFNAMES=eth0\necho "$NCCL_SOCKET_IFNAMES"\n')
    found = lint_settings(read_settings(script, "shell", name="t"))
    by_name = {f.subject: f for f in found}
    assert by_name["NCCL_INSTALL_PREFIX"].code == "NOT_NCCL" and by_name["NCCL_INSTALL_PREFIX"].severity.value == "info"
    assert "the file reads it back itself (line 2)" in by_name["NCCL_INSTALL_PREFIX"].message
    # Close to NCCL_SOCKET_IFNAME: a misspelling, even though the script echoes it.
    assert by_name["NCCL_SOCKET_IFNAMES"].code == "UNKNOWN_VARIABLE"


def test_names_that_only_resemble_nccl_s_are_info_and_lower_case_ones_are_ignored() -> None:
    found = codes("export USE_NCCL=1\nexport MY_NCCL_HOME=/opt\nnccl_algo=Ring\nARG_NCCLX=1\n", "shell")
    assert found == [(1, "NOT_NCCL", "USE_NCCL"), (2, "NOT_NCCL", "MY_NCCL_HOME")]


def test_torch_nccl_names_by_pytorch_version() -> None:
    text = "TORCH_NCCL_BLOCKING_WAIT=1\nTORCH_NCCL_DEBUG_INFO_TEMP_FILE=/tmp/fr_\nTORCH_NCCL_TRACE_BUFER_SIZE=2000\n"
    assert codes(text, "env") == [(3, "UNKNOWN_VARIABLE", "TORCH_NCCL_TRACE_BUFER_SIZE")]
    # Renamed from NCCL_BLOCKING_WAIT in PyTorch 2.2 (pytorch/pytorch#114077): older releases ignore it.
    assert (1, "NOT_IN_VERSION", "TORCH_NCCL_BLOCKING_WAIT") in codes(text, "env", torch_version="2.1.2")
    assert (1, "NOT_IN_VERSION", "TORCH_NCCL_BLOCKING_WAIT") not in codes(text, "env", torch_version="2.4.0+cu121")


def test_unknown_torch_nccl_name_suggests_the_flight_recorder_s() -> None:
    (finding,) = lint_settings(read_settings("TORCH_NCCL_TRACE_BUFER_SIZE=2000\n", "env", name="t"))
    assert finding.severity.value == "warning" and "TORCH_NCCL_TRACE_BUFFER_SIZE" in (finding.fix or "")


def test_torch_version_option_is_checked() -> None:
    result = clusterctl("nccl", "lint", "--torch-version", "two", str(TWO_PODS))
    assert result.exit_code == 2 and "is not a PyTorch version" in result.output
