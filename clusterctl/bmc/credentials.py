"""A BMC's password, read only when a power action needs it, from where the inventory says.

``password_file``: a file only its owner may read (mode 0600 or stricter, as ssh wants of a key);
one line, the trailing newline dropped. ``password_env``: an environment variable. Either way the
value becomes a ``Secret``: masked in every output, log line, journal and error (the Basic-auth
header that carries it too), and never put on a command line.
"""

from __future__ import annotations

import base64
import os

from clusterctl.errors import UsageError
from clusterctl.inventory.model import BmcConfig
from clusterctl.secret import Secret, read_secret_file, register_secret


def _where(config: BmcConfig) -> tuple[str | None, int | None]:
    if not config.source or ":" not in config.source:
        return config.source, None
    file, _, line = config.source.rpartition(":")
    return file, int(line) if line.isdigit() else None


def bmc_password(config: BmcConfig) -> Secret:
    """The password of ``config``'s BMCs; ``UsageError`` (exit 2, file, line and field) when it cannot be had."""
    file, line = _where(config)
    if config.password_env is not None:
        value = os.environ.get(config.password_env)
        if not value:
            raise UsageError(f"the environment variable {config.password_env} holding the BMC password of "
                             f"'{config.pattern}' is not set", file=file, line=line,
                             field=f"bmc.{config.pattern}.password_env",
                             hint=f"export {config.password_env}=... before running clusterctl (or use password_file).")
        return _secret(config, value)
    assert config.password_file is not None
    value, _ = read_secret_file(config.password_file, "BMC password", config.password_file, file=file, line=line,
                                field=f"bmc.{config.pattern}.password_file")
    return _secret(config, value)


def _secret(config: BmcConfig, value: str) -> Secret:
    # The Basic-auth header carries "user:password" in base64: masked wherever it could show.
    register_secret(base64.b64encode(f"{config.username}:{value}".encode()).decode())
    return Secret(value, label=f"BMC password of {config.pattern}")
