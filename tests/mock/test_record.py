"""`clusterctl record` runs only read-only commands and redacts consistently."""

from __future__ import annotations

from pathlib import Path

from clusterctl.fanout import Runner
from clusterctl.inventory.loader import load_inventory
from clusterctl.mock.transport import MockTransport
from clusterctl.record.redact import Redactor
from clusterctl.record.run import record, record_commands
from clusterctl.transport.base import Transport

DEMO = Path(__file__).resolve().parents[2] / "inventories" / "demo.yaml"


def test_record_runs_only_the_read_only_fact_commands_and_writes_nothing(tmp_path: Path) -> None:
    inventory = load_inventory(DEMO)
    hosts = [inventory.host("gpu-a1")]
    transports: list[MockTransport] = []

    def connect(host: object, _timeout: float) -> Transport:
        transports.append(MockTransport(host))  # type: ignore[arg-type]
        return transports[-1]

    with Runner(connect, parallel=1) as runner:
        report = record(runner, inventory, hosts, tmp_path / "out", redact=False)
    assert report.hosts == ["gpu-a1"] and not report.failed
    allowed = {command for command, _sudo in record_commands()}
    history = [line for t in transports for line in t.history]
    assert history and all(line in allowed for line in history), history
    assert not any(line.startswith("# put") for line in history)
    profile = (tmp_path / "out" / "profiles" / "gpu-a1" / "profile.yaml").read_text()
    assert "match: nvidia-smi topo -m" in profile and "hostname: gpu-a1" in profile


def test_redaction_is_consistent_across_texts() -> None:
    r = Redactor()
    first = r.text("inet 10.0.0.11/24 link/infiniband 00:00:10:29:fe:80 GPU-5269b708-678a-b1a8-60f0-c90406537486\n"
                   "Serial Number : 1320221015603\nnode_guid: 0c42:a103:00c4:1fea\n")
    again = r.text("peer 10.0.0.11 and GPU-5269b708-678a-b1a8-60f0-c90406537486, loopback 127.0.0.1\n")
    for original in ("10.0.0.11", "5269b708", "1320221015603", "0c42:a103", "00:00:10:29:fe:80"):
        assert original not in first + again
    assert first.split()[1].split("/")[0] == again.split()[1]  # the same address, the same stand-in
    assert "127.0.0.1" in again


def test_redacted_roce_gids_stay_gids_of_the_same_redacted_address() -> None:
    # A redacted recording is replayed as a mock host: tune-nccl and bench pick the RoCE v2 GID that is an
    # IPv4-mapped address, so redaction must keep that shape, and one address gets one stand-in in every form.
    import ipaddress

    from clusterctl.facts.rdma import parse_rdma

    fixture = Path(__file__).parents[1] / "fixtures" / "ibv_devinfo" / "roce-bond-cx6dx-vv.txt"
    text = fixture.read_text()
    # Older rdma-core writes every GID in full, the RoCE v2 one too: the same port, as they print it.
    for printed in (text, text.replace("::ffff:27.105.179.3", "0000:0000:0000:0000:0000:ffff:1b69:b303")):
        redacted = Redactor().text(printed)
        assert [p.roce_v2_gid_index for d in parse_rdma(redacted) for p in d.ports] == [3]
        gids = {index: gid for d in parse_rdma(redacted) for p in d.ports for index, gid, _ in p.gids}
        assert "27.105.179.3" not in redacted and "1b69:b303" not in redacted and "ebff:fef0:28b2" not in redacted
        assert ipaddress.IPv6Address(gids[2]) == ipaddress.IPv6Address(gids[3])  # one address, one stand-in
        assert str(ipaddress.IPv6Address(gids[2]).ipv4_mapped).startswith("192.0.2.")
        assert gids[0].startswith("fe80:0000:0000:0000:")  # the link-local prefix identifies nothing and stays
        assert ipaddress.IPv6Address(gids[0]) == ipaddress.IPv6Address(gids[1])  # its interface id: one stand-in


def test_redaction_leaves_four_part_versions_and_the_stub_resolver() -> None:
    r = Redactor()
    text = r.text("MLNX_OFED_LINUX-5.8-1.0.1.1:\nDOCA 24.10-0.7.0.0\nnameserver 127.0.0.53\nsrc 10.1.2.3\n")
    assert "5.8-1.0.1.1" in text and "24.10-0.7.0.0" in text and "127.0.0.53" in text
    assert "10.1.2.3" not in text


def test_an_ipv6_inventory_address_gets_the_stand_in_it_has_in_the_outputs() -> None:
    # The inventory and the outputs are one recording: an address a host is reached by is the address its
    # outputs show, and one original has one stand-in everywhere.
    r = Redactor()
    outputs = r.text("inet6 fd00:10::11/64 scope global\ninet 10.0.0.11/24\n")
    for original in ("fd00:10::11", "10.0.0.11"):
        stand_in = r.address(original)
        assert stand_in != original and f" {stand_in}/" in outputs
    assert r.address("gpu-a1.example.com").endswith(".example.invalid")
