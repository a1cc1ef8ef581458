"""Rendering the bootstrap templates in ``templates/bootstrap/`` with Jinja's StrictUndefined.

A value the template needs and the caller did not give is an error, never an empty string.
Every value lands through a filter that keeps it inert where it lands: ``yamlq`` writes a
double-quoted YAML scalar (JSON strings are valid YAML), ``label_value`` refuses what
Kubernetes would refuse as a label value. A control character (a newline would start a new
key) is refused outright.
"""

from __future__ import annotations

import json
import re
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from clusterctl.errors import UsageError

if TYPE_CHECKING:
    from jinja2 import Environment

_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
#: Kubernetes label values: at most 63 characters, alphanumeric at both ends ("" allowed).
LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")


class TemplateError(UsageError):
    """A template could not be rendered (a value missing, refused, or the template broken)."""


def templates_dir() -> Path:
    """``clusterctl/templates`` in an installed wheel, else ``<repo>/templates`` in a checkout."""
    package = Path(__file__).resolve().parents[2]  # .../clusterctl
    for candidate in (package / "templates", package.parent / "templates"):
        if (candidate / "bootstrap").is_dir():
            return candidate
    raise UsageError(f"bootstrap templates not found under {package / 'templates'} or {package.parent / 'templates'}")


def _checked(value: object) -> str:
    text = str(value)
    if _CONTROL.search(text):
        raise TemplateError(f"refusing to render a value with a control character: {text!r}")
    return text


def yaml_quote(value: object) -> str:
    return json.dumps(_checked(value), ensure_ascii=False)


def label_value(value: object) -> str:
    text = _checked(value)
    if len(text) > 63 or not LABEL_VALUE.match(text):
        raise TemplateError(
            f"{text!r} cannot be a Kubernetes label value (at most 63 characters: letters, digits, '-', '_', '.', "
            "beginning and ending with a letter or digit)"
        )
    return text


@lru_cache(maxsize=1)
def environment() -> Environment:
    from jinja2 import Environment, FileSystemLoader, StrictUndefined

    env = Environment(
        loader=FileSystemLoader(str(templates_dir())),
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        autoescape=False,  # YAML, TOML and feature files: each value escapes through its own filter
    )
    env.filters.update(yamlq=yaml_quote, label_value=label_value, tojson=lambda v: json.dumps(v, sort_keys=False))
    return env


def render(template_name: str, /, **values: Any) -> str:
    """Render ``templates/bootstrap/<template_name>``; a missing value raises ``TemplateError`` naming it."""
    from jinja2 import TemplateNotFound, UndefinedError

    try:
        template = environment().get_template(f"bootstrap/{template_name}")
    except TemplateNotFound as exc:
        raise TemplateError(f"no bootstrap template {template_name!r} under {templates_dir() / 'bootstrap'}") from exc
    try:
        return template.render(**values)
    except UndefinedError as exc:
        raise TemplateError(f"template bootstrap/{template_name}: {exc.message}") from exc
