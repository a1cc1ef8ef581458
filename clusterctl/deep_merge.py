"""Nested mappings merged key by key: containerd's imports (2.x) over its root configuration,
as both bootstrap's prediction and the simulated containerd read them, and a mock profile's
``machine:`` over the one it extends."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def deep_merge(base: Mapping[str, Any], over: Mapping[str, Any]) -> dict[str, Any]:
    """``over`` on ``base``: where both hold a mapping under a key they merge in turn; else ``over`` wins."""
    out = dict(base)
    for key, value in over.items():
        below = out.get(key)
        out[key] = deep_merge(below, value) if isinstance(below, dict) and isinstance(value, dict) else value
    return out
