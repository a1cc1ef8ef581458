"""``clusterctl bootstrap`` as a user runs it: the demo plan, preflight's table, options, --out."""

from __future__ import annotations

import json
import os
import shlex
import shutil
from pathlib import Path
from typing import ClassVar

import pytest
from clirun import clusterctl as run_cli

from clusterctl.bootstrap import registry
from clusterctl.bootstrap.phase import Phase, PhaseContext
from clusterctl.bootstrap.registry import PhaseEntry, all_phases
from clusterctl.changes import Change
from clusterctl.secret import Secret

REPO = Path(__file__).resolve().parents[2]
DEMO = REPO / "inventories" / "demo.yaml"


def clusterctl(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    done = run_cli(*args)
    return done.exit_code, done.stdout, done.stderr


def test_demo_plan_works_with_no_cluster(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = clusterctl(["-i", str(DEMO), "bootstrap", "plan", "--phase", "preflight"], capsys)
    assert code == 0, err
    assert "PHASE [preflight]" in out and "PLAN RECAP" in out


@pytest.mark.parametrize("columns", [None, "80"])
def test_preflight_failure_is_one_table_and_exit_1(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                    monkeypatch: pytest.MonkeyPatch, columns: str | None) -> None:
    if columns:  # an 80-column terminal: each FAILED line wraps under itself, a line off a terminal stays whole
        monkeypatch.setenv("COLUMNS", columns)
    demo = tmp_path / "demo"
    shutil.copytree(REPO / "inventories" / "demo", demo)
    probe = demo / "profiles" / "net" / "gpu-b2" / "node-probe.txt"
    probe.write_text(probe.read_text().replace("### nvidia-driver\n535.154.05", "### nvidia-driver\n550.54.15"))
    inventory = tmp_path / "demo.yaml"
    inventory.write_text(DEMO.read_text())
    code, out, err = clusterctl(["-i", str(inventory), "bootstrap", "plan", "--phase", "preflight"], capsys)
    assert code == 1
    assert "DRIVER_PIN_MISMATCH" in out and "NVIDIA driver 550.54.15 is loaded, the stack pins 535.154.05" in out
    assert "FAILED gpu-b2: phase preflight" in err and "gpu-a1" not in err
    lines = err.splitlines()
    assert lines[0].startswith("FAILED gpu-b2: phase preflight: ") and len(lines) == (2 if columns else 1), err
    assert all(len(line) <= 80 and line.startswith("  ") for line in lines[1:]), err


def test_json_output_and_unknown_phase(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = clusterctl(["-i", str(DEMO), "-o", "json", "bootstrap", "plan", "--phase", "preflight",
                               "--only", "gpu-a*"], capsys)
    assert code == 0
    data = json.loads(out)
    assert data["mode"] == "plan" and data["hosts"] == ["gpu-a1", "gpu-a2", "gpu-a3"]
    assert data["recap"]["phases"][0] == {"phase": "preflight", "ok": 3, "changed": 0, "failed": 0, "skipped": 0,
                                          "duration_s": data["recap"]["phases"][0]["duration_s"]}
    code, _, err = clusterctl(["-i", str(DEMO), "bootstrap", "phase", "prefligth"], capsys)
    assert code == 2 and "Did you mean 'preflight'?" in err
    code, _, err = clusterctl(["-i", str(DEMO), "bootstrap", "--skip-phases", "kernal", "--dry-run"], capsys)
    assert code == 2 and "field '--skip-phases': bootstrap has no phase named 'kernal'" in err  # not 'phase'
    code, _, err = clusterctl(["-i", str(DEMO), "certs", "renew", "--skip-phases", "renw", "--dry-run"], capsys)
    assert code == 2 and "certs renew has no phase named 'renw'" in err  # not "this command has ..."
    code, _, err = clusterctl(["-i", str(DEMO), "bootstrap", "phase", "zzz"], capsys)
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert "field 'phase': bootstrap has no phase named 'zzz'" in err
    assert "Phases: preflight, kernel," in err and "verify, reset." in err
    code, _, err = clusterctl(["-i", str(DEMO), "bootstrap", "--skip-phases", ",".join(
        p.name for p in all_phases()), "--dry-run"], capsys)
    assert code == 2 and "--skip-phases leaves no phase to run" in err
    # upgrade names the typo before reading the cluster (the demo has none: that would be "no working cluster").
    for args in (["phase", "kubelte", "--yes"], ["apply", "--skip-phases", "kubelte", "--yes"],
                 ["plan", "--skip-phases", "x"]):
        code, _, err = clusterctl(["-i", str(DEMO), "upgrade", *args, "--to", "1.31.2"], capsys)
        assert code == 2 and "upgrade has no phase named" in err and "working cluster" not in err, (args, err)


def test_phases_are_listed_in_order(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = clusterctl(["-i", str(DEMO), "bootstrap", "phases"], capsys)
    assert code == 0 and out.splitlines()[1].startswith("preflight")


def test_demo_plan_of_every_phase_and_out_files(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "review"
    code, stdout, err = clusterctl(["-i", str(DEMO), "bootstrap", "plan", "--out", str(out)], capsys)
    assert code == 0, err
    for phase in ("preflight", "kernel", "packages", "containerd", "nvidia-runtime"):
        assert f"PHASE [{phase}]" in stdout
    # Six identical hosts: their plan is printed once, for all of them.
    assert "--- gpu-a[1-3],gpu-b[1-3] [containerd]: 3 change(s)" in stdout
    assert stdout.count("+++ HOST:/etc/containerd/config.toml") == 1 and "+version = 4" in stdout
    config = out / "gpu-b2" / "etc" / "containerd" / "config.toml"
    assert 'default_runtime_name = "nvidia"' in config.read_text()
    assert (out / "gpu-a1" / "etc" / "sysctl.d" / "99-clusterctl-kubernetes.conf").is_file()
    commands = (out / "gpu-a1" / "COMMANDS.sh").read_text()
    assert "apt-mark hold containerd.io kubelet kubeadm kubectl" in commands
    assert commands.index("modprobe br_netfilter") < commands.index("apt-get update") < commands.index(
        "systemctl restart containerd")


TOKEN = "q7x2ab.9f8e7d6c5b4a3210"


class SecretPhase(Phase[None]):
    """Listed in ``registry.PHASES`` for one test: a phase that handles a join token like the cluster phases."""

    name: ClassVar[str] = "test-join-config"
    description: ClassVar[str] = "writes a file holding a token"

    def check(self, ctx: PhaseContext) -> None:
        ctx.shared.join.token = Secret(os.environ["CLUSTERCTL_TEST_TOKEN"], "join token")

    def plan(self, ctx: PhaseContext, state: None) -> list[Change]:
        token = ctx.shared.join.token
        assert token is not None
        return [Change.run(ctx.host.name, "install -d -m 0755 /etc/kubernetes", summary="folder"),
                Change.write_file(ctx.host.name, "/etc/kubernetes/join.yaml",
                                  f"discovery:\n  bootstrapToken:\n    token: {token.reveal()}\n",
                                  current=None, mode=0o600),
                Change.run(ctx.host.name, "true", stdin_secret=token, summary=f"join with {token}")]


def test_no_secret_in_output_plan_out_files_logs_or_progress(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CLUSTERCTL_TEST_TOKEN", TOKEN)
    state = tmp_path / "state"
    monkeypatch.setenv("CLUSTERCTL_STATE_DIR", str(state))
    # The phase is listed as an on-demand one, and the phases read again from the list.
    monkeypatch.setattr(registry, "PHASES", (*registry.PHASES, PhaseEntry(f"{__name__}:SecretPhase", default=False)))
    monkeypatch.setattr(registry, "_loaded", None)
    seen = []
    for args in (["bootstrap", "plan", "--phase", "test-join-config", "--out", str(tmp_path / "out")],
                 ["-o", "json", "bootstrap", "plan", "--phase", "test-join-config"],
                 ["--debug", "bootstrap", "phase", "test-join-config"],
                 ["-o", "yaml", "bootstrap", "phase", "test-join-config", "--resume"]):
        code, out, err = clusterctl(["-i", str(DEMO), "-l", "gpu-a1", *args], capsys)
        assert code == 0, err
        seen += [out, err]
    files = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert any(p.name == "join.yaml" for p in files) and any(p.suffix == ".json" for p in files)
    texts = seen + [p.read_text() for p in files]
    assert all(TOKEN not in text for text in texts)
    assert any("token: ********" in text for text in texts)  # the masked file content is there to review
    assert any("join with ********" in text for text in texts)


def test_duplicate_hostnames_and_product_uuids_fail_both_hosts(tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    demo = tmp_path / "demo"
    shutil.copytree(REPO / "inventories" / "demo", demo)
    a1 = (demo / "profiles" / "net" / "gpu-a1" / "node-probe.txt").read_text()
    (demo / "profiles" / "net" / "gpu-b1" / "node-probe.txt").write_text(a1)  # a cloned disk image
    inventory = tmp_path / "demo.yaml"
    inventory.write_text(DEMO.read_text())
    code, out, _ = clusterctl(["-i", str(inventory), "-o", "json", "bootstrap", "plan", "--phase", "preflight"],
                                capsys)
    assert code == 1
    data = json.loads(out)
    codes = {(r["host"], f["code"]) for r in data["results"] for f in r["findings"]}
    for host in ("gpu-a1", "gpu-b1"):
        assert (host, "DUPLICATE_HOSTNAME") in codes and (host, "DUPLICATE_PRODUCT_UUID") in codes
    assert set(data["failed_hosts"]) == {"gpu-a1", "gpu-b1"}


def test_an_applying_run_writes_an_undo_journal_that_undo_reverts(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CLUSTERCTL_STATE_DIR", str(tmp_path / "state"))
    base = ["-i", str(DEMO), "-l", "gpu-a1"]
    code, out, err = clusterctl([*base, "-o", "json", "bootstrap", "phase", "kernel"], capsys)
    assert code == 0, err
    journal = json.loads(out)["undo_journal"]
    assert journal and Path(journal).parent == tmp_path / "state" / "undo"
    code, out, err = clusterctl([*base, "exec", "cat /etc/sysctl.d/99-clusterctl-kubernetes.conf"], capsys)
    assert code == 0 and "net.ipv4.ip_forward" in out
    code, out, err = clusterctl([*base, "undo", journal, "--yes"], capsys)
    assert "removed /etc/sysctl.d/99-clusterctl-kubernetes.conf (it was new)" in out
    # A module loaded now stays loaded (its boot-time file is gone): named with why, and undo exits 1.
    assert code == 1, out + err
    assert "gpu-a1: cannot undo 'load br_netfilter now': a loaded module stays loaded until the next boot" in out
    code, out, err = clusterctl([*base, "exec", "test -e /etc/sysctl.d/99-clusterctl-kubernetes.conf"], capsys)
    assert code != 0
    # A plan writes no journal: nothing changed.
    code, out, err = clusterctl([*base, "-o", "json", "bootstrap", "plan", "--phase", "kernel"], capsys)
    assert code == 0 and json.loads(out)["undo_journal"] is None


def test_a_plan_says_ok_only_for_what_it_checked(tmp_path: Path) -> None:
    """No "ok" beside NO_TOPOLOGY_LABELS warnings, none for verify (it checks after the changes)."""
    out = run_cli("-i", DEMO, "bootstrap", "plan").stdout

    def status_lines(phase: str) -> list[str]:
        block = out.split(f"PHASE [{phase}]", 1)[1].split("PHASE [", 1)[0]
        return [line for line in block.splitlines()[1:] if line and not line.startswith(("---", "+", "-", "$", "@"))]

    assert status_lines("topology-labels")[0] == "not done (NO_TOPOLOGY_LABELS: see findings): gpu-a[1-3],gpu-b[1-3]"
    assert status_lines("verify")[0] == "checks after the changes are applied: gpu-a1"
    assert status_lines("preflight")[0] == "ok: gpu-a[1-3],gpu-b[1-3]"  # its checks did run
    assert status_lines("nvidia-runtime")[0] == "nothing to change: gpu-a[1-3],gpu-b[1-3]"
    assert "no change" in out.split("PLAN RECAP", 1)[1].splitlines()[2]
    survey = tmp_path / "survey.json"
    run_cli("-i", DEMO, "survey", "-o", "json", "--save", survey)
    with_survey = run_cli("-i", DEMO, "bootstrap", "plan", "--survey", survey).stdout
    labels = with_survey.split("PHASE [topology-labels]", 1)[1].splitlines()[1]
    assert labels == "would change: gpu-a[1-3],gpu-b[1-3]"


@pytest.mark.parametrize("phase", ["reset", "kernel"])
def test_a_phase_refused_off_a_terminal_names_the_plan_of_that_phase(phase: str, monkeypatch: pytest.MonkeyPatch
                                                                     ) -> None:
    """'bootstrap plan' plans the default phases, never reset: the refusal names the plan that shows this phase."""
    monkeypatch.delenv("CLUSTERCTL_YES", raising=False)
    done = run_cli("-i", DEMO, "bootstrap", "phase", phase)
    assert done.exit_code == 2 and f"'clusterctl bootstrap plan --phase {phase}' shows" in done.stderr, done.output
    shown = run_cli("-i", DEMO, "bootstrap", "plan", "--phase", phase)
    assert shown.exit_code == 0 and f"PHASE [{phase}]" in shown.stdout, shown.output


def test_plan_out_that_is_no_folder_is_refused_before_the_plan(tmp_path: Path) -> None:
    """As 'bootstrap artifacts --out' refuses it: exit 2 naming the option, not an internal error after the plan."""
    taken = tmp_path / "review"
    taken.write_text("a file\n")
    done = run_cli("-i", DEMO, "bootstrap", "plan", "--out", taken)
    assert done.exit_code == 2, done.output
    assert f"--out {taken}: exists and is not a folder" in done.stderr and "internal error" not in done.stderr
    assert "PHASE" not in done.stdout


def test_plan_files_of_two_hosts_never_share_a_folder(tmp_path: Path) -> None:
    """Host names may hold ':' (IPv6-style) and '_': each host's files go under its own folder, named as
    every per-host file clusterctl writes is (``writable.host_file_name``)."""
    from clusterctl.bootstrap.run import write_plan_files
    from clusterctl.engine.run import HostPhaseResult, RunReport, Status

    report = RunReport("c", applied=False, phases=["kernel"], hosts=["n:1", "n_1"], results=[
        HostPhaseResult(host, "kernel", Status.CHANGED, changes=[Change.run(host, f"echo {host}", summary="say")])
        for host in ("n:1", "n_1")])
    written = write_plan_files(report, str(tmp_path))
    assert len({p.parent for p in written}) == 2
    assert (tmp_path / "n%3A1" / "COMMANDS.sh").read_text().endswith("echo n:1\n")


@pytest.mark.parametrize("subnet", ["pod_subnet: 10.0.0.0/16", "service_subnet: 10.0.1.0/24"])
def test_a_pod_or_service_range_that_holds_a_hosts_own_address_fails_preflight(
        subnet: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # Accepted before: the CNI or kube-proxy then routes the node's own address into the cluster network.
    shutil.copytree(REPO / "inventories" / "demo", tmp_path / "demo")
    inventory = tmp_path / "demo.yaml"
    inventory.write_text(DEMO.read_text() + f"\nbootstrap:\n  {subnet}\n")
    code, out, _ = clusterctl(["-i", str(inventory), "-o", "json", "bootstrap", "plan", "--phase", "preflight"],
                              capsys)
    data = json.loads(out)
    held = {r["host"]: f["message"] for r in data["results"] for f in r["findings"] if f["code"] == "SUBNET_HOLDS_HOST"}
    assert code == 1 and set(held) == {"gpu-b1", "gpu-b2", "gpu-b3"} | (
        {"gpu-a1", "gpu-a2", "gpu-a3"} if "pod" in subnet else set()), held
    assert subnet.split(":")[0] in held["gpu-b1"] and "10.0.1.11" in held["gpu-b1"]


@pytest.mark.parametrize(("run", "goes_on"), [
    (["bootstrap", "--skip-phases", "packages"], "bootstrap --skip-phases packages --resume --yes"),
    (["bootstrap", "phase", "kernel", "--only", "gpu-b*"], "bootstrap phase kernel --only 'gpu-b*' --resume --yes"),
    (["reset"], "reset --yes")])  # reset keeps no progress: it runs again
def test_an_interrupted_run_of_some_hosts_and_phases_goes_on_with_those(
        run: list[str], goes_on: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The line that goes on after Ctrl-C names the run's hosts and the phases it left out: it said
    'bootstrap --resume --yes', which ran every phase on every host of the inventory."""
    import signal

    from day2.interrupts import Cut, interrupted

    cut = Cut("kernel", "modprobe", host="gpu-b1") if run[0] == "bootstrap" else Cut("reset", "", host="gpu-b1")
    cut_short = interrupted(monkeypatch, cut, signal.SIGINT, "-i", DEMO, "-l", "gpu-b1,gpu-b2", *run, "--yes")
    assert f"to go on where it stopped: clusterctl -i {DEMO} -l gpu-b1,gpu-b2 {goes_on}" in cut_short.stderr, \
        cut_short.stderr
    went_on = run_cli("-i", DEMO, "-o", "json", "-l", "gpu-b1,gpu-b2", *shlex.split(goes_on)).json()
    assert went_on["hosts"] == ["gpu-b1", "gpu-b2"] and "packages" not in went_on["phases"]


@pytest.mark.parametrize(("run", "kept"), [
    (["bootstrap", "--allow-downgrade", "--without-survey"], "bootstrap --allow-downgrade --state-dir {state} "
     "--without-survey --resume --yes"),
    (["reset", "--restore-containerd", "--force", "--purge-packages"],
     "reset --restore-containerd --force --purge-packages --state-dir {state} --yes")])
def test_an_interrupted_run_goes_on_with_the_options_it_was_given(
        run: list[str], kept: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The line that goes on after Ctrl-C keeps the run's own --state-dir and the options that change what it does:
    it dropped them, so the run it printed read another state folder (no progress there: it started over) and
    installed no pin below what a host runs, or left what reset was told to remove, purge or restore."""
    import signal

    from day2.interrupts import Cut, interrupted

    state = tmp_path / "my state"
    cut = Cut("kernel", "modprobe", host="gpu-a1") if run[0] == "bootstrap" else Cut("reset", "", host="gpu-a1")
    cut_short = interrupted(monkeypatch, cut, signal.SIGINT, "-i", DEMO, "-l", "gpu-a1", *run[:1], "--state-dir",
                            state, *run[1:], "--yes")
    goes_on = kept.format(state=shlex.quote(str(state)))
    assert f"to go on where it stopped: clusterctl -i {DEMO} -l gpu-a1 {goes_on}" in cut_short.stderr, cut_short.stderr
    went_on = run_cli("-i", DEMO, "-o", "json", "-l", "gpu-a1", *shlex.split(goes_on))
    assert went_on.exit_code == 0, went_on.output
    notes = went_on.json()["notes"]  # reset keeps no progress
    assert run[0] == "reset" or any(note.startswith(f"progress kept in {state}") for note in notes), notes


@pytest.mark.parametrize("run", [["bootstrap", "plan"], ["bootstrap", "--dry-run"], ["reset", "--dry-run"]])
def test_an_interrupted_plan_names_no_command_that_changes_hosts(run: list[str], monkeypatch: pytest.MonkeyPatch
                                                                 ) -> None:
    """A plan or dry run cut short has nothing to go on with: it said 'to go on where it stopped: clusterctl
    bootstrap --resume --yes' (or 'clusterctl reset --yes'), which changes the hosts the user only meant to look at."""
    import signal

    from day2.interrupts import Cut, interrupted

    cut = Cut("read", "lsmod" if run[0] == "bootstrap" else "", host="gpu-a1")
    cut_short = interrupted(monkeypatch, cut, signal.SIGINT, "-i", DEMO, "-l", "gpu-a1", *run)
    assert "interrupted (SIGINT)" in cut_short.stderr and "--yes" not in cut_short.stderr, cut_short.stderr
