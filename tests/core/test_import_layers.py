"""The import layers hold (no circle, no upward import), and the contract, the tree and CONTRIBUTING.md agree.

The contract is ``[tool.importlinter]`` in pyproject.toml; ``lint-imports`` checks every import
of the package, those inside functions and under ``TYPE_CHECKING`` included.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from clirun import REPO_ROOT

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

PACKAGE = REPO_ROOT / "clusterctl"


def _contracts() -> dict[str, dict[str, object]]:
    config = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    return {str(c["id"]): c for c in config["contracts"]}


def _layer_names() -> list[str]:
    """Every name on the layers contract's lines, optional ones (in parentheses) included."""
    layers = _contracts()["layers"]["layers"]
    assert isinstance(layers, list)
    return [name.strip().strip("()") for line in layers for name in re.split(r"[:|]", str(line))]


def _top_level() -> set[str]:
    """The package's own top-level packages and modules."""
    found = {p.name for p in PACKAGE.iterdir() if p.is_dir() and (p / "__init__.py").is_file()}
    found |= {p.stem for p in PACKAGE.glob("*.py") if p.stem != "__init__"}
    return found


def test_every_top_level_package_and_module_has_a_layer() -> None:
    assert sorted(_top_level() - set(_layer_names())) == []


def test_contributing_names_every_layer_of_the_contract() -> None:
    text = (REPO_ROOT / "CONTRIBUTING.md").read_text()
    section = text[text.index("## Layers"):text.index("## Map of the tree")]
    present = [n for n in _layer_names() if n in _top_level()]
    missing = [n for n in present if not re.search(rf"`(?:clusterctl/)?{n}(?:/|\.py)`", section)]
    assert len(present) > 20 and missing == []


def _lint_imports() -> str:
    found = Path(sys.executable).parent / "lint-imports"
    return str(found) if found.is_file() else (shutil.which("lint-imports") or "")


def test_the_import_contracts_are_kept() -> None:
    pytest.importorskip("importlinter", reason="import-linter missing: pip install -e '.[test]'")
    command = _lint_imports()
    assert command, "import-linter is installed but its lint-imports command is not on PATH"
    done = subprocess.run([command, "--no-cache"], cwd=REPO_ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-2000:]
    assert "0 broken" in done.stdout and "Layers: dependencies point down only KEPT" in done.stdout


def test_the_check_sees_imports_inside_functions_and_under_type_checking(tmp_path: Path) -> None:
    pytest.importorskip("importlinter", reason="import-linter missing: pip install -e '.[test]'")
    package = tmp_path / "layered"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "high.py").write_text("from layered import low\n")
    (package / "low.py").write_text("def later() -> None:\n    from layered import high  # noqa\n")
    (package / "lower.py").write_text("from typing import TYPE_CHECKING\n\nif TYPE_CHECKING:\n"
                                      "    from layered import high\n")
    config = tmp_path / "layers.toml"
    config.write_text('[tool.importlinter]\nroot_package = "layered"\n\n[[tool.importlinter.contracts]]\n'
                      'name = "layers"\ntype = "layers"\nlayers = ["layered.high", "layered.low", "layered.lower"]\n')
    done = subprocess.run([_lint_imports(), "--no-cache", "--config", str(config)], cwd=tmp_path,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 1, done.stdout
    assert "layered.low -> layered.high (l.2)" in done.stdout
    assert "layered.lower -> layered.high (l.4)" in done.stdout
