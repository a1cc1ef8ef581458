"""Jinja templates of ``templates/bootstrap/`` rendered with ``StrictUndefined``.

A value missing from the context is an error naming the template, never an empty string in
a config file. ``toml`` renders a Python value as a TOML value (strings escaped, no injection
from inventory values).
"""

from __future__ import annotations

import json
import re
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from clusterctl.errors import ClusterctlError

if TYPE_CHECKING:
    from jinja2 import Environment


class TemplateError(ClusterctlError):
    pass


def templates_dir() -> Path:
    package = Path(__file__).resolve().parents[1]  # .../clusterctl
    for candidate in (package / "templates", package.parent / "templates"):
        if (candidate / "bootstrap").is_dir():
            return candidate
    raise TemplateError(f"bootstrap templates not found under {package / 'templates'} "
                        f"or {package.parent / 'templates'}")


_BARE_KEY = re.compile(r"^[A-Za-z0-9_-]+$")


def toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)  # a JSON string is a valid TOML basic string
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{toml_key(k)} = {toml_value(v)}" for k, v in value.items()) + "}"
    raise TemplateError(f"cannot write {type(value).__name__} {value!r} as a TOML value")


def toml_key(key: str) -> str:
    return key if _BARE_KEY.match(key) else json.dumps(key)


@lru_cache(maxsize=1)
def environment() -> Environment:
    from jinja2 import Environment, FileSystemLoader, StrictUndefined

    env = Environment(loader=FileSystemLoader(str(templates_dir())), undefined=StrictUndefined, trim_blocks=True,
                      lstrip_blocks=True, keep_trailing_newline=True, autoescape=False)
    env.filters.update(toml=toml_value, toml_key=toml_key)
    return env


def render(name: str, **context: Any) -> str:
    from jinja2 import TemplateError as JinjaError

    try:
        return environment().get_template(f"bootstrap/{name}").render(**context)
    except JinjaError as exc:
        raise TemplateError(f"template bootstrap/{name}: {exc}") from exc
