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
    """Outside ``engine/`` no module takes or gives back a host lock itself (``heal`` did): it runs as
    phases, so every lock is released on Ctrl-C."""
    allowed = {"LockInfo", "DEFAULT_LOCK_PATH", "HostLocked", "STALE_AFTER_S", "who_runs_this"}
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


def _imports_from(module: str) -> dict[str, set[str]]:
    """Product file -> the names it imports from ``module``."""
    found: dict[str, set[str]] = {}
    for path in sorted(PRODUCT.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ImportFrom) and node.module == module:
                found.setdefault(str(path.relative_to(PRODUCT)), set()).update(a.name for a in node.names)
    return found


def test_no_command_runs_steps_under_locks_of_its_own() -> None:
    """Host locks are taken and given back inside ``engine/run.py`` only, and a command gets them by being
    phases on the engine (upgrade, then heal, once took the engine's locks and ran their own steps under them)."""
    places = [p for name in ("acquire", "acquire_then", "release") for p in _calls(name, on="host_lock")]
    assert places and _outside(places, ("engine/run.py",)) == []
    beyond = {path: names for path, names in _imports_from("clusterctl.engine.lock").items()
              if not path.startswith("engine/") and names - {"DEFAULT_LOCK_PATH", "who_runs_this"}}
    assert beyond == {}


def test_no_command_writes_a_progress_file_of_its_own() -> None:
    """A run's progress is recorded and saved by the engine as phases finish; a command may put its
    own run-wide values in ``store.run`` before the run, never record steps or save the file."""
    writes = [p for name in ("record", "forget", "save") for on in ("store", "progress")
              for p in _calls(name, on=on)]
    assert _outside(writes, ("engine/",)) == []
    own = [f"{path.relative_to(PRODUCT)}:{node.lineno}" for path in sorted(PRODUCT.rglob("*.py"))
           for node in ast.walk(ast.parse(path.read_text(), str(path)))
           if isinstance(node, ast.FunctionDef) and "progress" in node.name and node.name.startswith(("save", "load"))]
    assert _outside(own, ("engine/",)) == []


def test_undo_journals_are_written_ahead_by_the_engine_alone() -> None:
    """Every undo journal is written before each change, by the engine: the write-ahead journal is made in
    ``engine/`` alone (``RunPlace.journal``, ``journaled_gate``) for the engine's gate to keep (a journal saved
    after the fact, as ``tune-nccl --push`` once did, left hosts changed with no journal when interrupted)."""
    assert _outside(_calls("WriteAheadJournal"), ("engine/",)) == []
