"""``assert_hosts_unchanged``: a plan or a dry run must leave the simulated hosts exactly as they were.

Mock hosts keep everything they are in one state folder (``clusterctl.mock.state``: each host's
file tree and ``host.json``, the cluster's ``cluster.json``). The helper takes a snapshot of that
folder before the block and compares it after, file by file and byte by byte, naming every path
that appeared, vanished or changed. Left out are only the simulator's own bookkeeping, which is no
part of any host: lock files beside the JSON documents, and in ``host.json`` how often each
profile rule answered (``answers``, ``rule_hits``: a read of a recorded answer advances them).

    with assert_hosts_unchanged(mock_state):
        clusterctl("-i", DEMO, "bootstrap", "plan")

``seed_mock_hosts(inventory)`` first creates the hosts' state, so that a dry run that is the
first command to reach a host is not blamed for the simulator setting the host up.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from pathlib import Path

#: Keys of ``host.json`` the simulator advances on every read of a recorded answer.
BOOKKEEPING_KEYS = ("answers", "rule_hits")


def snapshot(folder: Path) -> dict[str, bytes]:
    """Every file under ``folder`` by relative path (``hosts/<host>/fs/etc/x``), bookkeeping left out."""
    found: dict[str, bytes] = {}
    if not folder.exists():
        return found
    for path in sorted(folder.rglob("*")):
        if path.is_dir() and not path.is_symlink():
            found[str(path.relative_to(folder)) + "/"] = b""
            continue
        if path.name.endswith(".lock"):
            continue
        data = path.read_bytes() if not path.is_symlink() else b"-> " + str(path.readlink()).encode()
        if path.name == "host.json" and path.parent.parent.name == "hosts":
            document = json.loads(data or b"{}")
            for key in BOOKKEEPING_KEYS:
                document.pop(key, None)
            data = json.dumps(document, sort_keys=True).encode()
        found[str(path.relative_to(folder))] = data
    return found


def differences(before: dict[str, bytes], after: dict[str, bytes]) -> list[str]:
    """One line per path that appeared, vanished or changed."""
    lines = [f"new: {p}" for p in sorted(after.keys() - before.keys())]
    lines += [f"gone: {p}" for p in sorted(before.keys() - after.keys())]
    lines += [f"changed: {p}" for p in sorted(before.keys() & after.keys()) if before[p] != after[p]]
    return lines


@contextlib.contextmanager
def assert_hosts_unchanged(folder: Path) -> Iterator[None]:
    """Fail when the block changed anything in the mock state ``folder`` (see the module docstring)."""
    before = snapshot(folder)
    yield
    changed = differences(before, snapshot(folder))
    assert not changed, f"the hosts changed under {folder}:\n  " + "\n  ".join(changed[:40])


def seed_mock_hosts(inventory_path: str | Path) -> None:
    """Create the state of every host of a mock inventory, as its first command would."""
    from clirun import clusterctl

    seeded = clusterctl("-i", str(inventory_path), "exec", "true")
    assert seeded.exit_code == 0, seeded.output
