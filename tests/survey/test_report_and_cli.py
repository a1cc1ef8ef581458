"""JSON report (schema, save/load) and the CLI: topo show, survey over mock inventories, the demo."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import jsonschema
import pytest
from clirun import clusterctl
from survey_builders import fleet, gpu_infos, healthy_state, inventory_host, nvswitch, rdma

from clusterctl.errors import UsageError
from clusterctl.inventory.model import Fabric
from clusterctl.plain_json import dumps_indented
from clusterctl.saved_survey import load_saved_survey, load_schema
from clusterctl.survey.report import host_to_json, report_to_json
from clusterctl.survey.run import build_report

REPO = Path(__file__).resolve().parents[2]
TOPO = REPO / "tests" / "fixtures" / "topo"
DEMO_PROFILE = REPO / "inventories" / "demo" / "profiles" / "dgx-a100"


def test_report_json_validates_and_holds_what_users_asked_for() -> None:
    report = build_report(fleet(healthy_state("bad", topology=nvswitch(lost=[(2, 3)]))), tp=4)
    data = report_to_json(report)
    jsonschema.validate(data, load_schema())
    bad = next(h for h in data["hosts"] if h["host"] == "bad")
    assert data["schema_version"] == 2
    assert bad["nvlink_domains"] == [[0, 1, 2, 3, 4, 5, 6, 7]] and bad["shape"] == "partial-nvlink"
    assert bad["gpus"][3]["index"] == 3 and bad["gpus"][3]["nearest_nics"] == ["mlx5_3"]
    nic = next(n for n in bad["nics"] if n["name"] == "mlx5_5")
    assert nic["nearest_gpus"] == [5] and nic["numa_node"] == "1" and nic["fabric"] is True
    assert [(f["severity"], f["code"]) for f in bad["findings"]] == [("error", "NVLINK_MISSING")]
    assert data["summary"]["ok"] is False and data["advice"]["tp"] == 4


def test_alike_hosts_share_their_records_and_a_host_that_differs_keeps_its_own() -> None:
    # Alike hosts get one parsed object per identical output, and the report makes each part of a
    # host record once per set of such objects; a host that shares some of them but not all (its
    # own port rates, its own fabric pin) must still get a record of its own.
    from dataclasses import replace

    topology, gpus, ports = nvswitch(), gpu_infos(), rdma()
    alike = [healthy_state(f"gpu-{i}", topology=topology, gpus=gpus, rdma=ports) for i in range(3)]
    slow = healthy_state("slow", topology=topology, gpus=gpus, rdma=rdma(overrides={"mlx5_2": {"rate_gbps": 100.0}}))
    pinned_host = replace(inventory_host("pinned"), fabric=Fabric(type="ib", rate_gbps=400, hcas=("mlx5_0",)))
    pinned = healthy_state("pinned", host=pinned_host, topology=topology, gpus=gpus, rdma=ports)
    report = build_report([*alike, slow, pinned])
    data = report_to_json(report)
    for host, record in zip(report.hosts, data["hosts"], strict=True):
        assert record == host_to_json(host)  # as the host's record made on its own
    records = {h["host"]: h for h in data["hosts"]}
    rate = {h: next(n for n in records[h]["nics"] if n["name"] == "mlx5_2")["ports"][0]["rate_gbps"]
            for h in ("gpu-0", "slow")}
    assert rate == {"gpu-0": 400.0, "slow": 100.0}
    fabric = {h: [n["name"] for n in records[h]["nics"] if n["fabric"]] for h in ("gpu-1", "pinned")}
    assert fabric == {"gpu-1": [f"mlx5_{j}" for j in range(8)], "pinned": ["mlx5_0"]}
    assert dumps_indented(data) == json.dumps(data, indent=2)


def test_saved_report_loads_back_and_other_versions_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "survey.json"
    path.write_text(json.dumps(report_to_json(build_report(fleet()))))
    saved = load_saved_survey(path)
    assert sorted(saved.hosts) == ["gpu-0", "gpu-1", "gpu-2"]
    assert saved.hosts["gpu-0"].gpus[1].nearest_nics == ("mlx5_1",)
    assert saved.hosts["gpu-0"].nics[0].ports[0].state == "PORT_ACTIVE"
    data = json.loads(path.read_text())
    data["schema_version"] = 3
    path.write_text(json.dumps(data))
    with pytest.raises(UsageError, match="field 'schema_version': not a clusterctl survey report: 3 is not a version"):
        load_saved_survey(path)


@pytest.mark.parametrize(("content", "says"), [
    (b'{\n  "kind": "clusterctl.survey",\n  "hosts": [\n', r"survey.json:4: not a clusterctl survey report: not JSON"),
    (b"\x00\x01\x02", r"survey.json:1: not a clusterctl survey report: binary data"),
    (b'{"kind": "\xff"}', r"survey.json:1: not a clusterctl survey report: not UTF-8 text"),
])
def test_a_damaged_saved_survey_is_a_usage_error_naming_file_and_line(tmp_path: Path, content: bytes,
                                                                      says: str) -> None:
    path = tmp_path / "survey.json"
    path.write_bytes(content)
    with pytest.raises(UsageError, match=says):
        load_saved_survey(path)
    with pytest.raises(UsageError, match="is a folder"):
        load_saved_survey(tmp_path)


def test_a_version_1_report_still_loads_with_its_hints_as_fixes(tmp_path: Path) -> None:
    data = report_to_json(build_report(fleet(healthy_state("bad", topology=nvswitch(lost=[(2, 3)])))))
    data["schema_version"] = 1
    for finding in [*data["findings"], *(f for h in data["hosts"] for f in h["findings"])]:
        finding["hint"] = finding.pop("fix")
    path = tmp_path / "survey-v1.json"
    path.write_text(json.dumps(data))
    saved = load_saved_survey(path)
    [lost] = [f for f in saved.findings if f.code == "NVLINK_MISSING"]
    assert lost.host == "bad" and lost.fix.startswith("Reset the GPUs")


def test_topo_show_from_stdin_as_json() -> None:
    text = (TOPO / "derived-hgx-h100-gpu2-gpu3-nvlink-lost.txt").read_text()
    result = clusterctl("topo", "show", "-", "--tp", "8", "-o", "json", stdin=text)
    assert result.exit_code == 1, result.output
    data = json.loads(result.stdout)
    jsonschema.validate(data, load_schema())
    assert data["source"] == "topo-show"
    assert [f["code"] for f in data["findings"]] == ["NVLINK_MISSING"]
    assert data["advice"]["hosts"][0]["fit"] == "does-not-fit"


def test_topo_show_healthy_file_prints_summary_and_exits_0() -> None:
    result = clusterctl("topo", "show", str(TOPO / "hgx-h100-8gpu-8nic.txt"), "--tp", "4")
    assert result.exit_code == 0, result.output
    assert "NVSwitch full mesh" in result.stdout and "NVLink domains: [0-7]" in result.stdout
    assert "GPU3: NUMA 0, nearest NIC mlx5_3 (PIX)" in result.stdout
    assert "No findings." in result.stdout


def test_topo_show_rejects_garbage_with_exit_2() -> None:
    result = clusterctl("topo", "show", "-", stdin="hello\nworld\n")
    assert result.exit_code == 2 and result.stderr.startswith("error:") and "Traceback" not in result.stderr


def _mock_inventory(tmp_path: Path) -> Path:
    """Four DGX A100 mock hosts; gpu-x2 lost GPU0<->GPU1 NVLink, gpu-x4 cannot be reached."""
    broken = tmp_path / "broken"
    broken.mkdir()
    topo = (DEMO_PROFILE / "nvidia-smi-topo-m.txt").read_text().splitlines()
    for number, line in enumerate(topo):
        parts = re.split(r"(\s+)", line.strip())  # tokens at even positions, separators kept
        if parts[0] in ("GPU0", "GPU1") and not parts[2].startswith("GPU"):  # not the header
            column = 2 if parts[0] == "GPU0" else 1  # GPU0 row: cell for GPU1; GPU1 row: cell for GPU0
            assert parts[2 * column].startswith("NV")
            parts[2 * column] = "SYS"
            topo[number] = "".join(parts)
    (broken / "topo.txt").write_text("\n".join(topo) + "\n")
    (broken / "profile.yaml").write_text(
        f"extends: {DEMO_PROFILE}\ncommands:\n  - match: nvidia-smi topo -m\n    stdout: topo.txt\n")
    dead = tmp_path / "dead"
    dead.mkdir()
    (dead / "profile.yaml").write_text(
        f"extends: {DEMO_PROFILE}\ncommands:\n  - regex: '.'\n    fail: unreachable\n")
    inventory = tmp_path / "inv.yaml"
    inventory.write_text(f"""cluster: t
defaults:
  transport: mock
  profile: {DEMO_PROFILE}
  fabric: {{type: ib, rate_gbps: 200}}
hosts:
  gpu-x1: {{address: 10.0.0.1, rack: r1}}
  gpu-x2: {{address: 10.0.0.2, rack: r1, profile: {broken}}}
  gpu-x3: {{address: 10.0.0.3, rack: r2}}
  gpu-x4: {{address: 10.0.0.4, rack: r2, profile: {dead}}}
""")
    return inventory


def test_survey_over_a_mock_inventory(tmp_path: Path) -> None:
    inventory = _mock_inventory(tmp_path)
    saved = tmp_path / "out" / "survey.json"
    saved.parent.mkdir()
    result = clusterctl("-i", str(inventory), "survey", "-o", "json", "--save", str(saved), "--tp", "8", "--graph",
                        str(tmp_path / "graphs"))
    assert result.exit_code == 1, result.output
    data = json.loads(result.stdout)
    jsonschema.validate(data, load_schema())
    problems = sorted((f["host"], f["code"]) for f in data["findings"] if f["severity"] != "info")
    assert problems == [("gpu-x2", "NVLINK_MISSING"), ("gpu-x4", "HOST_UNREACHABLE")]
    assert load_saved_survey(saved).hosts["gpu-x2"].shape == "partial-nvlink"
    fits = {h["host"]: h["fit"] for h in data["advice"]["hosts"]}
    assert fits == {"gpu-x1": "nvlink-all-pairs", "gpu-x2": "does-not-fit", "gpu-x3": "nvlink-all-pairs"}
    # A healthy NVSwitch host is drawn as one hub with all eight GPUs on it, not 28 crossing edges.
    healthy = (tmp_path / "graphs" / "gpu-x1.dot").read_text()
    assert "NVSwitch fabric: NV12 per GPU pair" in healthy
    assert healthy.count('-- "nvswitch0"') == 8
    # The host with a lost pair has no full mesh: its remaining NVLinks are drawn pair by pair.
    broken = (tmp_path / "graphs" / "gpu-x2.dot").read_text()
    assert "nvswitch" not in broken and broken.count('label="NV12"') == 27
    if shutil.which("dot"):
        assert (tmp_path / "graphs" / "gpu-x1.svg").exists()


def test_survey_table_view_names_the_problems(tmp_path: Path) -> None:
    result = clusterctl("-i", str(_mock_inventory(tmp_path)), "survey", "--matrix")
    assert result.exit_code == 1
    assert "gpu-x2 NVLINK_MISSING" in result.stdout and "unreachable" in result.stdout
    assert "NVSwitch full mesh" in result.stdout


def test_a_model_no_replica_of_which_fits_gets_no_pipeline_advice_and_no_empty_placement() -> None:
    # 16 GPUs asked of one 8-GPU host: there is no replica, so none spans hosts and nothing is placed.
    result = clusterctl("topo", "show", str(TOPO / "hgx-h100-8gpu-8nic.txt"), "--tp", "8", "--pp", "2")
    text = " ".join(result.stdout.split())
    assert result.exit_code == 0 and "TP 8 x PP 2 needs 16 GPUs; the hosts hold 8: no replica fits." in text
    assert "Pipeline parallelism" not in text and "placement" not in text and "global ranks" not in text


@pytest.mark.skipif(not (REPO / "inventories" / "demo.yaml").exists(), reason="demo inventory not present")
def test_demo_inventory_names_the_two_broken_hosts_and_nothing_else() -> None:
    result = clusterctl("-i", str(REPO / "inventories" / "demo.yaml"), "survey", "-o", "json")
    assert result.exit_code == 1, result.output
    data = json.loads(result.stdout)
    problems = {(f["host"], f["code"], f["severity"]) for f in data["findings"] if f["severity"] != "info"}
    assert ("gpu-a3", "NVLINK_MISSING", "error") in problems
    assert ("gpu-b3", "NIC_SLOW", "error") in problems
    assert {host for host, _, _ in problems} == {"gpu-a3", "gpu-b3"}
    slow = next(f for f in data["findings"] if f["code"] == "NIC_SLOW")
    assert slow["evidence"]["hca"] == "mlx5_2" and slow["evidence"]["rate_gbps"] == 10


def test_layout_advice_keeps_ranks_off_a_slow_nic() -> None:
    demo = str(Path(__file__).resolve().parents[2] / "inventories" / "demo.yaml")
    advice = clusterctl("-i", demo, "-l", "gpu-b*", "survey", "--tp", "8", "-o", "json").json()["advice"]
    nics = {h["host"]: {r["gpu"]: r["nic"] for r in h["rank_nics"]} for h in advice["hosts"]}
    # gpu-b3's mlx5_2 trained at 10 Gb/s: its GPU2 rank moves to mlx5_3 on the same PCIe switch.
    assert nics["gpu-b3"][2] == "mlx5_3"
    assert nics["gpu-b1"][2] == "mlx5_2"
    assert any("gpu-b3: mlx5_2 left out" in line for line in advice["explanation"])


# --- partial reads (issue 13) ------------------------------------------------------------------


def test_topo_show_of_a_clipped_paste_lists_what_it_could_not_read_and_carries_it_in_json() -> None:
    path = str(TOPO / "DERIVED-h200-clipped-100-columns.txt")
    text = clusterctl("topo", "show", path)
    assert text.exit_code == 0, text.output
    assert "topology read in part" in text.stdout and "line 1: rows NIC4..NIC7 have no column" in text.stdout
    assert "FACT_PARTIAL" not in text.stdout  # a file's warnings are listed once, not repeated as a finding
    data = json.loads(clusterctl("topo", "show", path, "-o", "json").stdout)
    jsonschema.validate(data, load_schema())
    warnings = data["hosts"][0]["parse_warnings"]
    assert {w["fact"] for w in warnings} == {"topology"} and warnings[0]["line"] == 1


def test_topo_show_says_when_the_nearest_nic_is_no_affinity() -> None:
    result = clusterctl("topo", "show", str(TOPO / "rtx4090-8gpu-2nic-tabs.txt"))
    lines = {line.split(":")[0].strip(): line for line in result.stdout.splitlines() if line.startswith("  GPU")}
    assert "no NIC with affinity" in lines["GPU0"] and "across the CPU interconnect" in lines["GPU0"]
    assert "nearest NIC NIC0, NIC1 (PHB)" in lines["GPU6"]


def test_topo_show_of_a_matrix_without_nics_says_so_once_not_per_gpu() -> None:
    b300 = TOPO / "b300-7gpu-610.57.04-nv18-no-nic-columns-interleaved-cpus-prompt.txt"
    result = clusterctl("topo", "show", str(b300))
    assert result.exit_code == 0, result.output
    assert "nearest NIC" not in result.stdout
    assert "the matrix names no NICs: no GPU-NIC path is known; NUMA 0: GPUs 0-2; NUMA 1: GPUs 3-6" in result.stdout


def test_live_survey_turns_a_partial_read_into_a_finding_not_a_crash(tmp_path: Path) -> None:
    clipped = tmp_path / "clipped"
    clipped.mkdir()
    shutil.copy(TOPO / "DERIVED-h200-clipped-140-columns.txt", clipped / "topo.txt")
    (clipped / "profile.yaml").write_text(
        f"extends: {DEMO_PROFILE}\ncommands:\n  - match: nvidia-smi topo -m\n    stdout: topo.txt\n")
    inventory = tmp_path / "inv.yaml"
    inventory.write_text(f"cluster: t\ndefaults: {{transport: mock, profile: {clipped}}}\nhosts:\n  gpu-p1: {{}}\n")
    result = clusterctl("-i", str(inventory), "survey", "-o", "json")
    data = json.loads(result.stdout)
    jsonschema.validate(data, load_schema())
    partial = [f for f in data["findings"] if f["code"] == "FACT_PARTIAL"]
    assert [(f["host"], f["severity"]) for f in partial] == [("gpu-p1", "warning")]
    assert partial[0]["evidence"]["warnings"][0]["line"] == 1
    host = data["hosts"][0]
    assert host["gpu_count"] == 8 and host["parse_warnings"][0]["fact"] == "topology"


# --- the last line says what the exit code means (issue 37) -----------------------------------


def test_demo_survey_ends_with_one_line_naming_its_exit_code_and_why() -> None:
    result = clusterctl("-i", str(REPO / "inventories" / "demo.yaml"), "survey")
    assert result.exit_code == 1, result.output
    last = result.stdout.rstrip().splitlines()[-1]
    assert last.startswith("6 hosts: 2 errors,"), last
    assert "exit 1: error findings on 2 hosts: gpu-a3,gpu-b3." in last


def test_a_healthy_survey_says_exit_0_and_why() -> None:
    result = clusterctl("-i", str(REPO / "inventories" / "demo.yaml"), "-l", "gpu-a1,gpu-b1", "survey")
    assert result.exit_code == 0, result.output
    assert result.stdout.rstrip().splitlines()[-1].endswith("exit 0: no error findings, every host reached.")
