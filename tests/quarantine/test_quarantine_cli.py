"""quarantine / release / status as a user runs them on a small simulated cluster (no bootstrap run)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from clirun import clusterctl
from kube_sim import KubeSim


@pytest.fixture
def sim(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> KubeSim:
    monkeypatch.chdir(tmp_path)
    return KubeSim(tmp_path, slurmd=("gpu-a2",))


def cli(sim: KubeSim, *args: str) -> tuple[int, str]:
    done = clusterctl("-i", sim.inventory, *args)
    return done.exit_code, done.stdout + done.stderr


def test_changing_hosts_needs_yes_off_a_terminal_and_names_must_be_in_the_inventory(
        sim: KubeSim, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CLUSTERCTL_YES")  # tests confirm by default (tests/conftest.py)
    before = sim.snapshot()
    code, out = cli(sim, "quarantine", "gpu-a3", "--reason", "xid")
    assert code == 2 and "--yes" in out
    assert cli(sim, "quarantine", "gpu-a3", "--reason", "xid", "--yes")[0] == 0
    before = sim.snapshot()
    code, out = cli(sim, "release", "gpu-a3", "--skip-checks")
    assert code == 2 and "--yes" in out
    code, out = cli(sim, "quarantine", "gpu-zz", "--reason", "xid", "--yes")
    assert code == 2 and "HOST 'gpu-zz': not in the inventory" in out
    assert sim.snapshot() == before


@pytest.mark.parametrize("option", ["--force", "--delete-emptydir-data"])
def test_a_drain_switch_without_drain_is_refused_not_ignored(sim: KubeSim, option: str) -> None:
    before = sim.snapshot()
    code, out = cli(sim, "quarantine", "gpu-a3", "--reason", "xid", option, "--yes")
    assert code == 2 and out.startswith(f"error: {option} goes with --drain"), out
    assert sim.snapshot() == before
    code, out = cli(sim, "quarantine", "gpu-a3", "--reason", "xid", option, "--drain", "--drain-timeout", "60", "--yes")
    assert code == 0 and "drain: evicted" in out, out


def test_a_second_quarantine_changes_nothing_and_keeps_since_when(sim: KubeSim) -> None:
    code, out = cli(sim, "quarantine", "gpu-a3", "--reason", "Xid 79", "--code", "XID_79", "--yes")
    assert code == 0, out
    first = sim.node("gpu-a3")["metadata"]["annotations"]
    assert first["clusterctl.dev/quarantine-codes"] == "XID_79"
    assert {"key": "clusterctl.dev/unhealthy", "value": "XID_79", "effect": "NoSchedule"} in \
        sim.node("gpu-a3")["spec"]["taints"]
    code, out = cli(sim, "quarantine", "gpu-a3", "--reason", "Xid 79", "--code", "XID_79", "--yes")
    assert code == 0 and "already quarantined as asked" in out
    assert sim.node("gpu-a3")["metadata"]["annotations"] == first


def test_a_drain_that_leaves_pods_says_which_and_exits_1(sim: KubeSim) -> None:
    sim.bare_pod("notebook", "gpu-a3")
    code, out = cli(sim, "quarantine", "gpu-a3", "--reason", "ecc", "--drain", "--yes")
    assert code == 1
    assert "NOT EVICTED default/notebook: declares no controller" in out
    assert "default/notebook" in sim.pods_on("gpu-a3")
    assert sim.node("gpu-a3")["spec"]["unschedulable"] is True  # cordoned all the same


def test_slurm_hosts_are_drained_and_resumed_with_the_node(sim: KubeSim) -> None:
    code, out = cli(sim, "quarantine", "gpu-a2", "--reason", "nvlink", "--yes")
    assert code == 0 and "gpu-a2: slurm: drained in Slurm node gpu-a2" in out
    state = sim.sh("scontrol -o show node gpu-a2")[1]
    assert "State=IDLE+DRAIN" in state and "Reason=clusterctl: nvlink" in state
    code, out = cli(sim, "release", "gpu-a2", "--skip-checks", "--yes")
    assert code == 0 and "checks skipped" in out and "resumed in Slurm node gpu-a2" in out
    assert "State=IDLE " in sim.sh("scontrol -o show node gpu-a2")[1]


def test_release_leaves_a_slurm_drain_someone_else_made(sim: KubeSim) -> None:
    # A reason typed over two lines is said on one line, its newline shown as \n (as health --slurm shows it).
    sim.sh("scontrol update nodename=gpu-a2 state=drain reason='bad DIMM\nticket 4711'", host="gpu-a2")
    code, out = cli(sim, "quarantine", "gpu-a2", "--reason", "nvlink", "--yes")
    assert code == 0 and "gpu-a2: slurm: already drained in Slurm (bad DIMM\\nticket 4711)\n" in out
    code, out = cli(sim, "release", "gpu-a2", "--skip-checks", "--yes")
    assert code == 0 and "drained by someone else (bad DIMM\\nticket 4711)\n" in out
    assert "State=IDLE+DRAIN" in sim.sh("scontrol -o show node gpu-a2")[1]


def test_release_of_a_host_that_is_not_quarantined_changes_nothing(sim: KubeSim) -> None:
    code, out = cli(sim, "-o", "json", "release", "gpu-a1", "--skip-checks", "--yes")
    assert code == 0 and json.loads(out)["hosts"][0]["not_quarantined"] is True
    assert json.loads(out)["undo_journal"] is None


def test_status_lists_cordons_made_outside_clusterctl(sim: KubeSim) -> None:
    sim.kubectl("cordon gpu-a1")
    assert cli(sim, "quarantine", "gpu-a3", "--reason", "nvlink", "--yes")[0] == 0
    code, out = cli(sim, "-o", "json", "status")
    assert code == 0
    rows = {r["host"]: r for r in json.loads(out)["quarantined"]}
    assert rows["gpu-a3"]["by_clusterctl"] and rows["gpu-a3"]["reason"] == "nvlink"
    assert not rows["gpu-a1"]["by_clusterctl"] and "kubectl uncordon gpu-a1" in rows["gpu-a1"]["release_needs"]


def test_dry_runs_of_quarantine_and_release_touch_nothing(sim: KubeSim) -> None:
    sim.deploy("web", 3, min_available=2)
    before = sim.snapshot()
    code, out = cli(sim, "quarantine", "gpu-a2", "gpu-a3", "--reason", "x", "--drain", "--dry-run")
    assert code == 0 and "would drain Slurm node gpu-a2" in out and "would evict 1 pod(s)" in out
    assert sim.snapshot() == before
    assert cli(sim, "quarantine", "gpu-a2", "--reason", "x", "--yes")[0] == 0
    before = sim.snapshot()
    code, out = cli(sim, "release", "gpu-a2", "--skip-checks", "--dry-run")
    assert code == 0 and "would resume Slurm node gpu-a2" in out and "would be released" in out
    assert sim.snapshot() == before


@pytest.mark.parametrize("columns", ["80", "120"])
def test_status_neutralises_escape_sequences_in_annotations_and_cuts_nothing(
        sim: KubeSim, monkeypatch: pytest.MonkeyPatch, columns: str) -> None:
    import shlex

    monkeypatch.setenv("COLUMNS", columns)
    assert cli(sim, "quarantine", "gpu-a3", "--reason", "nvlink", "--code", "NVLINK_DOWN", "--yes")[0] == 0
    hostile = "clusterctl.dev/quarantine-reason=\x1b]0;owned\x07\x1b[2Jfine\nforged line \x9b31m"
    assert sim.kubectl(f"annotate --overwrite node gpu-a3 {shlex.quote(hostile)}")[0] == 0
    code, out = cli(sim, "status")
    assert code == 0, out
    assert not any(ch in out for ch in ("\x1b", "\x07", "\x9b"))
    assert "\\x1b]0;owned\\x07" in out  # shown as escapes, as exec shows them
    assert "…" not in out and "gpu-a3" in out and "NVLINK_DOWN" in out
    needs = "health (level 1) and bench nccl on the host pass: clusterctl release gpu-a3"
    assert set(needs.split()) <= set(out.split()), out  # no word cropped (at 120 columns: "clusterctl release gp")
    if columns == "80":  # as blocks: the command to copy whole on its line (it broke after 'clusterctl')
        assert "clusterctl release gpu-a3" in out, out
    # 'status HOST' too: the reason stays on its host's line (a newline in it used to start a line of its own).
    code, out = cli(sim, "status", "gpu-a3")
    assert code == 0 and not any(ch in out for ch in ("\x1b", "\x07", "\x9b")), out
    assert "fine\\nforged" in out, out


def _answer_on_the_control_plane(sim: KubeSim, pattern: str, stdout: str = "", stderr: str = "",
                                 exit_code: int = 0) -> None:
    """The control plane's kubectl answers the commands matching ``pattern`` with this (the mock's rule)."""
    from clusterctl.mock.profile import forget_profiles

    profile = Path(sim.root) / "profiles" / "plain" / "profile.yaml"
    profile.write_text(profile.read_text() + f"commands:\n  - regex: {json.dumps(pattern)}\n"
                       f"    stdout_text: {json.dumps(stdout)}\n    stderr_text: {json.dumps(stderr)}\n"
                       f"    exit: {exit_code}\n")
    forget_profiles()


_UNREADABLE = "the pods of node gpu-a3 could not be read through gpu-a1 (cannot parse kubectl get pods -o json"


@pytest.mark.parametrize(("answer", "named"), [
    ({"stdout": "<html><body>502 Bad Gateway</body></html>"}, _UNREADABLE),
    ({"stdout": json.dumps({"kind": "PodList", "items": [{"metadata": {"name": "x"}}]})}, _UNREADABLE),
    ({"stderr": "Error from server (InternalError): an error on the server has prevented the request from "
                "succeeding (get pods)\n", "exit_code": 1}, "(kubectl failed: Error from server (InternalError)"),
])
def test_a_pod_list_that_cannot_be_read_fails_that_hosts_drain_only(sim: KubeSim, answer: dict[str, object],
                                                                   named: str) -> None:
    """kubectl's pod list of one node that is no pod list (or that kubectl fails for) fails that host's
    drain, named; the other hosts are quarantined and drained; the journal keeps what was done."""
    sim.deploy("web", 3)
    _answer_on_the_control_plane(sim, "spec.nodeName=gpu-a3", **answer)  # type: ignore[arg-type]
    done = clusterctl("-i", sim.inventory, "-o", "json", "quarantine", "gpu-a2", "gpu-a3", "--reason", "ecc",
                      "--drain", "--yes")
    assert done.exit_code == 1, done.output
    assert "no working cluster" not in done.output and "Traceback" not in done.output
    report = json.loads(done.stdout)
    hosts = {h["host"]: h for h in report["hosts"]}
    assert hosts["gpu-a2"]["ok"] and hosts["gpu-a2"]["drain"]["complete"]
    assert not any(p.startswith("default/web-") for p in sim.pods_on("gpu-a2"))
    assert hosts["gpu-a2"]["slurm"].startswith("drained")
    failed = hosts["gpu-a3"]
    assert not failed["ok"] and "drain of gpu-a3 stopped" in failed["error"] and named in failed["error"]
    assert sim.node("gpu-a3")["spec"]["unschedulable"] is True  # its quarantine itself was done
    assert report["undo_journal"]  # what was done (both hosts' taints and cordons, gpu-a2's evictions) can be undone
    journal = Path(report["undo_journal"]).read_text()
    assert "gpu-a3" in journal and "gpu-a2" in journal

    table = cli(sim, "quarantine", "gpu-a3", "--reason", "ecc", "--drain", "--yes")
    assert table[0] == 1 and "FAILED gpu-a3: drain of gpu-a3 stopped" in " ".join(table[1].split())


def test_a_node_that_cannot_be_read_fails_that_host_only(sim: KubeSim) -> None:
    _answer_on_the_control_plane(sim, "get node gpu-a3 -o json", stdout="<html>502 Bad Gateway</html>")
    done = clusterctl("-i", sim.inventory, "-o", "json", "quarantine", "gpu-a2", "gpu-a3", "--reason", "ecc", "--yes")
    assert done.exit_code == 1 and done.stdout.startswith("{"), done.output
    hosts = {h["host"]: h for h in json.loads(done.stdout)["hosts"]}
    assert hosts["gpu-a2"]["ok"] and sim.node("gpu-a2")["spec"]["unschedulable"] is True
    said = hosts["gpu-a3"]["error"]
    assert "gpu-a3 was not quarantined: its node could not be read (node gpu-a3: cannot parse" in said
    nodes = {n["metadata"]["name"]: n for n in json.loads(sim.kubectl("get nodes -o json")[1])["items"]}
    assert nodes["gpu-a2"]["spec"].get("unschedulable") and not nodes["gpu-a3"]["spec"].get("unschedulable")


def test_a_failed_read_of_the_nodes_is_named_as_what_it_is_not_as_no_cluster(sim: KubeSim) -> None:
    """kubectl answering the node list with a server error: a cluster is there, the read failed: exit 1,
    one paragraph naming the command and its last stderr line, not "no cluster here, bootstrap first"."""
    _answer_on_the_control_plane(sim, "get nodes -o json", stderr="Error from server (InternalError): an error on "
                                 "the server has prevented the request from succeeding (get nodes)\n", exit_code=1)
    for output in ("table", "json"):
        done = clusterctl("-i", sim.inventory, "-o", output, "status")
        assert done.exit_code == 1 and done.stdout == "", done.output
        lines = done.stderr.strip().splitlines()
        assert len(lines) == 1 and "the control plane gpu-a1" in lines[0], done.stderr
        assert "kubectl failed: Error from server (InternalError)" in lines[0]
        assert "no working cluster" not in lines[0] and "bootstrap" not in lines[0] and "Traceback" not in done.output


def test_an_api_server_that_refuses_connections_is_no_cluster(sim: KubeSim) -> None:
    _answer_on_the_control_plane(sim, "get nodes -o json", stderr="The connection to the server 10.0.0.1:6443 was "
                                 "refused - did you specify the right host or port?\n", exit_code=1)
    done = clusterctl("-i", sim.inventory, "status")
    assert done.exit_code == 2 and done.stdout == "", done.output
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith("error: no working cluster: ") and "was refused" in line
    assert "Run 'clusterctl bootstrap' first" in line


def test_a_failed_kubernetes_drain_still_drains_the_host_in_slurm(sim: KubeSim) -> None:
    """gpu-a2 is a Kubernetes node and runs slurmd: its pods cannot be listed, so its Kubernetes drain fails,
    but it is still drained in Slurm (no new job lands there); both results are reported, exit 1, and the
    journal takes both back."""
    sim.deploy("web", 3)
    _answer_on_the_control_plane(sim, "spec.nodeName=gpu-a2", stderr="Error from server (InternalError): an error "
                                 "on the server has prevented the request from succeeding (get pods)\n", exit_code=1)
    done = clusterctl("-i", sim.inventory, "-o", "json", "quarantine", "gpu-a2", "--reason", "ecc", "--drain", "--yes")
    assert done.exit_code == 1, done.output
    report = json.loads(done.stdout)
    (host,) = report["hosts"]
    assert not host["ok"] and "drain of gpu-a2 stopped" in host["error"]
    assert host["slurm"] == "drained in Slurm node gpu-a2"
    state = sim.sh("scontrol -o show node gpu-a2", host="gpu-a2")[1]
    assert "DRAIN" in state and "Reason=clusterctl: ecc" in state
    assert "resume" in Path(report["undo_journal"]).read_text()  # undo takes the Slurm drain back too

    code, out = cli(sim, "quarantine", "gpu-a2", "--reason", "ecc", "--drain", "--yes")
    said = " ".join(out.split())
    assert code == 1 and "FAILED gpu-a2: drain of gpu-a2 stopped" in said
    assert "gpu-a2: slurm: already drained in Slurm" in said


def test_the_undo_command_goes_whole_on_a_line_of_its_own_at_80_columns(
        sim: KubeSim, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    monkeypatch.setenv("CLUSTERCTL_STATE_DIR", str(tmp_path / "state"))
    code, out = cli(sim, "quarantine", "gpu-a3", "--reason", "nvlink", "--yes")
    assert code == 0, out
    (journal,) = (tmp_path / "state" / "undo").glob("quarantine-*.json")
    lines = [line.strip() for line in out.splitlines()]
    assert "undo with:" in lines and f"clusterctl undo {journal}" in lines, out  # never split in two


def test_a_failed_pod_listing_is_one_clear_line_naming_node_control_plane_and_what_to_check(sim: KubeSim) -> None:
    """kubectl's klog noise, its own "error:" prefix and a terminal escape in its answer: the user reads one
    line saying what failed on which node through which control plane, kubectl's last line neutralised, and
    the command to check there; no nested "error:", no Python class name."""
    stderr = ("I1206 12:00:00.000000 1 request.go:1] slow request\n"
              "error: You must be logged in to the server (Unauthorized) \x1b]0;owned\x07\n")
    _answer_on_the_control_plane(sim, "spec.nodeName=gpu-a3", stderr=stderr, exit_code=1)
    done = clusterctl("-i", sim.inventory, "-o", "json", "quarantine", "gpu-a3", "--reason", "ecc", "--drain", "--yes")
    assert done.exit_code == 1, done.output
    (host,) = json.loads(done.stdout)["hosts"]
    assert host["error"] == (
        "drain of gpu-a3 stopped: the pods of node gpu-a3 could not be read through gpu-a1 (kubectl failed: You must "
        "be logged in to the server (Unauthorized) \\x1b]0;owned\\x07); check on gpu-a1 that 'sudo kubectl "
        "--kubeconfig /etc/kubernetes/admin.conf get pods --all-namespaces --field-selector spec.nodeName=gpu-a3 "
        "-o json' lists them")
    code, out = cli(sim, "quarantine", "gpu-a3", "--reason", "ecc", "--drain", "--yes")
    (failed,) = [line for line in " ".join(out.split("\n    ")).splitlines() if line.startswith("FAILED")]
    assert code == 1 and "\x1b" not in out and "\x07" not in out
    assert failed.startswith("FAILED gpu-a3: drain of gpu-a3 stopped: the pods of node gpu-a3 could not be read")
    assert "error:" not in failed and "Error:" not in failed and "request.go" not in failed


def test_the_undo_listing_names_the_quarantined_node_not_the_control_plane_that_ran_kubectl(
        sim: KubeSim, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CLUSTERCTL_STATE_DIR", str(tmp_path / "state"))
    code, out = cli(sim, "quarantine", "gpu-a2", "--reason", "nvlink", "--yes")  # a Slurm node too
    assert code == 0, out
    (journal,) = json.loads(clusterctl("-o", "json", "undo", "--list").stdout)["journals"]
    assert journal["hosts"] == ["gpu-a2"]  # its taint, cordon, annotations and Slurm drain, made from elsewhere
    listed = clusterctl("undo", "--list").stdout.splitlines()
    assert listed[-1].split()[1:] == ["gpu-a2", "-"]
    code, out = cli(sim, "undo", "--last", "quarantine", "--skip-checks", "--yes")
    assert code == 0, out
    assert "clusterctl.dev/unhealthy" not in json.dumps(sim.node("gpu-a2")["spec"].get("taints") or [])
