"""Hosts that print the same output share one parse; a different output, or one that does not parse, does not."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from clusterctl.errors import ParseError
from clusterctl.facts import shared
from clusterctl.facts.shared import parse_shared
from clusterctl.facts.topo import parse_topo
from clusterctl.survey.collect import collect_host_facts
from clusterctl.transport.base import CommandResult, RunRequest, Transport


class Counting:
    def __init__(self) -> None:
        self.seen: list[str] = []

    def __call__(self, text: str) -> tuple[str, ...]:
        self.seen.append(text)
        if "bad" in text:
            raise ParseError("listing", "not a listing", line=1)
        return tuple(text.split())


def test_identical_outputs_are_parsed_once_and_get_the_same_value() -> None:
    parse = Counting()
    first = parse_shared(parse, "mlx5_0 mlx5_1")
    # Another host's output: equal bytes, another string object.
    again = parse_shared(parse, "".join(["mlx5_0 ", "mlx5_1"]))
    other = parse_shared(parse, "mlx5_0 mlx5_2")
    assert first == again == ("mlx5_0", "mlx5_1") and other == ("mlx5_0", "mlx5_2")
    assert parse.seen == ["mlx5_0 mlx5_1", "mlx5_0 mlx5_2"]


def test_an_output_that_does_not_parse_fails_on_every_host() -> None:
    parse = Counting()
    for _ in range(2):
        with pytest.raises(ParseError, match="not a listing"):
            parse_shared(parse, "bad output")
    assert len(parse.seen) == 2


def test_only_the_latest_texts_are_kept() -> None:
    parse = Counting()
    texts = [f"text {n}" for n in range(shared.KEPT + 1)]
    for text in (*texts, texts[-1], texts[0]):
        parse_shared(parse, text)
    assert parse.seen == [*texts, texts[0]]  # the latest was kept; the first was dropped when the last came


class Answers(Transport):
    def __init__(self, text: str) -> None:
        from clusterctl.inventory.model import Host

        super().__init__(Host(name="h", transport="local"))
        self.text = text

    def execute(self, request: RunRequest) -> CommandResult:
        return CommandResult(request.command, self.text, "", 0, 0.0)


def test_two_hosts_with_one_topology_each_get_it_and_a_third_its_own(fixture_text: Callable[[str, str], str]) -> None:
    from clusterctl.facts.topo import TOPOLOGY

    one, two = fixture_text("topo", "4gpu-nv3-4mlx5-tabs.txt"), fixture_text("topo", "hgx-h100-8gpu-8nic.txt")
    facts = [collect_host_facts(Answers(text), [TOPOLOGY]) for text in (one, "".join(one), two)]
    assert facts[0].topology == facts[1].topology == parse_topo(one)
    assert facts[2].topology == parse_topo(two) != facts[0].topology
