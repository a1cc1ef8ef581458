"""Rendering the node-phase templates of ``templates/bootstrap/`` (the shared environment).

A value missing from the context is an error naming the template, never an empty string in
a config file. ``toml`` renders a Python value as a TOML value (strings escaped, no injection
from inventory values).
"""

from __future__ import annotations

from typing import Any

from clusterctl.errors import ClusterctlError
from clusterctl.templating import environment, templates_dir, toml_key, toml_value

__all__ = ["TemplateError", "environment", "render", "templates_dir", "toml_key", "toml_value"]


class TemplateError(ClusterctlError):
    pass


def render(name: str, **context: Any) -> str:
    from jinja2 import TemplateError as JinjaError

    try:
        return environment().get_template(f"bootstrap/{name}").render(**context)
    except JinjaError as exc:
        raise TemplateError(f"template bootstrap/{name}: {exc}") from exc
