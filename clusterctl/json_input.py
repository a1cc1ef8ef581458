"""The one reader of the JSON (and YAML) files clusterctl reads back, and the typed fields taken from them.

Saved surveys, sweeps, bench results, health reports, progress files, undo journals, the receiver's
pending work and mock profiles may have been edited, cut short or written by another program.
``read_json`` reads one within its size limit (``inputfile``) and hands it to the reader's ``shape``,
built from the helpers below or a JSON Schema (``matching``); whatever is wrong is a usage error
(exit 2) naming the file, the line where the parser says, and the field (``hosts[2].verdict``).
``read_yaml`` is the one reader of YAML text (inventories, profiles, manifests, what hosts answer).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Mapping
from contextlib import suppress
from typing import Any, TypeVar

from clusterctl.errors import UsageError
from clusterctl.inputfile import read_text_input
from clusterctl.terminal_text import UNICODE_TRICKS

T = TypeVar("T")

#: Characters of one text field (a host name, a note, a value); real ones are under 300.
MAX_TEXT = 2_000
#: Characters of a path on a host (Linux's PATH_MAX): a file clusterctl wrote may have one this long.
MAX_PATH = 4_096
#: Characters no one-line text field may have: C0 and C1 controls (newline and tab included), DEL, and
#: the Unicode line separators and bidirectional overrides that make text read differently from what it is.
_UNSAFE = re.compile(rf"[\x00-\x1f\x7f-\x9f{UNICODE_TRICKS}]")


class BadField(Exception):
    """A field that is not what it should be; ``field`` says where (``ranges[2].best_gbps``, "": the whole)."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field
        self.message = message


def read_json(source: str, kind: str, what: str, shape: Callable[[Any], T], *, hint: str | None = None,
              decode: Callable[[str], Any] | None = None) -> T:
    """``shape(value)`` of the JSON file ``source`` (``-``: standard input) within ``LIMITS[kind]``: ``what``
    names what it should be ("a saved sweep"), ``hint`` what to do about a bad one, ``decode`` reads text that
    is not one JSON document (YAML, a journal's log). ``decode`` and ``shape`` raise ``BadField`` (worded
    ``not WHAT: MESSAGE``) or a ``UsageError`` (the file is added to it)."""
    try:
        text, label = read_text_input(source, kind, what=what)
    except UsageError as exc:
        raise UsageError(exc.message, file=exc.file, line=exc.line, hint=exc.hint or hint) from None
    try:
        return shape((decode or json.loads)(text))
    except json.JSONDecodeError as exc:
        raise UsageError(f"not {what}: not JSON at {syntax_error(exc)}.", file=label, line=exc.lineno,
                         hint=hint) from None
    except RecursionError:
        raise UsageError(f"not {what}: JSON nested too deep.", file=label, hint=hint) from None
    except BadField as exc:
        raise UsageError(f"not {what}: {exc.message}.", file=label, field=exc.field or None, hint=hint) from None
    except UsageError as exc:
        if exc.file:
            raise
        raise UsageError(exc.message, file=label, line=exc.line, field=exc.field, hint=exc.hint or hint) from None


#: What each of Python's JSON syntax errors (named by how its message starts) means, in words a user acts on:
#: ``{at}`` is where the parser stopped (``where '}' is``), ``{char}`` the character there.
_SYNTAX_WORDS = (
    ("Expecting value", "a value (text in double quotes, a number, true, false, null, an object or a list) "
                        "belongs {at}"),
    ("Expecting property name", "a key in double quotes belongs {at}"),
    ("Expecting ':'", "a ':' after the key belongs {at}"),
    ("Expecting ','", "a ',' between two entries, or the '}}' or ']' that ends them, belongs {at}"),
    ("Illegal trailing comma", "a ',' before the '}}' or ']' that ends the entries is one too many"),
    ("Unterminated string", "the text in double quotes that starts here never ends"),
    ("Invalid control character", "a control character ({char}) in text in double quotes, which JSON writes as "
                                  "an escape such as \\n or \\u0001"),
    ("Invalid \\uXXXX", "a \\u escape in text without four hexadecimal digits"),
    ("Invalid \\escape", "an escape JSON does not know ({escape}; it knows \\\" \\\\ \\/ \\b \\f \\n \\r \\t "
                        "and \\uXXXX)"),
    ("Extra data", "more follows the end of the JSON document, from {at_char}"),
    ("Unexpected UTF-8 BOM", "the text starts with a byte order mark (U+FEFF): save it as UTF-8 without one"),
)


def syntax_error(exc: json.JSONDecodeError) -> str:
    """``column N: WHAT IS WRONG`` for a JSON syntax error, in the product's words (Python's name its parser's
    state: "Expecting ',' delimiter"); the line is the caller's to name, with the file."""
    found = exc.doc[exc.pos] if exc.pos < len(exc.doc) else ""
    message = exc.msg
    if message.startswith("Expecting") and found in ("}", "]") and exc.doc[:exc.pos].rstrip().endswith(","):
        message = "Illegal trailing comma"  # as Python 3.13 says it; earlier ones expect the next entry
    if not exc.doc.strip():
        message = "the text is empty"
    fields = {"at": f"where {shown(found)} is" if found else "at the end",
              "at_char": shown(found), "char": f"U+{ord(found):04X}" if found else "",
              "escape": shown(exc.doc[exc.pos:exc.pos + 2])}
    words = next((w.format(**fields) for start, w in _SYNTAX_WORDS if message.startswith(start)),
                 message.removesuffix(" at").lower())
    return f"column {exc.colno}: {words}"


def read_yaml(text: str, read: Callable[[Any], Any] = lambda loader: loader.get_single_data()) -> Any:
    """``read(loader)`` over a PyYAML safe loader of ``text`` (by default its one document, as ``yaml.safe_load``
    reads it); a syntax error is a ``UsageError`` naming the 1-based line (the caller adds the file), what is
    wrong and the column."""
    import yaml

    # libyaml's parser when PyYAML has it (a 1,000-host inventory: 0.3 s less); PyYAML's own otherwise and
    # for a document libyaml refuses, as its errors are the ones worded below.
    fast = getattr(yaml, "CSafeLoader", None)
    try:
        if fast is not None:
            with suppress(yaml.YAMLError):
                return _read_with(fast, text, read)
        return _read_with(yaml.SafeLoader, text, read)
    except yaml.YAMLError as exc:
        line, words = _yaml_syntax_error(exc, text)
        raise UsageError(f"not valid YAML: {words}", line=line) from None


def _read_with(loader_class: Any, text: str, read: Callable[[Any], Any]) -> Any:
    loader = loader_class(text)
    try:
        return read(loader)
    finally:
        loader.dispose()


def _yaml_syntax_error(exc: Any, text: str) -> tuple[int | None, str]:
    """``(line, WHAT IS WRONG at column N)`` for PyYAML's error in ``text``."""
    if hasattr(exc, "position"):  # a ReaderError, raised before any mark: where in the text
        begins = text.rfind("\n", 0, exc.position) + 1
        return (text.count("\n", 0, begins) + 1,
                f"a character YAML does not allow (U+{exc.character:04X}) at column {exc.position - begins + 1}")
    problem, context, start, found = (getattr(exc, name, None) for name in ("problem", "context", "context_mark",
                                                                            "problem_mark"))
    # An unclosed quote is found only at the end of the file; the line where it was opened is the one to fix.
    mark = start if start is not None and "end of stream" in (problem or "") else found or start
    words = problem or context or str(exc)
    if mark is None:
        return None, words
    if problem and context:
        started = f" that started at line {start.line + 1}" if start is not None and start.line != mark.line else ""
        words += f" ({context}{started})"
    return mark.line + 1, f"{words} at column {mark.column + 1}"


def mapping(value: Any, field: str, *, required: tuple[str, ...] = (),
            optional: tuple[str, ...] | None = None) -> dict[str, Any]:
    """An object with every ``required`` key; with ``optional`` given, no key outside the two."""
    _is(value, dict, field, "an object")
    for key in required:
        if key not in value:
            raise BadField(join(field, key), "missing")
    unknown = [] if optional is None else [k for k in value if k not in required and k not in optional]
    if unknown:
        raise BadField(field, f"unknown field {shown(unknown[0])}")
    return value


def versioned(value: Any, kind: str | None, readable: tuple[int, ...], *, key: str = "schema_version",
              unversioned: int | None = None) -> dict[str, Any]:
    """The document when it says it is a ``kind`` of a version this clusterctl reads (``unversioned``: the
    version of one without ``key``)."""
    data = mapping(value, "")
    if kind is not None and data.get("kind") != kind:
        raise BadField("kind", f"{shown(str(data['kind'])) if 'kind' in data else 'missing'} where {kind} belongs")
    version = data.get(key, unversioned)
    if version not in readable:
        raise BadField(key, f"{repr(version)[:40]} is not a version this clusterctl reads "
                            f"({', '.join(map(str, readable))}); read it with the release that wrote it")
    return data


def items(value: Any, field: str, read: Callable[[Any, str], T], *, limit: int | None = None) -> tuple[T, ...]:
    """A list, each entry read by ``read(entry, "field[i]")``."""
    _is(value, list, field, "a list")
    if limit is not None and len(value) > limit:
        raise BadField(field, f"{len(value):,} entries (at most {limit:,})")
    return tuple(read(item, f"{field}[{i}]") for i, item in enumerate(value))


def count(value: Any, field: str, *, high: int | None = None) -> int:
    """A whole number from 0 (to ``high``)."""
    _is(value, int, field, "a whole number")
    if value < 0 or (high is not None and value > high):
        raise BadField(field, f"{value} is outside 0 to {high:,}" if high is not None else f"{value} is below 0")
    return value


def number(value: Any, field: str, *, low: float | None = None, high: float | None = None) -> float:
    """A finite number (from ``low``, to ``high``)."""
    _is(value, int | float, field, "a number")
    result = float(value)
    if not math.isfinite(result) or (low is not None and result < low) or (high is not None and result > high):
        raise BadField(field, f"{value} is out of range")
    return result


def flag(value: Any, field: str) -> bool:
    _is(value, bool, field, "true or false")
    return bool(value)


def text(value: Any, field: str, *, choices: tuple[str, ...] = (), pattern: re.Pattern[str] | None = None,
         meaning: str = "", line: bool = True, limit: int = MAX_TEXT) -> str:
    """Text: one of ``choices``; else all of it matching ``pattern`` (it is not ``meaning``); else, unless
    ``line`` is false (a shell line), one line without a control character, at most ``limit`` long."""
    _is(value, str, field, "text")
    if choices and value not in choices:
        raise BadField(field, f"{shown(value)} is not one of {', '.join(choices)}")
    if pattern is not None and not pattern.fullmatch(value):
        raise BadField(field, f"{shown(value)} is not {meaning}")
    if not line:
        return value
    if len(value) > limit:
        raise BadField(field, f"{len(value):,} characters (at most {limit:,})")
    bad = _UNSAFE.search(value)
    if bad:
        raise BadField(field, f"a control character (U+{ord(bad.group()):04X}) at character {bad.start() + 1}")
    return value


def maybe(read: Callable[[Any, str], T], value: Any, field: str) -> T | None:
    """``None`` for a JSON null, else ``read(value, field)``."""
    return None if value is None else read(value, field)


def matching(value: Any, schema: Mapping[str, Any]) -> Any:
    """``value`` when it matches the JSON Schema ``schema`` (draft 2020-12); else ``BadField`` at the first
    place that does not (in the order of the document)."""
    import jsonschema

    errors = jsonschema.Draft202012Validator(schema).iter_errors(value)
    error = next(iter(sorted(errors, key=lambda e: list(e.absolute_path))), None)
    if error is None:
        return value
    where = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in error.absolute_path).lstrip(".")
    if error.validator == "required":  # said as ``mapping`` says it
        raise BadField(join(where, next(k for k in error.validator_value if k not in error.instance)), "missing")
    if error.validator == "type":
        wanted = [_TYPE_WORDS.get(t, t) for t in ([error.validator_value] if isinstance(error.validator_value, str)
                                                   else error.validator_value)]
        raise BadField(where, f"{kind_of(error.instance)} where {' or '.join(wanted)} belongs")
    raise BadField(where, error.message if len(error.message) <= 200 else f"{error.message[:200]}...")


_TYPE_WORDS = {"object": "an object", "array": "a list", "string": "text", "number": "a number",
               "integer": "a whole number", "boolean": "true or false", "null": "null"}


def _is(value: Any, kind: Any, field: str, words: str) -> None:
    if not isinstance(value, kind) or (isinstance(value, bool) and kind is not bool):
        raise BadField(field, f"{kind_of(value)} where {words} belongs")


def join(field: str, key: str) -> str:
    return f"{field}.{key}" if field else key


def kind_of(value: Any) -> str:
    """What a JSON value is, in words: "an object", "text"."""
    return {dict: "an object", list: "a list", str: "text", bool: "true/false", int: "a number", float: "a number",
            type(None): "null"}.get(type(value), type(value).__name__)


def shown(value: str) -> str:
    """A value from the file, quoted, control characters escaped and cut to a length that fits a line."""
    quoted = ascii(value[:40])
    return quoted if len(value) <= 40 else quoted[:-1] + "...'"
