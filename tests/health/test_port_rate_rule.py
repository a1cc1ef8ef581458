"""One rule for a port's rate, in health as in survey: the inventory's fabric.rate_gbps for a port on the
fabric, else the same port of the same card on most hosts; on one host alone, the inventory's rate."""

from __future__ import annotations

from pathlib import Path

import pytest
from clirun import clusterctl
from mixed_fleet import CX6, CX7, HDR, NDR, SDR, compute_cards, host_profile, ibv_devinfo, inventory

from clusterctl.bootstrap.phases.node_agent import agent_config
from clusterctl.inventory.model import Fabric, Host
from clusterctl.mock.transport import MockTransport

#: A storage port on Ethernet: a ConnectX-7 at 4X NDR = 400 Gb/s, beside an InfiniBand fabric.
STORAGE = {"board_id": CX7, "active_speed": NDR, "link_layer": "Ethernet"}


#: The evidence fields of a slow port, the same in health's IB_PORT_SLOW as in survey's NIC_SLOW.
SLOW_FIELDS = ("hca", "port", "rate_gbps", "expected_gbps", "width", "speed", "basis")


def _slow_ports(tmp_path: Path, hosts: dict[str, Path], fabric: str) -> tuple[set[tuple[str, str, float]], ...]:
    """(host, port, rate judged against) of each slow port, as health and as survey name them; each port's
    evidence fields (rate, expected_gbps, basis...) are the same in both."""
    path = inventory(tmp_path, hosts, fabric)
    health = clusterctl("-i", path, "-o", "json", "health").json()
    health_evidence = {(h["host"], f["subject"]): tuple(f["evidence"].get(k) for k in SLOW_FIELDS)
                       for h in health["hosts"] for f in h["findings"] if f["code"] == "IB_PORT_SLOW"}
    in_health = {(h["host"], f["subject"], float(f["message"].rsplit(" at ", 1)[1].split()[0]))
                 for h in health["hosts"] for f in h["findings"] if f["code"] == "IB_PORT_SLOW"}
    survey = clusterctl("-i", path, "-o", "json", "survey").json()
    survey_evidence = {(f["host"], f"{f['evidence']['hca']}/{f['evidence']['port']}"):
                       tuple(f["evidence"].get(k) for k in SLOW_FIELDS)
                       for f in survey["findings"] if f["code"] == "NIC_SLOW"}
    in_survey = {(host, port, evidence[3]) for (host, port), evidence in survey_evidence.items()}
    assert health_evidence == survey_evidence
    return in_health, in_survey


def test_a_port_off_the_fabric_is_judged_against_its_peers_not_the_fabric_rate(tmp_path: Path) -> None:
    """On an InfiniBand fabric at 200 Gb/s, a storage port on Ethernet that trained at 200 where the
    same port of the same card runs at 400 is slow (meeting the fabric's rate does not let it off: it is
    not on the fabric); a fabric port below 200 is slow against the inventory; health and survey agree."""
    storage = {"mlx5_8": STORAGE}
    hosts = {f"s{i}": host_profile(tmp_path, "storage", storage) for i in range(4)}
    hosts["storage-slow"] = host_profile(tmp_path, "storage-slow", {"mlx5_8": {**STORAGE, "active_speed": HDR}})
    hosts["fabric-slow"] = host_profile(tmp_path, "fabric-slow", {**storage, "mlx5_2": {"active_speed": SDR}})
    in_health, in_survey = _slow_ports(tmp_path, hosts, "{type: ib, rate_gbps: 200}")
    assert in_health == in_survey == {("storage-slow", "mlx5_8/1", 400.0), ("fabric-slow", "mlx5_2/1", 200.0)}
    health = clusterctl("-i", tmp_path / "inventory.yaml", "-o", "json", "health").json()
    assert {(h["host"], f["evidence"]["basis"]) for h in health["hosts"] for f in h["findings"]
            if f["code"] == "IB_PORT_SLOW"} == {("storage-slow", "peers"), ("fabric-slow", "inventory")}


def test_a_port_not_listed_as_a_fabric_hca_is_judged_against_its_peers(tmp_path: Path) -> None:
    """The inventory's fabric.hcas says which HCAs are the fabric's: mlx5_8 (InfiniBand here) is not, so at
    200 Gb/s beside the same card at 400 it is slow, whatever the fabric's rate."""
    storage = {"mlx5_8": {"board_id": CX7, "active_speed": NDR}}
    hosts = {f"s{i}": host_profile(tmp_path, "storage", storage) for i in range(4)}
    hosts["storage-slow"] = host_profile(tmp_path, "storage-slow", {"mlx5_8": {"board_id": CX7, "active_speed": HDR}})
    fabric = "{type: ib, rate_gbps: 200, hcas: [" + ", ".join(f"mlx5_{i}" for i in range(8)) + "]}"
    in_health, in_survey = _slow_ports(tmp_path, hosts, fabric)
    assert in_health == in_survey == {("storage-slow", "mlx5_8/1", 400.0)}


def test_one_host_alone_is_held_to_the_inventory_rate(tmp_path: Path) -> None:
    """No peers to compare with (one host checked, by health, by Slurm's health check): a fabric port below
    the inventory's fabric.rate_gbps is slow all the same; below a rate the inventory does not give, nothing
    says it is."""
    host = {"gpu-9": host_profile(tmp_path, "fabric-slow", compute_cards(CX6, HDR, mlx5_2=SDR))}
    path = inventory(tmp_path, host, "{type: ib, rate_gbps: 200}")
    health = clusterctl("-i", path, "-o", "json", "health").json()
    assert [(f["subject"], f["message"]) for f in health["hosts"][0]["findings"] if f["code"] == "IB_PORT_SLOW"] == [
        ("mlx5_2/1", "port runs at 10 Gb/s, the inventory's fabric at 200 Gb/s")]
    slurm = clusterctl("-i", path, "-o", "json", "health", "--slurm").json()
    assert [f["code"] for f in slurm["checks"][0]["findings"] if f["code"] == "IB_PORT_SLOW"] == ["IB_PORT_SLOW"]
    unrated = clusterctl("-i", inventory(tmp_path, host, "{type: ib}"), "-o", "json", "health").json()
    assert not any(f["code"] == "IB_PORT_SLOW" for f in unrated["hosts"][0]["findings"])


def _mock_host(tmp_path: Path, profile: Path, **settings: str) -> MockTransport:
    return MockTransport(Host(name="gpu-9", transport="mock", profile=str(profile),
                              mock_state=str(tmp_path / "state"), **settings))  # type: ignore[arg-type]


@pytest.mark.parametrize("rate", [200, None])
def test_the_node_agent_holds_a_port_to_the_fabric_rate_bootstrap_wrote_in_its_config(
        tmp_path: Path, rate: int | None, capsys: pytest.CaptureFixture[str]) -> None:
    """The agent on the node has no peers and no inventory: bootstrap writes the host's fabric in its config
    (only where the inventory gives a rate), and a fabric port below that rate is a finding there too; so is
    it for Slurm's health check on the node, which reads the same config."""
    from clusterctl.agent.main import main

    profile = host_profile(tmp_path, "fabric-slow", compute_cards(CX6, HDR, mlx5_2=SDR))
    host = _mock_host(tmp_path, profile)
    fabric = Fabric(type="ib", rate_gbps=rate, hcas=tuple(f"mlx5_{i}" for i in range(8)))
    host.machine.host.fs.write("/etc/clusterctl/node-agent.json",
                               agent_config("gpu-9", kubernetes=False, fabric=fabric).encode())
    assert ('"fabric"' in host.get("/etc/clusterctl/node-agent.json").decode()) is bool(rate)
    assert main(["node-agent", "--textfile-dir", "/var/lib/node-exporter"], transport=lambda: host) == 0
    metrics = host.get("/var/lib/node-exporter/clusterctl_node_health.prom").decode()
    assert ('code="IB_PORT_SLOW"' in metrics) is bool(rate), metrics
    assert main(["slurm-health", "--node", "gpu-9"], transport=lambda: host) == (1 if rate else 0)
    assert ("IB_PORT_SLOW" in capsys.readouterr().err) is bool(rate)


def test_health_read_holds_a_pasted_port_to_the_rate_of_the_inventory_host_it_names(tmp_path: Path) -> None:
    """Outputs read from files have no peers either: with -i, the host --host names is held to its fabric's rate."""
    pasted = tmp_path / "ibv_devinfo.txt"
    pasted.write_text(ibv_devinfo(compute_cards(CX6, HDR, mlx5_2=SDR)))
    path = inventory(tmp_path, {"gpu-9": host_profile(tmp_path, "any", {})}, "{type: ib, rate_gbps: 200}")

    def slow(*args: str | Path) -> list[str]:
        run = clusterctl(*args, "-o", "json", "health", "read", pasted, "--host", "gpu-9")
        return [f["subject"] for f in run.json()["findings"] if f["code"] == "IB_PORT_SLOW"]

    assert slow("-i", path) == ["mlx5_2/1"]
    assert slow() == []  # no inventory: nothing says what the port should run at


def test_alone_on_a_roce_fabric_only_a_listed_hca_is_held_to_the_fabric_rate(tmp_path: Path) -> None:
    """Without GPU locality (health has none) an Ethernet RDMA port on a RoCE fabric may be the management
    NIC: it is held to fabric.rate_gbps only where the inventory's fabric.hcas lists it."""
    profile = host_profile(tmp_path, "roce", {"mlx5_8": {"link_layer": "Ethernet", "active_speed": "25.0 Gbps (32)"}})

    def slow(fabric: str) -> list[str]:
        health = clusterctl("-i", inventory(tmp_path, {"gpu-9": profile}, fabric), "-o", "json", "health").json()
        return [f["subject"] for f in health["hosts"][0]["findings"] if f["code"] == "IB_PORT_SLOW"]

    assert slow("{type: roce, rate_gbps: 200}") == []
    assert slow("{type: roce, rate_gbps: 200, hcas: [mlx5_8]}") == ["mlx5_8/1"]
