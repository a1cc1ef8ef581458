"""Every variable in the knowledge base is well formed under the rules the linter relies on."""

from __future__ import annotations

import pytest

from clusterctl.nccl.knowledge import SCOPE_READER, VariableInfo, knowledge_base
from clusterctl.nccl.lint import value_problems
from clusterctl.nccl.versions import NcclVersion

KB = knowledge_base()
ALL = KB.variables()
#: Every value grammar the knowledge base may name (the linter checks values of most of them).
KINDS = {"int", "bool", "enum", "list", "string", "bytes", "hca-list", "ifname-list", "algo-list", "proto-list",
         "subsys-list", "level", "cidr"}


def test_the_knowledge_base_covers_nccl_pytorch_and_names_that_never_existed() -> None:
    scopes = {v.scope for v in ALL}
    assert scopes <= set(SCOPE_READER)
    assert {"core", "plugin", "pytorch", "nccl-tests", "nonexistent"} <= scopes
    assert len([v for v in ALL if v.scope == "core"]) >= 250


@pytest.mark.parametrize("info", ALL, ids=[v.name for v in ALL])
def test_variable_metadata_is_well_formed(info: VariableInfo) -> None:
    assert info.kind in KINDS
    assert info.scope in SCOPE_READER
    assert info.source, "every fact says where it came from"
    assert info.name.startswith(("NCCL_", "TORCH_NCCL_")) or (
        info.plugin is not None and info.name.startswith(("OFI_NCCL_", "FI_")))
    if info.since is not None and info.removed is not None:
        assert info.since <= info.removed
    if info.minimum is not None and info.maximum is not None:
        assert info.minimum <= info.maximum
    if info.kind in ("enum", "level", "algo-list", "proto-list", "subsys-list"):
        assert info.values, "a word grammar lists its words"
    if info.replaced_by is not None:
        replacement = KB.variable(info.replaced_by)
        assert replacement is not None, f"{info.replaced_by} is not in the knowledge base"
        assert replacement.scope != "nonexistent"
    if info.scope in ("pytorch", "sharp-plugin", "nccl-tests", "nonexistent"):
        assert info.since is None and info.removed is None, "NCCL versions do not apply to other programs"


@pytest.mark.parametrize("info", [v for v in ALL if v.default is not None or v.defaults],
                         ids=lambda v: v.name)
def test_defaults_are_valid_under_their_own_grammar(info: VariableInfo) -> None:
    for version in (None, info.since, NcclVersion(2, 30, 7)):
        default = info.default_for(version)  # each release's own default, valid in that release
        if default is None:
            continue
        problems = [p for p in value_problems(info, default.value, version) if p.severity != "info"]
        assert problems == [], f"default {default.value!r} of {info.name}: {problems}"


@pytest.mark.parametrize("info", [v for v in ALL if v.defaults], ids=lambda v: v.name)
def test_version_dependent_defaults_are_newest_first(info: VariableInfo) -> None:
    sinces = [d.since for d in info.defaults]
    known = [s for s in sinces if s is not None]
    assert known == sorted(known, reverse=True)
    assert None not in sinces[:-1], "only the oldest default may lack a version"


def test_nccl_ib_timeout_default_follows_the_release() -> None:
    info = KB.variable("NCCL_IB_TIMEOUT")
    assert info is not None
    assert info.default_for(NcclVersion(2, 23, 4)).value == "20"  # type: ignore[union-attr]
    assert info.default_for(NcclVersion(2, 18, 3)).value == "18"  # type: ignore[union-attr]
    assert info.default_for(NcclVersion(2, 12, 12)).value == "14"  # type: ignore[union-attr]


def test_similar_names_suggest_real_variables_only() -> None:
    assert KB.similar("NCCL_NSOCS_PERTHREAD")[0] == "NCCL_NSOCKS_PERTHREAD"
    assert "NCCL_SOCKET_TIMEOUT" not in KB.similar("NCCL_SOCKET_TIMEOUTS")


def test_pytorch_old_names_are_kept_apart_from_nccl() -> None:
    for old, new in (("NCCL_ASYNC_ERROR_HANDLING", "TORCH_NCCL_ASYNC_ERROR_HANDLING"),
                     ("NCCL_BLOCKING_WAIT", "TORCH_NCCL_BLOCKING_WAIT"),
                     ("NCCL_DESYNC_DEBUG", "TORCH_NCCL_DESYNC_DEBUG"),
                     ("NCCL_ENABLE_TIMING", "TORCH_NCCL_ENABLE_TIMING")):
        info = KB.variable(old)
        assert info is not None and info.scope == "pytorch" and info.replaced_by == new
