"""``-o json`` text: what ``json.dumps(to_plain(v), indent=2)`` writes, for every kind of value clusterctl prints."""

from __future__ import annotations

import dataclasses
import enum
import json
from pathlib import Path
from typing import Any

import pytest

from clusterctl.facts.model import ParseWarning, RDMADevices, SoftwareStack
from clusterctl.plain_json import dumps_indented, to_plain
from clusterctl.secret import Secret


class Color(enum.Enum):
    RED = "red"


class Level(enum.IntEnum):
    ONE = 1


class Name(str):
    pass


class Ratio(float):
    pass


class Count(int):
    pass


@dataclasses.dataclass(frozen=True)
class Record:
    cells: tuple[Any, ...]
    color: Color
    _private: int = 3


VALUES: list[Any] = [
    {"a": [1, 2.5, -0.0, 1e300, True, False, None, "é\u2028\"\\\n\x1b[31m", [], {}, [[]], {"x": {}}],
     "b": (1, 2), 3: "an int key", True: "a bool key", None: "no key"},
    {"nan": float("nan"), "inf": [float("inf"), float("-inf")]},
    [], {}, "text", 7, None,
    [{"k": [1, {"z": []}]}],
    Record((1, Color.RED), Color.RED),
    Level.ONE, {Color.RED: Level.ONE}, Path("/etc/x"), Name("a str subclass"),
    RDMADevices(), ParseWarning("clipped", 3), SoftwareStack(kernel="6.8.0", missing={"nccl": "no output"}),
    {"set": {2}, "frozen": frozenset({"a"})},
    [Ratio(0.5), Ratio(float("inf")), Ratio(float("-inf")), Ratio(float("nan")), Count(3)],
]


@pytest.mark.parametrize("value", VALUES, ids=range(len(VALUES)))
def test_the_text_is_what_the_standard_library_writes(value: Any) -> None:
    assert dumps_indented(value) == json.dumps(to_plain(value), indent=2)


def test_a_secret_is_written_masked() -> None:
    text = dumps_indented({"token": Secret("abcdef.0123456789abcdef")})
    assert "0123456789abcdef" not in text and json.loads(text) == {"token": str(Secret("x"))}


def test_a_value_with_no_json_form_is_refused_as_json_refuses_it() -> None:
    with pytest.raises(TypeError, match="not JSON serializable"):
        dumps_indented({"x": object()})


def test_a_list_shared_by_many_records_is_written_in_full_at_every_depth() -> None:
    # A survey report gives alike hosts one shared list (their GPUs, their matrix): the writer writes
    # it once per depth and must still place every copy at its own indentation.
    shared: list[Any] = [1, ["two", {"three": [3]}], []]
    value = {"a": shared, "b": [shared, shared, {"c": shared}], "d": [[shared]], "e": (shared, shared)}
    assert dumps_indented(value) == json.dumps(to_plain(value), indent=2)


def test_values_made_on_the_way_never_take_each_others_text() -> None:
    # Records become dicts and lists only while they are written; were those freed, the next
    # record's list could reuse a freed one's identity and be written with its text.
    records = [Record((i, f"cell-{i}", [i, i + 1]), Color.RED) for i in range(3000)]
    assert dumps_indented(records) == json.dumps(to_plain(records), indent=2)


def test_a_dict_shared_by_many_records_is_written_in_full_at_every_depth() -> None:
    # Health gives alike hosts one shared facts dict (their GPUs, their links): written once per
    # depth, every copy still at its own indentation, and a dict changed between two writings
    # (a new document) written as it is now.
    shared: dict[str, Any] = {"gpu": {"index": 0, "notes": []}, "links": [1, 2], "ok": True}
    value = {"a": shared, "b": [shared, shared, {"c": shared}], "d": [[shared]], "e": {"f": shared}}
    assert dumps_indented(value) == json.dumps(to_plain(value), indent=2)
    shared["gpu"]["index"] = 7
    assert dumps_indented(value) == json.dumps(to_plain(value), indent=2)
