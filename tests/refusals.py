"""What a parser or the inventory loader refuses: the error it raises, for the tests that check the line
(and field) it names."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from clusterctl.errors import ExitCode, InventoryError, ParseError
from clusterctl.inventory.loader import load_inventory


def refusal(parse: Callable[[str], object], text: str) -> ParseError:
    """The ``ParseError`` that ``parse(text)`` raises; the test fails when it raises none."""
    with pytest.raises(ParseError) as raised:
        parse(text)
    return raised.value


def inventory_refusal(path: Path) -> InventoryError:
    """The ``InventoryError`` that loading the inventory at ``path`` raises: a usage error (exit 2) naming
    the file; the test fails when it raises none."""
    with pytest.raises(InventoryError) as caught:
        load_inventory(path)
    error = caught.value
    assert error.exit_code == ExitCode.USAGE == 2
    assert error.file == str(path)
    # The rendered message leads with "file:line:" so an editor can jump there.
    if error.line is not None:
        assert str(error).startswith(f"{path}:{error.line}: ")
    return error
