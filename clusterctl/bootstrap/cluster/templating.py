"""Rendering the cluster-phase templates of ``templates/bootstrap/`` (the shared environment)."""

from __future__ import annotations

from typing import Any

from clusterctl import templating
from clusterctl.templating import TemplateError, label_value

__all__ = ["TemplateError", "label_value", "render"]


def render(template_name: str, /, **values: Any) -> str:
    """Render ``templates/bootstrap/<template_name>``; a missing value raises ``TemplateError`` naming it."""
    return templating.render(f"bootstrap/{template_name}", **values)
