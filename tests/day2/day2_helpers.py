"""Shared by the day-2 tests: the demo cluster bootstrapped once, faults, a digest of the mock state."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
DEMO = REPO / "inventories" / "demo.yaml"
DEMO_SURVEY = REPO / "tests" / "bootstrap_cluster" / "fixtures" / "demo-survey.json"
_BOOTSTRAPPED: dict[str, Path] = {}


def _bootstrap(inventory: Path, *, state: Path, progress: Path) -> None:
    """'clusterctl bootstrap' of ``inventory`` with its mock hosts' state in ``state`` (the test's own
    CLUSTERCTL_MOCK_STATE given back after)."""
    from clirun import clusterctl

    saved = os.environ.get("CLUSTERCTL_MOCK_STATE")
    os.environ["CLUSTERCTL_MOCK_STATE"] = str(state)
    try:
        done = clusterctl("-i", inventory, "bootstrap", "--survey", DEMO_SURVEY, "--state-dir", progress)
    finally:
        if saved is None:
            os.environ.pop("CLUSTERCTL_MOCK_STATE", None)
        else:
            os.environ["CLUSTERCTL_MOCK_STATE"] = saved
    assert done.exit_code == 0, done.output


def bootstrap_once(cache: Path) -> Path:
    """The demo cluster after 'clusterctl bootstrap', made once per session and copied for each test."""

    if "demo" not in _BOOTSTRAPPED:
        _bootstrap(DEMO, state=cache, progress=cache / "progress")
        _BOOTSTRAPPED["demo"] = cache
    return _BOOTSTRAPPED["demo"]


def three_control_planes(folder: Path) -> Path:
    """The demo inventory with gpu-a2 and gpu-a3 control planes too (kubeadm's HA: three stacked etcd
    members), written into ``folder``; its hosts keep the demo's recordings."""
    import re

    text = DEMO.read_text().replace("profile: demo/", f"profile: {DEMO.parent / 'demo'}/")
    for name in ("gpu-a2", "gpu-a3"):
        text = re.sub(rf"(  {name}:\n(?:    .*\n)*?    rack: a\n)", r"\1    roles: [control-plane, worker]\n", text)
    assert text.count("roles: [control-plane, worker]") == 3
    inventory = folder / "demo-3cp.yaml"
    inventory.write_text(text)
    return inventory


def bootstrap_three_once(cache: Path) -> tuple[Path, Path]:
    """The three-control-plane demo after 'clusterctl bootstrap' (its inventory, its mock state), made once
    per session and copied for each test."""

    if "3cp" not in _BOOTSTRAPPED:
        _bootstrap(three_control_planes(cache), state=cache / "state", progress=cache / "progress")
        _BOOTSTRAPPED["3cp"] = cache
    cache = _BOOTSTRAPPED["3cp"]
    return cache / "demo-3cp.yaml", cache / "state"


def mock_cluster_folder(state: Path) -> Path:
    return next(p for p in state.iterdir() if p.name.startswith("demo-"))


def installed(state: Path, host: str, package: str) -> str:
    """The version of ``package`` a demo mock host has installed."""
    from clusterctl.mock.state import HostState

    data = HostState(mock_cluster_folder(state) / "hosts" / host, host).read()
    return str(data["packages"][package]["version"])


def set_fault(state: Path, host: str, name: str, value: str | None) -> None:
    """Make a demo mock host misbehave (``drain: hang``, ``kubelet: not-ready``); None clears it."""
    from clusterctl.mock.state import HostState

    folder = mock_cluster_folder(state) / "hosts" / host
    with HostState(folder, host).edit() as data:
        values = data.setdefault("values", {})
        if value is None:
            values.pop(name, None)
        else:
            values[name] = value


def state_digest(state: Path) -> str:
    """One hash of every file the mock cluster keeps (names and bytes)."""
    digest = hashlib.sha256()
    for path in sorted(p for p in state.rglob("*") if p.is_file()):
        digest.update(str(path.relative_to(state)).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


def unconfirmed(*args: str | Path) -> Any:
    """``clusterctl ARGS`` as a script without --yes runs it: no terminal, no CLUSTERCTL_YES
    (tests/conftest.py sets it for every other run)."""
    from clirun import clusterctl

    saved = os.environ.pop("CLUSTERCTL_YES", None)
    try:
        return clusterctl(*args)
    finally:
        if saved is not None:
            os.environ["CLUSTERCTL_YES"] = saved
