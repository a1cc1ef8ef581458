"""Small words of output that must read naturally, importable without anything heavy."""

from __future__ import annotations


def plural(count: int, noun: str, plural_form: str | None = None) -> str:
    """``1 host``, ``2 hosts``: counts that read naturally."""
    return f"{count} {noun if count == 1 else (plural_form or noun + 's')}"

