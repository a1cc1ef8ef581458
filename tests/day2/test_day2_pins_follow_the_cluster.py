"""The README's upgrade walk, then ``bootstrap plan``: the next bootstrap never downgrades the cluster.

After ``upgrade apply --to 1.36.3`` the demo inventory still pins 1.36.2. Bootstrap then refuses
(exit 2) naming what the hosts run and the pin, until the user moves the pin or asks for the
downgrade with ``--allow-downgrade``; it never passes ``--allow-downgrades`` to apt otherwise.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from clirun import clusterctl
from day2_helpers import DEMO, DEMO_SURVEY, installed, mock_cluster_folder

from clusterctl.transport.base import CommandResult, RunRequest


def _upgraded(state: Path) -> None:
    done = clusterctl("-i", DEMO, "upgrade", "apply", "--to", "1.36.3", "--yes", "--state-dir", state / "progress",
                      "--ready-timeout", "2")
    assert done.exit_code == 0, done.output


def _inventory_pinned_at(state: Path, tmp_path: Path, version: str) -> Path:
    """The demo inventory, its pin moved to ``version``, on the same mock hosts (as a user edits it)."""
    text = DEMO.read_text().replace('kubernetes: "1.36.2"', f'kubernetes: "{version}"')
    text = text.replace("profile: demo/", f"profile: {DEMO.parent / 'demo'}/")
    text = text.replace("defaults:\n", f"defaults:\n  mock_state: {mock_cluster_folder(state)}\n", 1)
    moved = tmp_path / "demo.yaml"
    moved.write_text(text)
    return moved


def test_after_the_readme_upgrade_walk_bootstrap_plan_plans_no_downgrade(bootstrapped_demo: Path,
                                                                         tmp_path: Path) -> None:
    _upgraded(bootstrapped_demo)
    plan = clusterctl("-i", DEMO, "bootstrap", "plan", "--survey", DEMO_SURVEY)
    assert plan.exit_code == 2, plan.output
    assert "--allow-downgrades" not in plan.output and "kubelet=1.36.2" not in plan.output
    error = plan.stderr.split("error: ", 1)[1]
    assert "gpu-a[1-3],gpu-b[1-3] run kubelet, kubeadm, kubectl 1.36.3-1.1" in error
    assert "pins kubelet, kubeadm, kubectl 1.36.2 (stack.kubernetes)" in error and "--allow-downgrade" in error
    assert "Traceback" not in plan.output
    # Said once, as the apply says it: not again per host in the phases, the findings and FAILED lines.
    assert " ".join(plan.output.split()).count("1.36.3-1.1") == 1, plan.output
    assert "PHASE [" not in plan.output and "DOWNGRADE_REFUSED" not in plan.output and "FAILED" not in plan.output

    # An apply refuses the same way before its first phase: no host changed, not even by the kernel phase
    # that comes before the packages'; no progress to resume.
    hosts = mock_cluster_folder(bootstrapped_demo) / "hosts"
    before = {p: p.read_bytes() for p in sorted(hosts.rglob("*")) if p.is_file()}
    applied = clusterctl("-i", DEMO, "bootstrap", "--survey", DEMO_SURVEY, "--yes", "--state-dir",
                         bootstrapped_demo / "fresh-progress")
    assert applied.exit_code == 2, applied.output
    assert "PHASE [" not in applied.output and "Nothing was changed." in applied.stderr
    assert "gpu-a[1-3],gpu-b[1-3] run kubelet, kubeadm, kubectl 1.36.3-1.1" in applied.stderr
    assert {p: p.read_bytes() for p in sorted(hosts.rglob("*")) if p.is_file()} == before
    assert not (bootstrapped_demo / "fresh-progress").exists()
    assert {installed(bootstrapped_demo, h, "kubelet") for h in ("gpu-a1", "gpu-b3")} == {"1.36.3-1.1"}

    # The user picks the running version: the plan is quiet about packages.
    moved = _inventory_pinned_at(bootstrapped_demo, tmp_path, "1.36.3")
    kept = clusterctl("-i", moved, "-o", "json", "bootstrap", "plan", "--survey", DEMO_SURVEY)
    assert kept.exit_code == 0, kept.output
    packages = [r for r in kept.json()["results"] if r["phase"] == "packages"]
    assert packages and all(r["status"] == "ok" and not r.get("changes") for r in packages)


def test_a_downgrade_is_planned_only_when_asked_for(bootstrapped_demo: Path) -> None:
    _upgraded(bootstrapped_demo)
    asked = clusterctl("-i", DEMO, "-l", "gpu-b3", "bootstrap", "plan", "--phase", "packages", "--allow-downgrade")
    assert asked.exit_code == 0, asked.output
    install = next(line for line in asked.stdout.splitlines() if line.startswith("$ apt-get install"))
    assert "--allow-downgrades" in install and "'kubelet=1.36.2-*'" in install
    assert "DOWNGRADE" in asked.stdout  # the plan says it goes back, as a warning

    done = clusterctl("-i", DEMO, "-l", "gpu-b3", "bootstrap", "phase", "packages", "--allow-downgrade", "--yes",
                      "--state-dir", bootstrapped_demo / "progress")
    assert done.exit_code == 0, done.output
    assert installed(bootstrapped_demo, "gpu-b3", "kubelet").startswith("1.36.2-")


def test_a_fresh_bootstrap_never_passes_allow_downgrades(_private_mock_state: Path) -> None:
    plan = clusterctl("-i", DEMO, "-l", "gpu-a1", "bootstrap", "plan", "--phase", "packages")
    assert plan.exit_code == 0, plan.output
    install = next(line for line in plan.stdout.splitlines() if line.startswith("$ apt-get install"))
    assert "'kubelet=1.36.2-*'" in install and "--allow-downgrades" not in install


def test_the_downgrade_check_reads_each_hosts_packages_once_for_the_run(bootstrapped_demo: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """The read that decides whether the pins would downgrade a host is the packages phase's first: a plan and
    a run that changes nothing ask each host's dpkg once, not twice (besides the run's record of the
    confirmation read, after its phases)."""
    from clusterctl.engine.confirm import TOKEN
    from clusterctl.engine.read_ahead import MARKER
    from clusterctl.mock.transport import MockTransport

    asked: dict[str, int] = {}
    execute = MockTransport.execute

    def counting(transport: MockTransport, request: RunRequest) -> CommandResult:
        read = "dpkg-query -W" in request.command and f"{MARKER} {TOKEN} " not in request.command
        asked[transport.host.name] = asked.get(transport.host.name, 0) + read
        return execute(transport, request)

    monkeypatch.setattr(MockTransport, "execute", counting)
    for argv in (["plan"], ["--yes", "--state-dir", str(bootstrapped_demo / "again")]):
        asked.clear()
        done = clusterctl("-i", DEMO, "bootstrap", *argv, "--survey", DEMO_SURVEY)
        assert done.exit_code == 0 and "PHASE [packages]" in done.output, done.output
        assert asked == dict.fromkeys(("gpu-a1", "gpu-a2", "gpu-a3", "gpu-b1", "gpu-b2", "gpu-b3"), 1), argv


def test_a_pin_below_the_cluster_is_blamed_not_a_to_nobody_gave(bootstrapped_demo: Path, tmp_path: Path) -> None:
    # 'upgrade plan' with no --to plans to the pin: a pin that would downgrade named '--to' as the culprit.
    pinned = _inventory_pinned_at(bootstrapped_demo, tmp_path, "1.36.1")
    plan = clusterctl("-i", pinned, "upgrade", "plan")
    assert plan.exit_code == 2 and plan.stdout == "", plan.output
    said = " ".join(plan.stderr.split())
    assert "field 'stack.kubernetes'" in said and "1.36.1 would be a downgrade" in said and "--to" not in said, said
    given = clusterctl("-i", pinned, "upgrade", "plan", "--to", "1.35.9")
    assert given.exit_code == 2 and "field '--to'" in given.stderr, given.output
