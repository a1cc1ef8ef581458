from __future__ import annotations

import pytest

from clusterctl.errors import UsageError
from clusterctl.nccl.versions import NcclVersion, parse_version


@pytest.mark.parametrize(("text", "expected"), [
    ("2.18.3", NcclVersion(2, 18, 3)),
    ("2.18.3-1", NcclVersion(2, 18, 3)),
    ("2.21.5+cuda12.4", NcclVersion(2, 21, 5)),
    ("v2.19.4-1", NcclVersion(2, 19, 4)),
    ("2.20", NcclVersion(2, 20, 0)),
    ("NCCL version 2.19.3+cuda12.3", NcclVersion(2, 19, 3)),
])
def test_versions_are_read_in_every_spelling(text: str, expected: NcclVersion) -> None:
    assert parse_version(text) == expected


def test_versions_compare_numerically_not_as_text() -> None:
    assert parse_version("2.9.6") < parse_version("2.18.3-1") < parse_version("2.21.5+cuda12.4")
    assert str(parse_version("2.21.5+cuda12.4")) == "2.21.5"


@pytest.mark.parametrize("text", ["", "latest", "2", "2.x.1", "2.18.3 beta"])
def test_a_non_version_is_a_usage_error(text: str) -> None:
    with pytest.raises(UsageError, match="not an NCCL version"):
        parse_version(text)
