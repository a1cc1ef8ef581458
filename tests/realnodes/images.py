"""The images the real nodes run, made from the built binaries (nothing is pulled).

``pause`` is Kubernetes' own ``build/pause/linux/pause.c`` (from the ``k8s.io/kubernetes``
module the build already fetched) compiled statically, as its Makefile does.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path


def kubernetes_source(version: str) -> Path:
    """The ``k8s.io/kubernetes`` module's folder in the Go module cache."""
    env = {**os.environ, "GOFLAGS": "-mod=mod", "GOTOOLCHAIN": "local"}
    listing = subprocess.run(["go", "mod", "download", "-json", f"k8s.io/kubernetes@v{version}"],
                             capture_output=True, text=True, env=env, timeout=600, check=True)
    return Path(json.loads(listing.stdout)["Dir"])


def pause_binary(kubernetes: str, pause_version: str, out_dir: Path) -> Path:
    out = out_dir / f"pause-{pause_version}"
    if out.exists():
        return out
    out_dir.mkdir(parents=True, exist_ok=True)
    source = kubernetes_source(kubernetes) / "build" / "pause" / "linux" / "pause.c"
    partial = out.with_suffix(".partial")
    subprocess.run(["gcc", "-Os", "-Wall", "-Werror", "-static", f"-DVERSION=v{pause_version}", "-o", str(partial),
                    str(source)], check=True, capture_output=True, timeout=300)
    subprocess.run(["strip", str(partial)], check=True, capture_output=True)
    partial.rename(out)
    return out
