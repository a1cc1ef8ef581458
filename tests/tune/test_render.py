"""Rendered files: golden copies, safe quoting, a ConfigMap valid for Kubernetes, the tuner CSV."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
from pathlib import Path

import pytest
import yaml
from fixture_files import fixture_dir

from clusterctl.errors import UsageError
from clusterctl.nccl.tune.derive import TunedSetting, Tuning
from clusterctl.nccl.tune.render import render_files
from clusterctl.nccl.tune.sweep_result import RangeOutcome, SweepResult
from clusterctl.templating import templates_dir

GOLDEN = Path(__file__).resolve().parent / "golden"
SCHEMA = fixture_dir("k8s-schema") / "configmap-v1.json"
UPDATE = os.environ.get("UPDATE_GOLDEN") == "1"


def _tuning() -> Tuning:
    return Tuning(
        hosts=("gpu-1", "gpu-2"),
        nccl_version="2.28.3",
        fabric="ib",
        settings=(
            TunedSetting("NCCL_IB_HCA", "=mlx5_0:1,mlx5_1:1",
                         "2 active IB ports in GPU order (GPU0->mlx5_0, GPU1->mlx5_1)"),
            TunedSetting("NCCL_SOCKET_IFNAME", "=eno1", "eno1 carries the inventory address 10.0.0.11"),
            TunedSetting("NCCL_CROSS_NIC", "0", "rail-optimised: every host has the same GPU-to-NIC layout"),
        ),
        host_overrides={"gpu-2": (TunedSetting("NCCL_SOCKET_IFNAME", "=eth0", "eth0 carries 10.0.0.12"),)},
    )


def _sweep() -> SweepResult:
    return SweepResult(
        budget=24, runs_used=20, full_grid_runs=1152, candidates_tried=17, candidates_total=17,
        ranges=(RangeOutcome("small", 0.3, 0.05, "NCCL_ALGO=Tree NCCL_PROTO=LL", 0.5, True, 3),),
        settings=(TunedSetting("NCCL_BUFFSIZE", "8388608", "measured: large messages +20%", "sweep"),),
        tuner_rows=(("allreduce", "small", "tree", "ll"), ("allgather", "large", "ring", "simple")), notes=(),
    )


@pytest.mark.parametrize("name", ["nccl.conf", "nccl.sh", "nccl-configmap.yaml", "nccl-envfrom.yaml",
                                  "nccl-slurm.sh", "nccl_tuner.conf", "hosts/gpu-2/nccl.conf"])
def test_rendered_files_match_golden(name: str) -> None:
    files = render_files(_tuning(), _sweep(), fmt="all", nodes=2, ranks=16)
    golden = GOLDEN / name.replace("/", "__")
    if UPDATE:
        golden.write_text(files[name])
    assert files[name] == golden.read_text()


def test_tuner_csv_has_the_plugin_format() -> None:
    text = render_files(_tuning(), _sweep(), fmt="tuner", nodes=2, ranks=16)["nccl_tuner.conf"]
    rows = [line for line in text.splitlines() if line and not line.startswith("#")]
    # one row per collective and size range; the open-ended range reaches SIZE_MAX (the plugin's strtoull)
    assert rows == ["allgather,67108865,18446744073709551615,ring,simple,-1,2,16",
                    "allreduce,0,65535,tree,ll,-1,2,16"]
    env = render_files(_tuning(), _sweep(), fmt="conf")["nccl.conf"]
    assert "NCCL_TUNER_CONFIG_FILE=/etc/nccl_tuner.conf" in env and "NCCL_TUNER_PLUGIN=example" in env


def test_no_tuner_file_without_per_size_winners() -> None:
    assert "nccl_tuner.conf" not in render_files(_tuning(), None, fmt="all")


def test_configmap_validates_against_the_kubernetes_schema() -> None:
    jsonschema = pytest.importorskip("jsonschema")
    schema = json.loads(SCHEMA.read_text())
    doc = yaml.safe_load(render_files(_tuning(), fmt="k8s", namespace="ml")["nccl-configmap.yaml"])
    validator = jsonschema.Draft4Validator(schema)  # "$schema": json-schema.org/schema#, draft-4 style
    validator.validate(doc)
    assert not validator.is_valid({**doc, "datas": {}})  # strict: a misspelt field is refused
    assert doc["data"]["NCCL_IB_HCA"] == "=mlx5_0:1,mlx5_1:1"
    snippet = yaml.safe_load(render_files(_tuning(), fmt="k8s")["nccl-envfrom.yaml"])
    assert snippet["envFrom"][0]["configMapRef"]["name"] == doc["metadata"]["name"]


HOSTILE = "x'; touch /tmp/pwned; echo \"$HOME\" `id` # : {a: b}"


def test_hostile_values_stay_values_in_shell_and_yaml(tmp_path: Path) -> None:
    tuning = Tuning(hosts=("h",), nccl_version=None, fabric="ib",
                    settings=(TunedSetting("NCCL_SOCKET_IFNAME", HOSTILE, "a reason: with 'quotes'\nand a newline"),))
    files = render_files(tuning, fmt="all")
    script = tmp_path / "nccl.sh"
    script.write_text(files["nccl.sh"])
    out = subprocess.run(["sh", "-c", f". {shlex.quote(str(script))}; printf %s \"$NCCL_SOCKET_IFNAME\""],
                         capture_output=True, text=True, check=True, cwd=tmp_path)
    assert out.stdout == HOSTILE
    assert not (tmp_path / "pwned").exists()
    assert yaml.safe_load(files["nccl-configmap.yaml"])["data"]["NCCL_SOCKET_IFNAME"] == HOSTILE
    # the reason's newline stays inside its comment line
    assert "\nand a newline" not in files["nccl.conf"]


@pytest.mark.parametrize("value", ["a\nNCCL_IB_DISABLE=1", "tab\there", " padded"])
def test_values_that_would_corrupt_a_file_are_refused(value: str) -> None:
    tuning = Tuning(hosts=("h",), nccl_version=None, fabric="ib", settings=(TunedSetting("NCCL_IB_HCA", value, "r"),))
    with pytest.raises(UsageError):
        render_files(tuning, fmt="conf")


def test_templates_are_found_in_the_checkout() -> None:
    assert (templates_dir() / "nccl" / "nccl.conf.j2").is_file()
