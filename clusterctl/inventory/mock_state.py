"""Where a mock cluster keeps its state: the default of the inventory's ``mock_state`` setting.

In order:

1. the inventory's ``mock_state: DIR`` (in ``defaults``, a group or a host; relative to the
   inventory file; Ansible: ``clusterctl_mock_state``): exactly that folder;
2. else ``$CLUSTERCTL_MOCK_STATE/<cluster>-<hash>``;
3. else ``${XDG_STATE_HOME:-~/.local/state}/clusterctl/mock/<cluster>-<hash>``.

``<hash>`` is taken from the inventory file's absolute path, so two checkouts of the same demo
inventory do not share state, and nothing is ever written into the repository. Plain path arithmetic,
kept with the inventory so that loading one never imports the simulator (``clusterctl.mock``).
"""

from __future__ import annotations

import hashlib
import os
import re
from pathlib import Path

from clusterctl.writable import state_home

#: Environment variable naming the folder under which mock clusters keep their state.
MOCK_STATE_ENV = "CLUSTERCTL_MOCK_STATE"


def state_base() -> Path:
    """The folder holding every mock cluster's state folder."""
    explicit = os.environ.get(MOCK_STATE_ENV, "").strip()
    if explicit:
        return Path(explicit).expanduser()
    return state_home() / "mock"


def default_state_folder(cluster: str | None, inventory_source: str | None) -> Path:
    """The state folder of a mock cluster whose inventory names no ``mock_state``."""
    name = re.sub(r"[^A-Za-z0-9_.-]+", "_", cluster or "mock") or "mock"
    where = str(Path(inventory_source).resolve()) if inventory_source else "(no inventory)"
    digest = hashlib.sha256(where.encode()).hexdigest()[:10]
    return state_base() / f"{name}-{digest}"
