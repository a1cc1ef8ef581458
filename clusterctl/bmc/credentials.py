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


def bmc_password(config: BmcConfig) -> Secret:
    """The password of ``config``'s BMCs; ``UsageError`` (exit 2, file, line and field) when it cannot be had."""
    # config.source is the entry's "file:line", which UsageError prints where a file and its line go.
    if config.password_env is not None:
        value = os.environ.get(config.password_env)
        if not value:
            raise UsageError(f"the environment variable {config.password_env} holding the BMC password of "
                             f"'{config.pattern}' is not set", file=config.source,
                             field=f"bmc.{config.pattern}.password_env",
                             hint=f"export {config.password_env}=... before running clusterctl (or use password_file).")
    else:
        assert config.password_file is not None
        value, _ = read_secret_file(config.password_file, "BMC password", config.password_file, file=config.source,
                                    field=f"bmc.{config.pattern}.password_file")
    # The Basic-auth header carries "user:password" in base64: masked wherever it could show.
    register_secret(base64.b64encode(f"{config.username}:{value}".encode()).decode())
    return Secret(value, label=f"BMC password of {config.pattern}")
