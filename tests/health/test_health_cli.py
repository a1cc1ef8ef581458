"""``clusterctl health`` over the demo inventory, ``health compare`` and ``health read`` as a user runs them."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from clirun import DEMO, REPO_ROOT, clusterctl
from fixture_files import fixture_dir

PROFILES = REPO_ROOT / "inventories" / "demo" / "profiles"


def test_demo_health_names_unhealthy_and_degraded_hosts_with_actions() -> None:
    run = clusterctl("-i", str(DEMO), "health")
    assert run.exit_code == 1, run.output
    out = run.stdout
    for host, code in (("gpu-a3", "NVLINK_DOWN"), ("gpu-b2", "GPU_ROW_REMAP_PENDING"), ("gpu-b3", "IB_PORT_SLOW"),
                       ("gpu-b1", "GPU_XID")):
        assert any(host in line and code in line for line in out.splitlines()), (host, code, out)
    assert "fix: Drain the host, then reset the GPU (nvidia-smi -r -i 5)" in out
    assert "CRC Errors 891" in out  # gpu-a3's lost links with their error counters


def test_demo_health_json_lists_every_host_with_its_verdict() -> None:
    run = clusterctl("-i", str(DEMO), "-o", "json", "health")
    assert run.exit_code == 1
    data = run.json()
    verdicts = {h["host"]: h["verdict"] for h in data["hosts"]}
    assert verdicts == {"gpu-a1": "healthy", "gpu-a2": "healthy", "gpu-a3": "unhealthy", "gpu-b1": "degraded",
                        "gpu-b2": "unhealthy", "gpu-b3": "unhealthy"}
    assert data["kind"] == "clusterctl.health" and data["xid_catalog"]["version"]
    b1 = next(h for h in data["hosts"] if h["host"] == "gpu-b1")
    xid = next(f for f in b1["findings"] if f["code"] == "GPU_XID")
    assert xid["evidence"]["action"] == "RESTART_APP" and "Xid (PCI:0000:4e:00): 13" in xid["evidence"]["evidence"]


def _inventory(tmp_path: Path, name: str, profile: str) -> Path:
    path = tmp_path / f"{name}.yaml"
    path.write_text(f"""cluster: t
defaults: {{transport: mock, roles: [worker], fabric: {{type: ib, rate_gbps: 200}}}}
hosts:
  n1: {{profile: {PROFILES / 'dgx-a100'}}}
  n2: {{profile: {PROFILES / 'dgx-a100'}}}
  n3: {{profile: {PROFILES / profile}}}
""")
    return path


def test_compare_names_what_got_worse(tmp_path: Path) -> None:
    before, after = tmp_path / "before.json", tmp_path / "after.json"
    first = clusterctl("-i", str(_inventory(tmp_path, "monday", "dgx-a100")), "health", "--save", str(before))
    assert first.exit_code == 0, first.output
    second = clusterctl("-i", str(_inventory(tmp_path, "today", "gpu-a3")), "health", "--save", str(after))
    assert second.exit_code == 1
    compared = clusterctl("-o", "json", "health", "compare", str(before), str(after))
    assert compared.exit_code == 1, compared.output
    worse = {(w["host"], w["code"]) for w in compared.json()["worse"]}
    assert {("n3", "HEALTH_VERDICT_WORSE"), ("n3", "HEALTH_NVLINK_WENT_DOWN"),
            ("n3", "HEALTH_NVLINK_COUNTERS_GREW")} <= worse
    assert not any(host != "n3" for host, _ in worse)
    # Each change carries the action of the host's own finding of that fault (heal's and quarantine's rule).
    evidence = [(w["code"], w.get("evidence", {})) for w in compared.json()["worse"]]
    actions = {(code, e.get("code")): e.get("action") for code, e in evidence}
    assert actions[("HEALTH_NVLINK_WENT_DOWN", None)] == actions[("HEALTH_NEW_FINDING", "NVLINK_DOWN")] == "RESET_GPU"
    same = clusterctl("health", "compare", str(before), str(before))
    assert same.exit_code == 0 and "Nothing got worse." in same.stdout


def test_compare_judges_a_new_xid_by_the_catalogue_as_the_host_finding_does(tmp_path: Path) -> None:
    """A new Xid 79 was a warning with no fix and no action; the host's GPU_XID is an error: drain, reboot."""
    inventory = _inventory(tmp_path, "fleet", "dgx-a100")
    inventory.write_text(inventory.read_text().replace("transport: mock,", "transport: mock, mock_state: state,"))
    before, after = tmp_path / "before.json", tmp_path / "after.json"
    assert clusterctl("-i", str(inventory), "health", "--save", str(before)).exit_code == 0
    assert clusterctl("-i", str(inventory), "-l", "n3", "mock", "set", "fault=xid-79").exit_code == 0
    assert clusterctl("-i", str(inventory), "health", "--save", str(after)).exit_code == 1
    compared = clusterctl("-o", "json", "health", "compare", str(before), str(after))
    (xid,) = [w for w in compared.json()["worse"] if w["code"] == "HEALTH_NEW_KERNEL_EVENTS"]
    assert (xid["severity"], xid["evidence"]["action"]) == ("error", "RESTART_BM"), xid
    assert xid["fix"].startswith("Drain the host, then reboot it")


def test_compare_refuses_what_is_not_a_health_report(tmp_path: Path) -> None:
    other = tmp_path / "x.json"
    other.write_text(json.dumps({"kind": "clusterctl.survey"}))
    run = clusterctl("health", "compare", str(other), str(other))
    assert run.exit_code == 2 and "not a clusterctl health report" in run.stderr


@pytest.mark.parametrize(("content", "said"), [
    ('{"kind": "clusterctl.health", "hosts": [{"host": "n\u0001"}]}',
     "1: not a clusterctl health report: not JSON at column 52: a control character (U+0001) in text in double "
     "quotes, which JSON writes as an escape such as \\n or \\u0001."),
    ('{\n  "kind": "clusterctl.health",\n}\n',
     "3: not a clusterctl health report: not JSON at column 1: a ',' before the '}' or ']' that ends the entries "
     "is one too many."),
    ('{\n  "kind": "clusterctl.health"\n  "hosts": []\n}\n',
     "3: not a clusterctl health report: not JSON at column 3: a ',' between two entries, or the '}' or ']' that "
     "ends them, belongs where '\"' is."),
    ("{'kind': 'clusterctl.health'}", "1: not a clusterctl health report: not JSON at column 2: a key in double "
                                      "quotes belongs where \"'\" is."),
])
def test_bad_json_is_said_in_the_products_words_naming_file_line_and_column(content: str, said: str,
                                                                             tmp_path: Path) -> None:
    """Not Python's parser state ("Invalid control character at", "Expecting ',' delimiter"): what is wrong."""
    bad = tmp_path / "bad.json"
    bad.write_text(content)
    run = clusterctl("health", "compare", str(bad), str(bad))
    hint = " Save one with 'clusterctl health --save FILE' (or -o json).\n"
    assert run.exit_code == 2 and run.stderr == f"error: {bad}:{said}{hint}", run.stderr


def test_compare_names_the_line_of_a_damaged_report_and_refuses_binary_data(tmp_path: Path) -> None:
    cut = tmp_path / "cut.json"
    cut.write_text('{\n  "kind": "clusterctl.health",\n  "hosts": [\n')
    run = clusterctl("health", "compare", str(cut), str(cut))
    assert run.exit_code == 2 and f"{cut}:4: not a clusterctl health report: not JSON" in run.stderr
    assert "Traceback" not in run.stderr
    binary = tmp_path / "binary.json"
    binary.write_bytes(b"\x89PNG\r\n\x1a\n\x00")
    run = clusterctl("health", "compare", str(binary), str(binary))
    assert run.exit_code == 2 and f"{binary}:3: not a clusterctl health report: binary data" in run.stderr


#: A saved report edited by hand or written by something else: the field each refusal names, and what it says.
DAMAGED = {
    "level": (lambda r: r.update(level="x"), "level", "text where a whole number belongs"),
    "hosts": (lambda r: r.update(hosts={"n1": {}}), "hosts", "an object where a list belongs"),
    "host": (lambda r: r["hosts"][0].pop("host"), "hosts[0].host", "missing"),
    "verdict": (lambda r: r["hosts"][0].update(verdict="fine"), "hosts[0].verdict", "'fine' is not one of"),
    "gpus": (lambda r: r["hosts"][0]["facts"].update(gpus=[1]), "hosts[0].facts.gpus",
             "a list where an object or null belongs"),
    "finding": (lambda r: r["hosts"][0].update(findings=[{"code": "X"}]), "hosts[0].findings[0].severity", "missing"),
    "kind": (lambda r: r.update(kind="clusterctl.survey"), "kind", "'clusterctl.survey' where clusterctl.health"),
}


@pytest.mark.parametrize("damage", DAMAGED.values(), ids=DAMAGED.keys())
def test_compare_refuses_a_damaged_report_naming_the_file_and_field(
        tmp_path: Path, damage: tuple[Callable[[dict[str, Any]], None], str, str]) -> None:
    """A wrong field used to end in 'internal error: ValueError' (exit 1), or an unnamed 'damaged: 'host''."""
    good, bad = tmp_path / "good.json", tmp_path / "bad.json"
    assert clusterctl("-i", str(DEMO), "health", "--save", str(good)).exit_code == 1
    report = json.loads(good.read_text())
    damage[0](report)
    bad.write_text(json.dumps(report))
    for args in ((good, bad), (bad, good)):
        run = clusterctl("health", "compare", *map(str, args))
        assert run.exit_code == 2 and run.stdout == "", run.output
        said = f"error: {bad}: field '{damage[1]}': not a clusterctl health report: {damage[2]}"
        assert run.stderr.startswith(said), run.stderr
        assert "internal error" not in run.stderr and len(run.stderr.strip().splitlines()) == 1


def test_read_judges_pasted_outputs_as_one_host() -> None:
    smi = fixture_dir("nvidia-smi-q") / "mlengineering-510.73.08-a100-remap-pending-clipped.txt"
    log = fixture_dir("kernel-log") / "mlengineering-xid63-row-remap.log"
    run = clusterctl("-o", "json", "health", "read", str(smi), str(log), "--host", "node-115")
    assert run.exit_code == 1, run.output
    (host,) = run.json()["hosts"]
    assert host["host"] == "node-115" and host["verdict"] == "unhealthy"
    assert host["reason"].startswith("GPU_ROW_REMAP_PENDING")
    assert "leaves lines out" in run.stderr and "says 8 but 1" in run.stderr  # what could not be read


def test_read_refuses_text_it_does_not_know(tmp_path: Path) -> None:
    other = tmp_path / "notes.txt"
    other.write_text("just some notes\n")
    run = clusterctl("health", "read", str(other))
    assert run.exit_code == 2 and "notes.txt" in run.stderr and "not recognised" in run.stderr


def test_read_says_an_ibstatus_paste_is_ibstatus_and_what_to_paste_instead() -> None:
    run = clusterctl("health", "read", str(fixture_dir("ibstatus") / "4x-edr-4-hca-ucx-guide.txt"))
    message = " ".join(run.stderr.split())
    assert run.exit_code == 2 and "4x-edr-4-hca-ucx-guide.txt:1" in message, run.output
    assert "this is ibstatus output" in message and "paste the output of ibstat or ibv_devinfo -v" in message


def _dcgm_profile(tmp_path: Path, name: str, answer: str) -> Path:
    """The demo's healthy host with DCGM installed: ``dcgmi diag -r N -j`` answers ``answer``."""
    folder = tmp_path / name
    folder.mkdir()
    (folder / "diag.json").write_text(answer)
    (folder / "profile.yaml").write_text(f"extends: {PROFILES / 'dgx-a100'}\ncommands:\n"
                                         "  - regex: 'dcgmi diag -r [123] -j'\n    stdout: diag.json\n")
    return folder


def test_level_1_runs_dcgm_diag_and_a_failed_test_makes_the_host_unhealthy(tmp_path: Path) -> None:
    """Level 1 on hosts that have DCGM: the real 3.x JSON (every test skipped) proves nothing and says so
    (never a pass); the same answer with one test failed on GPU 0 (derived from it) takes that host out of
    service."""
    recorded = (fixture_dir("dcgmi") / "dcgm139-3x-json-skips-clipped.json").read_text()
    failed = recorded.replace('"status" : "Skip"', '"status" : "Fail"', 1)
    assert failed != recorded
    inventory = tmp_path / "dcgm.yaml"
    inventory.write_text(f"""cluster: t
defaults: {{transport: mock, roles: [worker], fabric: {{type: ib, rate_gbps: 200}}}}
hosts:
  n1: {{profile: {_dcgm_profile(tmp_path, 'skips', recorded)}}}
  n2: {{profile: {_dcgm_profile(tmp_path, 'fails', failed)}}}
""")
    run = clusterctl("-i", str(inventory), "-o", "json", "health", "--level", "1")
    assert run.exit_code == 1, run.output
    hosts = {h["host"]: h for h in run.json()["hosts"]}
    codes = {name: {f["code"] for f in host["findings"]} for name, host in hosts.items()}
    assert "DCGM_DIAG_FAILED" in codes["n2"] and hosts["n2"]["verdict"] == "unhealthy"
    failed_finding = next(f for f in hosts["n2"]["findings"] if f["code"] == "DCGM_DIAG_FAILED")
    assert "PCIe" in failed_finding["message"] and "Fail" in failed_finding["message"]
    assert {code for code in codes["n1"] if code.startswith("DCGM")} == {"DCGM_DIAG_SKIPPED"}, codes["n1"]
    assert hosts["n1"]["verdict"] != "healthy"
    assert not any("dcgmi" in f["message"] and "not installed" in f["message"] for f in hosts["n1"]["findings"])


def test_level_2_adds_each_hosts_own_nccl_test_judged_against_the_fleet() -> None:
    run = clusterctl("-i", str(DEMO), "-l", "gpu-a1,gpu-a2,gpu-a3", "-o", "json", "health", "--level", "2")
    assert run.exit_code == 1, run.output
    hosts = {h["host"]: h for h in run.json()["hosts"]}
    for name, host in hosts.items():
        busbw = [f for f in host["findings"] if f["code"] == "NCCL_BUSBW"]
        assert busbw and "bus bandwidth" in busbw[0]["message"] and "fleet median" in busbw[0]["message"], name
    # gpu-a3's recorded all_reduce figure is one its topology (GPU3 without NVLink) cannot give.
    assert "FIGURE_IMPOSSIBLE" in {f["code"] for f in hosts["gpu-a3"]["findings"]}
    level0 = clusterctl("-i", str(DEMO), "-l", "gpu-a1", "-o", "json", "health")
    assert not any(f["code"].startswith("NCCL") for h in level0.json()["hosts"] for f in h["findings"])


def test_level_2_headline_names_the_root_cause_before_the_figure_it_explains() -> None:
    run = clusterctl("-i", str(DEMO), "-l", "gpu-a3", "-o", "json", "health", "--level", "2")
    (host,) = run.json()["hosts"]
    assert {"NVLINK_DOWN", "FIGURE_IMPOSSIBLE"} <= {f["code"] for f in host["findings"]}
    assert host["reason"].startswith("NVLINK_DOWN: GPU 3: 0 of 12 NVLinks active"), host["reason"]
    assert host["reason"].endswith("(+1 more: FIGURE_IMPOSSIBLE)")


def test_the_kernel_log_window_is_honoured_and_what_it_left_out_is_said() -> None:
    # gpu-b1's recorded Xids are two hours old (its profile's recorded_at).
    day = clusterctl("-i", str(DEMO), "-l", "gpu-b1", "-o", "json", "health", "--since", "24h").json()["hosts"][0]
    assert "GPU_XID" in {f["code"] for f in day["findings"]} and day["verdict"] == "degraded"
    recent = clusterctl("-i", str(DEMO), "-l", "gpu-b1", "-o", "json", "health", "--since", "30m").json()["hosts"][0]
    codes = {f["code"]: f for f in recent["findings"]}
    assert "GPU_XID" not in codes and recent["verdict"] == "healthy"
    left_out = codes["KERNEL_LOG_BEFORE_WINDOW"]["message"]
    assert "before the --since 30m window left out (Xid 13, Xid 43" in left_out
    # The window as the user wrote it: '--since 60m' was named "the --since 1h window" (24h: "1d").
    hour = clusterctl("-i", str(DEMO), "-l", "gpu-b1", "-o", "json", "health", "--since", "60m").json()["hosts"][0]
    (left_out,) = [f["message"] for f in hour["findings"] if f["code"] == "KERNEL_LOG_BEFORE_WINDOW"]
    assert "before the --since 60m window left out" in left_out, left_out


@pytest.mark.parametrize("since", ["9999999d", "99999999999999d"])
def test_a_window_longer_than_the_calendar_holds_every_event(since: str) -> None:
    # Its start lies before year 1: every Xid is inside it (was "internal error: OverflowError", exit 1).
    run = clusterctl("-i", str(DEMO), "-l", "gpu-b1", "-o", "json", "health", "--since", since)
    (host,) = run.json()["hosts"]
    assert "GPU_XID" in {f["code"] for f in host["findings"]} and host["verdict"] == "degraded", run.output


@pytest.mark.parametrize("options", [("--quarantine",), ("--quarantine", "--yes"), ("--yes",), ("--dry-run",)])
def test_local_refuses_the_quarantine_options_it_would_ignore(options: tuple[str, ...]) -> None:
    """``--local`` checks this machine alone: asked to quarantine too, it says it will not (exit 2) instead of
    checking and quarantining nothing."""
    run = clusterctl("health", "--local", *options)
    assert run.exit_code == 2, run.output
    assert run.stdout == "" and "--quarantine" in run.stderr


@pytest.mark.parametrize("options", [("--dry-run",), ("--yes",), ("--max-unavailable", "1")])
def test_slurm_refuses_the_quarantine_options_instead_of_draining_anyway(options: tuple[str, ...]) -> None:
    """``--slurm`` drains a failing node for real: a ``--dry-run`` (or another option of ``--quarantine``) given
    with it is refused (exit 2) before anything is read or drained, never silently ignored."""
    run = clusterctl("health", "--local", "--slurm", *options)
    assert run.exit_code == 2, run.output
    assert run.stdout == "" and "--quarantine" in run.stderr


@pytest.mark.parametrize("options", [("--level", "2"), ("--force",), ("--probe-timeout", "30")])
def test_slurm_refuses_the_options_it_does_not_run_with(options: tuple[str, ...]) -> None:
    """``--slurm`` runs level 0 with each probe's limit taken from ``--deadline``: ``--level``, ``--force`` and
    ``--probe-timeout`` would have no effect, so they are refused (exit 2) and named, never silently ignored."""
    run = clusterctl("health", "--local", "--slurm", *options)
    assert run.exit_code == 2, run.output
    assert run.stdout == "" and options[0] in run.stderr


def test_slurm_refuses_a_since_it_cannot_read_as_a_usage_error() -> None:
    """A ``--since`` that is no duration is the user's mistake (exit 2, said once), with ``--slurm`` as without
    it, never each host's failed health check (exit 1, what Slurm's HealthCheckProgram reads as a bad node)."""
    run = clusterctl("health", "--local", "--slurm", "--since", "bogus")
    assert run.exit_code == 2, run.output
    assert run.stdout == "" and "--since" in run.stderr and "ERROR: clusterctl" not in run.stderr
