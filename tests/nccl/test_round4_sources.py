"""Round 4 of real settings files (issue #36): values with spaces inside an expansion, continued export
lines, Helm-style ``NAME: value`` mappings with ``null``, a launcher's own OFI_NCCL_PATH, and a file
lint reads nothing from."""

from __future__ import annotations

import json

from clirun import clusterctl
from fixture_files import FIXTURES, read_settings_file

from clusterctl.nccl.sources import read_settings

SETTINGS = FIXTURES / "nccl-settings"


def _lint(*names: str) -> tuple[int, list[dict[str, object]], dict[str, object]]:
    run = clusterctl("-o", "json", "nccl", "lint", *(str(SETTINGS / n) for n in names))
    data = json.loads(run.stdout)
    return run.exit_code, data["findings"], data["summary"]


def test_a_command_substitution_with_spaces_and_pipes_is_one_value() -> None:
    read = read_settings_file(SETTINGS / "paddle-llama13b-socket-ifname-cmd-subst.sh")
    assert [(s.name, s.value, s.line, s.dynamic) for s in read] == [
        ("NCCL_SOCKET_IFNAME", "$(ip a | grep '10.31.10' | awk '{print $7}')", 4, True),
        ("NCCL_IB_HCA", "mlx5_0", 5, False)]
    assert getattr(read, "notes", None) == ()


def test_every_assignment_after_an_expansion_in_a_continued_export_is_read() -> None:
    read = read_settings_file(SETTINGS / "DERIVED-continued-export-with-expansions.sh")
    assert [(s.name, s.value, s.line) for s in read] == [
        ("NCCL_SOCKET_IFNAME", "$(ip a | grep '10.31.10' | awk '{print $7}')", 4),
        ("NCCL_BUFFSIZE", "$(( 4 * 1024 * 1024 ))", 5),
        ("NCCL_DEBUG_SUBSYS", "INIT NET", 6),
        ("NCCL_IB_HCA", "mlx5_0", 7)]
    _, findings, summary = _lint("DERIVED-continued-export-with-expansions.sh")
    assert summary["settings"] == 4
    # The whole default is read: 'INIT NET' is one value, and NCCL wants subsystems separated by commas.
    assert [(f["line"], f["code"]) for f in findings] == [(6, "INVALID_VALUE")]


def test_what_the_shell_reader_cannot_read_is_named_with_its_line() -> None:
    read = read_settings("export NCCL_SOCKET_IFNAME=$(ip route | awk '{print $5}'\nexport NCCL_IB_HCA=mlx5_0\n"
                         "torchrun train.py NCCL_DEBUG=INFO\n", "shell", name="launch.sh")
    assert [(n.line, n.severity) for n in read.notes] == [(1, "warning"), (3, "info")]
    assert "not closed" in read.notes[0].message and "argument of 'torchrun'" in read.notes[1].message
    assert [s.name for s in read] == ["NCCL_SOCKET_IFNAME", "NCCL_IB_HCA"]


def test_a_values_mapping_is_read_with_the_chart_values_scope_and_null_removes_a_default() -> None:
    read = read_settings_file(SETTINGS / "nemo-launcher-config-env-vars-null.yaml")
    by_name = {s.name: s for s in read}
    assert set(by_name) == {"NCCL_TOPO_FILE", "NCCL_IB_PCI_RELAXED_ORDERING", "NCCL_IB_TIMEOUT", "NCCL_DEBUG",
                            "NCCL_PROTO", "TORCH_NCCL_AVOID_RECORD_STREAMS", "NCCL_NVLS_ENABLE"}
    assert all(s.scope == "chart values" for s in read)
    assert (by_name["NCCL_DEBUG"].origin, by_name["NCCL_DEBUG"].line) == ("unset", 54)
    assert (by_name["NCCL_NVLS_ENABLE"].value, by_name["NCCL_NVLS_ENABLE"].origin) == ("0", "")
    code, findings, summary = _lint("nemo-launcher-config-env-vars-null.yaml")
    assert code == 0 and summary["settings"] == 7
    unset = {f["subject"] for f in findings if f["code"] == "UNSET_BY_VALUES"}
    assert unset == {"NCCL_TOPO_FILE", "NCCL_IB_PCI_RELAXED_ORDERING", "NCCL_IB_TIMEOUT", "NCCL_DEBUG", "NCCL_PROTO"}
    assert all(f["severity"] == "info" for f in findings)  # a removed default is no empty (invalid) value


def test_a_launchers_own_plugin_like_path_variable_is_not_an_unknown_plugin_variable() -> None:
    code, findings, _ = _lint("elmoe-setup-env-cuda-paths-excerpt.sh")
    (finding,) = findings
    assert (finding["line"], finding["code"], finding["severity"]) == (10, "NOT_NCCL", "info")
    assert "not an NCCL/plugin variable" in finding["message"] and code == 0


def test_a_file_lint_reads_nothing_from_is_said_and_exits_non_zero() -> None:
    run = clusterctl("-o", "json", "nccl", "lint", str(FIXTURES / "helm-index" / "nvidia-device-plugin-index.yaml"))
    data = json.loads(run.stdout)
    assert run.exit_code == 1 and data["summary"]["settings"] == 0
    assert [f["code"] for f in data["findings"]] == ["NO_SETTINGS_READ"]
