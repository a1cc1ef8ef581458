"""Every local file clusterctl replaces goes through one writer, ``writable.replace_file``: a reader sees the
old file or the new one, and a failed write leaves the old file as it was and no temporary behind."""

from __future__ import annotations

import ast
import errno
import os
import stat
from pathlib import Path

import pytest

import clusterctl
from clusterctl.errors import UsageError
from clusterctl.writable import replace_file, write_files


def test_a_failed_write_leaves_the_old_file_and_no_temporary(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "nccl.conf").write_text("NCCL_IB_HCA=mlx5_0\n")

    def disk_full(fd: int) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "fsync", disk_full)
    with pytest.raises(UsageError, match=f"cannot write {tmp_path / 'nccl.conf'}: No space left on device"):
        write_files({"nccl.conf": "NCCL_IB_HCA=mlx5_1\n"}, tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["nccl.conf"]
    assert (tmp_path / "nccl.conf").read_text() == "NCCL_IB_HCA=mlx5_0\n"


def test_a_folder_in_the_way_leaves_no_temporary(tmp_path: Path) -> None:
    # No injection: the rename itself fails, as it does for a real user who named a folder.
    (tmp_path / "board.json" / "inside").mkdir(parents=True)
    with pytest.raises(UsageError, match=f"cannot write {tmp_path / 'board.json'}: Is a directory"):
        write_files({"first.json": "{}\n", "board.json": "{}\n"}, tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["board.json", "first.json"]
    assert (tmp_path / "board.json").is_dir()


def test_an_interrupt_leaves_no_temporary(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def interrupted(src: object, dst: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(os, "replace", interrupted)
    with pytest.raises(KeyboardInterrupt):
        replace_file(tmp_path / "progress.json", "{}\n", mode=0o600)
    assert list(tmp_path.iterdir()) == []


def test_modes_private_exactly_else_as_the_umask_makes_them(tmp_path: Path) -> None:
    old = os.umask(0o002)
    try:
        replace_file(tmp_path / "private" / "record.json", "{}\n", mode=0o600)
        replace_file(tmp_path / "shared.sh", "export NCCL_DEBUG=WARN\n")
        (tmp_path / "private.json").write_text("old\n")
        (tmp_path / "private.json").chmod(0o644)
        replace_file(tmp_path / "private.json", "new\n", mode=0o600)
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "private" / "record.json").stat().st_mode) == 0o600
    assert stat.S_IMODE((tmp_path / "shared.sh").stat().st_mode) == 0o664
    assert stat.S_IMODE((tmp_path / "private.json").stat().st_mode) == 0o600
    assert (tmp_path / "private.json").read_text() == "new\n"


def test_without_parents_a_missing_folder_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        replace_file(tmp_path / "no-such" / "survey.json", "{}\n", parents=False)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("command", ["health", "survey"])
@pytest.mark.parametrize(("path", "said"), [("/", "is a folder; give a file name."),
                                            (".", "is a folder; give a file name."),
                                            ("/no-such-folder/r.json", "the folder /no-such-folder does not exist.")])
def test_a_save_that_cannot_be_written_is_refused_before_any_host_is_read(command: str, path: str, said: str) -> None:
    """'health --save /' ended in 'internal error: ValueError'; any unwritable --save failed only after the
    whole fleet had been read."""
    from clirun import DEMO, clusterctl

    done = clusterctl("-i", DEMO, command, "--save", path)
    assert (done.exit_code, done.stdout) == (2, "")
    assert " ".join(done.stderr.split()) == f"error: --save {path}: {said}"


@pytest.mark.parametrize("command", [("tune-nccl",), ("bootstrap", "artifacts"), ("dashboards",)])
def test_an_out_folder_that_is_a_file_is_a_usage_error(command: tuple[str, ...], tmp_path: Path) -> None:
    """tune-nccl's and bootstrap artifacts' --out FILE ended in 'internal error: FileExistsError', exit 1."""
    from clirun import DEMO, clusterctl

    (tmp_path / "afile").write_text("mine\n")
    done = clusterctl("-i", DEMO, *command, "--out", tmp_path / "afile")
    assert (done.exit_code, done.stdout) == (2, "")
    assert " ".join(done.stderr.split()) == f"error: --out {tmp_path / 'afile'}: exists and is not a folder."
    assert (tmp_path / "afile").read_text() == "mine\n"


@pytest.mark.parametrize("command", [("tune-nccl",), ("bootstrap", "artifacts"), ("dashboards",)])
def test_a_full_disk_under_out_is_an_error_naming_the_file(command: tuple[str, ...], tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """A full disk under --out ended in 'internal error: OSError', exit 1, naming no file."""
    from clirun import DEMO, clusterctl

    def disk_full(fd: int) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "fsync", disk_full)
    done = clusterctl("-i", DEMO, *command, "--out", tmp_path / "out")
    said = " ".join(done.stderr.split())
    assert done.exit_code == 2 and "internal error" not in said, said
    assert f"error: --out {tmp_path / 'out'}: cannot write {tmp_path / 'out'}/" in said
    assert said.endswith(": No space left on device.")


def _renames(tree: ast.AST) -> list[int]:
    """Lines that rename or stage a file by hand: ``os.replace``/``os.rename``, ``PATH.replace(OTHER)``
    (one argument: ``str.replace`` takes two), ``.rename(...)``, ``mkstemp``, ``NamedTemporaryFile``."""
    lines = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
        if (name in {"rename", "mkstemp", "NamedTemporaryFile"}
                or (name == "replace" and isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name)
                    and func.value.id == "os")
                or (name == "replace" and len(node.args) == 1 and not node.keywords)):
            lines.append(node.lineno)
    return lines


def test_no_module_but_writable_replaces_a_local_file_by_hand() -> None:
    root = Path(clusterctl.__file__).parent
    found = []
    for path in sorted(root.rglob("*.py")):
        relative = path.relative_to(root).as_posix()
        # The simulator keeps its mock hosts' files: those are the hosts' side, not clusterctl's.
        if relative == "writable.py" or relative.startswith("mock/"):
            continue
        found += [f"{relative}:{line}" for line in _renames(ast.parse(path.read_text(), str(path)))]
    assert found == [], "write through clusterctl.writable.replace_file instead"
