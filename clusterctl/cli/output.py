"""Turning results into JSON or YAML text (``-o json|yaml``, ``--save FILE``)."""

from __future__ import annotations

from typing import Any


def dump(payload: Any, fmt: str) -> str:
    """JSON or YAML text; any registered secret that slipped into a value is masked."""
    # Imported here: every command module imports this one, and `clusterctl --help` must not
    # pay for the JSON writer and the secret registry.
    from clusterctl.plain_json import dumps_indented, to_plain
    from clusterctl.secret import mask_text

    if fmt == "json":
        return mask_text(dumps_indented(payload) + "\n")
    plain = to_plain(payload)
    import yaml

    return mask_text(str(yaml.safe_dump(plain, sort_keys=False, default_flow_style=False, allow_unicode=True)))


def save_report(path: str, payload: dict[str, object]) -> None:
    """``--save FILE`` (survey, health): the report's JSON as ``-o json`` prints it (a secret masked), replacing
    FILE whole; one that cannot be written is a usage error (exit 2)."""
    from pathlib import Path

    from clusterctl.errors import UsageError
    from clusterctl.writable import replace_file

    try:
        replace_file(Path(path), dump(payload, "json"), parents=False)
    except OSError as exc:
        raise UsageError(f"cannot write the report ({exc.strerror})", file=path) from exc
