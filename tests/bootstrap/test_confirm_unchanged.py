"""A re-run reads a host its phases last found in order with one batched read, and skips it only
when the host answers exactly as then; a host that drifted runs every phase and is repaired.

The demo cluster, bootstrapped once with its survey. The second run is what adding a node, or
a cron job re-applying the cluster, looks like: the workers answer one batched read each and
are skipped (``unchanged since the last run``), the first control plane runs its phases (its
join token is fresh each run). Then gpu-b2 drifts as a host does (a module unloaded, a package
unheld, containerd's config deleted) and a plain ``bootstrap`` repairs it; gpu-b3's inventory
entry changes and it is read in full again, while the others stay skipped.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from clirun import REPO_ROOT, clusterctl

SURVEY = REPO_ROOT / "tests" / "bootstrap_cluster" / "fixtures" / "demo-survey.json"
WORKERS = ["gpu-a2", "gpu-a3", "gpu-b1", "gpu-b2", "gpu-b3"]
CONFIRMED = "unchanged since the last run: the host answers its phases' reads as then (one batched read)"


def _inventory(tmp_path: Path) -> Path:
    (tmp_path / "demo").symlink_to(REPO_ROOT / "inventories" / "demo")
    inventory = tmp_path / "demo.yaml"
    inventory.write_text((REPO_ROOT / "inventories" / "demo.yaml").read_text())
    return inventory


def _bootstrap(inventory: Path, tmp_path: Path, *args: str) -> dict[str, Any]:
    done = clusterctl("-i", inventory, "-o", "json", "bootstrap", *args, "--survey", SURVEY,
                      "--state-dir", tmp_path / "state")
    assert done.exit_code == 0, done.output
    data: dict[str, Any] = done.json()
    return data


def _by_host(data: dict[str, Any]) -> dict[str, dict[str, str]]:
    out: dict[str, dict[str, str]] = {}
    for r in data["results"]:
        out.setdefault(r["host"], {})[r["phase"]] = r["status"] if r["status"] != "skipped" else \
            ("confirmed" if r.get("message") == CONFIRMED else "skipped")
    return out


def _confirmed(phases: dict[str, str]) -> bool:
    """Every phase that applies to the host was confirmed (the rest are other hosts' phases)."""
    return "confirmed" in phases.values() and set(phases.values()) <= {"confirmed", "skipped"}


def test_unchanged_hosts_are_confirmed_by_one_read_and_a_drifted_host_is_repaired(tmp_path: Path) -> None:
    inventory = _inventory(tmp_path)
    first = _bootstrap(inventory, tmp_path, "--yes")
    assert first["changed"]

    # gpu-b2 drifts the way hosts do, behind clusterctl's back.
    drift = "modprobe -r br_netfilter; apt-mark unhold kubelet; rm -f /etc/containerd/config.toml"
    assert clusterctl("-i", inventory, "-l", "gpu-b2", "exec", "--sudo", "--", drift).exit_code == 0

    plan = _by_host(_bootstrap(inventory, tmp_path, "--dry-run"))
    for host in WORKERS:
        if host != "gpu-b2":
            assert _confirmed(plan[host]), (host, plan[host])
    assert {plan["gpu-b2"][p] for p in ("kernel", "packages", "containerd")} == {"changed"}

    repaired = _bootstrap(inventory, tmp_path, "--yes")
    status = _by_host(repaired)
    assert {status["gpu-b2"][p] for p in ("kernel", "packages", "containerd")} == {"changed"}
    summaries = [c["summary"] for r in repaired["results"] if r["host"] == "gpu-b2" for c in r["changes"]]
    assert "load br_netfilter now" in summaries and "hold kubelet" in summaries
    for host in WORKERS:
        if host != "gpu-b2":
            assert _confirmed(status[host]), (host, status[host])
    # The first control plane is read in full every run: its join token is made afresh.
    assert "confirmed" not in status["gpu-a1"].values() and status["gpu-a1"]["control-plane"] == "ok"
    assert any(n.startswith("unchanged since the last run") and "gpu-b2" not in n for n in repaired["notes"])

    # gpu-b3's inventory entry changes (a label): it is read in full again; gpu-b2, repaired, is confirmed.
    text = inventory.read_text().replace("  gpu-b3:\n", "  gpu-b3:\n    labels: {site: lab-2}\n", 1)
    inventory.write_text(text)
    again = _by_host(_bootstrap(inventory, tmp_path, "--yes"))
    assert _confirmed(again["gpu-b2"])
    assert "confirmed" not in again["gpu-b3"].values() and "changed" not in again["gpu-b3"].values()


def test_a_survey_that_never_ends_is_read_no_further_than_its_limit(tmp_path: Path) -> None:
    """``bootstrap phase kernel --survey /dev/zero`` on a re-run: the kernel phase never reads the survey,
    but the re-run's record of what the phases plan from takes its content. That read stops at the
    survey's input limit; it used to read /dev/zero whole, until the machine ran out of memory."""
    import resource
    import subprocess
    import sys

    from clirun import clusterctl_env

    inventory = _inventory(tmp_path)
    base = [sys.executable, "-m", "clusterctl", "-i", str(inventory), "bootstrap", "phase", "kernel",
            "--state-dir", str(tmp_path / "state"), "--yes"]

    def cap_memory() -> None:  # a regression then fails the run quickly, not the machine
        resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))

    def run(*more: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([*base, *more], capture_output=True, text=True, timeout=300, cwd=tmp_path,
                              env=clusterctl_env(tmp_path, COLUMNS="200"), preexec_fn=cap_memory)

    first = run()
    assert first.returncode == 0, first.stdout + first.stderr
    again = run("--survey", "/dev/zero")
    assert again.returncode == 0, again.stdout + again.stderr
    assert "nothing changed" in again.stdout
