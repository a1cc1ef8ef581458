"""Every change undo cannot revert says why, where it is planned: ``clusterctl undo`` then names it
with that reason, and exits 1 unless the change leaves nothing to put back (``changes.not_undone``).

Read from the source: each ``Change.run(...)`` of the product gives ``undo=`` (the command that
reverts it), ``cannot_undo=`` (why none does) or ``makes=(MAKES_NO_TRACE,)`` (it leaves nothing
behind), except in the modules below, whose changes never reach an undo journal as they are planned.
"""

from __future__ import annotations

import ast

from clirun import REPO_ROOT

PRODUCT = REPO_ROOT / "clusterctl"
#: Modules whose ``Change.run`` needs no reason of its own, and why.
EXEMPT = {
    "changes.py": "the undo step itself: a revert is not journaled",
    "bench/ib_bench.py": "recorded for the dry run only (Gate.record): never applied",
    "bootstrap/phases/verify.py": "a temporary change: its clean-up is its undo",
    "bootstrap/phases/reset.py": "plan() gives every change but a restart reset's reason (TAKEN_FOR_GOOD)",
    "bootstrap/phases/reset_from_journal.py": "steps of reset's plan, which gives them its reason",
}


def _says_why(call: ast.Call) -> bool:
    given = {k.arg: k.value for k in call.keywords}
    if "undo" in given or "cannot_undo" in given:
        return True
    makes = given.get("makes")
    return makes is not None and "MAKES_NO_TRACE" in ast.unparse(makes)


def test_every_change_undo_cannot_revert_says_why_where_it_is_planned() -> None:
    silent = []
    for path in sorted(PRODUCT.rglob("*.py")):
        where = path.relative_to(PRODUCT).as_posix()
        if where in EXEMPT:
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "run" \
                    and isinstance(node.func.value, ast.Name) and node.func.value.id == "Change" \
                    and not _says_why(node):
                silent.append(f"{where}:{node.lineno}")
    assert silent == [], ("give these changes undo=, cannot_undo= (a short true reason) or "
                          f"makes=(MAKES_NO_TRACE,): {silent}")


def test_the_exempt_modules_still_plan_changes() -> None:
    """An exemption whose module no longer builds a ``Change.run`` is stale: drop it."""
    for where in EXEMPT:
        assert "Change.run(" in (PRODUCT / where).read_text(), where
