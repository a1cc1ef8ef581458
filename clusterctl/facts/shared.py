"""One parse per distinct output: hosts that print byte-identical text share its parsed value.

The hosts of a fleet are mostly alike: the same ``nvidia-smi topo -m``, the same stack, the same
``ibdev2netdev`` on every node of a rack (and, on simulated hosts replaying one recording, every
output). Parsers are pure functions of their text and return frozen values, so the value read
from one host's output is the value of any other host that printed exactly the same text; the
second host pays a dictionary look-up (the text's hash and one comparison) instead of the parse.

Bounded: the most recently used ``KEPT`` texts, and no text over ``LONGEST`` characters is kept
(a fleet of unique outputs costs one look-up and one insertion each, never a growing memory).
A text that does not parse is not kept: its ``ParseError`` is raised again for each host.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")

#: How many distinct (parser, text) pairs are kept.
KEPT = 256
#: Longer texts are parsed every time (a 1,279-line ``ibv_devinfo -v`` is about 60,000 characters).
LONGEST = 1_000_000


def parse_shared(parse: Callable[[str], T], text: str) -> T:
    """``parse(text)``, computed once for every identical ``text`` seen lately (see the module)."""
    if len(text) > LONGEST:
        return parse(text)
    return _parse_kept(parse, text)


@functools.lru_cache(maxsize=KEPT)
def _parse_kept(parse: Callable[[str], Any], text: str) -> Any:
    return parse(text)
