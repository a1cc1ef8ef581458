"""Finding the inventory file and detecting its format."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from clirun import clusterctl

from clusterctl.errors import ExitCode, InventoryError, UsageError
from clusterctl.inventory.loader import load_inventory, resolve_inventory_path

WriteFile = Callable[..., Path]


@pytest.mark.parametrize(
    ("name", "text", "fmt"),
    [
        ("inv.yaml", "hosts:\n  h: {address: 10.0.0.1}\n", "clusterctl"),
        ("inv.yml", "all:\n  hosts:\n    h: {ansible_host: 10.0.0.1}\n", "ansible-yaml"),
        ("hosts", "all:\n  hosts:\n    h: {ansible_host: 10.0.0.1}\n", "ansible-yaml"),
        ("hosts.ini", "[g]\nh ansible_host=10.0.0.1\n", "ansible-ini"),
        ("hosts", "# a comment\n[g]\nh ansible_host=10.0.0.1\n", "ansible-ini"),
        ("inventory", "h ansible_host=10.0.0.1\n", "ansible-ini"),
        ("hosts", "hosts:\n  h: {address: 10.0.0.1}\n", "clusterctl"),
    ],
)
def test_format_is_detected(write: WriteFile, name: str, text: str, fmt: str) -> None:
    inventory = load_inventory(write(text, name))
    assert inventory.format == fmt
    assert inventory.host("h").connect_address == "10.0.0.1"


def test_missing_file_names_the_path(tmp_path: Path) -> None:
    missing = tmp_path / "nope.yaml"
    with pytest.raises(InventoryError) as caught:
        load_inventory(missing)
    assert caught.value.exit_code == ExitCode.USAGE == 2
    assert str(missing) in str(caught.value)
    assert "not found" in str(caught.value)


def test_folder_instead_of_file(tmp_path: Path) -> None:
    with pytest.raises(InventoryError, match="is a folder"):
        load_inventory(tmp_path)


def test_binary_file_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "inv.yaml"
    path.write_bytes(b"hosts:\n  \xff\xfe: {}\n")
    with pytest.raises(InventoryError, match="not UTF-8"):
        load_inventory(path)


def test_resolve_prefers_explicit_then_default(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "inventory.yaml").write_text("hosts: {h: }\n")
    monkeypatch.chdir(tmp_path)
    assert resolve_inventory_path("given.ini") == Path("given.ini")
    assert resolve_inventory_path(None) == Path("inventory.yaml")
    assert load_inventory(resolve_inventory_path(None)).hosts[0].name == "h"


def test_the_environment_names_the_inventory_unless_i_does(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "inventory.yaml").write_text("hosts: {default-host: }\n")
    (tmp_path / "env.yaml").write_text("hosts: {env-host: }\n")
    (tmp_path / "given.yaml").write_text("hosts: {given-host: }\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("CLUSTERCTL_INVENTORY", str(tmp_path / "env.yaml"))
    assert [h["host"] for h in clusterctl("-o", "json", "inventory", "show").json()["hosts"]] == ["env-host"]
    given = clusterctl("-i", "given.yaml", "-o", "json", "inventory", "show").json()
    assert [h["host"] for h in given["hosts"]] == ["given-host"]
    monkeypatch.setenv("CLUSTERCTL_INVENTORY", "env-a,env-b")  # a host list, as -i takes one
    assert [h["host"] for h in clusterctl("-o", "json", "inventory", "show").json()["hosts"]] == ["env-a", "env-b"]
    monkeypatch.delenv("CLUSTERCTL_INVENTORY")
    assert [h["host"] for h in clusterctl("-o", "json", "inventory", "show").json()["hosts"]] == ["default-host"]


def test_resolve_without_any_inventory_says_how(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CLUSTERCTL_INVENTORY", raising=False)
    monkeypatch.chdir(tmp_path)
    with pytest.raises(UsageError) as caught:
        resolve_inventory_path(None)
    assert caught.value.exit_code == 2
    message = str(caught.value)
    assert "-i" in message
    assert "CLUSTERCTL_INVENTORY" in message
    assert "inventory.yaml" in message


def test_importing_the_package_does_not_import_yaml() -> None:
    import subprocess
    import sys

    code = "import sys, clusterctl.inventory; print('yaml' in sys.modules)"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "False"
