"""Rendering the templates of ``templates/bootstrap/`` (the shared environment), node and cluster phases alike."""

from __future__ import annotations

from typing import Any

from clusterctl import templating


def render(template_name: str, /, **values: Any) -> str:
    """Render ``templates/bootstrap/<template_name>``; a missing value raises ``templating.TemplateError`` naming it."""
    return templating.render(f"bootstrap/{template_name}", **values)
