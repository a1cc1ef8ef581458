"""``kubeadm certs check-expiration`` tables of several kubeadm releases (tests/fixtures/kubeadm-certs)."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest
from fixture_files import read_fixture
from refusals import refusal

from clusterctl.errors import ParseError
from clusterctl.facts.kubeadm_certs import parse_check_expiration


def test_both_tables_of_a_recent_kubeadm() -> None:
    found = parse_check_expiration(read_fixture("kubeadm-certs", "kubeadm2866-v1.26.txt"))
    assert [c.name for c in found.certificates] == ["admin.conf", "apiserver", "apiserver-kubelet-client",
                                                    "controller-manager.conf", "front-proxy-client", "scheduler.conf"]
    front = found.certificates[4]
    assert (front.authority, front.residual, front.externally_managed) == ("front-proxy-ca", "348d", False)
    assert front.expires == datetime(2024, 4, 9, 9, 16, tzinfo=timezone.utc)
    assert [(a.name, a.residual) for a in found.authorities] == [("ca", "6y"), ("front-proxy-ca", "6y")]
    assert front.days_left(datetime(2024, 4, 1, tzinfo=timezone.utc)) == 8


def test_an_old_alpha_table_with_blank_authorities_and_stacked_etcd() -> None:
    found = parse_check_expiration(read_fixture("kubeadm-certs", "sealer753-alpha.txt"))
    assert len(found.certificates) == 10 and found.authorities == ()
    assert found.certificates[0].authority == "" and found.certificates[2].authority == "etcd-ca"
    assert found.soonest() is not None and found.soonest().name == "admin.conf"  # type: ignore[union-attr]
    old = parse_check_expiration(read_fixture("kubeadm-certs", "pr83932-v1.17.txt"))
    assert [c.residual for c in old.certificates] == ["364d"] * 9


def test_an_expired_certificate_has_negative_days() -> None:
    found = parse_check_expiration(read_fixture("kubeadm-certs", "DERIVED-kubeadm2866-expired-admin-conf.txt"))
    admin = found.certificates[0]
    assert admin.residual == "<invalid>" and admin.days_left(datetime(2023, 6, 1, tzinfo=timezone.utc)) < 0


def test_bad_input_names_the_line() -> None:
    text = read_fixture("kubeadm-certs", "kubeadm2866-v1.26.txt").replace("Apr 09, 2024 09:16 UTC", "tomorrow      "
                                                                            "        ", 1)
    assert refusal(parse_check_expiration, text).line == 6  # apiserver, the first row dated 09:16
    with pytest.raises(ParseError):
        parse_check_expiration("error execution phase: failed to load admin kubeconfig\n")


def test_missing_rows_are_named_not_refused() -> None:
    found = parse_check_expiration(read_fixture("kubeadm-certs", "missing-etcd-99y-alpha-deprecated.txt"))
    assert found.missing == ("apiserver-etcd-client", "etcd-healthcheck-client", "etcd-peer", "etcd-server", "etcd-ca")
    assert [c.name for c in found.certificates] == ["admin.conf", "apiserver", "apiserver-kubelet-client",
                                                    "controller-manager.conf", "front-proxy-client", "scheduler.conf"]
    assert [(a.name, a.residual) for a in found.authorities] == [("ca", "9y"), ("front-proxy-ca", "9y")]
    assert found.certificates[0].expires == datetime(2120, 10, 23, 4, 50, tzinfo=timezone.utc)


def test_expired_and_missing_together() -> None:
    found = parse_check_expiration(read_fixture("kubeadm-certs", "kubespray-external-etcd-expired.txt"))
    now = datetime(2023, 2, 21, tzinfo=timezone.utc)
    expired = [c.name for c in found.certificates if c.days_left(now) < 0]
    assert expired == ["admin.conf", "apiserver-kubelet-client", "controller-manager.conf", "front-proxy-client",
                       "scheduler.conf"]
    assert found.soonest() is not None and found.soonest().residual == "<invalid>"  # type: ignore[union-attr]
    apiserver = found.certificates[1]
    assert (apiserver.name, apiserver.residual, apiserver.days_left(now)) == ("apiserver", "10d", 10)
    assert "etcd-ca" in found.missing and len(found.missing) == 5


def test_before_init_every_row_is_missing() -> None:
    found = parse_check_expiration(read_fixture("kubeadm-certs", "before-init-all-missing-v1.29.txt"))
    assert found.certificates == () and found.authorities == () and found.soonest() is None
    assert found.missing[-4:] == ("super-admin.conf", "ca", "etcd-ca", "front-proxy-ca") and len(found.missing) == 14
    after = parse_check_expiration(read_fixture("kubeadm-certs", "after-init-super-admin-v1.29.txt"))
    assert after.missing == () and after.certificates[-1].name == "super-admin.conf"
    assert {c.authority for c in after.certificates} == {"ca", "etcd-ca", "front-proxy-ca"}
    assert [a.name for a in after.authorities] == ["ca", "etcd-ca", "front-proxy-ca"]


def test_a_missing_row_without_a_name_names_its_line() -> None:
    text = read_fixture("kubeadm-certs", "before-init-all-missing-v1.29.txt").replace("!MISSING! etcd-peer",
                                                                                      "!MISSING!")
    assert refusal(parse_check_expiration, text).line == 8  # etcd-peer's row


def test_every_fact_of_a_check_reaches_the_json() -> None:
    from json_holds import assert_reached_but

    from clusterctl.day2.certs import HostCerts

    now = datetime(2023, 2, 21, tzinfo=timezone.utc)
    parsed = [parse_check_expiration(read_fixture("kubeadm-certs", name))
              for name in ("kubespray-external-etcd-expired.txt", "kubeadm2866-v1.26.txt")]
    assert_reached_but({}, parsed, lambda expiration: HostCerts("cp1", expiration).to_json(now))


def test_findings_name_each_missing_expired_and_expiring_certificate() -> None:
    from clusterctl.day2.certs import expiration_findings

    found = parse_check_expiration(read_fixture("kubeadm-certs", "kubespray-external-etcd-expired.txt"))
    findings = expiration_findings("cp1", found, datetime(2023, 2, 21, tzinfo=timezone.utc), 30)
    codes = [(f.code, f.message.split(" ")[0].rstrip(":")) for f in findings]
    assert codes[:5] == [("CERT_MISSING", n) for n in ("apiserver-etcd-client", "etcd-healthcheck-client",
                                                        "etcd-peer", "etcd-server", "etcd-ca")]
    assert ("CERT_EXPIRED", "admin.conf") in codes and ("CERT_EXPIRING", "apiserver") in codes
    assert ("CERT_EXPIRED", "ca") not in codes and len(codes) == 11


def test_the_real_kubeadm_1_37_tables_and_an_external_ca() -> None:
    from clusterctl.day2.certs import EXTERNAL_FIX, expiration_findings

    full = parse_check_expiration(read_fixture("kubeadm-certs", "recorded-kubeadm-1.37.2-stacked-etcd.txt"))
    assert len(full.certificates) == 11 and full.missing == () and full.certificates[-1].name == "super-admin.conf"
    assert {(a.name, a.residual, a.externally_managed) for a in full.authorities} == {
        ("ca", "9y", False), ("etcd-ca", "9y", False), ("front-proxy-ca", "9y", False)}
    external = parse_check_expiration(read_fixture("kubeadm-certs",
                                                   "recorded-kubeadm-1.37.2-external-ca-missing-rows.txt"))
    assert external.missing == ("front-proxy-client", "super-admin.conf")
    signed_outside = {c.name for c in external.certificates if c.externally_managed}
    assert signed_outside == {"admin.conf", "apiserver", "apiserver-kubelet-client", "controller-manager.conf",
                              "scheduler.conf"}
    assert [a.name for a in external.authorities if a.externally_managed] == ["ca"]
    # A month before they expire: kubeadm cannot renew what the outside CA signed, and the fix says so.
    soon = datetime(2027, 11, 20, tzinfo=timezone.utc)
    fixes = {f.message.split(" ")[0]: f.fix for f in expiration_findings("cp1", external, soon, 30)
             if f.code == "CERT_EXPIRING"}
    assert fixes["apiserver"] == EXTERNAL_FIX and fixes["etcd-peer"] == "clusterctl certs renew"


def test_klog_warnings_before_the_tables_are_skipped_and_every_row_is_read() -> None:
    # kubespray's and KubeOne's kubeadm print klog "W0420 ..." lines (KubeletConfiguration advice) before the tables.
    external = parse_check_expiration(read_fixture("kubeadm-certs", "kubespray-klog-warnings-external-etcd.txt"))
    assert [(c.name, c.residual, c.authority) for c in external.certificates][-2:] == [
        ("front-proxy-client", "347d", "front-proxy-ca"), ("scheduler.conf", "347d", "ca")]
    assert [a.name for a in external.authorities] == ["ca", "front-proxy-ca"] and external.missing == ()
    stacked = parse_check_expiration(read_fixture("kubeadm-certs", "kubeone-stacked-etcd-mixed-renewals.txt"))
    assert len(stacked.certificates) == 10 and [a.name for a in stacked.authorities] == ["ca", "etcd-ca",
                                                                                         "front-proxy-ca"]
    # Renewed at different times: the soonest is an etcd certificate, not the first row; kubeconfigs name no CA.
    soonest = stacked.soonest()
    assert soonest is not None and (soonest.name, soonest.residual) == ("etcd-healthcheck-client", "170d")
    assert [c.authority for c in stacked.certificates if c.name.endswith(".conf")] == ["", "", ""]
    assert stacked.authorities[-1].expires == datetime(2031, 3, 7, 15, 3, tzinfo=timezone.utc)


def test_every_certificate_expired_under_a_new_ca_is_a_finding_and_the_ca_is_not() -> None:
    from clusterctl.day2.certs import expiration_findings

    found = parse_check_expiration(read_fixture("kubeadm-certs", "config-flag-expired-after-new-ca.txt"))
    assert {c.residual for c in found.certificates} == {"<invalid>"} and found.certificates[-1].name == \
        "super-admin.conf"
    findings = expiration_findings("cp1", found, datetime(2026, 5, 28, tzinfo=timezone.utc), 30)
    assert [(f.code, f.message.split(" ")[0].rstrip(":")) for f in findings] == [
        ("CERT_EXPIRED", c.name) for c in found.certificates]
