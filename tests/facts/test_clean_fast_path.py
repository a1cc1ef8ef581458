"""The pre-cleaning's fast path (a text with nothing to clean only has its lines' trailing blanks
cut) gives exactly what the full per-line cleaning gives: on every recorded output, and on
mangled text built from the characters and words the cleaning acts on."""

from __future__ import annotations

from pathlib import Path

import pytest
from fixture_files import FIXTURES
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from clusterctl.facts import clean as cleaning

RECORDINGS = sorted(p for p in FIXTURES.rglob("*") if p.is_file() and p.suffix in (".txt", ".log", ".out", ""))


def _full(text: str) -> cleaning.Cleaned:
    return cleaning._clean(text, plain=False)


@pytest.mark.parametrize("path", RECORDINGS, ids=lambda p: str(p.relative_to(FIXTURES)))
def test_every_recording_cleans_the_same_on_either_path(path: Path) -> None:
    text = path.read_text(encoding="utf-8", errors="replace")
    assert cleaning.clean(text) == _full(text)


def test_a_plain_recording_takes_the_fast_path() -> None:
    # The recorded DGX A100 nvidia-smi -q is what a fleet health run reads 1,000 times: it must be plain.
    text = (FIXTURES.parents[1] / "inventories/demo/profiles/dgx-a100/nvidia-smi-q.txt").read_text()
    assert cleaning._is_plain(text)
    assert [line.text for line in cleaning.clean(text).lines][:2] == [
        line.rstrip() for line in text.splitlines() if line.strip()][:2]


@pytest.mark.parametrize("noise", ["$ ibstat", "user@gpu01:~$ ibstat", "[root@gpu01 ~]# ibstat", "sh-4.4# ibstat",
                                   "```", "~~~", "...", "…", "[snip]", "[truncated]", "│ x │", "\x1b[31mred\x1b[0m",
                                   "a\x00b"])
def test_a_text_with_something_to_clean_is_not_plain(noise: str) -> None:
    assert not cleaning._is_plain(f"Port 1:\n{noise}\n    State: Active\n")


_PIECES = st.sampled_from(["State", ": ", "Active", "  ", "\t", "\r", "\n", "$", "#", "@", "%", "`", "~", "...", "…",
                           "snip", "truncated", "sh-4.2", "│", "┌──┐", "─", "\x1b[1m", "\x00", ">", "//", "--", ";",
                           "user@host:~$ ", "[root@h ~]# ", "ibstat", "nvidia-smi -q", "```text", "\xa0", "é"])


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_PIECES, max_size=40).map("".join))
def test_mangled_text_cleans_the_same_on_either_path(text: str) -> None:
    assert cleaning.clean(text) == _full(text)


@pytest.mark.parametrize("dots", [".", "..", "....", "......"])
def test_a_line_of_dots_cleans_the_same_on_either_path(dots: str) -> None:
    # Four or more dots are an author's elision, as '...' is; one or two are no elision, on either path.
    text = f"Port 1:\n{dots}\n    State: Active\n"
    cleaned = cleaning.clean(text)
    assert cleaned == _full(text)
    assert ("elision" in " ".join(cleaned.removed)) is (len(dots) > 3)
