"""The bundled demo inventory: every host answers every survey command, and the two hosts
broken on purpose really show their fault (what the demo is there to show)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from clirun import clusterctl

from clusterctl.facts.base import Fact
from clusterctl.facts.gpus import GPUS
from clusterctl.facts.model import RDMADevice, TopoMatrix
from clusterctl.facts.nvlink import NVLINK
from clusterctl.facts.rdma import RDMA
from clusterctl.facts.stack import STACK
from clusterctl.facts.survey_facts import SURVEY_FACTS
from clusterctl.facts.topo import TOPOLOGY
from clusterctl.inventory.loader import load_inventory
from clusterctl.inventory.model import Host, Inventory
from clusterctl.mock.transport import MockTransport

REPO = Path(__file__).resolve().parents[2]
DEMO = REPO / "inventories" / "demo.yaml"
HEALTHY = ("gpu-a1", "gpu-a2", "gpu-b1", "gpu-b2")
BROKEN = ("gpu-a3", "gpu-b3")


@pytest.fixture(scope="module")
def inventory() -> Inventory:
    return load_inventory(DEMO)


def answer(host: Host, fact: Fact[Any]) -> Any:
    """Run the fact's own command line on the mock host and parse it with the fact's parser."""
    result = MockTransport(host).run(fact.command, sudo=fact.sudo)
    assert result.exit_code == 0, f"{host.name}: {fact.command!r} -> exit {result.exit_code}: {result.stderr}"
    return fact.parse(result.stdout)


def test_inventory_describes_two_racks_of_three_with_one_control_plane(inventory: Inventory) -> None:
    assert [h.name for h in inventory.hosts] == ["gpu-a1", "gpu-a2", "gpu-a3", "gpu-b1", "gpu-b2", "gpu-b3"]
    assert [h.rack for h in inventory.hosts] == ["a", "a", "a", "b", "b", "b"]
    assert [h.name for h in inventory.hosts if "control-plane" in h.roles] == ["gpu-a1"]
    assert all("worker" in h.roles and h.transport == "mock" for h in inventory.hosts)
    assert {h.fabric.type for h in inventory.hosts} == {"ib"}
    assert {h.fabric.rate_gbps for h in inventory.hosts} == {200}


@pytest.mark.parametrize("fact", SURVEY_FACTS, ids=lambda f: f.name)
def test_every_host_answers_every_survey_fact(inventory: Inventory, fact: Fact[Any]) -> None:
    for host in inventory.hosts:
        parsed = answer(host, fact)
        assert parsed, f"{host.name}: {fact.name} parsed to nothing"


def test_healthy_hosts_show_a_full_nvswitch_mesh_and_hdr_links(inventory: Inventory) -> None:
    for name in HEALTHY:
        host = inventory.host(name)
        topo: TopoMatrix = answer(host, TOPOLOGY)
        gpus = [d.label for d in topo.gpus]
        assert len(gpus) == 8
        for a in gpus:
            for b in gpus:
                if a != b:
                    link = topo.link(a, b)
                    assert link is not None and link.kind == "NV" and link.nvlinks == 12, (name, a, b, link)
        lanes = [lane for status in answer(host, NVLINK) for lane in status.lanes]
        assert len(lanes) == 8 * 12 and all(lane.active for lane in lanes)
        rates = _compute_rates(answer(host, RDMA), host.fabric.hcas)
        assert rates == {hca: 200.0 for hca in host.fabric.hcas}


def test_gpu_a3_lost_the_nvlinks_of_gpu3(inventory: Inventory) -> None:
    host = inventory.host("gpu-a3")
    topo: TopoMatrix = answer(host, TOPOLOGY)
    pair = topo.link("GPU2", "GPU3")
    assert pair is not None and pair.kind != "NV" and pair.nvlinks == 0
    mirror = topo.link("GPU3", "GPU2")
    assert mirror is not None and mirror.kind == pair.kind
    # Every other pair keeps its 12 NVLinks: only GPU3 is cut off.
    others = [d.label for d in topo.gpus if d.label != "GPU3"]
    assert all(topo.link(a, b).kind == "NV" for a in others for b in others if a != b)  # type: ignore[union-attr]

    statuses = {status.gpu_index: status for status in answer(host, NVLINK)}
    assert statuses[3].lanes and not any(lane.active for lane in statuses[3].lanes)
    assert all(lane.active for index, status in statuses.items() if index != 3 for lane in status.lanes)
    # The same GPUs as the healthy machine: only link state differs.
    healthy = answer(inventory.host("gpu-a1"), NVLINK)
    assert [s.uuid for s in healthy] == [statuses[i].uuid for i in sorted(statuses)]


def test_gpu_b3_has_one_nic_trained_far_below_hdr(inventory: Inventory) -> None:
    host = inventory.host("gpu-b3")
    rates = _compute_rates(answer(host, RDMA), host.fabric.hcas)
    slow = {hca: rate for hca, rate in rates.items() if rate != 200.0}
    assert slow == {"mlx5_2": 10.0}
    port = next(p for d in answer(host, RDMA) if d.hca == "mlx5_2" for p in d.ports)
    assert (port.state, port.active_width, port.active_speed) == ("PORT_ACTIVE", "4X", "2.5 Gbps")


def test_broken_hosts_differ_from_healthy_ones_only_where_documented(inventory: Inventory) -> None:
    healthy = inventory.host("gpu-a1")
    for name in BROKEN:
        host = inventory.host(name)
        for fact in (GPUS, STACK):
            assert answer(host, fact) == answer(healthy, fact), (name, fact.name)
    assert answer(inventory.host("gpu-a3"), RDMA) == answer(healthy, RDMA)
    assert answer(inventory.host("gpu-b3"), TOPOLOGY) == answer(healthy, TOPOLOGY)


def test_recorded_stack_matches_the_inventory_pins(inventory: Inventory) -> None:
    """The demo hosts run the pinned driver, CUDA and NCCL; Kubernetes and containerd are pinned
    for ``clusterctl bootstrap`` and not installed yet."""
    for host in inventory.hosts:
        stack = answer(host, STACK)
        assert stack.os_name == "Ubuntu" and stack.os_version == "22.04"
        found = {"driver": stack.driver, "cuda": stack.cuda, "nccl": stack.nccl}
        pins = host.stack.pinned()
        assert found == {k: pins[k] for k in found}, host.name
        assert stack.kubelet is None and stack.containerd is None
        assert set(stack.missing) == {"containerd", "kubelet", "kubeadm"}


def test_gpu_query_agrees_with_nvlink_and_stack(inventory: Inventory) -> None:
    host = inventory.host("gpu-a1")
    gpus = answer(host, GPUS)
    assert [g.index for g in gpus] == list(range(8))
    assert {g.name for g in gpus} == {"NVIDIA A100-SXM4-80GB"}
    assert [g.uuid for g in gpus] == [s.uuid for s in answer(host, NVLINK)]
    assert {g.driver_version for g in gpus} == {answer(host, STACK).driver}
    assert all(g.memory_total_mib == 81920 and g.ecc_mode and g.persistence_mode for g in gpus)


def test_files_the_profile_declares_can_be_read(inventory: Inventory) -> None:
    transport = MockTransport(inventory.host("gpu-b1"))
    assert 'VERSION_ID="22.04"' in transport.run("cat /etc/os-release").stdout
    assert "535.154.05" in transport.run("cat /proc/driver/nvidia/version").stdout
    assert transport.run("hostname").stdout == "gpu-b1\n"


def test_exec_nvidia_smi_l_on_the_demo_inventory() -> None:
    run = clusterctl("-i", DEMO, "-o", "json", "exec", "--", "nvidia-smi", "-L")
    out = run.stdout
    assert run.exit_code == 0, run.output
    records = json.loads(out)
    text = json.dumps(records)
    for name in HEALTHY + BROKEN:
        assert name in text
    assert text.count("GPU 7: NVIDIA A100-SXM4-80GB") == 6


def _compute_rates(devices: tuple[RDMADevice, ...], hcas: tuple[str, ...]) -> dict[str, float | None]:
    return {d.hca: d.ports[0].rate_gbps for d in devices if d.hca in hcas}


def test_a_gpu_reset_is_answered_as_nvidia_smi_answers_it_on_this_machine(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``clusterctl heal``'s reset-gpu step: never "nvidia-smi: not found" on a host that has nvidia-smi. With
    persistence mode Enabled (as the profile's GPU query says) nvidia-smi refuses the reset, naming the GPU by
    the bus id of that same query; a GPU that fell off the bus cannot be reset at all (exit 15)."""
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path))  # the injected fault stays in this test's mock hosts
    host = load_inventory(DEMO).host("gpu-a2")
    gpus = answer(host, GPUS)
    assert all(g.persistence_mode for g in gpus)
    transport = MockTransport(host)
    for gpu in gpus:
        refused = transport.run(f"nvidia-smi -r -i {gpu.index}", sudo=True)
        assert refused.exit_code == 255, refused.stderr
        assert f"  GPU {gpu.pci_bus_id}: In use by another client\n" in refused.stderr
    every = transport.run("nvidia-smi -r", sudo=True)
    assert every.exit_code == 255 and all(f"GPU {g.pci_bus_id}: In use" in every.stderr for g in gpus)
    assert clusterctl("-i", DEMO, "-l", "gpu-a2", "mock", "set", "fault=xid-79").exit_code == 0
    lost = MockTransport(load_inventory(DEMO).host("gpu-a2")).run("nvidia-smi -r -i 3", sudo=True)
    assert lost.exit_code == 15 and "GPU 0000:4E:00.0: GPU is lost.  Reboot the system" in lost.stderr
    assert gpus[3].pci_bus_id == "00000000:4E:00.0"
    assert MockTransport(load_inventory(DEMO).host("gpu-a2")).run("nvidia-smi -r -i 2", sudo=True).exit_code == 255


def test_persistence_mode_is_kept_per_gpu_and_a_gpu_whose_persistence_mode_is_off_resets(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``nvidia-smi -pm 0 -i N`` lasts on the mock host (until ``-pm 1`` or a boot): the reset of that GPU then
    succeeds, the others are still refused; the GPU that fell off the bus answers "GPU is lost" to all of it."""
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path))
    query = "nvidia-smi --query-gpu=index,persistence_mode --format=csv"

    def run(command: str) -> Any:
        return MockTransport(load_inventory(DEMO).host("gpu-a2")).run(command, sudo=True)

    assert run(f"{query} -i 4").stdout == "index, persistence_mode\n4, Enabled\n"
    off = run("nvidia-smi -pm 0 -i 4")
    assert off.ok and off.stdout == "Disabled persistence mode for GPU 00000000:87:00.0.\nAll done.\n"
    assert run(f"{query} -i 4").stdout == "index, persistence_mode\n4, Disabled\n"
    reset = run("nvidia-smi -r -i 4")
    assert reset.ok and "GPU 00000000:87:00.0  was successfully reset." in reset.stdout
    assert run("nvidia-smi -r -i 5").exit_code == 255  # persistence mode still on there
    assert run("nvidia-smi -pm 1 -i 4").stdout.startswith("Enabled persistence mode for GPU 00000000:87:00.0.")
    assert run("nvidia-smi -r -i 4").exit_code == 255
    assert run("nvidia-smi -pm 0 -i 6").ok
    assert clusterctl("-i", DEMO, "-l", "gpu-a2", "mock", "set", "fault=xid-79").exit_code == 0
    for lost in ("nvidia-smi -pm 0 -i 3", f"{query} -i 3", "nvidia-smi -r -i 3"):
        answer_ = run(lost)
        assert answer_.exit_code == 15 and "GPU 0000:4E:00.0: GPU is lost" in answer_.stderr, lost
    # A boot: nvidia-persistenced turns persistence mode on again (and the injected fault is gone).
    assert run("systemctl reboot").ok
    assert run(f"{query} -i 6").stdout == "index, persistence_mode\n6, Enabled\n"
    assert run("nvidia-smi -r -i 3").exit_code == 255
