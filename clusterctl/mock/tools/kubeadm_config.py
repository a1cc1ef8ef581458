"""The simulated kubeadm's reading of its configuration: ``--config`` documents, strict decoding
against the one schema of kubeadm's fields (``recordings/kube/kubeadm-v1beta4.schema.json``),
the API versions each release reads, which flags may stand beside ``--config``, ``--dry-run``.

Shared by ``kubeadm``, ``kubeadm_reset`` and ``kubeadm_upgrade``; it imports none of them.
"""

from __future__ import annotations

import json
import time
from typing import Any

from clusterctl.mock.tools.base import ToolContext, option
from clusterctl.mock.tools.kube_state import recording

#: kubeadm's config API fields, one schema for the simulator and the tests (recordings/kube/README.md).
SCHEMA_FILE = "kubeadm-v1beta4.schema.json"


def schema() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(recording(SCHEMA_FILE))
    return loaded


def unknown_field(value: Any, node: dict[str, Any], defs: dict[str, Any], path: str = "") -> str | None:
    """The first field kubeadm's strict decoding refuses, as its path (``apiServer.extraArgs[0].foo``)."""
    while "$ref" in node:
        node = defs[str(node["$ref"]).rsplit("/", 1)[-1]]
    if isinstance(value, dict) and "properties" in node:
        properties: dict[str, Any] = node["properties"]
        for key, item in value.items():
            if key not in properties:
                if node.get("additionalProperties") is False:
                    return f"{path}{key}"
                continue
            found = unknown_field(item, properties[key], defs, f"{path}{key}.")
            if found:
                return found
    elif isinstance(value, list) and isinstance(node.get("items"), dict):
        for index, item in enumerate(value):
            found = unknown_field(item, node["items"], defs, f"{path.rstrip('.')}[{index}].")
            if found:
                return found
    return None


#: What kubeadm's errors end with.
TRACE = "To see the stack trace of this error execute with --v=5 or higher\n"


def kubeadm_version(ctx: ToolContext) -> str:
    """The installed kubeadm binary's version (``v1.36.2``; v1.36.0 when the package is not installed)."""
    return "v" + (ctx.installed_version("kubeadm") or "1.36.0").split("-")[0]


def minor_of(version: str) -> int:
    """The minor of Kubernetes ``version`` (``v1.37.2`` -> 37); 36, the uninstalled kubeadm's, where it has none."""
    try:
        return int(version.lstrip("v").split(".")[1])
    except (IndexError, ValueError):
        return 36


class ConfigError(Exception):
    pass


#: Flags kubeadm takes beside ``--config`` (``isAllowedFlag``, cmd/kubeadm/app/apis/kubeadm/validation/
#: validation.go, 1.35 to 1.37); any other makes init, join, reset and upgrade refuse to start.
ALLOWED_WITH_CONFIG = frozenset({
    "config", "ignore-preflight-errors", "dry-run", "kubeconfig", "node-name", "kubeconfig-dir", "upload-certs",
    "print-manifest", "allow-missing-template-keys", "output", "show-managed-fields", "print-join-command", "rootfs",
    "v", "log-file", "yes"})
SHORTHANDS = {"-f": "force", "-y": "yes", "-v": "v", "-o": "output"}


def check_mixed_arguments(args: list[str]) -> None:
    """kubeadm's ``ValidateMixedArguments``: ``--config`` with a flag it does not allow beside it fails."""
    if option(args, "--config") is None:
        return
    mixed: set[str] = set()
    for arg in args:
        name = arg[2:].split("=", 1)[0] if arg.startswith("--") else SHORTHANDS.get(arg.split("=", 1)[0])
        if name and name not in ALLOWED_WITH_CONFIG and not name.startswith("skip-"):
            mixed.add(name)
    if mixed:
        # pflag visits flags in name order; Go prints the slice as [a b].
        raise ConfigError(f"can not mix '--config' with arguments [{' '.join(sorted(mixed))}]")


def dry_run(args: list[str], section: dict[str, Any] | None = None) -> bool:
    """``--dry-run`` on the command line or ``dryRun: true`` in the configuration section it reads."""
    return "--dry-run" in args or bool((section or {}).get("dryRun"))


#: Where kubeadm's commands load each kind (cmd/kubeadm/app/util/config/), named in their klog warnings.
LOADERS = {"JoinConfiguration": "joinconfiguration.go", "ResetConfiguration": "resetconfiguration.go",
           "UpgradeConfiguration": "upgradeconfiguration.go"}


def load_config(ctx: ToolContext, args: list[str], *, strict: bool = False) -> dict[str, dict[str, Any]]:
    """The documents of ``--config`` by kind; ``ConfigError`` with kubeadm's wording when refused.

    ``strict`` is ``kubeadm config validate``'s decoding: an unknown field at any depth fails.
    init, join, reset, upgrade and the others decode as kubeadm's commands do: an unknown field is
    a klog warning on stderr and the command goes on (``strictErrors`` false in ``util/config``).
    """
    import yaml

    path = option(args, "--config")
    if path is None:
        return {}
    if path in ("/dev/stdin", "-"):
        data = ctx.stdin
    else:
        content = ctx.fs.read(ctx.path(path))
        if content is None:
            raise ConfigError(f"unable to read config from \"{path}\" : open {path}: no such file or directory")
        data = content
    docs: dict[str, dict[str, Any]] = {}
    try:
        loaded = [d for d in yaml.safe_load_all(data.decode()) if d]
    except yaml.YAMLError as exc:
        raise ConfigError(f"error converting YAML to JSON: {exc}") from None
    for doc in loaded:
        api, kind = str(doc.get("apiVersion", "")), str(doc.get("kind", ""))
        if api.startswith("kubeadm.k8s.io/"):
            if api == "kubeadm.k8s.io/v1beta3" and (minor := minor_of(kubeadm_version(ctx))) >= 37:
                # v1beta3 was removed in 1.37 (kubernetes#136016): the real kubeadm's wording.
                raise ConfigError(f'your configuration file uses an old API spec: "{api}" (kind: "{kind}"). Please '
                                  f"use kubeadm v1.{minor - 1} instead and run 'kubeadm config migrate "
                                  "--old-config old-config-file --new-config new-config-file', which will write the "
                                  "new, similar spec using a newer API version.")
            if api not in ("kubeadm.k8s.io/v1beta3", "kubeadm.k8s.io/v1beta4"):
                raise ConfigError(f'no kind "{kind}" is registered for version "{api}" in scheme '
                                  '"k8s.io/kubernetes/cmd/kubeadm/app/apis/kubeadm/scheme/scheme.go:31"')
            if api == "kubeadm.k8s.io/v1beta3":
                _check_v1beta3(ctx, kind, doc)
            types = schema()["$defs"]
            unknown = unknown_field(doc, types[kind], types) if api.endswith("v1beta4") and kind in types else None
            if unknown:
                group, version = api.split("/", 1)
                message = (f'error unmarshaling configuration schema.GroupVersionKind{{Group:"{group}", '
                           f'Version:"{version}", Kind:"{kind}"}}: strict decoding error: unknown field "{unknown}"')
                if strict:
                    raise ConfigError(message)
                # The commands themselves decode leniently (strictErrors=false in util/config): a warning.
                ctx.log(klog("W", LOADERS.get(kind, "initconfiguration.go") + ":53", message))
        docs[kind] = doc
    return docs


#: v1beta3's ``extraArgs`` were maps; v1beta4 made them ``[{name, value}]`` lists (Go struct, field).
V1BETA3_MAPS = {"apiServer": ("APIServer", "extraArgs"), "controllerManager": ("ControlPlaneComponent", "extraArgs"),
                "scheduler": ("ControlPlaneComponent", "extraArgs"),
                "nodeRegistration": ("NodeRegistrationOptions", "kubeletExtraArgs")}


def _check_v1beta3(ctx: ToolContext, kind: str, doc: dict[str, Any]) -> None:
    """Before 1.37 kubeadm still reads v1beta3, warning (klog) that it is deprecated; v1beta4's list
    shapes do not decode into its maps."""
    ctx.log(klog("W", "common.go:100", f'your configuration file uses a deprecated API spec: "kubeadm.k8s.io/'
                  f'v1beta3" (kind: "{kind}"). Please use \'kubeadm config migrate --old-config old-config-file '
                  "--new-config new-config-file', which will write the new, similar spec using a newer API version."))
    for section, (struct, field) in V1BETA3_MAPS.items():
        if isinstance((doc.get(section) or {}).get(field), list):
            raise ConfigError(f'error unmarshaling configuration schema.GroupVersionKind{{Group:"kubeadm.k8s.io", '
                              f'Version:"v1beta3", Kind:"{kind}"}}: json: cannot unmarshal array into Go struct field '
                              f"{struct}.{section}.{field} of type map[string]string")


def klog(level: str, where: str, message: str) -> str:
    """One klog line (``W1201 20:36:04.244084   12315 version.go:108] ...``), as kubeadm logs to stderr."""
    now = time.time()
    stamp = time.strftime("%m%d %H:%M:%S", time.gmtime(now)) + f".{int(now % 1 * 1e6):06d}"
    return f"{level}{stamp}   12315 {where}] {message}\n"
