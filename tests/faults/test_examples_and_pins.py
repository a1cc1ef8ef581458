"""Every example inventory in the repository is one ``bootstrap`` accepts: it loads, ``inventory
check`` passes, its cluster settings are valid and its stack pins are supported; the demo also
plans. The pins are the newest patches of their lines, and the newest-minor rule lives in one place."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from clirun import clusterctl

from clusterctl.bootstrap import matrix
from clusterctl.bootstrap.cluster.settings import cluster_settings
from clusterctl.inventory import load_inventory
from clusterctl.inventory.pins import CNI_PINS

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = [*sorted((REPO / "inventories" / "examples").iterdir()), REPO / "inventories" / "demo.yaml"]


def _readme_inventory(tmp_path: Path) -> Path:
    """The README's inventory example (the first YAML block with ``cluster:``), as a file."""
    blocks = re.findall(r"```yaml\n(.*?)```", (REPO / "README.md").read_text(), re.DOTALL)
    text = next(b for b in blocks if b.startswith("cluster:"))
    path = tmp_path / "readme-inventory.yaml"
    path.write_text(text)
    return path


def _accepted_by_bootstrap(path: Path) -> None:
    inventory = load_inventory(path)
    cluster_settings(inventory)  # what 'bootstrap plan' checks up front (exit 2 otherwise)
    for host in inventory.hosts:
        pin = host.stack
        if pin.kubernetes:
            verdict = matrix.kubernetes_supported(pin.kubernetes)
            assert verdict.ok and verdict.known, f"{path.name} {host.name}: {verdict.message}"
            if pin.containerd:
                verdict = matrix.containerd_supports(pin.kubernetes, pin.containerd)
                assert verdict.ok and verdict.known, f"{path.name} {host.name}: {verdict.message}"


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_every_example_inventory_passes_check_and_bootstraps_pins(path: Path) -> None:
    done = clusterctl("-i", str(path), "inventory", "check")
    assert done.exit_code == 0, done.stderr
    _accepted_by_bootstrap(path)


def test_the_readme_inventory_example_passes_check_and_bootstraps_pins(tmp_path: Path) -> None:
    path = _readme_inventory(tmp_path)
    done = clusterctl("-i", str(path), "inventory", "check")
    assert done.exit_code == 0, done.stderr
    _accepted_by_bootstrap(path)


def test_the_demo_plans(tmp_path: Path) -> None:
    done = clusterctl("-i", str(REPO / "inventories" / "demo.yaml"), "bootstrap", "plan")
    assert done.exit_code == 0, done.stderr


def test_the_newest_minor_is_written_in_one_place() -> None:
    newest = f"{matrix.NEWEST_KUBERNETES[0]}.{matrix.NEWEST_KUBERNETES[1]}"
    texts = [(p, p.read_text()) for p in [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]]
    for path, text in texts:
        for claim in re.findall(r"newest (?:Kubernetes )?minor[^.\n]*?(1\.\d\d)", text):
            assert claim == newest, f"{path.name} says the newest minor is {claim}, matrix.py says {newest}"


def test_the_demo_pins_the_newest_patch_of_its_lines() -> None:
    # Newest published patches as read from the projects' own tags (sources in docs/bootstrap.md).
    demo = load_inventory(REPO / "inventories" / "demo.yaml")
    assert {h.stack.containerd for h in demo.hosts if h.stack.containerd} == {"2.2.7"}
    assert CNI_PINS["calico"].version == "v3.31.7"
    assert CNI_PINS["flannel"].version == "v0.28.9"
