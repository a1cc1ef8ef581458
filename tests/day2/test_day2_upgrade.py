"""``clusterctl upgrade plan|apply`` on the demo mock cluster after bootstrap."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from clirun import clusterctl
from day2_helpers import DEMO, installed, mock_cluster_folder, set_fault, state_digest, unconfirmed
from demo_cluster import KUBECTL, kubectl_apply, trainer_with_budget

from clusterctl.transport.base import CommandResult, RunRequest


def _run(*args: str | Path) -> Any:
    return clusterctl("-i", DEMO, *args)


def _json(*args: str | Path) -> dict[str, Any]:
    done = _run("-o", "json", *args)
    assert done.exit_code in (0, 1), done.output
    data: dict[str, Any] = done.json()
    return data


def _apply(state: Path, *args: str) -> Any:
    return _run("upgrade", "apply", "--yes", "--state-dir", state / "progress", "--ready-timeout", "2", *args)


def test_the_next_patch_plans_every_node_in_kubeadms_order_then_converges(bootstrapped_demo: Path) -> None:
    plan = _json("upgrade", "plan", "--to", "1.36.3")
    assert (plan["current"], plan["target"], plan["nothing_to_do"]) == ("1.36.2", "1.36.3", False)
    assert [h["host"] for h in plan["hosts"]] == ["gpu-a1", "gpu-a2", "gpu-a3", "gpu-b1", "gpu-b2", "gpu-b3"]
    first = plan["hosts"][0]
    assert first["role"] == "first control plane"
    assert [s["step"] for s in first["steps"]] == ["kubeadm", "kubeadm-upgrade", "drain", "kubelet", "restart-kubelet",
                                                    "ready", "uncordon"]
    commands = [c["command"] for s in first["steps"] for c in s["changes"] if "command" in c]
    assert commands.index("kubeadm upgrade plan v1.36.3 --config /dev/stdin") < \
        commands.index("kubeadm upgrade apply v1.36.3 --config /dev/stdin --yes")
    # kubeadm's documented line, the lists refreshed before the install: a site's one mirror gains
    # the target after the bring-up read its lists (seen on the real nodes).
    kubeadm = next(c for c in commands if "'kubeadm=1.36.3-*'" in c)
    assert kubeadm.startswith("apt-mark unhold kubeadm && apt-get update ") and \
        kubeadm.index("apt-get update") < kubeadm.index("apt-get install") and kubeadm.endswith("apt-mark hold kubeadm")
    # Both apt calls wait for a dpkg lock another process holds (unattended-upgrades), as bootstrap's do.
    assert kubeadm.count("-o DPkg::Lock::Timeout=") == 2, kubeadm
    worker = plan["hosts"][3]
    assert [c["command"] for c in worker["steps"][1]["changes"]] == ["kubeadm upgrade node --config /dev/stdin"]
    assert worker["steps"][2]["runs_on"] == "gpu-a1" and "cordon gpu-b1" in worker["steps"][2]["changes"][0]["command"]
    human = _run("upgrade", "plan", "--to", "1.36.3")
    assert "PLAN (nothing was changed)" in human.stdout
    # What a step would wait for, in the one wording of every plan (remove-node, certs renew, heal --dry-run).
    assert "      (wait: " in human.stdout and "      wait: " not in human.stdout, human.stdout

    done = _apply(bootstrapped_demo, "--to", "1.36.3")
    assert done.exit_code == 0, done.output
    assert "upgraded: every node runs 1.36.3" in done.stdout
    assert installed(bootstrapped_demo, "gpu-b3", "kubelet") == "1.36.3-1.1"
    again = _json("upgrade", "plan", "--to", "1.36.3")
    assert again["nothing_to_do"] is True
    assert all(h["status"] == "up to date" for h in again["hosts"])
    assert "nothing to do" in _run("upgrade", "plan", "--to", "1.36.3").stdout


def test_the_next_minor_moves_the_apt_source_and_keeps_the_nvidia_runtime(bootstrapped_demo: Path) -> None:
    plan = _json("upgrade", "plan", "--to", "1.37.2")
    first = plan["hosts"][0]["steps"][0]["changes"]
    source = next(c for c in first if c.get("path") == "/etc/apt/sources.list.d/clusterctl-kubernetes.sources")
    assert "+URIs: https://pkgs.k8s.io/core:/stable:/v1.37/deb/" in source["diff"]
    done = _apply(bootstrapped_demo, "--to", "1.37.2", "--max-unavailable", "3")
    assert done.exit_code == 0, done.output
    from clusterctl.mock.state import HostState

    host = HostState(mock_cluster_folder(bootstrapped_demo) / "hosts" / "gpu-a2", "gpu-a2")
    config = (host.fs.read("/etc/containerd/config.toml") or b"").decode()
    assert "runtimes.nvidia" in config and "pause:3.10.2" in config
    assert _json("upgrade", "plan", "--to", "1.37.2")["nothing_to_do"] is True
    # A minor whose repository the mirror lacks (404) is a warning in words: it said "error: OSError: curl: ...".
    unread = _run("upgrade", "plan", "--to", "1.38.0")
    assert "UPGRADE_REPOSITORY_UNREAD" in unread.stdout, unread.output
    assert "OSError" not in unread.output and "gpu-a1: error: " not in unread.stdout, unread.stdout


def test_a_skipped_minor_a_downgrade_and_a_missing_version_are_refused(bootstrapped_demo: Path) -> None:
    skipped = _run("upgrade", "plan", "--to", "1.38.0")
    assert skipped.exit_code == 2 and "one minor at a time" in skipped.stderr and "1.37" in skipped.stderr
    down = _run("upgrade", "apply", "--to", "1.35.4", "--yes")
    assert down.exit_code == 2 and "downgrade" in down.stderr
    missing = _run("upgrade", "plan", "--to", "1.37.9")
    assert missing.exit_code == 2
    assert "1.37.9 is not in the pinned repository" in missing.stderr and "1.37.2-1.1" in missing.stderr
    assert _run("upgrade", "plan", "--to", "one.two").exit_code == 2
    assert unconfirmed("-i", DEMO, "upgrade", "apply", "--to", "1.36.3").exit_code == 2  # no terminal, no --yes


def test_an_api_server_image_pinned_by_digest_reads_its_tag_or_says_it_has_none(bootstrapped_demo: Path) -> None:
    from clusterctl.mock.state import HostState

    fs = HostState(mock_cluster_folder(bootstrapped_demo) / "hosts" / "gpu-a1", "gpu-a1").fs
    manifest = "/etc/kubernetes/manifests/kube-apiserver.yaml"
    text = (fs.read(manifest) or b"").decode()
    digest = "sha256:" + "0123456789abcdef" * 4
    tagged = "registry.k8s.io/kube-apiserver:v1.36.2"
    assert tagged in text
    fs.write(manifest, text.replace(tagged, f"{tagged}@{digest}").encode(), mode=0o600)
    plan = _json("upgrade", "plan", "--to", "1.36.3")
    assert (plan["current"], plan["target"]) == ("1.36.2", "1.36.3")
    fs.write(manifest, text.replace(tagged, f"registry.k8s.io/kube-apiserver@{digest}").encode(), mode=0o600)
    untagged = _run("upgrade", "plan", "--to", "1.36.3")
    # The manifest names no version: the read fails (exit 1, as an image without a tag), the digest no version.
    assert untagged.exit_code == 1 and "pinned by digest, without a tag naming its version" in untagged.stderr
    assert "is not a Kubernetes version" not in untagged.stderr, untagged.stderr


def test_kubeadm_upgrade_node_puts_back_the_manifests_it_would_write(bootstrapped_demo: Path) -> None:
    # Simulated as kubeadm does it (phases/upgrade/staticpods.go): each manifest is compared with the one it would
    # write, a different one replaced; no version is read from it, so a hand edit at the cluster's version goes too.
    from clusterctl.mock.state import HostState

    fs = HostState(mock_cluster_folder(bootstrapped_demo) / "hosts" / "gpu-a1", "gpu-a1").fs
    manifest = "/etc/kubernetes/manifests/kube-apiserver.yaml"
    text = (fs.read(manifest) or b"").decode()
    tagged = "registry.k8s.io/kube-apiserver:v1.36.2"
    for edited in (text + "    args: [--profiling=true]\n", text.replace(tagged, f"{tagged}@sha256:{'ab' * 32}")):
        fs.write(manifest, edited.encode(), mode=0o600)
        done = _run("-l", "gpu-a1", "exec", "--sudo", "kubeadm", "upgrade", "node")
        assert done.exit_code == 0 and (fs.read(manifest) or b"").decode() == text, done.output


def test_plan_and_dry_run_change_nothing(bootstrapped_demo: Path) -> None:
    before = state_digest(bootstrapped_demo)
    assert _run("upgrade", "plan", "--to", "1.37.2").exit_code == 0
    assert _run("upgrade", "apply", "--to", "1.37.2", "--dry-run", "--yes").exit_code == 0
    assert state_digest(bootstrapped_demo) == before


def test_a_drain_that_cannot_finish_stops_the_rollout_and_resume_finishes_it(bootstrapped_demo: Path,
                                                                               tmp_path: Path) -> None:
    kubectl_apply(DEMO, tmp_path, trainer_with_budget(6))
    done = _apply(bootstrapped_demo, "--to", "1.36.3", "--drain-timeout", "1")
    assert done.exit_code == 1
    # The first node with a Ready pod of the budget stops the rollout (a pod not Ready yet may go).
    stopped = done.stderr.split("STOPPED: ", 1)[1]
    host = stopped.split(":", 1)[0]
    assert stopped.startswith(f"{host}: phase drain: ") and "disruption budget" in stopped, done.stderr
    assert installed(bootstrapped_demo, host, "kubeadm") == "1.36.3-1.1"  # done before the drain
    assert installed(bootstrapped_demo, host, "kubelet") == "1.36.2-1.1"  # stopped before its kubelet
    assert installed(bootstrapped_demo, "gpu-b3", "kubeadm") == "1.36.2-1.1"  # not touched
    assert _run("-l", "gpu-a1", "exec", "--", f"{KUBECTL} delete pdb trainer").exit_code in (0, 1)
    assert _run("-l", "gpu-a1", "exec", "--", f"{KUBECTL} apply -f /root/trainer.yaml").exit_code == 0
    kubectl_apply(DEMO, tmp_path, trainer_with_budget(1))
    resumed = _apply(bootstrapped_demo, "--resume")
    assert resumed.exit_code == 0, resumed.output
    assert _json("upgrade", "plan", "--to", "1.36.3")["nothing_to_do"] is True  # gpu-a1 uncordoned again


def test_a_node_cordoned_before_the_upgrade_is_upgraded_and_left_cordoned(bootstrapped_demo: Path) -> None:
    assert _run("-l", "gpu-a1", "exec", "--", f"{KUBECTL} cordon gpu-b2").exit_code == 0
    done = _apply(bootstrapped_demo, "--to", "1.36.3", "-o", "json")
    assert done.exit_code == 0, done.output
    hosts = {h["host"]: h for h in done.json()["hosts"]}
    assert "uncordon" not in [s["step"] for s in hosts["gpu-b2"]["steps"]]
    assert "left cordoned" in hosts["gpu-b2"]["message"]
    assert _json("upgrade", "plan", "--to", "1.36.3")["nothing_to_do"] is True


def test_a_node_that_stays_not_ready_is_named_and_left_cordoned(bootstrapped_demo: Path) -> None:
    set_fault(bootstrapped_demo, "gpu-a2", "kubelet", "not-ready")
    done = _apply(bootstrapped_demo, "--to", "1.36.3", "-o", "json")
    assert done.exit_code == 1
    hosts = {h["host"]: h for h in done.json()["hosts"]}
    assert hosts["gpu-a2"]["status"] == "failed"
    assert "phase ready: gpu-a2 Ready at v1.36.3 (up to 2 s): not there after 2 s" in hosts["gpu-a2"]["message"]
    assert "stays cordoned" in hosts["gpu-a2"]["message"]
    assert {hosts[h]["status"] for h in ("gpu-a3", "gpu-b1", "gpu-b2", "gpu-b3")} == {"not started"}
    assert _run("upgrade", "apply", "--resume", "--to", "1.37.2", "--yes", "--state-dir",
                bootstrapped_demo / "progress").exit_code == 2


def test_a_host_another_run_holds_is_refused_before_anything_changes(bootstrapped_demo: Path) -> None:
    """upgrade apply takes bootstrap's per-host lock on every node: a bootstrap (or a second upgrade)
    working on gpu-b2 stops it before the first change, and the locks it took are given back."""
    from clusterctl.mock.state import HostState

    other = ('{"control_host": "admin-box", "owner": "ops", "pid": 4242, "run_id": "another-run", '
             '"started": "2099-01-01T00:00:00+00:00"}\n')
    lock = "/var/lib/clusterctl/bootstrap.lock"
    hosts = mock_cluster_folder(bootstrapped_demo) / "hosts"
    HostState(hosts / "gpu-b2", "gpu-b2").fs.write(lock, other.encode())
    done = _apply(bootstrapped_demo, "--to", "1.36.3", "-o", "json")
    assert done.exit_code == 1
    assert "gpu-b2: lock: locked by ops@admin-box" in done.json()["stopped"]
    assert {h["status"] for h in done.json()["hosts"]} == {"not started"}
    assert installed(bootstrapped_demo, "gpu-a1", "kubeadm") == "1.36.2-1.1"
    for name in ("gpu-a1", "gpu-a2", "gpu-a3", "gpu-b1", "gpu-b3"):
        assert HostState(hosts / name, name).fs.read(lock) is None
    assert HostState(hosts / "gpu-b2", "gpu-b2").fs.read(lock) == other.encode()  # never someone else's


def test_a_host_that_does_not_answer_fails_the_plan_and_stops_the_apply_before_anything_changes(
        bootstrapped_demo: Path) -> None:
    assert _run("-l", "gpu-b2", "mock", "set", "power=off").exit_code == 0
    plan = _run("upgrade", "plan", "--to", "1.36.3")
    assert plan.exit_code == 1, plan.output
    assert "STOPPED: gpu-b2: phase kubeadm: unreachable" in plan.stderr
    assert "could not be planned" in plan.output and "to carry it out" not in plan.output
    done = _apply(bootstrapped_demo, "--to", "1.36.3", "-o", "json")
    assert done.exit_code == 1, done.output
    assert done.json()["stopped"].startswith("gpu-b2: lock: ")
    assert {h["status"] for h in done.json()["hosts"]} == {"not started"}
    assert installed(bootstrapped_demo, "gpu-a1", "kubeadm") == "1.36.2-1.1"


def test_a_host_that_is_not_a_node_is_printed_with_its_fix_and_fails_the_plan_as_every_report_does(
        bootstrapped_demo: Path) -> None:
    for node in ("gpu-a2", "gpu-a3", "gpu-b2", "gpu-b3"):
        gone = _run("-l", "gpu-a1", "exec", "--sudo", "--", f"{KUBECTL} delete node {node}")
        assert gone.exit_code == 0, gone.output
    for command in (("upgrade", "plan"), ("upgrade", "apply", "--yes")):
        run = _run(*command, "--to", "1.36.3")
        lines = run.stdout.splitlines()
        at = lines.index("ERROR   gpu-b3 UPGRADE_NODE_MISSING: gpu-b3 is not a node of the cluster")
        assert lines[at + 1] == "        fix: Add it with 'clusterctl bootstrap' before upgrading.", run.output
        # An error finding is exit 1, a plan's too (the apply stops on it): never "carry it out", exit 0.
        assert run.exit_code == 1, run.output
        assert "to carry it out" not in run.output
    # The apply stops on the first three and says how many more there are (it said nothing of the fourth).
    assert run.stderr.splitlines()[-1].endswith("gpu-b2 is not a node of the cluster (+1 more)"), run.output
    assert "PLAN (nothing was changed): errors found (above)" in _run("upgrade", "plan", "--to", "1.36.3").stdout
    plan = _run("-o", "json", "upgrade", "plan", "--to", "1.36.3")
    assert (plan.exit_code, plan.json()["ok"]) == (1, False), plan.output
    # And its help says so.
    assert "Exits 1 when a node cannot be planned or it finds an error" in " ".join(
        clusterctl("upgrade", "plan", "-h").stdout.split())


def test_plan_and_apply_read_each_nodes_packages_once_then_once_after_each_package_change(
        bootstrapped_demo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The pre-check's read (would the target downgrade a node?) is the one the node's first phases use;
    only what changed the packages is read again (a plan, which changes nothing, reads them once)."""
    from clusterctl.mock.transport import MockTransport

    asked: dict[str, list[str]] = {}
    execute = MockTransport.execute

    def recording(transport: MockTransport, request: RunRequest) -> CommandResult:
        line = request.command
        step = "read" if "dpkg-query -W" in line else "install" if "apt-get install" in line else ""
        asked.setdefault(transport.host.name, []).extend([step] if step else [])
        return execute(transport, request)

    monkeypatch.setattr(MockTransport, "execute", recording)
    plan = _run("upgrade", "plan", "--to", "1.36.3")
    assert plan.exit_code == 0, plan.output
    assert asked == {host: ["read"] for host in ("gpu-a1", "gpu-a2", "gpu-a3", "gpu-b1", "gpu-b2", "gpu-b3")}, asked
    asked.clear()
    done = _apply(bootstrapped_demo, "--to", "1.36.3")
    assert done.exit_code == 0, done.output
    assert sorted(asked) == ["gpu-a1", "gpu-a2", "gpu-a3", "gpu-b1", "gpu-b2", "gpu-b3"]
    # kubeadm's install, kubelet's install: each read by the next phase, nothing read twice in between.
    assert all(steps == ["read", "install", "read", "install", "read"] for steps in asked.values()), asked




def test_an_apply_stopped_before_it_starts_has_something_to_do(bootstrapped_demo: Path) -> None:
    """An error finding (a host no node of the cluster) stops the apply before any node is planned: its JSON
    does not say there is nothing to do (as a failed remove-node's does not), nor does its text."""
    gone = _run("-l", "gpu-a1", "exec", "--sudo", "--", f"{KUBECTL} delete node gpu-b3")
    assert gone.exit_code == 0, gone.output
    done = _apply(bootstrapped_demo, "--to", "1.36.3", "-o", "json")
    assert (done.exit_code, done.json()["ok"], done.json()["nothing_to_do"]) == (1, False, False), done.output
    assert "nothing to do" not in _apply(bootstrapped_demo, "--to", "1.36.3").output


@pytest.mark.parametrize("command", [("bootstrap",), ("certs", "renew"), ("upgrade", "apply", "--to", "1.37.2")])
def test_resume_with_dry_run_is_refused_in_one_sentence(command: tuple[str, ...], tmp_path: Path) -> None:
    # Three wordings before; 'upgrade apply --dry-run --resume' spoke of 'upgrade plan', which nobody typed.
    refused = _run(*command, "--dry-run", "--resume", "--state-dir", str(tmp_path))
    assert refused.exit_code == 2
    assert "--resume only makes sense for a run that applies (not with --dry-run or plan)" in refused.stderr
    assert not any(tmp_path.iterdir())


def test_one_phase_or_phases_left_out_never_say_the_nodes_run_the_target(bootstrapped_demo: Path) -> None:
    """'upgrade phase NAME' and --skip-phases run part of the upgrade: a node they leave at 1.36.2 is not said
    to be upgraded or up to date, nor every node to run 1.36.3 (it said both)."""
    node_phases = "kubeadm,kubeadm-upgrade,drain,kubelet,restart-kubelet,ready,uncordon"
    rest = _json("upgrade", "plan", "--to", "1.36.3", "--skip-phases", node_phases)
    assert {h["status"] for h in rest["hosts"]} == {"nothing to do"}, rest["hosts"]
    for planned in (_run("upgrade", "plan", "--to", "1.36.3", "--skip-phases", node_phases),
                    _run("upgrade", "phase", "network", "--to", "1.36.3", "--dry-run")):
        assert planned.exit_code == 0 and "every node runs" not in planned.stdout, planned.output
        assert "up to date" not in planned.stdout and "nothing to do in phase" in planned.stdout, planned.stdout
    done = _run("upgrade", "phase", "uncordon", "--to", "1.36.3", "-l", "gpu-b3", "--yes",
                "--state-dir", bootstrapped_demo / "progress")
    assert done.exit_code == 0, done.output
    assert "upgraded" not in done.stdout and "every node runs" not in done.stdout, done.stdout
    assert "gpu-b3           changed" in done.stdout and "done: phase uncordon" in done.stdout, done.stdout
    assert installed(bootstrapped_demo, "gpu-b3", "kubelet").startswith("1.36.2")


def test_leaving_out_only_the_cluster_add_ons_still_upgrades_every_node(bootstrapped_demo: Path) -> None:
    # network and gpu-addons run once for the cluster, after the nodes: without them every node still runs the
    # target, and a plan after it finds the nodes up to date (the real-node upgrade walk skips both).
    skipped = ("--skip-phases", "network,gpu-addons")
    planned = _json("upgrade", "plan", "--to", "1.36.3", *skipped)
    assert {h["status"] for h in planned["hosts"]} == {"planned"}, planned["hosts"]
    done = _run("upgrade", "apply", "--to", "1.36.3", *skipped, "--yes", "--state-dir", bootstrapped_demo / "p")
    assert done.exit_code == 0 and "upgraded: every node runs 1.36.3" in done.stdout, done.output
    again = _json("upgrade", "plan", "--to", "1.36.3", *skipped)
    assert {h["status"] for h in again["hosts"]} == {"up to date"}, again["hosts"]


def test_workers_alone_never_go_a_minor_past_the_control_plane(bootstrapped_demo: Path) -> None:
    # Kubernetes' version skew policy: a kubelet is never newer than its API server. '-l' with workers alone
    # planned (and applied) kubelet 1.37.2 under an API server at 1.36.2.
    before = state_digest(bootstrapped_demo)
    for command in (("upgrade", "plan"), ("upgrade", "apply", "--yes")):
        refused = _run(*command, "--to", "1.37.2", "-l", "gpu-b3")
        assert refused.exit_code == 2 and refused.stdout == "", refused.output
        assert "the control plane runs 1.36.2" in refused.stderr and "gpu-a1" in refused.stderr, refused.stderr
    assert state_digest(bootstrapped_demo) == before
    # A patch, or the first control plane in the selection (it goes first), is the supported way.
    assert _run("upgrade", "plan", "--to", "1.36.3", "-l", "gpu-b3").exit_code == 0
    assert _run("upgrade", "plan", "--to", "1.37.2", "-l", "gpu-a1,gpu-b3").exit_code == 0


def test_a_plan_of_part_of_the_upgrade_names_the_command_that_runs_that_part(bootstrapped_demo: Path) -> None:
    # It named 'upgrade apply --to X', which runs every phase on every node, under a plan of one phase.
    phase = _run("upgrade", "phase", "drain", "--to", "1.36.3", "-l", "gpu-b3", "--dry-run")
    assert phase.exit_code == 0, phase.output
    assert f"run 'clusterctl -i {DEMO} -l gpu-b3 upgrade phase drain --to 1.36.3' to carry it out" in phase.stdout, \
        phase.stdout
    # After the upgrade, under the note that the inventory still pins 1.36.2, it said "with the inventory's pins".
    assert _apply(bootstrapped_demo, "--to", "1.36.3").exit_code == 0
    done = _run("upgrade", "plan", "--to", "1.36.3")
    assert "nothing to do: every node runs 1.36.3, the rest of its stack as the inventory pins it" in done.stdout
    skipped = _run("upgrade", "plan", "--to", "1.37.2", "--skip-phases", "drain,uncordon")
    assert f"run 'clusterctl -i {DEMO} upgrade apply --to 1.37.2 --skip-phases drain,uncordon' to carry it out" in \
        skipped.stdout, skipped.stdout
    # It dropped --max-unavailable: the apply it named upgraded the workers one at a time, not as the plan showed.
    batched = _run("upgrade", "plan", "--to", "1.37.2", "--max-unavailable", "2")
    assert f"run 'clusterctl -i {DEMO} upgrade apply --to 1.37.2 --max-unavailable 2' to carry it out" in \
        batched.stdout, batched.stdout


def test_a_control_plane_left_a_minor_behind_stops_the_next_minor(bootstrapped_3cp: Path) -> None:
    # A rollout that stopped after the first control plane leaves the others a minor behind. The version was read
    # on the first alone, so the next minor was planned (and applied): gpu-a2 two minors at once, its API server
    # two minors from the first's, where kubeadm and Kubernetes' skew policy allow one.
    inventory = str(bootstrapped_3cp)
    (manifest,) = Path(os.environ["CLUSTERCTL_MOCK_STATE"]).rglob(
        "gpu-a2/fs/etc/kubernetes/manifests/kube-apiserver.yaml")
    manifest.write_text(manifest.read_text().replace(":v1.36.2", ":v1.35.9"))
    before = state_digest(Path(os.environ["CLUSTERCTL_MOCK_STATE"]))
    for command in (("upgrade", "plan"), ("upgrade", "apply", "--yes")):
        refused = clusterctl("-i", inventory, *command, "--to", "1.37.2")
        assert refused.exit_code == 2 and refused.stdout == "", refused.output
        assert "the cluster runs 1.35.9; 1.37.2 skips" in refused.stderr, refused.stderr
    assert state_digest(Path(os.environ["CLUSTERCTL_MOCK_STATE"])) == before
    plan = clusterctl("-i", inventory, "-o", "json", "upgrade", "plan", "--to", "1.36.3")
    assert plan.exit_code == 0 and plan.json()["current"] == "1.35.9", plan.output


def test_a_control_plane_whose_version_cannot_be_read_stops_the_plan_and_the_apply(bootstrapped_3cp: Path) -> None:
    # The oldest control plane's version was read on every control plane, but one that did not answer (or whose
    # manifest could not be read) was left out in silence: the next minor was counted from the others, and a
    # gpu-a2 a minor behind would have been taken two minors at once.
    inventory, state = str(bootstrapped_3cp), Path(os.environ["CLUSTERCTL_MOCK_STATE"])
    (manifest,) = state.rglob("gpu-a2/fs/etc/kubernetes/manifests/kube-apiserver.yaml")
    text = manifest.read_text()
    digest = "sha256:" + "0123456789abcdef" * 4
    manifest.write_text(text.replace("kube-apiserver:v1.36.2", f"kube-apiserver@{digest}"))
    before = state_digest(state)
    for command in (("upgrade", "plan"), ("upgrade", "apply", "--yes")):
        refused = clusterctl("-i", inventory, *command, "--to", "1.37.2")
        assert refused.exit_code == 1 and refused.stdout == "", refused.output
        assert "cannot read the API server's version: the control plane gpu-a2 answered, but the read failed" in \
            refused.stderr and "pinned by digest" in refused.stderr, refused.stderr
    assert state_digest(state) == before
    manifest.unlink()  # no API server there (a control plane not joined yet): none to count, as before
    plan = clusterctl("-i", inventory, "-l", "gpu-a1", "-o", "json", "upgrade", "plan", "--to", "1.36.3")
    assert plan.exit_code == 0 and plan.json()["current"] == "1.36.2", plan.output
    manifest.write_text(text)
    assert clusterctl("-i", inventory, "-l", "gpu-a2", "mock", "set", "power=off").exit_code == 0
    before = state_digest(state)
    down = clusterctl("-i", inventory, "-l", "gpu-a1", "upgrade", "apply", "--yes", "--to", "1.37.2")
    assert down.exit_code == 1 and down.stdout == "", down.output
    assert "cannot read the API server's version: the control plane gpu-a2 was not reached (unreachable" in \
        down.stderr, down.stderr
    assert state_digest(state) == before


def test_an_empty_to_is_refused_not_taken_for_the_pin(bootstrapped_demo: Path) -> None:
    # A script's unset variable (--to "$VERSION") planned the inventory's pin as if --to was not given.
    for command in (("upgrade", "plan"), ("upgrade", "apply", "--yes")):
        empty = _run(*command, "--to", "")
        assert empty.exit_code == 2 and empty.stdout == "", empty.output
        assert "'' is not a Kubernetes version" in empty.stderr, empty.stderr
