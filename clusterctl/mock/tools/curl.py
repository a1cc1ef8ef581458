"""``curl -fsSL [--retry N] URL -o FILE``: how bootstrap fetches an apt source's signing key.

No network on a mock host: the file written is a placeholder ASCII-armoured block naming the
URL (apt is simulated too and does not check signatures). Without ``-o`` the placeholder goes
to stdout. A URL that is not http(s) fails as curl does: ``curl: (1) Protocol "x" not
supported``, exit 1 (curl 7.88 on Debian 12).
"""

from __future__ import annotations

from clusterctl.mock.tools import packages as db
from clusterctl.mock.tools.base import ToolContext, ToolResult, split_args

#: Options that take the next word as their value.
VALUED = frozenset({"-o", "--output", "-w", "--write-out", "--retry", "--connect-timeout", "-m", "--max-time", "-H",
                    "--header"})


def run(ctx: ToolContext) -> ToolResult:
    words, given, options = split_args(ctx.args, VALUED)
    output = given.get("-o", given.get("--output"))
    write_out = given.get("-w", given.get("--write-out", ""))
    flags = {letter for option in options if not option.startswith("--") for letter in option[1:]}
    url = words[-1] if words else None
    if url is None:
        return ToolResult("", "curl: no URL specified!\n", 2)
    scheme = url.split("://", 1)[0] if "://" in url else ""
    if scheme not in ("http", "https"):
        return ToolResult("", f'curl: (1) Protocol "{scheme}" not supported\n', 1)
    served = ctx.machine.get("http")
    if not isinstance(served, dict):  # no site of the profile's: an apt source's index, else a signing key
        body = _packages_index(ctx, url) if url.endswith("/Packages") else (
            f"-----BEGIN PGP PUBLIC KEY BLOCK-----\n\n(mock key fetched from {url})\n"
            "-----END PGP PUBLIC KEY BLOCK-----\n")
        served = {} if body is None else {url: {"body": body}}
    entry = served.get(url)
    entry = entry if isinstance(entry, dict) else ({} if entry is None else {"body": str(entry)})
    status = int(str(entry.get("status", 200 if url in served else 404)))
    body = "" if "I" in flags else str(entry.get("body", ""))
    shown = write_out.replace("%{http_code}", str(status))
    if status >= 400 and "f" in flags:
        return ToolResult(shown, f"curl: (22) The requested URL returned error: {status}\n", 22)
    if output is None:
        return ToolResult(body + shown)
    if output != "/dev/null":
        if not ctx.fs.is_dir(output.rsplit("/", 1)[0] or "/"):
            return ToolResult("", f"curl: (23) Failure writing output to destination, passed {len(body)} returned "
                              "0\n", 23)
        ctx.fs.write(output, body.encode())
    return ToolResult(shown)


def _packages_index(ctx: ToolContext, url: str) -> str | None:
    """The ``Packages`` index of the repository source ``url`` names (None: no source of the profile's)."""
    source = next((s for s in db.all_sources(ctx) if s.rstrip("/") in url), None)
    if source is None:
        return None
    return "\n".join(f"Package: {name}\nVersion: {version}\nArchitecture: amd64\n"
                     f"Filename: pool/{name}_{version}_amd64.deb\n"
                     for name, versions in sorted(db.offered(ctx, source).items()) for version in versions)
