"""CHANGELOG.md keeps Keep a Changelog's shape: helpers merging in parallel each once added a second
``### Fixed`` under ``[Unreleased]``, which readers then miss."""

from __future__ import annotations

from pathlib import Path

KINDS = ("Added", "Changed", "Deprecated", "Removed", "Fixed", "Security")


def test_each_release_names_each_kind_of_change_once() -> None:
    text = (Path(__file__).parents[2] / "CHANGELOG.md").read_text(encoding="utf-8")
    releases = text.split("\n## ")[1:]
    assert releases and releases[0].startswith("[Unreleased]")
    for release in releases:
        name = release.splitlines()[0]
        kinds = [line[4:].strip() for line in release.splitlines() if line.startswith("### ")]
        assert all(kind in KINDS for kind in kinds), (name, kinds)
        assert len(kinds) == len(set(kinds)), f"{name}: a kind of change twice: {kinds}"


def test_every_entry_stands_under_a_kind_of_change() -> None:
    # A merge once left two entries between "## [Unreleased]" and its first "###": under no kind.
    text = (Path(__file__).parents[2] / "CHANGELOG.md").read_text(encoding="utf-8")
    for release in text.split("\n## ")[1:]:
        before_first_kind = release.split("\n### ")[0]
        assert not [line for line in before_first_kind.splitlines() if line.startswith("- ")], \
            release.splitlines()[0]
