"""containerd's configuration, the way containerd itself reads it. Pure functions, no I/O.

* Config version by containerd release: 2 for 1.x, 3 for 2.0 to 2.2, 4 for 2.3 and later
  (containerd ``RELEASES.md``, ``version/version.go`` ``ConfigVersion``).
* CRI tables: v2 ``plugins."io.containerd.grpc.v1.cri"`` (``sandbox_image``, ``containerd.runtimes``,
  ``registry.config_path``); v3/v4 ``plugins."io.containerd.cri.v1.runtime"`` (runtimes) and
  ``plugins."io.containerd.cri.v1.images"`` (``pinned_images.sandbox``, ``registry.config_path``)
  (containerd ``docs/cri/config.md``). v4 differs from v3 only in server settings, which
  clusterctl does not write.
* ``imports``: on 1.x a drop-in's ``plugins.<id>`` table REPLACES the root's whole table
  (``mergeConfig``, containerd#5837, #7982); from 2.0 sub-tables are merged key by key.
* A drop-in must not carry a higher version than its root (2.3.0-2.3.4 die with "drop-in
  config version X higher than root config version Y"); clusterctl's rule: the same version.
"""

from __future__ import annotations

import copy
import re
import sys
from dataclasses import dataclass, field
from typing import Any

from clusterctl.bootstrap.matrix import parse_version
from clusterctl.deep_merge import deep_merge
from clusterctl.errors import ParseError
from clusterctl.findings import Finding, Severity
from clusterctl.templating import render

V2_CRI = "io.containerd.grpc.v1.cri"
V3_RUNTIME = "io.containerd.cri.v1.runtime"
V3_IMAGES = "io.containerd.cri.v1.images"
NVIDIA_RUNTIME_BINARY = "/usr/bin/nvidia-container-runtime"
CONFIG_PATH = "/etc/containerd/config.toml"
DROPIN_DIR = "/etc/containerd/conf.d"
CERTS_DIR = "/etc/containerd/certs.d"


def config_version_for(containerd_version: str) -> int:
    version = parse_version(containerd_version)
    if version is None:
        raise ValueError(f"not a containerd version: {containerd_version!r}")
    if version[0] < 2:
        return 2
    if version[:2] < (2, 3):
        return 3
    return 4


def parse_toml(text: str, what: str) -> dict[str, Any]:
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - Python 3.10
        import tomli as tomllib
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        match = re.search(r"line (\d+)", str(exc))
        line = int(match.group(1)) if match else None
        raise ParseError(what, str(exc).split(" (at line")[0], line=line) from None


def file_version(doc: dict[str, Any]) -> int:
    """The ``version`` of a config file; containerd treats a file without one as version 1."""
    value = doc.get("version", 1)
    return value if isinstance(value, int) else 1


def _get(doc: dict[str, Any], *path: str) -> Any:
    node: Any = doc
    for key in path:
        if not isinstance(node, dict) or key not in node:
            return None
        node = node[key]
    return node


def runtimes_of(doc: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Runtime tables of a config at any version (v2 or v3/v4 layout), by runtime name."""
    found: dict[str, dict[str, Any]] = {}
    for plugin in (V2_CRI, V3_RUNTIME):
        tables = _get(doc, "plugins", plugin, "containerd", "runtimes")
        if isinstance(tables, dict):
            for name, body in tables.items():
                if isinstance(body, dict):
                    found.setdefault(name, body)
    return found


def cri_tables(version: int) -> dict[str, tuple[str, ...]]:
    """Where each managed value lives at this config version (v2: all in one CRI table)."""
    runtime, images, sandbox = (V2_CRI, V2_CRI, ("sandbox_image",)) if version == 2 else \
        (V3_RUNTIME, V3_IMAGES, ("pinned_images", "sandbox"))
    return {"runtimes": ("plugins", runtime, "containerd", "runtimes"),
            "default_runtime": ("plugins", runtime, "containerd", "default_runtime_name"),
            "sandbox": ("plugins", images, *sandbox), "config_path": ("plugins", images, "registry", "config_path")}


def effective_config(root: dict[str, Any], dropins: list[dict[str, Any]], containerd_major: int) -> dict[str, Any]:
    """What containerd ends up with after reading ``imports`` (in order), by its own merge rule."""
    merged = copy.deepcopy(root)
    for dropin in dropins:
        if containerd_major < 2:
            plugins = dict(merged.get("plugins") or {})
            for plugin_id, table in (dropin.get("plugins") or {}).items():
                plugins[plugin_id] = copy.deepcopy(table)  # 1.x: the whole plugin table is replaced
            rest = {k: v for k, v in dropin.items() if k not in ("plugins", "version", "imports")}
            merged = deep_merge(merged, rest)
            if plugins:
                merged["plugins"] = plugins
        else:
            merged = deep_merge(merged, {k: v for k, v in dropin.items() if k not in ("version", "imports")})
    return merged


@dataclass(frozen=True)
class WantedContainerd:
    containerd_version: str
    version: int
    sandbox_image: str
    #: ``default``: nvidia is the default runtime; ``runtimeclass``: runc stays default.
    runtime_mode: str
    cdi: bool
    #: Runtimes already in the host's config (kept), by name.
    existing_runtimes: dict[str, dict[str, Any]] = field(default_factory=dict)
    certs_dir: str = CERTS_DIR
    dropin_dir: str = DROPIN_DIR
    #: Settings of the host's config that are not clusterctl's (``root``, ``[grpc]``, other
    #: plugins' tables): carried into the new file so that nothing local is lost.
    carried: dict[str, Any] = field(default_factory=dict)

    @property
    def default_runtime(self) -> str:
        return "nvidia" if self.runtime_mode == "default" else "runc"

    def runtimes(self) -> dict[str, dict[str, Any]]:
        """runc and nvidia as clusterctl wants them, every other existing runtime kept as it is.

        An existing nvidia entry keeps its own keys (a GPU Operator's BinaryName under
        /usr/local/nvidia, extra options); clusterctl only makes sure it is runc v2 with
        SystemdCgroup on, like runc's.
        """
        out: dict[str, dict[str, Any]] = {}
        for name in ("runc", "nvidia"):
            body = copy.deepcopy(self.existing_runtimes.get(name, {}))
            body.setdefault("runtime_type", "io.containerd.runc.v2")
            options = dict(body.get("options") or {})
            if name == "nvidia":
                options.setdefault("BinaryName", NVIDIA_RUNTIME_BINARY)
            options["SystemdCgroup"] = True
            body["options"] = options
            out[name] = body
        for name, body in self.existing_runtimes.items():
            if name not in out:
                out[name] = copy.deepcopy(body)
        return out


#: Registry host -> the server containerd's hosts.toml names for it (docs/hosts.md); any other: https://<host>.
REGISTRY_SERVERS = {"docker.io": "https://registry-1.docker.io"}


def registry_server(registry: str) -> str:
    """The server behind a registry host name, where a pull goes when no mirror answers for it."""
    return REGISTRY_SERVERS.get(registry, f"https://{registry}")


#: Plugin tables clusterctl writes itself (any version); everything else is carried over.
CRI_PLUGINS = (V2_CRI, V3_RUNTIME, V3_IMAGES, "cri")
#: Server sections that version 4 moved under plugins (``serviceMigrate`` in containerd's
#: ``cmd/containerd/server/config/config.go``).
SERVER_SECTIONS = ("grpc", "ttrpc", "debug", "metrics")


def carried_settings(root: dict[str, Any], target_version: int) -> tuple[dict[str, Any], list[str]]:
    """What of the host's config to keep, and the CRI keys that the new file drops (for a warning)."""
    carried: dict[str, Any] = {}
    plugins: dict[str, Any] = {}
    for key, value in root.items():
        if key in ("version", "imports"):
            continue
        if key == "plugins" and isinstance(value, dict):
            plugins.update({plugin_id: table for plugin_id, table in value.items() if plugin_id not in CRI_PLUGINS})
        elif key in SERVER_SECTIONS and target_version >= 4 and isinstance(value, dict):
            plugins.setdefault(f"io.containerd.server.v1.{key}", value)
        else:
            carried[key] = value
    if plugins:
        carried["plugins"] = plugins
    # What the new file writes itself (and so does not drop).
    managed = {"sandbox_image", "enable_cdi", "cdi_spec_dirs", "containerd.default_runtime_name", "pinned_images"}
    written = ("pinned_images.", "containerd.runtimes", "registry.config_path")
    dropped = [f"{plugin_id}: {key} = {value!r}" for plugin_id in CRI_PLUGINS
               if isinstance(table := _get(root, "plugins", plugin_id), dict)
               for key, value in _flatten(table) if key not in managed and not key.startswith(written)]
    return carried, dropped


def _flatten(table: dict[str, Any], prefix: str = "") -> list[tuple[str, Any]]:
    out: list[tuple[str, Any]] = []
    for key, value in table.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict) and value:
            out.extend(_flatten(value, name + "."))
        elif not isinstance(value, dict):
            out.append((name, value))
    return out


def render_config(wanted: WantedContainerd) -> str:
    template = "config-v2.toml.j2" if wanted.version == 2 else "config-v3.toml.j2"
    carried = dict(wanted.carried)
    plugins = carried.pop("plugins", {})
    scalars = {k: v for k, v in carried.items() if not isinstance(v, dict)}
    tables = {k: v for k, v in carried.items() if isinstance(v, dict)}
    return render(f"bootstrap/containerd/{template}", version=wanted.version,
                  containerd_version=wanted.containerd_version, imports=[f"{wanted.dropin_dir}/*.toml"],
                  sandbox_image=wanted.sandbox_image, cdi=wanted.cdi, default_runtime=wanted.default_runtime,
                  runtimes=wanted.runtimes(), certs_dir=wanted.certs_dir, dropin_dir=wanted.dropin_dir,
                  carried_scalars=scalars, carried_tables=tables, carried_plugins=plugins)


def check_dropins(root_version: int, containerd_version: str, root: dict[str, Any],
                  dropins: dict[str, dict[str, Any]], wanted: WantedContainerd, host: str) -> list[Finding]:
    """Drop-ins at another config version (errors where containerd refuses them), and managed values a
    drop-in would override (an error: containerd would lose them)."""
    problems: list[Finding] = []
    major = (parse_version(containerd_version) or (2, 0, 0))[0]
    for path, doc in sorted(dropins.items()):
        version = file_version(doc)
        if version > root_version:
            problems.append(Finding(Severity.ERROR, "CONTAINERD_DROPIN_VERSION_HIGHER",
                                    f"{path} is config version {version}, higher than the root's {root_version}: "
                                    "containerd refuses it (2.3.0-2.3.4 exit at start; aicr#1688)", host=host,
                                    file=path, fix="Rewrite the drop-in at the root's version (or remove it)."))
        elif version != root_version:
            problems.append(Finding(Severity.WARNING, "CONTAINERD_DROPIN_VERSION_MISMATCH",
                                    f"{path} is config version {version}, the root is {root_version}: "
                                    "drop-ins should carry the root's version", host=host, file=path,
                                    fix="Write drop-ins at the root's config version."))
    tables = cri_tables(root_version)
    effective = effective_config(root, [dropins[p] for p in sorted(dropins)], major)
    lost: list[str] = []
    if _get(effective, *tables["sandbox"]) != wanted.sandbox_image:
        lost.append(f"the sandbox image ({_get(effective, *tables['sandbox'])!r} instead of {wanted.sandbox_image!r})")
    runtimes = _get(effective, *tables["runtimes"]) or {}
    for name in ("runc", "nvidia"):
        options = (runtimes.get(name) or {}).get("options") or {}
        if name not in runtimes:
            lost.append(f"the {name} runtime")
        elif options.get("SystemdCgroup") is not True:
            lost.append(f"SystemdCgroup for {name}")
    if _get(effective, *tables["default_runtime"]) != wanted.default_runtime:
        lost.append(f"the default runtime ({_get(effective, *tables['default_runtime'])!r})")
    if _get(effective, *tables["config_path"]) != wanted.certs_dir:
        lost.append("registry config_path")
    if lost and dropins:
        rule = ("containerd 1.x replaces a whole plugin table imported from a drop-in (containerd#5837)"
                if major < 2 else "a drop-in overrides the root key by key")
        problems.append(Finding(Severity.ERROR, "CONTAINERD_DROPIN_OVERRIDES",
                                f"with the drop-ins, containerd would lose {'; '.join(lost)}: {rule}", host=host,
                                file=", ".join(sorted(dropins)), fix="clusterctl's config.toml already holds the "
                                "nvidia runtime: remove the drop-in, or regenerate it after this phase (nvidia-ctk "
                                "copies the root's table)."))
    return problems
