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
from clusterctl.inventory.loader import load_inventory
from clusterctl.inventory.model import BootstrapConfig
from clusterctl.inventory.pins import CNI_PINS, PUBLISHED, PublishedLine

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
            assert not verdict.message, f"{path.name} {host.name}: {verdict.message}"
            if pin.containerd:
                verdict = matrix.containerd_supports(pin.kubernetes, pin.containerd)
                assert not verdict.message, f"{path.name} {host.name}: {verdict.message}"


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


def newest_patch(project: str, version: str) -> PublishedLine | None:
    """The line ``version`` (``1.36.2``, ``v3.31.7``) belongs to, when ``PUBLISHED`` records it."""
    parts = version.lstrip("v").split(".")
    return next((line for line in PUBLISHED
                 if line.project == project and parts[: len(line.line.split("."))] == line.line.split(".")), None)


def _is_newest(project: str, version: str, where: str) -> None:
    line = newest_patch(project, version)
    assert line is not None, f"{where}: {project} {version} is on no line pins.PUBLISHED records"
    assert version.lstrip("v") == line.newest.lstrip("v"), \
        f"{where}: {project} {version}, the newest {line.line} patch is {line.newest} ({line.source})"
    assert "end of life" not in line.note, f"{where}: {project} {line.line}: {line.note}"


def test_the_examples_pin_the_newest_published_patches_of_supported_lines(tmp_path: Path) -> None:
    examples = [p for p in EXAMPLES if p.name != "demo.yaml"] + [_readme_inventory(tmp_path)]
    for path in examples:
        for host in load_inventory(path).hosts:
            if host.stack.kubernetes:
                _is_newest("kubernetes", host.stack.kubernetes, f"{path.name} {host.name}")
            if host.stack.containerd:
                _is_newest("containerd", host.stack.containerd, f"{path.name} {host.name}")


def test_the_pins_are_the_newest_published_patches_with_their_source() -> None:
    for name, pin in CNI_PINS.items():
        _is_newest(name, pin.version, f"CNI_PINS[{name!r}]")
    _is_newest("nvidia-container-toolkit", BootstrapConfig().nvidia_container_toolkit, "nvidia_container_toolkit")
    assert all(line.source and line.newest for line in PUBLISHED)


def test_the_demo_is_on_the_newest_containerd_patch_and_one_kubernetes_patch_behind() -> None:
    demo = load_inventory(REPO / "inventories" / "demo.yaml")
    (containerd,) = {h.stack.containerd for h in demo.hosts if h.stack.containerd}
    line = newest_patch("containerd", containerd)
    assert line is not None and containerd == line.newest
    # Behind on purpose, and said so in demo.yaml: `upgrade --to` the newest patch is the README's tour.
    (kubernetes,) = {h.stack.kubernetes for h in demo.hosts if h.stack.kubernetes}
    newest = newest_patch("kubernetes", kubernetes)
    assert newest is not None and matrix.parse_version(kubernetes) < matrix.parse_version(newest.newest)
    assert f"({newest.newest})" in (REPO / "inventories" / "demo.yaml").read_text()


def test_containerds_table_has_the_newest_minor_row() -> None:
    newest = f"{matrix.NEWEST_KUBERNETES[0]}.{matrix.NEWEST_KUBERNETES[1]}.0"
    assert matrix.containerd_supports(newest, "2.3.7").ok and not matrix.containerd_supports(newest, "2.4.2").message
    assert not matrix.containerd_supports(newest, "2.2.9").ok  # 1.37 lists 2.4.0+ and 2.3.0+ only
