"""Hostile cases for ``bench``: outputs checked before work, runs that must not collide, hosts
that are down, logs that cannot be read, results that cannot be compared, and SIGTERM."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import pytest

from clusterctl.bench.results import new_results_dir

from .conftest import DEMO, REPO, clusterctl_process


def test_an_unwritable_plot_fails_before_any_host_is_touched(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    ran = cli("-i", DEMO, "-l", "gpu-a1,gpu-a2", "bench", "ib", "--plot", "/nonexistent/m.svg",
              "--results-dir", str(tmp_path / "r"))
    assert ran.code == 2
    assert "--plot /nonexistent/m.svg" in ran.err and "Traceback" not in ran.err
    assert not (tmp_path / "r").exists()  # nothing ran, nothing was written


def test_a_png_plot_without_matplotlib_fails_up_front(cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "matplotlib" else real(name, *a))
    ran = cli("-i", DEMO, "-l", "gpu-a1,gpu-a2", "bench", "ib", "--plot", str(tmp_path / "m.png"))
    assert ran.code == 2 and "needs matplotlib" in ran.err


def test_an_env_name_no_shell_can_export_fails_before_any_host_is_touched(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    # Each host used to fail on its own with "NCCL_FAILED: error: ValueError: not a valid environment variable name".
    for pair in ("1X=y", "A-B=y", "\u00e9=y"):
        ran = cli("-i", DEMO, "-l", "gpu-a1", "bench", "nccl", "--env", pair, "--results-dir", str(tmp_path / "r"))
        assert ran.code == 2 and ran.out == "", ran.err
        assert f"--env takes KEY=VALUE, KEY a shell variable name (letters, digits, '_'), got {pair!r}" in ran.err
        assert not (tmp_path / "r").exists()


def test_an_unwritable_results_dir_is_a_usage_error(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    blocker = tmp_path / "file"
    blocker.write_text("")
    for command in (["bench", "ib"], ["bench", "nccl"]):
        ran = cli("-i", DEMO, "-l", "gpu-a1,gpu-a2", *command, "--results-dir", str(blocker / "sub"))
        assert ran.code == 2, command
        assert "--results-dir" in ran.err and "internal error" not in ran.err


def test_runs_in_the_same_second_get_their_own_folders(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    now = time.time()
    first, second = new_results_dir(now=now), new_results_dir(now=now)
    assert first != second and first.is_dir() and second.is_dir()
    assert second.name == first.name + "-2"


def test_a_second_writer_never_overwrites_the_first(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    folder = tmp_path / "run"
    args = ("-i", DEMO, "-l", "gpu-a1,gpu-a2", "bench", "nccl", "--results-dir", str(folder))
    assert cli(*args).code in (0, 1)
    before = (folder / "results.json").read_text()
    again = cli(*args)
    assert again.code == 2 and "already holds the results of another run" in again.err
    assert (folder / "results.json").read_text() == before


def test_an_unreachable_host_is_unreachable_not_slow(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    inv = tmp_path / "inv.yaml"
    demo = (REPO / "inventories" / "demo.yaml").read_text()
    inv.write_text(
        demo.replace("profile: demo/", f"profile: {REPO}/inventories/demo/")
        .replace("hosts:\n  gpu-a1:", "hosts:\n  gpu-down: {transport: ssh, address: 127.0.0.1, port: 1, rack: a}\n"
                 "  gpu-a1:", 1)
    )
    ran = cli("-i", str(inv), "-l", "gpu-a1,gpu-a2,gpu-down", "-o", "json", "bench", "ib",
              "--results-dir", str(tmp_path / "r"))
    assert ran.code == 1
    findings = json.loads(ran.out)["findings"]
    down = [f for f in findings if "gpu-down" in (f.get("host"), f.get("subject"))]
    assert [f["code"] for f in down] == ["HOST_UNREACHABLE"]
    assert not any("slow" in f["message"] for f in findings)


def test_report_reads_stdin_and_keeps_going_past_a_bad_file(  # type: ignore[no-untyped-def]
    cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import io

    log = next((REPO / "tests" / "fixtures" / "nccl-tests").glob("*.txt"))
    monkeypatch.setattr("sys.stdin", io.StringIO(log.read_text()))
    ran = cli("bench", "report", "-", str(tmp_path / "missing.log"), str(log), "-o", "json")
    assert ran.code == 2
    files = json.loads(ran.out)["files"]
    assert [f["file"] for f in files] == ["<stdin>", str(tmp_path / "missing.log"), str(log)]
    assert files[0]["tool"] == "nccl-tests" and files[2]["tool"] == "nccl-tests"
    assert "no such file" in files[1]["error"]


def _results(folder: Path, payload: dict) -> str:  # type: ignore[type-arg]
    folder.mkdir()
    (folder / "results.json").write_text(json.dumps(payload))
    return str(folder)


def test_compare_refuses_an_unknown_schema_and_warns_on_unlike_runs(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    ib = _results(tmp_path / "ib", {"schema_version": 1, "kind": "bench-ib", "test": "ib_write_bw", "links": [
        {"server": "a", "server_hca": "mlx5_0", "client": "b", "client_hca": "mlx5_0", "gbps": 190.0}]})
    future = _results(tmp_path / "future", {"schema_version": 99, "links": []})
    nccl = _results(tmp_path / "nccl", {"schema_version": 1, "nccl": {"op": "all_reduce", "runs": [
        {"host": "a", "busbw_gbs": 180.0}]}})
    ran = cli("bench", "compare", ib, future)
    assert ran.code == 2 and "field 'schema_version': not a results file: 99 is not a version" in ran.err
    ran = cli("bench", "compare", ib, nccl)
    assert ran.code == 0
    assert "measured different things (ib_write_bw vs nccl all_reduce)" in ran.err


LINK = {"server": "a", "server_hca": "mlx5_0", "client": "b", "client_hca": "mlx5_0", "gbps": 190.0}
#: Results files of the right version whose figures are not where or what they should be.
DAMAGED = {
    "links": ({"links": "a,b"}, "links': not a results file: text where a list belongs"),
    "link": ({"links": [5]}, "links[0]': not a results file: a number where an object belongs"),
    "server": ({"links": [{**LINK, "server": None}]}, "links[0].server': not a results file: null where text"),
    "hca": ({"links": [{k: v for k, v in LINK.items() if k != "client_hca"}]},
            "links[0].client_hca': not a results file: missing"),
    "gbps": ({"links": [{**LINK, "gbps": "190"}]}, "links[0].gbps': not a results file: text where a number or null"),
    "nccl": ({"nccl": [1]}, "nccl': not a results file: a list where an object belongs"),
    "run": ({"nccl": {"op": "all_reduce", "runs": [{"busbw_gbs": 1.0}]}}, "nccl.runs[0].host': not a results file"),
    # Another report was compared as a run with no figures ("120 new", exit 0):
    "health": ({"kind": "clusterctl.health", "hosts": []}, "kind': not a results file: a 'clusterctl.health' report"),
    "empty": ({}, "links': not a results file: missing, and so is 'nccl'"),
}


@pytest.mark.parametrize(("payload", "says"), DAMAGED.values(), ids=DAMAGED.keys())
def test_compare_and_dashboards_refuse_a_damaged_results_file_naming_it_and_the_field(  # type: ignore[no-untyped-def]
        cli, tmp_path: Path, payload: dict, says: str) -> None:  # type: ignore[type-arg]
    """These used to end in 'internal error: KeyError' or 'TypeError' with exit 1."""
    good = _results(tmp_path / "good", {"schema_version": 1, "links": [LINK]})
    bad = _results(tmp_path / "bad", {"schema_version": 1, **payload})
    for argv in (("bench", "compare", good, bad), ("bench", "compare", bad, good),
                 ("-i", DEMO, "dashboards", "--bench", bad)):
        ran = cli(*argv)
        assert ran.code == 2 and ran.out == "", ran
        assert ran.err.startswith(f"error: {bad}/results.json: field '{says}"), ran.err
        assert len(ran.err.strip().splitlines()) == 1


def test_sigterm_during_bench_ib_stops_the_servers_and_removes_their_logs(tmp_path: Path) -> None:
    """SIGTERM used to end Python at once, leaving perftest servers and their logs behind."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    token = f"clusterctl-sigterm-test-{os.getpid()}"
    fake = bin_dir / "ib_write_bw"  # a perftest server that stays up, as a real one waits for its client
    fake.write_text(f"#!/bin/sh\necho {token}\necho $$ >> {tmp_path}/pids\nexec sleep 300\n")
    fake.chmod(0o755)
    inv = tmp_path / "inv.yaml"
    inv.write_text("cluster: l\ndefaults:\n  transport: local\n  fabric: {type: ib, rate_gbps: 200, hcas: [mlx5_0]}\n"
                   "hosts:\n  n1: {}\n  n2: {}\n")
    env_path = f"{bin_dir}:{os.environ.get('PATH', '')}"
    proc = clusterctl_process("-i", str(inv), "bench", "ib", "--hca", "mlx5_0", "--settle", "60",
                              "--results-dir", str(tmp_path / "r"), cwd=tmp_path, path=env_path)
    pids = tmp_path / "pids"
    deadline = time.monotonic() + 60
    while not pids.exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    time.sleep(0.5)
    [server_pid] = [int(p) for p in pids.read_text().split()]
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 143, err[-2000:]
    assert "interrupted (SIGTERM)" in err and "Traceback" not in err
    assert not _running(server_pid)
    leftovers = [p for p in Path("/tmp").glob("clusterctl-bench-*.log") if token in p.read_text(errors="replace")]
    assert leftovers == []


def _running(pid: int) -> bool:
    """Alive and not a zombie waiting for a parent (in a container, PID 1 may never reap it)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return False
    return "\nState:\tZ" not in status


def test_the_matrix_says_what_a_cell_is(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    plot = tmp_path / "m.svg"
    ran = cli("-i", DEMO, "-l", "gpu-a1,gpu-a2", "bench", "ib", "--settle", "0", "--plot", str(plot),
              "--results-dir", str(tmp_path / "r"))
    assert ran.code == 0, ran.err
    meaning = "the lowest bandwidth in Gb/s of the tests between the two hosts (every HCA pair)"
    assert meaning in ran.out.replace("\n", " ") or meaning in " ".join(ran.out.split())
    assert meaning in plot.read_text()
