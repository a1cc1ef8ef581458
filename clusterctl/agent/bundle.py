"""The one file bootstrap puts on every node: clusterctl's checks and ``prometheus-client`` as a zipapp.

Nodes need only ``python3`` (3.10 or newer: Ubuntu 22.04, Debian 12, RHEL 9): the bundle is a
``zipapp`` holding clusterctl's packages without its command line and simulator (no Typer, Rich,
paramiko or Jinja on the node) and ``prometheus_client``, the library the metrics are written
with. Built from the clusterctl that runs bootstrap, in a fixed order with fixed times, so the
same clusterctl gives the same bytes and a re-run of bootstrap changes nothing.
"""

from __future__ import annotations

import functools
import hashlib
import io
import zipfile
from collections.abc import Iterator
from pathlib import Path

#: Where bootstrap puts it, and the program line that runs it.
BUNDLE_PATH = "/usr/local/lib/clusterctl/clusterctl-node.pyz"
PYTHON = "/usr/bin/python3"
#: clusterctl's packages the node does not need (they import the CLI's and the simulator's libraries).
LEFT_OUT = ("cli", "mock", "__main__.py")
_SUFFIXES = (".py", ".csv", ".json", ".txt")
_STAMP = (1980, 1, 1, 0, 0, 0)
MAIN = b"from clusterctl.agent.main import main\n\nraise SystemExit(main())\n"


def _files(root: Path, top: str, left_out: tuple[str, ...] = ()) -> Iterator[tuple[str, Path]]:
    for path in sorted(root.rglob("*")):
        relative = path.relative_to(root)
        if not path.is_file() or "__pycache__" in relative.parts or path.suffix not in _SUFFIXES:
            continue
        if relative.parts[0] in left_out:
            continue
        yield f"{top}/{relative.as_posix()}", path


#: ``sha256sum``'s line for the bundle, beside it: a re-run of bootstrap reads these few bytes, not the
#: whole bundle from every host (``sha256sum -c`` checks it by hand).
DIGEST_PATH = BUNDLE_PATH + ".sha256"


def digest_line(data: bytes) -> str:
    return f"{hashlib.sha256(data).hexdigest()}  {BUNDLE_PATH.rsplit('/', 1)[-1]}\n"


@functools.lru_cache(maxsize=1)
def build() -> bytes:
    """The zipapp's bytes (``python3 clusterctl-node.pyz node-agent ...``), built once per process."""
    import prometheus_client

    import clusterctl

    members = [("__main__.py", MAIN)]
    sources = [*_files(Path(clusterctl.__file__).parent, "clusterctl", LEFT_OUT),
               *_files(Path(prometheus_client.__file__).parent, "prometheus_client")]
    members += [(name, path.read_bytes()) for name, path in sources]
    out = io.BytesIO()
    out.write(b"#!/usr/bin/env python3\n")
    with zipfile.ZipFile(out, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for name, data in members:
            info = zipfile.ZipInfo(name, date_time=_STAMP)
            info.external_attr = 0o644 << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            archive.writestr(info, data)
    return out.getvalue()
