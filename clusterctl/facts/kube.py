"""Facts about a Kubernetes cluster read through ``kubectl`` and ``helm`` (JSON outputs).

Each parser takes the command's text and returns typed data, or raises ``ParseError`` naming
the line where the JSON broke or the object that lacks what Kubernetes always writes.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, TypeVar

from clusterctl.errors import ParseError
from clusterctl.json_input import kind_of, syntax_error

#: A JSON container type: what ``json_member`` returns.
J = TypeVar("J", list[Any], dict[str, Any])

ADMIN_KUBECONFIG = "/etc/kubernetes/admin.conf"
GPU_RESOURCE = "nvidia.com/gpu"


def kubectl(args: str) -> str:
    """A kubectl line run on a control-plane host as root, with the admin kubeconfig."""
    return f"kubectl --kubeconfig {ADMIN_KUBECONFIG} {args}"


def load_json(what: str, text: str) -> Any:
    """A command's JSON output; bad JSON is a ``ParseError`` naming the line where it broke."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        lines = text.splitlines()
        raise ParseError(what, f"not JSON at {syntax_error(exc)}", line=exc.lineno,
                         text=lines[exc.lineno - 1] if 0 < exc.lineno <= len(lines) else None) from None


def json_below(what: str, text: str, opens: str | tuple[str, ...] = ("{", "[")) -> Any:
    """The JSON a command printed below lines of its own (a prompt, a warning): from the first line that ``opens``
    it (an object or a list). The lines above are blanked, not cut: a syntax error names the output's own line."""
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if line.lstrip().startswith(opens)), None)
    if start is None:
        raise ParseError(what, "no JSON in the output", line=1, text=lines[0] if text.strip() else "")
    return load_json(what, "\n" * start + "\n".join(lines[start:]))


def json_member(what: str, parent: dict[str, Any], key: str, kind: type[J], *, named: str | None = None,
                line: int | None = None) -> J:
    """``parent[key]``, a JSON list or object (absent or null: an empty one); any other type is a ``ParseError``
    naming the field (``named``, else the key quoted): a value skipped would read as none there."""
    value = parent.get(key)
    if value is None:
        return kind()
    if not isinstance(value, kind):
        raise ParseError(what, f"{named or repr(key)} is {kind_of(value)}, not {kind_of(kind())}", line=line)
    return value


def list_items(what: str, text: str) -> list[Any]:
    """The ``items`` of a ``kubectl get ... -o json`` List."""
    data = load_json(what, text)
    if not isinstance(data, dict) or not isinstance(data.get("items"), list):
        raise ParseError(what, "no 'items' list: not a kubectl List")
    return data["items"]


def string_map(value: Any) -> dict[str, str]:
    """Labels or annotations as strings (``{}`` where the object has none)."""
    return {str(k): str(v) for k, v in value.items()} if isinstance(value, dict) else {}


def ready_condition(node: Any) -> dict[str, Any] | None:
    """A Node object's ``Ready`` condition, ``None`` where it reports none."""
    status = node.get("status") if isinstance(node, dict) else None
    conditions = status.get("conditions") if isinstance(status, dict) else None
    return next((c for c in conditions if isinstance(c, dict) and c.get("type") == "Ready"), None) \
        if isinstance(conditions, list) else None


@dataclass(frozen=True)
class HelmRelease:
    name: str
    namespace: str
    #: ``<chart>-<version>`` as Helm lists it.
    chart: str
    status: str
    revision: int

    def chart_version(self, chart_name: str) -> str | None:
        prefix = chart_name + "-"
        return self.chart[len(prefix):] if self.chart.startswith(prefix) else None


HELM_LIST_COMMAND = f"helm list --all-namespaces --all --output json --kubeconfig {ADMIN_KUBECONFIG}"


def parse_helm_list(text: str) -> list[HelmRelease]:
    """``helm list -o json`` -> releases (Helm 3 writes a JSON array; ``revision`` is a string)."""
    data = load_json("helm list -o json", text.strip() or "[]")
    if not isinstance(data, list):
        raise ParseError("helm list -o json", "expected a JSON array of releases")
    out: list[HelmRelease] = []
    for index, item in enumerate(data):
        try:
            out.append(HelmRelease(str(item["name"]), str(item["namespace"]), str(item["chart"]),
                                   str(item["status"]), int(str(item["revision"]))))
        except (KeyError, TypeError, ValueError) as exc:
            raise ParseError("helm list -o json", f"release {index} lacks or mangles {exc}") from None
    return out
