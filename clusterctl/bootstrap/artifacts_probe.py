"""Is each artifact of ``bootstrap artifacts`` on the site's mirrors? Asked from a host, with curl.

The host is the one that will fetch them (its network, its proxy, its CA store): by default the
first control plane. One request per apt source (its ``Packages`` index), per chart repository
(``index.yaml``), per image (a registry v2 ``HEAD /v2/<name>/manifests/<tag>``, through the
containerd mirror the inventory names for that registry) and per manifest or key URL. The
answers are judged by pure functions (``parse_packages_index``, ``chart_versions``,
``judge_status``) so a recorded answer tests them.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from clusterctl.bootstrap.apt_sources import Pin
from clusterctl.bootstrap.artifacts import Artifact, ArtifactList
from clusterctl.bootstrap.containerd_config import registry_server
from clusterctl.errors import ParseError, UsageError
from clusterctl.json_input import read_yaml

#: Media types a registry must accept to answer for a multi-arch image (OCI index, Docker list).
MANIFEST_ACCEPT = ("application/vnd.oci.image.index.v1+json, "
                   "application/vnd.docker.distribution.manifest.list.v2+json, "
                   "application/vnd.oci.image.manifest.v1+json, application/vnd.docker.distribution.manifest.v2+json")
CURL = "curl -sS --max-time 20"


@dataclass(frozen=True)
class ProbeResult:
    artifact: Artifact
    #: ``present``, ``missing`` or ``unknown`` (unreachable, credentials asked, unreadable answer).
    status: str
    #: What was asked (a URL) and what came back, for people.
    url: str
    detail: str = ""

    def to_json(self) -> dict[str, Any]:
        return {**self.artifact.to_json(), "status": self.status, "probed": self.url, "detail": self.detail}


def parse_packages_index(text: str) -> dict[str, list[str]]:
    """An apt ``Packages`` index -> package name -> versions offered (stanzas split by blank lines)."""
    offered: dict[str, list[str]] = {}
    name: str | None = None
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            name = None
            continue
        if line[0] in " \t":
            continue  # a continuation of a multi-line field (Description)
        key, sep, value = line.partition(":")
        if not sep:
            raise ParseError("an apt Packages index", "expected 'Field: value'", line=number, text=line)
        if key == "Package":
            name = value.strip()
        elif key == "Version" and name:
            offered.setdefault(name, []).append(value.strip())
    return offered


def chart_versions(text: str, chart: str) -> list[str]:
    """The versions of ``chart`` a Helm repository's ``index.yaml`` offers."""
    try:
        data = read_yaml(text)
    except UsageError as exc:
        raise ParseError("a Helm index.yaml", exc.message, line=exc.line) from None
    if not isinstance(data, dict) or not isinstance(data.get("entries"), dict):
        raise ParseError("a Helm index.yaml", "no 'entries' mapping (not a Helm repository index)", line=1)
    entries = data["entries"].get(chart) or []
    return [str(e.get("version")) for e in entries if isinstance(e, dict)]


def judge_status(code_text: str, exit_code: int, stderr: str) -> tuple[str, str]:
    """What ``curl -w '%{http_code}'`` said about one URL: (status, detail)."""
    code = code_text.strip()[-3:]
    if exit_code != 0 and code in ("", "000"):
        return "unknown", f"not reachable: {stderr.strip()[:200] or f'curl exit {exit_code}'}"
    if code.startswith("2"):
        return "present", f"HTTP {code}"
    if code == "404":
        return "missing", "HTTP 404"
    if code in ("401", "403"):
        return "unknown", f"HTTP {code}: the server asks for credentials"
    return "unknown", f"HTTP {code or '?'}"


def image_url(artifact: Artifact, mirrors: Mapping[str, Sequence[str]]) -> str:
    """The registry v2 manifest URL of an image, through the containerd mirror for its registry."""
    registry, _, path = artifact.name.partition("/")
    if "." not in registry and ":" not in registry and registry != "localhost":
        registry, path = "docker.io", artifact.name
    if registry == "docker.io" and "/" not in path:
        path = f"library/{path}"
    endpoint = (list(mirrors.get(registry, ())) or [registry_server(registry)])[0]
    # A version pinned by digest is asked for by it (what the nodes pull), not by its tag.
    return f"{endpoint.rstrip('/')}/v2/{path}/manifests/{artifact.version.rpartition('@')[2]}"


Runner = Callable[[str], tuple[str, str, int]]


def _probe_package(artifact: Artifact, fetch: Runner) -> ProbeResult:
    """Present when the ``Packages`` index of every suite its hosts use offers the version."""
    if not artifact.indexes:
        return ProbeResult(artifact, "unknown", artifact.source, "not an apt source URL")
    offers: list[str] = []
    for url in artifact.indexes:
        out, err, code = fetch(url)
        if code != 0:
            return ProbeResult(artifact, "missing" if "404" in err else "unknown", url,
                               f"index not fetched: {err.strip()[:200]}")
        try:
            offered = parse_packages_index(out).get(artifact.name, [])
        except ParseError as exc:
            return ProbeResult(artifact, "unknown", url, f"index unreadable: {exc}")
        ok = [v for v in offered if Pin(artifact.name, artifact.version, "").matches(v)]
        if not ok:
            return ProbeResult(artifact, "missing", url,
                               f"offers {', '.join(offered[-3:]) or 'no version'} of {artifact.name}")
        offers += [v for v in ok if v not in offers]
    return ProbeResult(artifact, "present", ", ".join(artifact.indexes), f"offers {', '.join(offers)}")


def probe(found: ArtifactList, run: Runner, mirrors: Mapping[str, Sequence[str]]) -> list[ProbeResult]:
    """Probe every artifact through ``run`` (a command on the probing host -> stdout, stderr, exit)."""
    q = shlex.quote
    results: list[ProbeResult] = []
    fetched: dict[str, tuple[str, str, int]] = {}

    def fetch(url: str) -> tuple[str, str, int]:
        if url not in fetched:
            fetched[url] = run(f"{CURL} -f {q(url)}")
        return fetched[url]

    def head(artifact: Artifact, url: str, *headers: str) -> ProbeResult:
        extra = "".join(f" -H {q(h)}" for h in headers)
        out, err, code = run(f"{CURL} -o /dev/null -I -w '%{{http_code}}'{extra} {q(url)}")
        status, detail = judge_status(out, code, err)
        return ProbeResult(artifact, status, url, detail)

    for artifact in found.artifacts:
        if artifact.kind == "apt-package":
            results.append(_probe_package(artifact, fetch))
        elif artifact.kind == "chart":
            if artifact.archive:
                there = Path(artifact.archive).expanduser().is_file()
                results.append(ProbeResult(artifact, "present" if there else "missing", artifact.archive,
                                           "chart archive on the control machine" if there else "no such file"))
                continue
            url = artifact.source.rstrip("/") + "/index.yaml"
            out, err, code = fetch(url)
            if code != 0:
                results.append(ProbeResult(artifact, "unknown", url, f"index not fetched: {err.strip()[:200]}"))
                continue
            try:
                versions = chart_versions(out, artifact.name)
            except ParseError as exc:
                results.append(ProbeResult(artifact, "unknown", url, f"index unreadable: {exc}"))
                continue
            there = artifact.version in versions
            results.append(ProbeResult(artifact, "present" if there else "missing", url,
                                       "" if there else f"offers {', '.join(versions[:3]) or 'no version'}"))
        elif artifact.kind == "image":
            results.append(head(artifact, image_url(artifact, mirrors), f"Accept: {MANIFEST_ACCEPT}"))
        else:  # manifest, apt-key: a URL
            results.append(head(artifact, artifact.source))
    return results
