"""bench ib against MockTransport fleets: commands, judgement, localisation, cleanup."""

from __future__ import annotations

import shutil
from dataclasses import replace
from pathlib import Path

import yaml
from clirun import clusterctl

from clusterctl.bench.ib_bench import run_ib_bench
from clusterctl.bench.model import HcaInfo
from clusterctl.bench.perftest_rounds import IBOptions
from clusterctl.changes import Gate
from clusterctl.inventory.model import Fabric, Host
from clusterctl.mock.transport import MockTransport
from clusterctl.transport.base import CommandResult, FailureKind, RunRequest, TransportError

from .conftest import FAST, PERFTEST, SERVER_PID, Fleet, FleetFactory, check_rounds

OPTS = IBOptions(settle_s=0, duration_s=5)


def hcas_for(hosts: list, names: tuple[str, ...] = ("mlx5_0",)) -> dict:  # type: ignore[type-arg]
    return {h.name: [HcaInfo(name=n, rate_gbps=200) for n in names] for h in hosts}


def test_slow_host_is_named(mock_fleet: FleetFactory) -> None:
    fleet = mock_fleet(6, slow_host=3)
    with fleet.runner() as runner:
        report = run_ib_bench(runner, fleet.hosts, hcas_for(fleet.hosts), OPTS)
    assert [(d.kind, d.subject) for d in report.diagnoses] == [("slow-host", "h3")]
    assert report.rounds_used == 5 and len(report.results) == 15
    slow = {frozenset((r.server, r.client)) for r in report.results if r.slow}
    assert slow == {frozenset(("h3", f"h{i}")) for i in (1, 2, 4, 5, 6)}
    assert report.failed


def test_bad_link_is_named(mock_fleet: FleetFactory) -> None:
    fleet = mock_fleet(6, bad_link=(1, 4))
    with fleet.runner() as runner:
        report = run_ib_bench(runner, fleet.hosts, hcas_for(fleet.hosts), OPTS)
    assert [(d.kind, d.subject) for d in report.diagnoses] == [("bad-link", "h1/mlx5_0 <-> h4/mlx5_0")]
    matrix = report.matrix()
    assert matrix.get("h1", "h4") == 0.48 and matrix.get("h1", "h2") == 196.8


def test_find_straggler_uses_fewer_rounds(mock_fleet: FleetFactory) -> None:
    fleet = mock_fleet(10, slow_host=7)
    with fleet.runner() as runner:
        report = run_ib_bench(runner, fleet.hosts, hcas_for(fleet.hosts), OPTS, find_stragglers=True)
    assert [(d.kind, d.subject) for d in report.diagnoses] == [("slow-host", "h7")]
    assert report.rounds_used < report.all_pairs_rounds == 9


def test_commands_use_distinct_ports_gid_index_and_kill_by_pid(mock_fleet: FleetFactory) -> None:
    fleet = mock_fleet(4)
    hcas = {h.name: [HcaInfo("mlx5_0", "Ethernet", 200, 3), HcaInfo("mlx5_1", "Ethernet", 200, 5)]
            for h in fleet.hosts}
    with fleet.runner() as runner:
        report = run_ib_bench(runner, fleet.hosts, hcas, OPTS)
    check_rounds(report.rounds)
    for index in {t.round for t in report.planned}:
        ports = [t.port for t in report.planned if t.round == index]
        assert len(ports) == len(set(ports))
    first = report.planned[0]
    assert " -x 3 " in first.client_command and first.client_command.endswith("--report_gbits " +
                                                                              first.server.connect_address)
    for host in fleet.hosts:
        starts = [c for c in fleet.history(host.name) if c.endswith("& echo $!")]
        kills = [c for c in fleet.history(host.name) if c.startswith(f"kill {SERVER_PID} ")]
        assert len(kills) == len(starts) > 0
        assert not any("pkill" in c or "killall" in c for c in fleet.history(host.name))


def test_server_is_killed_when_the_client_times_out(mock_fleet: FleetFactory) -> None:
    fleet = mock_fleet(2, client_delay=5)
    opts = replace(OPTS, client_timeout_s=0.3)
    with fleet.runner() as runner:
        report = run_ib_bench(runner, fleet.hosts, hcas_for(fleet.hosts), opts)
    (result,) = report.results
    assert result.error is not None and "timed out" in result.error
    assert any(c.startswith(f"kill {SERVER_PID} ") for c in fleet.history(result.server))
    assert any(f.code == "LINK_FAILED" for f in report.findings)


def test_a_failed_link_names_the_host_that_failed(mock_fleet: FleetFactory) -> None:
    """The pair's subject ("h1/mlx5_0 <-> h2/mlx5_0") does not say which end served: the message does."""
    fleet = mock_fleet(2)
    connect = fleet.connect

    def server_lost(host: Host, timeout_s: float) -> MockTransport:
        transport = connect(host, timeout_s)
        if host.name == "h1":
            def execute(request: RunRequest) -> CommandResult:
                if request.command.endswith("& echo $!"):  # the server's start
                    raise TransportError(FailureKind.UNREACHABLE, "connection to 10.0.0.1 closed by remote host")
                return MockTransport.execute(transport, request)
            transport.execute = execute  # type: ignore[method-assign]
        return transport

    fleet.connect = server_lost  # type: ignore[method-assign]
    with fleet.runner() as runner:
        report = run_ib_bench(runner, fleet.hosts, hcas_for(fleet.hosts), OPTS)
    (finding,) = report.findings
    assert finding.subject == "h1/mlx5_0 <-> h2/mlx5_0"
    assert finding.message == ("ib_write_bw failed: server host h1 failed: unreachable: "
                               "connection to 10.0.0.1 closed by remote host")


def test_dry_run_runs_nothing(mock_fleet: FleetFactory) -> None:
    fleet = mock_fleet(5)
    gate = Gate(apply=False)
    with fleet.runner() as runner:
        report = run_ib_bench(runner, fleet.hosts, hcas_for(fleet.hosts), OPTS, gate=gate)
    assert len(report.rounds) == 5 and report.results == ()
    assert fleet.transports == {}
    # Every planned server start and client run is in the gate's records, on its own host.
    assert len(gate.records) == 2 * len(report.planned)
    first = report.planned[0]
    assert [(r.change.host, r.change.command, r.applied) for r in gate.records[:2]] == [
        (first.server.name, first.server_command, False), (first.client.name, first.client_command, False)]


def test_hcas_and_gid_index_from_a_saved_survey(tmp_path) -> None:  # type: ignore[no-untyped-def]
    import json
    from pathlib import Path

    from clusterctl.bench.hcas import hcas_from_survey
    from clusterctl.inventory.model import Fabric, Host

    # A real report, as `clusterctl survey --save` writes it for the demo cluster ...
    demo = str(Path(__file__).resolve().parents[2] / "inventories" / "demo.yaml")
    saved = tmp_path / "survey.json"
    clusterctl("-i", demo, "-l", "gpu-a1", "survey", "-o", "json", "--save", saved)
    # ... turned into a RoCE host: mlx5_0 with its RoCE v2 GID, mlx5_1 down.
    report = json.loads(saved.read_text())
    for nic in report["hosts"][0]["nics"]:
        for port in nic["ports"]:
            port["link_layer"] = "Ethernet"
            port["roce_v2_gid_index"] = 3
            if nic["name"] == "mlx5_1":
                port["state"] = "PORT_DOWN"
    saved.write_text(json.dumps(report))
    hosts = [Host(name="gpu-a1", fabric=Fabric(type="roce", hcas=("mlx5_0", "mlx5_1", "mlx5_2"))),
             Host(name="h2", fabric=Fabric(type="roce", hcas=("mlx5_4",)))]
    found, warnings = hcas_from_survey(str(saved), hosts)
    assert found["gpu-a1"] == [HcaInfo("mlx5_0", "Ethernet", 200.0, 3), HcaInfo("mlx5_2", "Ethernet", 200.0, 3)]
    # A host the survey does not know keeps the inventory's HCAs, without a GID index.
    assert found["h2"] == [HcaInfo("mlx5_4", "Ethernet", None, None)]
    assert warnings == {"h2": f"HCAs from the inventory (not in the saved survey {saved})"}


def test_find_straggler_on_a_small_fleet_measures_every_pair(mock_fleet: FleetFactory) -> None:
    fleet = mock_fleet(6, slow_host=3)
    with fleet.runner() as runner:
        report = run_ib_bench(runner, fleet.hosts, hcas_for(fleet.hosts), OPTS, find_stragglers=True)
    assert report.pattern == "all-pairs"
    assert report.rounds_used == report.all_pairs_rounds == 5
    assert [(d.kind, d.subject) for d in report.diagnoses] == [("slow-host", "h3")]


def test_hcas_are_found_with_ibstat_where_ibv_devinfo_is_missing(tmp_path: Path) -> None:
    from clusterctl.bench.hcas import discover_hcas
    from clusterctl.fanout import Runner
    from clusterctl.inventory.model import Fabric, Host
    from clusterctl.mock.transport import MockTransport

    fixtures = Path(__file__).resolve().parents[1] / "fixtures" / "ibstat"
    profile = tmp_path / "p"
    profile.mkdir()
    (profile / "ibstat.txt").write_text((fixtures / "socket-direct-cx6-ibp2s0f0.txt").read_text())
    (profile / "profile.yaml").write_text("commands:\n  - match: ibstat\n    stdout: ibstat.txt\n")
    host = Host(name="sd1", transport="mock", profile=str(profile), fabric=Fabric(type="ib", rate_gbps=100))
    found, warnings = discover_hcas(Runner(lambda h, t: MockTransport(h), parallel=1, timeout_s=30), [host])
    assert [(h.name, h.rate_gbps) for h in found["sd1"]] == [("ibp2s0f0", 100.0)] and warnings == {}


def test_a_host_with_neither_ibv_devinfo_nor_ibstat_gets_the_inventorys_hcas_and_says_why(tmp_path: Path) -> None:
    from clusterctl.bench.hcas import discover_hcas
    from clusterctl.fanout import Runner
    from clusterctl.inventory.model import Fabric, Host
    from clusterctl.mock.transport import MockTransport

    profile = tmp_path / "p"
    profile.mkdir()
    (profile / "profile.yaml").write_text("commands: []\n")  # a host without either tool
    host = Host(name="h1", transport="mock", profile=str(profile), fabric=Fabric(type="ib", hcas=("mlx5_0",)))
    found, warnings = discover_hcas(Runner(lambda h, t: MockTransport(h), parallel=1, timeout_s=30), [host])
    assert [h.name for h in found["h1"]] == ["mlx5_0"]
    (warning,) = warnings.values()
    assert warning.startswith("HCAs from the inventory (") and "ibv_devinfo -v" in warning and "not found" in warning


def test_a_port_trained_below_its_peers_is_judged_against_their_rate(tmp_path: Path) -> None:
    """h3's mlx5_0 trained at 200 Gb/s where h1's and h2's run at 400 (no rate in the inventory): its links
    reach 196.8 Gb/s, 49% of the 400 Gb/s the port should run at (``rate_basis``, as survey and health hold
    it), not 98% of its own degraded rate."""
    hosts = []
    for i in (1, 2, 3):
        folder = tmp_path / f"h{i}"
        folder.mkdir()
        shutil.copy(PERFTEST / FAST, folder / "hdr.txt")
        shutil.copy(PERFTEST / "write_bw-ndr400-gbits-prompt.txt", folder / "ndr.txt")
        rules = [{"regex": r"^ib_write_bw .* > /tmp/clusterctl-bench-\S+\.log 2>&1 < /dev/null & echo \$!$",
                  "stdout_text": f"{SERVER_PID}\n"},
                 {"regex": r"^cat /tmp/clusterctl-bench-\S+\.log$", "stdout_text": ""},
                 {"regex": r"(^|\s)ib_write_bw .* 10\.0\.0\.3$", "stdout": "hdr.txt"},
                 {"regex": r"(^|\s)ib_write_bw .* \S+$", "stdout": "hdr.txt" if i == 3 else "ndr.txt"}]
        (folder / "profile.yaml").write_text(yaml.safe_dump({"commands": rules}, sort_keys=False))
        hosts.append(Host(name=f"h{i}", address=f"10.0.0.{i}", rack="a", transport="mock", profile=str(folder),
                          fabric=Fabric(type="ib")))
    hcas = {h.name: [HcaInfo("mlx5_0", rate_gbps=200 if h.name == "h3" else 400)] for h in hosts}
    with Fleet(hosts).runner() as runner:
        report = run_ib_bench(runner, hosts, hcas, OPTS)
    assert {r.expected_gbps for r in report.results} == {400}
    slow = [(f.subject, f.message) for f in report.findings if f.code == "LINK_SLOW"]
    assert sorted(slow) == [(link, "196.8 Gb/s is 49% of the 400 Gb/s line rate; a link within a rack must reach 90% "
                                   "(360.0 Gb/s)") for link in ("h2/mlx5_0 <-> h3/mlx5_0", "h3/mlx5_0 <-> h1/mlx5_0")]
    assert [(d.kind, d.subject) for d in report.diagnoses] == [("slow-host", "h3")]
