"""The NCCL environment a ``bench nccl`` run exports: settings files, then ``--env`` pairs.

Kept with NCCL's settings rather than in ``bench``, so that bench (which tune-nccl's sweep
runs) needs nothing from here.

Settings files are read with ``sources.read_settings``, the one reader of NCCL
settings: every format tune-nccl renders (nccl.conf/env, profile.d, ConfigMap, Slurm exports)
and the ones people keep (job scripts, manifests). Only NCCL's variables come out of it, so a
ConfigMap's ``apiVersion`` or ``metadata`` can never end up in the environment.
"""

from __future__ import annotations

from collections.abc import Sequence

from clusterctl.errors import UsageError
from clusterctl.inputfile import read_text_input
from clusterctl.inventory.values import ENV_NAME
from clusterctl.nccl.sources import read_settings


def nccl_env(pairs: Sequence[str], env_file: str | None = None) -> dict[str, str]:
    """The NCCL variables set in ``env_file`` (the last setting of a name winning, as in a shell), then
    ``--env KEY=VALUE`` pairs over them."""
    env: dict[str, str] = {}
    if env_file:
        text, label = read_text_input(env_file, "nccl-settings")  # the one reader of a file a user names
        for setting in sorted(read_settings(text, name=label), key=lambda s: s.line):
            if setting.dynamic:
                raise UsageError(f"{setting.name}={setting.value} is computed when the job runs; give its value "
                                 "with --env NAME=VALUE", file=env_file, line=setting.line)
            env[setting.name] = setting.value
    for pair in pairs:
        name, sep, value = pair.partition("=")
        name = name.strip()
        if not sep or not ENV_NAME.fullmatch(name):
            raise UsageError(f"--env takes KEY=VALUE, KEY a shell variable name (letters, digits, '_'), got {pair!r}")
        env[name] = value
    return env
