"""``ValueProblem``: one thing wrong with a setting's value, as the value grammars report it.

Below both the knowledge base (``knowledge``) and the grammars that check values (``grammar``,
``plugins``), so that neither imports the other at run time.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ValueProblem:
    """One thing wrong with a value: a stable code, a severity, what NCCL does with it, how to fix it."""

    code: str
    severity: str
    message: str
    fix: str


def invalid(message: str, fix: str, severity: str = "error") -> ValueProblem:
    """The usual problem: a value its reader does not take as written (``INVALID_VALUE``)."""
    return ValueProblem("INVALID_VALUE", severity, message, fix)
