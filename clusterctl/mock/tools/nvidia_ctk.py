"""``nvidia-ctk`` (NVIDIA Container Toolkit 1.18+): ``runtime configure --runtime=containerd``,
``cdi generate``, ``--version``.

``runtime configure`` writes the drop-in ``/etc/containerd/conf.d/99-nvidia.toml`` (the 1.18.1+
path; 1.18.0 wrote ``config.d``, NVIDIA/nvidia-container-toolkit#1404 and #1407) at the root
config's version, holding a copy of the root's CRI runtime plugin table (so containerd 1.x's
whole-table replacement keeps runc and the rest) plus ``runtimes.nvidia`` with
``BinaryName = "/usr/bin/nvidia-container-runtime"``; ``--set-as-default`` sets
``default_runtime_name = "nvidia"``, ``--cdi.enabled`` sets ``enable_cdi = true``. It adds
``imports = ["/etc/containerd/conf.d/*.toml"]`` to config.toml when missing. Its log lines go
to stderr as recorded in #1404. ``cdi generate --output=F`` writes a CDI spec with one device
per GPU that the host's ``nvidia-smi -L`` lists, plus ``all``.
"""

from __future__ import annotations

import copy
import re
from typing import Any

from clusterctl.mock.tools import containerd_config as cc
from clusterctl.mock.tools.base import ToolContext, ToolResult, split_args

PACKAGES = ("nvidia-container-toolkit", "nvidia-container-toolkit-base")
DROP_IN = "/etc/containerd/conf.d/99-nvidia.toml"
RUNTIME = "/usr/bin/nvidia-container-runtime"


#: Options that take the next word as their value.
VALUED = frozenset(f"--{name}" for name in (
    "runtime", "config", "drop-in-config", "output", "nvidia-runtime-name", "config-source"))


def _options(args: list[str]) -> dict[str, str]:
    """The long options by name (``--set-as-default`` alone: ``true``)."""
    _words, given, flags = split_args(args, VALUED)
    return {name[2:]: "true" for name in flags if name.startswith("--")} | {name[2:]: v for name, v in given.items()}


def _log(*lines: str) -> str:
    return "".join(f"INFO[0000] {line}\n" for line in lines)


def configure(ctx: ToolContext, opts: dict[str, str]) -> ToolResult:
    runtime = opts.get("runtime", "docker")
    if runtime != "containerd":
        return ToolResult("", f"ERRO[0000] unable to configure runtime {runtime!r} on this mock host\n", 1)
    config_path = opts.get("config", cc.CONFIG)
    drop_in = opts.get("drop-in-config", DROP_IN)
    root = cc.load(ctx, config_path)
    if root is None and ctx.fs.read(config_path) is not None:
        return ToolResult("", f"ERRO[0000] unable to load config: failed to load config from {config_path}\n", 1)
    root = root or {}
    version = int(root.get("version", 2) or 2)
    plugin = cc.cri_plugin(version)
    name = opts.get("nvidia-runtime-name", "nvidia")
    cri = copy.deepcopy((root.get("plugins") or {}).get(plugin) or {})
    containerd: dict[str, Any] = cri.setdefault("containerd", {})
    runtimes: dict[str, Any] = containerd.setdefault("runtimes", {})
    base = copy.deepcopy(runtimes.get("runc") or {"runtime_type": "io.containerd.runc.v2"})
    nvidia: dict[str, Any] = {**{k: v for k, v in base.items() if k != "options"},
                              "privileged_without_host_devices": False, "runtime_type": "io.containerd.runc.v2"}
    nvidia["options"] = {**(base.get("options") or {}), "BinaryName": RUNTIME}
    runtimes[name] = nvidia
    if opts.get("set-as-default") == "true":
        containerd["default_runtime_name"] = name
    if opts.get("cdi.enabled") == "true":
        cri["enable_cdi"] = True
    document = {"version": version, "plugins": {plugin: cri}}
    folder = drop_in.rsplit("/", 1)[0]
    ctx.fs.mkdir(folder)
    ctx.fs.write(drop_in, cc.dumps(document).encode())
    pattern = f"{folder}/*.toml"
    imports = [str(i) for i in root.get("imports") or []]
    if pattern not in imports:
        text = (ctx.fs.read(config_path) or b"").decode()
        line = "imports = [" + ", ".join(f'"{i}"' for i in [*imports, pattern]) + "]"
        if re.search(r"(?m)^imports\s*=.*$", text):
            text = re.sub(r"(?m)^imports\s*=.*$", line, text, count=1)
        elif re.search(r"(?m)^version\s*=.*$", text):
            text = re.sub(r"(?m)^(version\s*=.*)$", lambda m: m.group(1) + "\n" + line, text, count=1)
        else:
            text = f"version = {version}\n{line}\n" + text
        ctx.fs.mkdir(config_path.rsplit("/", 1)[0])
        ctx.fs.write(config_path, text.encode())
    return ToolResult("", _log(f"Using config version {version}", f'Using CRI runtime plugin name "{plugin}"',
                               f"Wrote updated config to {drop_in}",
                               "It is recommended that containerd daemon be restarted."))


def cdi_generate(ctx: ToolContext, opts: dict[str, str]) -> ToolResult:
    import yaml

    indexes = [int(m.group(1)) for line in ctx.gpus() if (m := re.match(r"GPU (\d+):", line))]
    if not indexes:
        return ToolResult("", "ERRO[0000] failed to generate CDI spec: failed to create device CDI specs: "
                          "failed to initialize NVML: ERROR_LIBRARY_NOT_FOUND\n", 1)
    devices = [{"name": str(i), "containerEdits": {"deviceNodes": [{"path": f"/dev/nvidia{i}"}]}} for i in indexes]
    devices.append({"name": "all", "containerEdits": {"deviceNodes": [{"path": f"/dev/nvidia{i}"} for i in indexes]}})
    spec = {"cdiVersion": "0.5.0", "kind": "nvidia.com/gpu", "devices": devices,
            "containerEdits": {"deviceNodes": [{"path": "/dev/nvidiactl"}, {"path": "/dev/nvidia-uvm"}]}}
    text = yaml.safe_dump(spec, sort_keys=False)
    output = opts.get("output")
    if not output:
        return ToolResult(text)
    parent = output.rsplit("/", 1)[0] or "/"
    ctx.fs.mkdir(parent)
    ctx.fs.write(output, text.encode())
    return ToolResult("", _log("Generated CDI spec with version 0.5.0"))


def run(ctx: ToolContext) -> ToolResult:
    args = ctx.args
    version = ctx.installed_version(*PACKAGES) or "1.18.0-1"
    if not args or args[0] in ("--version", "-v", "version"):
        upstream = version.rsplit("-", 1)[0]
        return ToolResult(f"NVIDIA Container Toolkit CLI version {upstream}\ncommit: mock\n")
    opts = _options(args)
    if args[:2] == ["runtime", "configure"]:
        return configure(ctx, opts)
    if args[:2] == ["cdi", "generate"]:
        return cdi_generate(ctx, opts)
    return ToolResult("", f"Incorrect Usage: no such command {' '.join(args[:2])!r}\n", 1)
