"""Reading an inventory file's text, with the errors a user can act on; below every loader."""

from __future__ import annotations

from pathlib import Path

from clusterctl.errors import InventoryError, UsageError


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
