"""containerd on a node: version, config files, CRI plugin status, kubeadm's pause image.

``containerd_probe`` reads the version, the root config, the list of drop-ins and kubeadm's
images in one round trip (files are printed under ``@@clusterctl@@ <name>`` lines: a TOML
comment cannot be mistaken for one); the phase then reads each drop-in. The parsers are pure
and tested on real outputs (``tests/fixtures/containerd/``).
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field

from clusterctl.errors import ParseError
from clusterctl.facts.base import absent_reason
from clusterctl.facts.klog import is_klog_line
from clusterctl.facts.sections import MARKER_FILES, cat_missing, files_read, ls_failed, section_command, split_sections
from clusterctl.facts.table import cells_under_header, numbered_lines, read_lines

_WHAT = "containerd facts"


@dataclass(frozen=True)
class ContainerdFacts:
    #: ``1.6.20``, ``2.2.1``; None when containerd is not installed.
    version: str | None
    #: Content of the root config; None when there is none.
    config: str | None
    #: Drop-in file name -> content ("" until read), in the order containerd reads them.
    dropins: dict[str, str] = field(default_factory=dict)
    #: Registry -> content of ``certs.d/<registry>/hosts.toml``.
    hosts_files: dict[str, str] = field(default_factory=dict)
    #: The pause image the installed kubeadm wants; None without kubeadm.
    kubeadm_pause: str | None = None
    #: systemd's word for the service (``active``, ``inactive``, ``failed``...) and whether it
    #: starts at boot (``enabled``, ``disabled``...); None where systemctl could not say.
    service: str | None = None
    enabled: str | None = None


_VERSION = re.compile(r"^containerd\s+\S+\s+v?(\d+\.\d+\.\d+)\S*")


def parse_containerd_version(text: str) -> str:
    """``containerd --version``: ``containerd <module or package> [v]X.Y.Z[~suffix] <revision>``."""
    for line in numbered_lines(text):
        match = _VERSION.match(line.text.strip())
        if not match:
            raise ParseError("containerd --version", "expected 'containerd <package> <version> <revision>'",
                             line=line.number, text=line.text)
        return match.group(1)
    raise ParseError("containerd --version", "no output")


@dataclass(frozen=True)
class PluginStatus:
    type: str
    id: str
    platforms: str
    status: str


def parse_ctr_plugins(text: str) -> tuple[PluginStatus, ...]:
    """``ctr plugins ls``: a ``TYPE ID PLATFORMS STATUS`` header, then one plugin per line."""
    rows = cells_under_header(text, "ctr plugins ls", "TYPE ID PLATFORMS STATUS", lambda cells: len(cells) == 4,
                              "expected four columns")
    return tuple(PluginStatus(*cells) for cells in rows)


def cri_status(plugins: tuple[PluginStatus, ...]) -> str | None:
    """The CRI plugin's status (``ok``, ``error``, ``skip``), or None when it is not listed."""
    return next((p.status for p in plugins if p.type == "io.containerd.grpc.v1" and p.id == "cri"), None)


def parse_kubeadm_images(text: str) -> tuple[str, ...]:
    """``kubeadm config images list``: one image reference per line (klog lines from stderr skipped)."""
    return tuple(read_lines(text, "kubeadm config images list", _image_reference,
                            "expected an image reference such as registry.k8s.io/pause:3.10.1", skip=is_klog_line))


def _image_reference(line: str) -> str | None:
    value = line.strip()
    return None if " " in value or "/" not in value or ":" not in value.rsplit("/", 1)[-1] else value


def pause_image(images: tuple[str, ...]) -> str | None:
    return next((image for image in images if image.rsplit("/", 1)[-1].startswith("pause:")), None)


def containerd_probe(config_path: str, dropin_dir: str, certs_dir: str, kubernetes: str | None,
                     registries: tuple[str, ...] = ()) -> str:
    """One shell line printing every piece under ``@@clusterctl@@ <name>`` headers.

    Simple commands only (no loops): the drop-ins are listed here and read one by one after.
    """
    kube = f" --kubernetes-version {shlex.quote('v' + kubernetes.lstrip('v'))}" if kubernetes else ""
    sections = [
        ("version", "containerd --version"),
        ("config", f"cat {shlex.quote(config_path)}"),
        ("dropins", f"ls -1 {shlex.quote(dropin_dir)}"),
        *((f"hosts:{registry}", f"cat {shlex.quote(f'{certs_dir}/{registry}/hosts.toml')}") for registry in registries),
        ("kubeadm-images", f"kubeadm config images list{kube}"),
        ("service", "systemctl is-active containerd"),
        ("enabled", "systemctl is-enabled containerd"),
    ]
    return section_command(sections, marker=MARKER_FILES)


def parse_containerd_probe(text: str) -> ContainerdFacts:
    """The probe's output; drop-in contents are filled in by the caller (``dropin_names``)."""
    sections = split_sections(text, _WHAT, marker=MARKER_FILES)
    version = None if absent_reason(sections.text("version")) else sections.read("version", parse_containerd_version)
    config_section = sections.get("config")
    config = None if config_section is None or cat_missing(config_section.text) else config_section.text
    listing = sections.get("dropins")
    dropins = {} if listing is None or ls_failed(listing.text) else {
        name: "" for line in listing.lines if (name := line.strip()).endswith(".toml") and "/" not in name}
    hosts_files = {registry: text for registry, text in files_read(sections, "hosts:").items() if text is not None}
    # kubeadm's own log lines (``could not fetch a Kubernetes version from the internet``) are not a failure: it
    # falls back to its own version and lists the images. An error of its own ("error", "unable") lists none.
    answer = "".join(line + "\n" for line in sections.text("kubeadm-images").splitlines() if not is_klog_line(line))
    listed = not absent_reason(answer) and not re.search(r"error|unable", answer, re.IGNORECASE)
    pause = pause_image(sections.read("kubeadm-images", parse_kubeadm_images)) if listed else None
    service = _systemd_word(sections.text("service"), ("active", "inactive", "failed", "activating", "deactivating"))
    enabled = _systemd_word(sections.text("enabled"), ("enabled", "disabled", "masked", "static"))
    return ContainerdFacts(version, config, dict(sorted(dropins.items())), hosts_files, pause, service=service,
                           enabled=enabled)


def _systemd_word(section_text: str, words: tuple[str, ...]) -> str | None:
    """``systemctl is-active`` / ``is-enabled`` answer one word; anything else (no systemd) is None."""
    said = section_text.split()
    return said[0] if len(said) == 1 and said[0] in words else None
