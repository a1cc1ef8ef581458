"""The three files a user keeps a secret in (``CLUSTERCTL_SUDO_PASS_FILE`` and its siblings, a BMC's
``password_file``, ``remediate serve --token-file``) are read by one reader and refused for the same
reasons, each refusal naming the file."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from clusterctl.bmc.credentials import bmc_password
from clusterctl.cli.credentials import read_secret
from clusterctl.errors import UsageError
from clusterctl.inventory.model import BmcConfig
from clusterctl.quarantine.webhook_server import TokenFile

GOOD = "0123456789abcdef-secret"


def _sudo(path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.delenv("CLUSTERCTL_SUDO_PASS", raising=False)
    monkeypatch.setenv("CLUSTERCTL_SUDO_PASS_FILE", str(path))
    secret = read_secret("sudo password", "CLUSTERCTL_SUDO_PASS", ask=False)
    assert secret is not None
    return secret.reveal()


def _bmc(path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    config = BmcConfig("gpu-a*", "bmc-{host}", "admin", password_file=str(path), source="lab.yaml:7")
    return bmc_password(config).reveal()


def _token(path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    return TokenFile(str(path))._current().decode()


READERS: dict[str, Callable[[Path, pytest.MonkeyPatch], str]] = {"sudo": _sudo, "bmc": _bmc, "token": _token}


@pytest.mark.parametrize("reader", READERS)
@pytest.mark.parametrize(("content", "mode", "says"), [
    (b"", 0o600, "alone on one line"),
    (b"\n", 0o600, "alone on one line"),
    (GOOD.encode() + b"\nsecond line\n", 0o600, "alone on one line"),
    (b"x" * 5000, 0o600, "at most 4096 bytes"),
    (b"\xff\xfe" + GOOD.encode(), 0o600, "not UTF-8 text"),
    (GOOD.encode() + b"\n", 0o644, "others may read or change it (mode 644)"),
    (GOOD.encode() + b"\n", 0o660, "others may read or change it (mode 660)"),
    (GOOD.encode() + b"\n", 0o604, "others may read or change it (mode 604)"),
])
def test_every_secret_file_is_refused_for_the_same_reasons(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                           reader: str, content: bytes, mode: int, says: str) -> None:
    path = tmp_path / "secret"
    path.write_bytes(content)
    path.chmod(mode)
    with pytest.raises(UsageError) as caught:
        READERS[reader](path, monkeypatch)
    assert str(path) in str(caught.value) and says in str(caught.value), str(caught.value)
    assert GOOD not in str(caught.value)


@pytest.mark.parametrize("reader", READERS)
def test_a_missing_file_or_a_folder_is_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, reader: str) -> None:
    for path, says in ((tmp_path / "absent", "No such file or directory"), (tmp_path, "not a regular file")):
        with pytest.raises(UsageError) as caught:
            READERS[reader](path, monkeypatch)
        assert str(path) in str(caught.value) and says in str(caught.value), str(caught.value)


@pytest.mark.parametrize("reader", READERS)
def test_the_secret_is_the_line_without_its_ending(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                   reader: str) -> None:
    path = tmp_path / "secret"
    path.write_text(GOOD + "\r\n")
    path.chmod(0o600)
    assert READERS[reader](path, monkeypatch) == GOOD


def test_only_the_receivers_token_may_be_read_by_its_group(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Alertmanager runs as its own user: the token file is often root:alertmanager 0640.
    path = tmp_path / "secret"
    path.write_text(GOOD + "\n")
    path.chmod(0o640)
    assert _token(path, monkeypatch) == GOOD
    for reader in (_sudo, _bmc):
        with pytest.raises(UsageError, match=r"mode 0600 \(chmod 600"):
            reader(path, monkeypatch)
