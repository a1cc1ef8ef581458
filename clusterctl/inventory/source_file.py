"""Reading an inventory file's text, with the errors a user can act on; below every loader."""

from __future__ import annotations

from pathlib import Path

from clusterctl.errors import InventoryError


def read_inventory_text(file_path: Path) -> str:
    """The file's text; a missing, folder, unreadable or non-UTF-8 file is an ``InventoryError``."""
    if not file_path.exists():
        raise InventoryError(
            f"inventory file not found: {file_path}",
            file=None,
            hint="Check the path given with -i/--inventory or in CLUSTERCTL_INVENTORY.",
        )
    if file_path.is_dir():
        raise InventoryError(f"the inventory {file_path} is a folder; give the inventory file inside it.", file=None)
    from clusterctl.inputfile import LIMITS

    if file_path.is_file() and file_path.stat().st_size > LIMITS["inventory"]:
        raise InventoryError(
            f"the inventory is larger than the {LIMITS['inventory'] // 2**20} MiB limit.", file=str(file_path)
        )
    try:
        return file_path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise InventoryError(
            f"the inventory is not UTF-8 text (byte {exc.start} cannot be read).", file=str(file_path)
        ) from None
    except OSError as exc:
        raise InventoryError(f"cannot read the inventory {file_path}: {exc.strerror}.") from None
