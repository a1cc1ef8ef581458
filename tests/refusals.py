"""What a parser refuses: the ``ParseError`` it raises, for the tests that check the line it names."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from clusterctl.errors import ParseError


def refusal(parse: Callable[[str], object], text: str) -> ParseError:
    """The ``ParseError`` that ``parse(text)`` raises; the test fails when it raises none."""
    with pytest.raises(ParseError) as raised:
        parse(text)
    return raised.value
