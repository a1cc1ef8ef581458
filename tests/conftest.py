"""Fixtures shared by every test folder.

``sshd_hosts``: a factory of real OpenSSH ``sshd`` mock hosts on loopback (see
``tests/sshd_hosts.py``). Tests using it are marked ``@pytest.mark.sshd`` and skip, with the
reason, only where ``/usr/sbin/sshd`` cannot run (CI installs openssh-server).
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from sshd_hosts import SSHDHosts, containerd_missing_reason, isolation_missing_reason, sshd_missing_reason
from tier_times import pytest_runtest_logreport, pytest_terminal_summary  # noqa: F401  (hooks: each tier's time)

#: Folders whose tests share one expensive set-up (the real control plane, a session fixture; the real
#: nodes, one machine-wide lock): with ``-n`` each such folder runs on one worker, and first, so the
#: two longest units start at once and the rest balance around them.
_WHOLE_FOLDERS = ("realnodes", "upstream")


def _unit(nodeid: str) -> str:
    """What one pytest-xdist worker runs whole: a folder of ``_WHOLE_FOLDERS``, else a test file (so
    module fixtures, the real nodes and sshd farms, start once)."""
    path = nodeid.split("::", 1)[0]
    parts = path.split("/")
    return parts[1] if len(parts) > 2 and parts[1] in _WHOLE_FOLDERS else path


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    items.sort(key=lambda item: _unit(item.nodeid) not in _WHOLE_FOLDERS)


@pytest.hookimpl(tryfirst=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object:
    """The README's test command runs ``-n auto``: work goes out by ``_unit`` (xdist's loadscope,
    scoped by file or folder instead of by module or class)."""
    from xdist.scheduler import LoadScopeScheduling

    class ByFileOrFolder(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return _unit(nodeid)

    return ByFileOrFolder(config, log)  # type: ignore[arg-type]


@pytest.fixture(autouse=True)
def _private_mock_state(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Every test's mock hosts keep their state in a folder of their own (never ~/.local/state)."""
    folder = tmp_path_factory.mktemp("mock-state")
    monkeypatch.setenv("CLUSTERCTL_MOCK_STATE", str(folder))
    return folder


@pytest.fixture
def sshd_hosts(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SSHDHosts]:
    """``sshd_hosts(3, profile=DIR)`` starts three sshd mock hosts; all are stopped afterwards."""
    reason = sshd_missing_reason()
    if reason:
        pytest.skip(reason)
    farm = SSHDHosts(tmp_path_factory.mktemp("sshd"))
    try:
        yield farm
    finally:
        farm.stop_all()


@pytest.fixture
def needs_isolation() -> None:
    """Skips the test where isolated sshd hosts (own mount and UTS namespaces) cannot run."""
    reason = isolation_missing_reason()
    if reason:
        pytest.skip(reason)


@pytest.fixture
def needs_containerd() -> None:
    """Skips the test where isolated sshd hosts with a real containerd cannot run."""
    reason = containerd_missing_reason()
    if reason:
        pytest.skip(reason)


@pytest.fixture(autouse=True)
def _no_inherited_width(monkeypatch: pytest.MonkeyPatch) -> None:
    """Output is checked as a pipe or a log shows it: whole lines. pytest-xdist's workers inherit
    ``COLUMNS=80``, which asks clusterctl to wrap; the tests of wrapping set their own width."""
    monkeypatch.delenv("COLUMNS", raising=False)
    monkeypatch.delenv("LINES", raising=False)


@pytest.fixture(autouse=True)
def _changes_confirmed(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tests run as a CI job that reviewed its plan: commands that change hosts do not ask
    (``CLUSTERCTL_YES``, ``clusterctl/cli/confirm.py``). Tests of the question itself delete it."""
    monkeypatch.setenv("CLUSTERCTL_YES", "1")


@pytest.fixture(autouse=True)
def _private_state_dir(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """Commands record the last run's failed hosts (``--limit @retry``) under XDG_STATE_HOME:
    keep tests from writing into the real home and from seeing each other's runs."""
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path_factory.mktemp("state")))
