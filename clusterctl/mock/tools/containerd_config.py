"""Reading containerd's configuration from a mock host's tree (shared by nvidia-ctk, ctr, crictl).

Not a tool: helpers that resolve ``/etc/containerd/config.toml`` with its ``imports`` the way
the installed containerd does (1.x: an imported file replaces each top-level ``plugins.<id>``
table it names; 2.x: merged key by key; see /work/shared/reference/bootstrap-facts.md) and write
small TOML documents.
"""

from __future__ import annotations

import sys
from typing import Any

from clusterctl.deep_merge import deep_merge
from clusterctl.mock.tools.base import ToolContext
from clusterctl.templating import toml_key, toml_value

CONFIG = "/etc/containerd/config.toml"
SOCKET = "/run/containerd/containerd.sock"


def cri_plugin(version: int) -> str:
    return "io.containerd.grpc.v1.cri" if version < 3 else "io.containerd.cri.v1.runtime"


class TOMLError(ValueError):
    """A file containerd could not read as TOML."""


def parse_toml(data: bytes) -> dict[str, Any]:
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - Python 3.10 has tomli as a dependency of its test tools only
        import tomli as tomllib
    try:
        return tomllib.loads(data.decode())
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise TOMLError(str(exc)) from None


def load(ctx: ToolContext, path: str = CONFIG) -> dict[str, Any] | None:
    data = ctx.fs.read(path)
    if data is None:
        return None
    try:
        return parse_toml(data)
    except TOMLError:
        return None


def installed_major(ctx: ToolContext) -> int:
    """The installed containerd's major version (1 when it cannot tell: Debian's and Ubuntu's 1.x)."""
    package = ctx.installed_version("containerd", "containerd.io") or "1"
    head = package.split(".", 1)[0].split(":")[-1]
    return int(head) if head.isdigit() else 1


def imported(ctx: ToolContext, pattern: object) -> list[str]:
    """The files an ``imports`` entry names: a glob pattern's matches in the tree, else the path itself."""
    return ctx.fs.glob(str(pattern)) if any(c in str(pattern) for c in "*?[") else [str(pattern)]


def effective(ctx: ToolContext) -> dict[str, Any]:
    """The configuration containerd runs with: the root file, then each import over it.

    containerd 1.x replaces each whole ``plugins.<id>`` table an import names; 2.x merges imports
    key by key (checked against the real 1.6, 2.2 and 2.3 by tests/upstream/test_contract_containerd.py).
    """
    root = load(ctx) or {}
    merged = dict(root)
    plugins = dict(root.get("plugins") or {})
    whole_tables = installed_major(ctx) < 2
    for pattern in root.get("imports") or []:
        for path in imported(ctx, pattern):
            doc = load(ctx, path) or {}
            for plugin_id, table in (doc.get("plugins") or {}).items():
                below = plugins.get(plugin_id)
                if whole_tables or not isinstance(below, dict) or not isinstance(table, dict):
                    plugins[plugin_id] = table  # 1.x: the whole plugin table is replaced
                else:
                    plugins[plugin_id] = deep_merge(below, table)
    merged["plugins"] = plugins
    return merged


def runtimes(config: dict[str, Any]) -> tuple[dict[str, Any], str]:
    """The CRI runtimes table and the default runtime name of an effective config."""
    version = int(config.get("version", 1) or 1)
    cri = (config.get("plugins") or {}).get(cri_plugin(version)) or {}
    containerd = cri.get("containerd") or {}
    return dict(containerd.get("runtimes") or {}), str(containerd.get("default_runtime_name") or "runc")


def cri_disabled(config: dict[str, Any]) -> bool:
    disabled = [str(p) for p in config.get("disabled_plugins") or []]
    return "cri" in disabled or "io.containerd.grpc.v1.cri" in disabled


def dumps(doc: dict[str, Any]) -> str:
    """TOML for nested tables of strings, numbers, booleans and lists (enough for configs we write)."""
    lines: list[str] = []

    def table(prefix: list[str], body: dict[str, Any]) -> None:
        scalars = {k: v for k, v in body.items() if not isinstance(v, dict)}
        tables = {k: v for k, v in body.items() if isinstance(v, dict)}
        if prefix and (scalars or not tables):
            lines.append("")
            lines.append("[" + ".".join(toml_key(p) for p in prefix) + "]")
        for k, v in scalars.items():
            lines.append(f"{'  ' * min(len(prefix), 1)}{toml_key(k)} = {toml_value(v)}")
        for k, v in tables.items():
            table([*prefix, k], v)

    table([], doc)
    return "\n".join(lines).lstrip("\n") + "\n"
