"""Small words of output that must read naturally, importable without anything heavy."""

from __future__ import annotations


def plural(count: int, noun: str) -> str:
    """``1 host``, ``2 hosts``: counts that read naturally."""
    return f"{count} {noun if count == 1 else noun + 's'}"


def seconds(value: float | None) -> str:
    """``60 s``, ``4.9 s``, ``0.25 s``: a duration as people write it (a space before the unit)."""
    if value is None:
        return "the time limit"
    shown = round(value, 2) if value < 1 else round(value, 1)
    return f"{shown:g} s"


def first_few(items: list[str], shown: int, sep: str = "; ") -> str:
    """The first ``shown`` of ``items``, and how many were left out: ``a; b; c (+2 more)``."""
    left = len(items) - shown
    return sep.join(items[:shown]) + (f" (+{left} more)" if left > 0 else "")


def more_codes(codes: list[str], shown: int = 3) -> str:
    """`` (+4 more: A, B, C, ...)``: how many findings follow the one a line names, and their first codes."""
    named = list(dict.fromkeys(codes))
    listed = ", ".join(named[:shown]) + (", ..." if len(named) > shown else "")
    return f" (+{len(codes)} more: {listed})" if codes else ""
