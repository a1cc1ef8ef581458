"""The air-gapped site's image mirror: a real CNCF ``distribution`` registry on the control
namespace, filled with images made here from the built binaries (nothing is pulled).

``image(files, entrypoint)`` makes a one-layer OCI image (a deterministic gzip tar, its config,
its manifest); ``push`` uploads it with the registry's HTTP API (monolithic blob upload, then the
manifest), run inside the control namespace where the registry listens. The registry is
``registry serve CONFIG`` of ``github.com/distribution/distribution/v3`` (tests/upstream/build-tools).
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import sys
import tarfile
import urllib.request
from dataclasses import dataclass
from pathlib import Path

OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
OCI_CONFIG = "application/vnd.oci.image.config.v1+json"
OCI_LAYER = "application/vnd.oci.image.layer.v1.tar+gzip"
PORT = 5000


def config_yaml(storage: Path, address: str) -> str:
    """The registry's configuration: files under ``storage``, plain HTTP on ``address`` (the
    control namespace only: nothing outside the tier's network can reach it)."""
    return (f"version: 0.1\nlog:\n  level: warn\nstorage:\n  filesystem:\n    rootdirectory: {storage}\n"
            f"  delete:\n    enabled: true\nhttp:\n  addr: {address}:{PORT}\n")


@dataclass(frozen=True)
class Image:
    layer: bytes
    config: bytes
    manifest: bytes

    @property
    def blobs(self) -> dict[str, bytes]:
        return {_digest(self.layer): self.layer, _digest(self.config): self.config}


def _digest(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def image(files: dict[str, Path], *, entrypoint: list[str], user: str = "") -> Image:
    """One layer holding ``files`` (path in the image -> file here, mode 0755, owned by root)."""
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tar:
        folders: set[str] = set()
        for inside in sorted(files):
            parts = inside.strip("/").split("/")
            for i in range(1, len(parts)):
                folder = "/".join(parts[:i])
                if folder not in folders:
                    folders.add(folder)
                    info = tarfile.TarInfo(folder)
                    info.type, info.mode = tarfile.DIRTYPE, 0o755
                    tar.addfile(info)
            data = files[inside].read_bytes()
            info = tarfile.TarInfo(inside.strip("/"))
            info.size, info.mode = len(data), 0o755
            tar.addfile(info, io.BytesIO(data))
    uncompressed = raw.getvalue()
    layer = gzip.compress(uncompressed, compresslevel=1, mtime=0)
    config = json.dumps({
        "architecture": "amd64", "os": "linux",
        "config": {"Entrypoint": entrypoint, "Env": ["PATH=/usr/local/bin:/usr/bin:/bin"],
                   **({"User": user} if user else {})},
        "rootfs": {"type": "layers", "diff_ids": [_digest(uncompressed)]},
    }, sort_keys=True).encode()
    manifest = json.dumps({
        "schemaVersion": 2, "mediaType": OCI_MANIFEST,
        "config": {"mediaType": OCI_CONFIG, "digest": _digest(config), "size": len(config)},
        "layers": [{"mediaType": OCI_LAYER, "digest": _digest(layer), "size": len(layer)}],
    }, sort_keys=True).encode()
    return Image(layer, config, manifest)


def push(registry: str, repository: str, tag: str, built: Image) -> None:
    """Upload ``built`` as ``registry/repository:tag`` (``registry``: ``http://host:port``)."""
    for digest, blob in built.blobs.items():
        head = urllib.request.Request(f"{registry}/v2/{repository}/blobs/{digest}", method="HEAD")
        try:
            with urllib.request.urlopen(head, timeout=60):
                continue
        except urllib.error.HTTPError as exc:
            if exc.code != 404:
                raise
        start = urllib.request.Request(f"{registry}/v2/{repository}/blobs/uploads/", method="POST", data=b"")
        with urllib.request.urlopen(start, timeout=60) as answer:
            location = answer.headers["Location"]
        if location.startswith("/"):
            location = registry + location
        separator = "&" if "?" in location else "?"
        upload = urllib.request.Request(f"{location}{separator}digest={digest}", method="PUT", data=blob,
                                        headers={"Content-Type": "application/octet-stream"})
        with urllib.request.urlopen(upload, timeout=300):
            pass
    put = urllib.request.Request(f"{registry}/v2/{repository}/manifests/{tag}", method="PUT", data=built.manifest,
                                 headers={"Content-Type": OCI_MANIFEST})
    with urllib.request.urlopen(put, timeout=60):
        pass


def main(argv: list[str]) -> int:
    """``registry.py push URL SPEC.json`` (run in the control namespace, where the registry
    listens): SPEC is a list of {"repository", "tag", "entrypoint", "user", "files": {inside: local}}."""
    if len(argv) != 4 or argv[1] != "push":
        print(main.__doc__, file=sys.stderr)
        return 2
    for item in json.loads(Path(argv[3]).read_text()):
        built = image({inside: Path(local) for inside, local in item["files"].items()},
                      entrypoint=item["entrypoint"], user=item.get("user", ""))
        push(argv[2], item["repository"], item["tag"], built)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
