"""CONTRIBUTING.md's map of the tree names only files and folders that exist."""

from __future__ import annotations

import re

from clirun import REPO_ROOT

#: Where a path in the map may be relative to: the repository, the package, the tests.
BASES = (REPO_ROOT, REPO_ROOT / "clusterctl", REPO_ROOT / "tests", REPO_ROOT / "clusterctl" / "bootstrap")


def _section(text: str, start: str, end: str) -> str:
    return text[text.index(start):text.index(end)]


def test_every_path_the_map_names_exists() -> None:
    text = (REPO_ROOT / "CONTRIBUTING.md").read_text()
    map_text = _section(text, "## Layers", "## Rules")
    named = set(re.findall(r"`([\w./-]+(?:\.py|/))`", map_text))
    block = _section(map_text, "```", "## Where a new thing goes")
    named |= {m for m in re.findall(r"^\s*([\w-]+/)\s", block, flags=re.M)}
    named |= set(re.findall(r"(?<![\w*/])([a-z]\w*(?:/\w+)*\.py)", block))
    missing = sorted(p for p in named if not any((base / p).exists() for base in BASES)
                     and not any(any(base.glob(f"*/{p}")) for base in BASES))
    assert len(named) > 40 and missing == []
