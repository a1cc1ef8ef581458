"""One action engine: no command keeps a host lock, a progress file or a signal handler of its own.

Read from the source (every module of the product, calls inside functions too): the host lock is
made in ``clusterctl/engine/lock.py`` alone, a run's progress is kept by ``clusterctl/engine``
alone, and Ctrl-C/SIGTERM become ``Interrupted`` in one place, ``cli/app.py``, for the engine
to handle.
"""

from __future__ import annotations

import ast

from clirun import REPO_ROOT

PRODUCT = REPO_ROOT / "clusterctl"
#: The transport and its wrappers offer the exclusive create the lock is made of; the simulator
#: implements it.
LOCK_PRIMITIVE_OWNERS = ("engine/lock.py", "transport/", "host_reader.py", "fanout/time_budget.py", "mock/")


def _calls(name: str, *, on: str | None = None) -> list[str]:
    """``file:line`` of every call of ``name`` (a function, or a method; ``on``: of that name only)."""
    found = []
    for path in sorted(PRODUCT.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if not isinstance(node, ast.Call):
                continue
            func = node.func
            if isinstance(func, ast.Attribute):
                called = func.attr
                if on is not None and not (isinstance(func.value, ast.Name) and func.value.id == on):
                    continue
            else:
                called = func.id if isinstance(func, ast.Name) and on is None else ""
            if called == name:
                found.append(f"{path.relative_to(PRODUCT)}:{node.lineno}")
    return found


def _outside(places: list[str], owners: tuple[str, ...]) -> list[str]:
    return [p for p in places if not p.startswith(owners)]


def test_there_is_one_host_lock() -> None:
    """The lock file is made in ``engine/lock.py`` alone (a step that takes it, ``heal``'s, goes through it)."""
    places = _calls("create_exclusive") + _calls("create_exclusive_then")
    assert any(p.startswith("engine/lock.py") for p in places)
    assert _outside(places, LOCK_PRIMITIVE_OWNERS) == []


def test_host_locks_are_taken_and_given_back_through_the_engine() -> None:
    """Outside ``engine/`` no module takes or gives back a host lock itself (``heal`` did): it calls
    ``engine.run.take_locks``/``give_back_locks`` or runs as phases, so every lock is released on Ctrl-C."""
    allowed = {"LockInfo", "DEFAULT_LOCK_PATH", "HostLocked", "STALE_AFTER_S"}
    found = []
    for path in sorted(PRODUCT.rglob("*.py")):
        if path.is_relative_to(PRODUCT / "engine"):
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if not isinstance(node, ast.ImportFrom):
                continue
            names = {a.name for a in node.names}
            if (node.module == "clusterctl.engine.lock" and names - allowed) or \
                    (node.module == "clusterctl.engine" and "lock" in names):
                found.append(f"{path.relative_to(PRODUCT)}:{node.lineno}")
    assert found == []


def test_progress_is_kept_by_the_engine_alone() -> None:
    places = _calls("ProgressStore") + _calls("progress_path") + _calls("default_state_dir")
    assert _outside(places, ("engine/",)) == []


def test_signals_are_turned_into_interrupted_in_one_place() -> None:
    assert _outside(_calls("signal"), ("cli/app.py",)) == []
