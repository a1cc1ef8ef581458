"""The one Jinja environment for ``templates/`` (NCCL settings files, bootstrap configs and manifests).

Rendered with ``StrictUndefined``: a value the template needs and the caller did not give is an
error, never an empty string in a config file. Every value lands through a filter that keeps it
inert where it lands:

- ``shq`` quotes for a shell; ``yamlq`` writes a double-quoted YAML scalar (JSON strings are
  valid YAML); ``tojson`` writes JSON (keys in the caller's order);
- ``toml`` / ``toml_key`` write a TOML value / key (strings escaped);
- ``conf_value`` refuses what NCCL's NAME=VALUE reader would misread; ``label_value`` refuses
  what Kubernetes would refuse as a label value; ``comment`` keeps text on one comment line.
- ``block`` marks what a template macro rendered (``{{ table(...) | block }}``) as lines.

A value with a control character (a newline would start a new key or setting) is refused outright.
"""

from __future__ import annotations

import json
import re
import shlex
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from clusterctl.errors import UsageError

if TYPE_CHECKING:
    from jinja2 import Environment

_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_BARE_KEY = re.compile(r"^[A-Za-z0-9_-]+$")
#: Kubernetes label values: at most 63 characters, alphanumeric at both ends ("" allowed).
LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")


class TemplateError(UsageError):
    """A template could not be rendered (a value missing, refused, or the template broken)."""


def templates_dir() -> Path:
    """``clusterctl/templates`` in an installed wheel, else ``<repo>/templates`` in a checkout."""
    package = Path(__file__).resolve().parent  # .../clusterctl
    candidates = (package / "templates", package.parent / "templates")
    for candidate in candidates:
        if (candidate / "nccl").is_dir() and (candidate / "bootstrap").is_dir():
            return candidate
    raise UsageError(f"templates not found under {candidates[0]} or {candidates[1]}")


# --- filters ---------------------------------------------------------------------------------


def checked(value: object) -> str:
    """``value`` as text; a control character in it is refused."""
    text = str(value)
    if _CONTROL.search(text):
        raise TemplateError(f"refusing to render a value with a control character: {text!r}")
    return text


def shell_quote(value: object) -> str:
    return shlex.quote(checked(value))


def yaml_quote(value: object) -> str:
    # JSON strings are valid YAML double-quoted scalars: every special character is escaped.
    return json.dumps(checked(value), ensure_ascii=False)


def conf_value(value: object) -> str:
    text = checked(value)
    if text != text.strip():
        raise TemplateError(f"refusing to write a value with leading/trailing blanks to nccl.conf: {text!r}")
    return text


def label_value(value: object) -> str:
    text = checked(value)
    if len(text) > 63 or not LABEL_VALUE.match(text):
        raise TemplateError(
            f"{text!r} cannot be a Kubernetes label value (at most 63 characters: letters, digits, '-', '_', '.', "
            "beginning and ending with a letter or digit)"
        )
    return text


def one_line_comment(value: object) -> str:
    if isinstance(value, (list, tuple)):
        value = ", ".join(str(v) for v in value)
    return " ".join(_CONTROL.sub(" ", str(value)).split())


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


# --- the environment -------------------------------------------------------------------------


class RenderedBlock(str):
    """Lines a macro of these templates rendered (its values already went through their filters)."""


def _finalize(value: object) -> object:
    if isinstance(value, RenderedBlock):
        return value
    return checked(value) if isinstance(value, str) else value


@lru_cache(maxsize=1)
def environment() -> Environment:
    from jinja2 import Environment, FileSystemLoader, StrictUndefined

    env = Environment(
        loader=FileSystemLoader(str(templates_dir())),
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        autoescape=False,  # not HTML: each value escapes through its own filter
        # The last line of defence, for a value a template prints without a filter: a control
        # character (a newline starts a new key, table or setting) is refused, never written.
        finalize=_finalize,
    )
    env.filters.update(shq=shell_quote, yamlq=yaml_quote, tojson=json.dumps, toml=toml_value, toml_key=toml_key,
                       conf_value=conf_value, label_value=label_value, comment=one_line_comment, block=RenderedBlock)
    return env


def render(path: str, /, **values: Any) -> str:
    """Render ``templates/<path>``; a missing template or value raises ``TemplateError`` naming it."""
    from jinja2 import TemplateNotFound, UndefinedError

    try:
        template = environment().get_template(path)
    except TemplateNotFound as exc:
        raise TemplateError(f"no template {path!r} under {templates_dir()}") from exc
    try:
        return template.render(**values)
    except UndefinedError as exc:
        raise TemplateError(f"template {path}: {exc.message}") from exc
