"""The inventory's ``bmc:`` section: values, which entry a host takes, and every error with file, line and field;
the password read only from a 0600 file or an environment variable, as a secret."""

from __future__ import annotations

from pathlib import Path

import pytest
from refusals import inventory_refusal

from clusterctl.bmc.credentials import bmc_password
from clusterctl.bmc.redfish import address_for
from clusterctl.errors import UsageError
from clusterctl.inventory.bmc_section import bmc_for
from clusterctl.inventory.loader import load_inventory
from clusterctl.secret import mask_text

HOSTS = "hosts: {gpu-a1: {}, gpu-a2: {}, gpu-b1: {}}\n"


def inventory(tmp_path: Path, bmc: str) -> Path:
    path = tmp_path / "inv.yaml"
    path.write_text(HOSTS + "bmc:\n" + bmc)
    return path


def test_entries_by_pattern_and_by_name(tmp_path: Path) -> None:
    (tmp_path / "ca.pem").write_text("-----BEGIN CERTIFICATE-----\n")
    inv = load_inventory(inventory(tmp_path, (
        "  gpu-a*:\n"
        "    address: \"https://{host}-bmc.mgmt\"\n"
        "    username: admin\n"
        "    password_env: BMC_PASSWORD\n"
        "    ca_file: ca.pem\n"
        "    timeout_s: 4\n"
        "  gpu-a2: {address: 10.1.0.12:8443, username: root, password_file: pw, verify_tls: false,\n"
        "           system: /redfish/v1/Systems/Self, power_timeout_s: 120}\n")))
    a1, a2 = bmc_for(inv.bmc, "gpu-a1"), bmc_for(inv.bmc, "gpu-a2")
    assert a1 is not None and a2 is not None and bmc_for(inv.bmc, "gpu-b1") is None
    assert a1.pattern == "gpu-a*" and a1.verify_tls and a1.ca_file == str(tmp_path / "ca.pem")
    assert a1.timeout_s == 4 and a1.power_timeout_s == 300 and a1.source == f"{tmp_path / 'inv.yaml'}:3"
    assert address_for(a1, "gpu-a1").url == "https://gpu-a1-bmc.mgmt"
    # The entry under its own name wins over the pattern written before it.
    assert a2.pattern == "gpu-a2" and not a2.verify_tls and a2.password_file == str(tmp_path / "pw")
    assert address_for(a2, "gpu-a2").url == "https://10.1.0.12:8443"
    assert address_for(a2, "gpu-a2").system == "/redfish/v1/Systems/Self"


def test_bmc_files_are_named_by_the_inventorys_one_path_rule(tmp_path: Path) -> None:
    # password_file and ca_file kept '..' (and symlinks) as written, unlike every other file an inventory names.
    (tmp_path / "site").mkdir()
    (tmp_path / "ca.pem").write_text("-----BEGIN CERTIFICATE-----\n")
    inv = load_inventory(inventory(tmp_path / "site", "  gpu-a1: {address: x, username: u, password_file: ../pw,\n"
                                   "           ca_file: ../ca.pem}\n"))
    assert (inv.bmc[0].password_file, inv.bmc[0].ca_file) == (str(tmp_path / "pw"), str(tmp_path / "ca.pem"))


@pytest.mark.parametrize(("bmc", "line", "field", "words"), [
    ("  gpu-a1: {address: x, username: u, password: hunter22}\n", 3, "bmc.gpu-a1.password",
     "never written in the inventory"),
    ("  gpu-a1: {address: x, username: u}\n", 3, "bmc.gpu-a1", "exactly one of password_file and password_env"),
    ("  gpu-a1: {address: x, username: u, password_env: A, password_file: f}\n", 3, "bmc.gpu-a1", "not both"),
    ("  gpu-a1: {username: u, password_env: A}\n", 3, "bmc.gpu-a1", "has no address"),
    ("  gpu-a1: {address: x, password_env: A}\n", 3, "bmc.gpu-a1", "has no username"),
    ("  gpu-z*: {address: x, username: u, password_env: A}\n", 3, "bmc.gpu-z*", "names no host"),
    ("  gpu-a1:\n    address: x\n    username: u\n    password_env: A\n    verify_tls: \"no\"\n", 7,
     "bmc.gpu-a1.verify_tls", "true or false"),
    ("  gpu-a1: {address: x, username: u, password_env: 1BAD, timeout_s: 3}\n", 3, "bmc.gpu-a1.password_env",
     "not an environment variable name"),
    ("  gpu-a1: {address: x, username: u, password_env: A, ca_file: missing.pem}\n", 3, "bmc.gpu-a1.ca_file",
     "no such file"),
    ("  gpu-a1: {address: \"ftp://x\", username: u, password_env: A}\n", 3, "bmc.gpu-a1.address",
     "not a BMC address"),
    ("  gpu-a1: {address: \"-{host}-bmc\", username: u, password_env: A}\n", 3, "bmc.gpu-a1.address",
     "not a BMC address"),
    ("  gpu-a1: {address: \"https://[::::]:443\", username: u, password_env: A}\n", 3, "bmc.gpu-a1.address",
     "not a BMC address"),
    ("  gpu-a1: {address: \"fd00::21\", username: u, password_env: A}\n", 3, "bmc.gpu-a1.address",
     "not a BMC address"),
    ("  gpu-a1: {address: \"bmc:0\", username: u, password_env: A}\n", 3, "bmc.gpu-a1.address",
     "not a BMC address"),
    ("  gpu-a1: {address: x, username: u, password_env: A, timout_s: 3}\n", 3, "bmc.gpu-a1.timout_s",
     "Did you mean 'timeout_s'?"),
    ("  - gpu-a1\n", 3, "bmc", "must map host names or patterns"),
])
def test_every_error_names_file_line_and_field(tmp_path: Path, bmc: str, line: int, field: str,
                                                 words: str) -> None:
    error = inventory_refusal(inventory(tmp_path, bmc))
    assert (error.line, error.field) == (line, field), str(error)
    assert words in str(error)
    assert "hunter22" not in str(error)


def test_the_password_comes_from_a_private_file_as_a_secret(tmp_path: Path) -> None:
    secret_file = tmp_path / "pw"
    secret_file.write_text("s3cret-bmc-word\n")
    secret_file.chmod(0o644)
    inv = load_inventory(inventory(tmp_path, "  gpu-a*: {address: x, username: admin, password_file: pw}\n"))
    config = inv.bmc[0]
    with pytest.raises(UsageError) as caught:
        bmc_password(config)
    assert "others may read or change it (mode 644)" in str(caught.value) and "chmod 600" in str(caught.value)
    assert str(caught.value).startswith(f"{tmp_path / 'inv.yaml'}:3: field 'bmc.gpu-a*.password_file': ")
    secret_file.chmod(0o600)
    password = bmc_password(config)
    assert password.reveal() == "s3cret-bmc-word"
    assert str(password) == "********" and "s3cret-bmc-word" not in repr(password)
    assert mask_text("login s3cret-bmc-word") == "login ********"
    import base64

    header = base64.b64encode(b"admin:s3cret-bmc-word").decode()
    assert header not in mask_text(f"Authorization: Basic {header}")


def test_the_password_from_the_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    inv = load_inventory(inventory(tmp_path, "  gpu-a*: {address: x, username: admin, password_env: LAB_BMC_PW}\n"))
    monkeypatch.delenv("LAB_BMC_PW", raising=False)
    with pytest.raises(UsageError) as caught:
        bmc_password(inv.bmc[0])
    assert "LAB_BMC_PW" in str(caught.value) and "is not set" in str(caught.value)
    monkeypatch.setenv("LAB_BMC_PW", "from-the-env-42")
    assert bmc_password(inv.bmc[0]).reveal() == "from-the-env-42"
