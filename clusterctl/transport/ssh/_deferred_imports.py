"""Imported first by ``clusterctl.transport.ssh``, before paramiko: defers paramiko's ``invoke``.

paramiko's ``config`` module imports ``invoke`` (with its vendored YAML, ``unittest.mock``
and more) as soon as paramiko is imported, for one purpose: running the command of an
ssh_config ``Match exec`` line. That import was a sixth of a fan-out's fixed CPU. Here
``invoke`` is entered in ``sys.modules`` as a stand-in module that imports the real one on
first use (paramiko's only use is ``invoke.run``), so an ssh_config with ``Match exec``
works as before and everyone else never pays for it. Where ``invoke`` is not installed, or
is already imported, nothing is done.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
import threading
import types

_lock = threading.Lock()


class DeferredModule(types.ModuleType):
    """Stands in for a module in ``sys.modules`` until an attribute of it is needed."""

    def __getattr__(self, name: str) -> object:
        # Called only for attributes the stand-in lacks: everything but its name and spec.
        return getattr(load(self), name)


def load(stand_in: DeferredModule) -> types.ModuleType:
    """The real module behind ``stand_in``, imported once (several threads may ask at once)."""
    with _lock:
        real = stand_in.__dict__.get("_deferred_real")
        if real is None:
            name = stand_in.__name__
            if sys.modules.get(name) is stand_in:
                del sys.modules[name]
            try:
                real = importlib.import_module(name)
            except BaseException:
                sys.modules.setdefault(name, stand_in)
                raise
            stand_in.__dict__["_deferred_real"] = real
        return real


def defer(name: str) -> None:
    """Enter a stand-in for ``name`` unless it is imported already or not installed."""
    if name in sys.modules:
        return
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return
    if spec is None:
        return
    stand_in = DeferredModule(name)
    stand_in.__spec__ = spec
    sys.modules[name] = stand_in


if "paramiko" not in sys.modules:
    defer("invoke")
