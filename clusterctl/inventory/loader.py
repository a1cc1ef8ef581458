"""Find the inventory file and read it in whichever format it is written."""

from __future__ import annotations

from pathlib import Path

from clusterctl.errors import InventoryError, UsageError
from clusterctl.inventory.model import Inventory

#: Environment variable naming the inventory when ``-i`` is not given.
INVENTORY_ENV = "CLUSTERCTL_INVENTORY"
#: File used when neither ``-i`` nor the environment names one.
DEFAULT_INVENTORY = "inventory.yaml"

_YAML_SUFFIXES = (".yaml", ".yml", ".json")


def resolve_inventory_path(explicit: str | None) -> Path:
    """The inventory to use: ``-i`` (or ``$CLUSTERCTL_INVENTORY``: the option reads it), else ``./inventory.yaml``."""
    if explicit:
        return Path(explicit)
    if Path(DEFAULT_INVENTORY).is_file():
        return Path(DEFAULT_INVENTORY)
    raise UsageError(
        "no inventory given.",
        hint=f"Pass one with -i/--inventory PATH, set {INVENTORY_ENV}=PATH, "
        f"or create ./{DEFAULT_INVENTORY} in the current folder.",
    )


def open_inventory(explicit: str | None) -> Inventory:
    """The inventory ``-i`` (or ``$CLUSTERCTL_INVENTORY``) names: a file, or an ad-hoc host list
    such as ``'gpu-[01-16],login1'`` or ``'a,b,'`` when no file of that name exists."""
    from clusterctl.hostlist import looks_like_host_list

    if explicit and looks_like_host_list(explicit):
        from clusterctl.inventory.adhoc import inventory_from_host_list

        return inventory_from_host_list(explicit)
    return load_inventory(resolve_inventory_path(explicit))


def load_inventory(path: str | Path) -> Inventory:
    """Read a clusterctl YAML, Ansible YAML or Ansible INI inventory, detecting which it is.

    YAML whose top level is ``all:`` (or only Ansible groups) is read as Ansible; other YAML as
    clusterctl's format; a file that is not a YAML mapping (``[group]`` headers, host lines) as
    Ansible INI. Mock hosts get their state folder (``with_mock_state``).
    """
    inventory = _read_any(path)
    return with_mock_state(inventory, str(Path(path).resolve()))


def with_mock_state(inventory: Inventory, source: str) -> Inventory:
    """Mock hosts without ``mock_state`` get their cluster's default state folder (never in the repo)."""
    if not any(h.transport == "mock" and not h.mock_state for h in inventory.hosts):
        return inventory
    from dataclasses import replace

    from clusterctl.inventory.mock_state import default_state_folder

    folder = str(default_state_folder(inventory.name, source))
    hosts = tuple(replace(h, mock_state=folder) if h.transport == "mock" and not h.mock_state else h
                  for h in inventory.hosts)
    return replace(inventory, hosts=hosts)


def _read_any(path: str | Path) -> Inventory:
    from clusterctl.inventory.ansible import parse_ansible_ini, parse_ansible_yaml
    from clusterctl.inventory.native import parse_native
    from clusterctl.inventory.yaml_tree import Mapping, parse_yaml

    file_path = Path(path)
    file = str(path)
    text = read_inventory_text(file_path)
    base_dir = file_path.resolve().parent
    suffix = file_path.suffix.lower()
    if suffix in (".ini", ".cfg") or (suffix not in _YAML_SUFFIXES and _looks_like_ini(text)):
        return parse_ansible_ini(text, file=file, base_dir=base_dir)
    root = parse_yaml(text, file)
    # Ansible's YAML has 'all:' at the top, and neither of clusterctl's own 'hosts:' and 'cluster:'.
    if isinstance(root, Mapping) and root.get("all") is not None and root.get("hosts") is None \
            and root.get("cluster") is None:
        return parse_ansible_yaml(root, file=file, base_dir=base_dir)
    return parse_native(text, file=file, base_dir=base_dir, tree=root)


def read_inventory_text(file_path: Path) -> str:
    """The file's text, read as every file a user names is (``inputfile``: its size limit, no binary or
    non-UTF-8 data, no folder); anything wrong is an ``InventoryError``."""
    from clusterctl.inputfile import read_text_input

    if not file_path.exists():
        raise InventoryError(f"inventory file not found: {file_path}",
                             hint="Check the path given with -i/--inventory or in CLUSTERCTL_INVENTORY.")
    try:
        return read_text_input(str(file_path), "inventory", what="an inventory")[0]
    except UsageError as exc:
        raise InventoryError(exc.message, file=exc.file, line=exc.line, hint=exc.hint) from None


def _looks_like_ini(text: str) -> bool:
    """INI when the first meaningful line is a ``[section]`` or a host line rather than ``key:``."""
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith(("#", ";", "---")):
            continue
        if line.startswith("[") and line.endswith("]") and "," not in line:
            return True
        # A YAML mapping key is "name:" followed by a space or the end of the line; a host line
        # ("gpu01 ansible_host=10.0.0.1", "gpu01:2222") is not.
        first_word = line.split()[0]
        return not (first_word.endswith(":") or ": " in line or line.startswith(("-", "{")))
    return False
