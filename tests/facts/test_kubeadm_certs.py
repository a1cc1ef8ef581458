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
