"""``clusterctl certs check|renew`` on the demo mock cluster after bootstrap."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from clirun import clusterctl
from day2_helpers import DEMO, mock_cluster_folder, set_fault, state_digest, unconfirmed

from clusterctl.day2.certs import PARKED_DIR


def test_check_lists_days_left_and_warns_before_expiry(bootstrapped_demo: Path) -> None:
    done = clusterctl("-i", DEMO, "-o", "json", "certs", "check")
    assert done.exit_code == 0, done.output
    (host,) = done.json()["hosts"]
    assert host["host"] == "gpu-a1"
    days = {c["name"]: c["days_left"] for c in host["certificates"]}
    assert 300 < days["apiserver"] < 366 and "etcd-server" in days
    # The product's one timestamp form (``clusterctl.utc``), as every other report's: it said '+00:00'.
    stamps = [c["expires"] for c in (*host["certificates"], *host["authorities"])]
    assert stamps and all(re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:00Z", s) for s in stamps), stamps
    assert done.json()["findings"] == []
    set_fault(bootstrapped_demo, "gpu-a1", "certs", "expiring")
    soon = clusterctl("-i", DEMO, "certs", "check")
    assert soon.exit_code == 0 and "CERT_EXPIRING" in soon.stdout and "apiserver expires in 4 day(s)" in soon.stdout
    lines = soon.stdout.splitlines()  # each finding with its fix below it, as every report prints findings
    at = next(i for i, line in enumerate(lines) if "CERT_EXPIRING" in line and "apiserver expires" in line)
    assert lines[at + 1] == "        fix: clusterctl certs renew", soon.stdout


def test_renew_restarts_the_static_pods_and_its_dry_run_touches_nothing(bootstrapped_demo: Path) -> None:
    set_fault(bootstrapped_demo, "gpu-a1", "certs", "expiring")
    before = state_digest(bootstrapped_demo)
    plan = clusterctl("-i", DEMO, "-o", "json", "certs", "renew", "--dry-run")
    assert plan.exit_code == 0 and state_digest(bootstrapped_demo) == before
    commands = [c["command"] for c in plan.json()["hosts"][0]["changes"]]
    assert commands[0] == "kubeadm certs renew all"
    assert any("mv /etc/kubernetes/manifests/kube-apiserver.yaml" in c for c in commands)
    assert plan.json()["hosts"][0]["waits"] == ["the API server answers /readyz"]
    assert unconfirmed("-i", DEMO, "certs", "renew").exit_code == 2  # no terminal, no --yes
    done = clusterctl("-i", DEMO, "-o", "json", "certs", "renew", "--yes", "--restart-wait", "1")
    assert done.exit_code == 0, done.output
    assert done.json()["hosts"][0]["soonest_days_left"] >= 364
    listing = clusterctl("-i", DEMO, "-l", "gpu-a1", "exec", "--", "ls /etc/kubernetes/manifests")
    assert all(f"{c}.yaml" in listing.stdout for c in ("etcd", "kube-apiserver", "kube-scheduler"))
    assert "CERT_EXPIRING" not in clusterctl("-i", DEMO, "certs", "check").stdout
    # The folder the manifests waited in was made by a journalled change: undo removes it with the rest.
    parked = mock_cluster_folder(bootstrapped_demo) / "hosts" / "gpu-a1" / "fs" / PARKED_DIR.lstrip("/")
    assert parked.is_dir() and not any(parked.iterdir())
    undone = clusterctl("-i", DEMO, "undo", done.json()["undo_journal"], "--yes")
    assert f"undid 'create {PARKED_DIR}'" in undone.stdout and not parked.exists(), undone.output


def test_check_at_80_and_120_columns_cuts_no_certificate_name_or_date(bootstrapped_demo: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    (host,) = clusterctl("-i", DEMO, "-o", "json", "certs", "check").json()["hosts"]
    names = [c["name"] for c in host["certificates"]]
    for columns in ("80", "120"):
        monkeypatch.setenv("COLUMNS", columns)
        done = clusterctl("-i", DEMO, "certs", "check")
        assert done.exit_code == 0, done.output
        assert "…" not in done.stdout
        assert all(len(line.rstrip()) <= int(columns) for line in done.stdout.splitlines()), done.stdout
        assert all(name in done.stdout for name in names)
        assert "apiserver-kubelet-client" in done.stdout


def test_check_after_kubeadm_reset_says_no_cluster_in_one_paragraph(bootstrapped_demo: Path) -> None:
    """kubeadm lists every certificate as !MISSING! and exits 0 where no cluster is (the real one does:
    tests/upstream/test_contract_kubeadm_certs.py): the one "no cluster here" error, exit 2."""
    from test_day2_no_cluster import assert_no_cluster

    reset = clusterctl("-i", DEMO, "-l", "gpu-a1", "exec", "--sudo", "--", "kubeadm reset --force")
    assert reset.exit_code == 0, reset.output
    for output in ("table", "json"):
        assert_no_cluster(clusterctl("-i", DEMO, "-o", output, "certs", "check"),
                          "kubeadm lists every certificate and CA as !MISSING!")


def test_a_control_plane_without_its_etcd_ca_is_unread_with_what_kubeadm_said_and_what_to_do(
        bootstrapped_3cp: Path) -> None:
    gone = clusterctl("-i", str(bootstrapped_3cp), "-l", "gpu-a2", "exec", "--sudo", "--",
                      "rm /etc/kubernetes/pki/etcd/ca.crt")
    assert gone.exit_code == 0, gone.output
    done = clusterctl("-i", str(bootstrapped_3cp), "-o", "json", "certs", "check")
    assert done.exit_code == 1, done.output
    (unread,) = [f for f in done.json()["findings"] if f["code"] == "CERTS_UNREAD"]
    assert unread["host"] == "gpu-a2"
    assert "Error checking external CA condition for etcd/ca certificate authority" in unread["message"]
    assert "stack trace" not in unread["message"]
    assert unread["fix"].startswith("put /etc/kubernetes/pki/etcd/ca.crt back"), unread
    # The joined control planes have no super-admin.conf, as kubeadm's own do not: nothing to warn of.
    assert not [f for f in done.json()["findings"] if f["code"] == "CERT_MISSING"], done.json()["findings"]
    assert {h["host"] for h in done.json()["hosts"] if "certificates" in h} == {"gpu-a1", "gpu-a3"}


def test_renew_left_out_does_not_say_the_certificates_were_renewed(bootstrapped_demo: Path) -> None:
    # --skip-phases renew restarts the static pods alone: each control plane said "renewed" all the same.
    done = clusterctl("-i", DEMO, "-o", "json", "certs", "renew", "--skip-phases", "renew", "--yes",
                      "--restart-wait", "1")
    assert done.exit_code == 0, done.output
    assert [h["status"] for h in done.json()["hosts"]] == ["done"]
    text = clusterctl("-i", DEMO, "certs", "renew", "--skip-phases", "renew", "--yes", "--restart-wait", "1")
    assert text.exit_code == 0 and "gpu-a1: done" in text.stdout and "renewed" not in text.stdout, text.output


def test_a_selection_of_workers_alone_is_named_as_the_selection_not_a_role_field() -> None:
    # It said "field 'roles'", sending the user to an inventory that was right: the -l left the control planes out.
    for command in (("certs", "check"), ("certs", "renew", "--dry-run")):
        done = clusterctl("-i", DEMO, "-l", "gpu-b3", *command)
        assert done.exit_code == 2 and done.stdout == "", done.output
        said = " ".join(done.stderr.split())
        assert "field 'roles'" not in said and "no control-plane host among the selected hosts" in said, said
        assert "-l" in said, said
