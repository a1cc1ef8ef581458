"""What a sweep measures: one-knob variations of NCCL's defaults, each valid for the NCCL version.

``candidate_space`` is the common knobs (algorithms, protocols, channels, buffer size, threads; derive
proposes the TCP socket transport's on Ethernet fabrics); ``lint_validator`` drops a value the lint
knowledge base warns about, or NCCL's default.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from clusterctl.nccl.knowledge import knowledge_base
from clusterctl.nccl.lint import lint_settings
from clusterctl.nccl.sources import Setting
from clusterctl.nccl.versions import NcclVersion

#: The example tuner plugin's CSV format (plugins/tuner/example) dates from 2.28: not the catalogue's
#: ``since`` of NCCL_TUNER_CONFIG_FILE (2.27.5), the first release that read the variable at all.
TUNER_CSV_SINCE = NcclVersion(2, 28, 0)
#: First release whose ncclAlgoStr has each algorithm (src/graph/tuning.cc, src/enqueue.cc by tag); the
#: catalogue's NCCL_ALGO lists the names, not when each came (its note says so).
ALGO_SINCE: dict[str, NcclVersion] = {
    "NVLS": NcclVersion(2, 17, 0),
    "NVLSTree": NcclVersion(2, 18, 0),
    "PAT": NcclVersion(2, 23, 0),
}

#: (name, value, nccl version) -> is it a valid setting there (the lint knowledge base answers).
Validator = Callable[[str, str, "NcclVersion | None"], bool]

@dataclass(frozen=True)
class Candidate:
    env: tuple[tuple[str, str], ...]

    @property
    def label(self) -> str:
        return " ".join(f"{k}={v}" for k, v in self.env) or "defaults"

    def get(self, name: str) -> str | None:
        return dict(self.env).get(name)


def valid_only(candidates: Iterable[Candidate], version: NcclVersion | None, validate: Validator | None
               ) -> list[Candidate]:
    """The candidates whose every setting ``validate`` accepts for ``version`` (all of them without one)."""
    return [c for c in candidates if validate is None or all(validate(k, v, version) for k, v in c.env)]

def candidate_space(
    version: NcclVersion | None,
    *,
    validate: Validator | None = None,
    nvswitch: bool = False,
    one_gpu_per_node: bool = False,
) -> list[Candidate]:
    """One-knob variations of the defaults (plus algorithm/protocol pairs where a tuner CSV can use them).

    ``nvswitch`` adds NVLS/NVLSTree (NCCL picks them itself on NVSwitch systems, so they are worth
    measuring there), ``one_gpu_per_node`` PAT (NCCL runs PAT only with one GPU per node).
    """
    algos = ["Ring", "Tree"]
    if nvswitch:
        algos += ["NVLS", "NVLSTree"]
    if one_gpu_per_node:
        algos += ["PAT"]
    algos = [a for a in algos if a not in ALGO_SINCE or version is None or version >= ALGO_SINCE[a]]
    protos = ("LL", "LL128", "Simple")
    options: list[tuple[tuple[str, str], ...]] = []
    options += [(("NCCL_ALGO", a),) for a in algos]
    options += [(("NCCL_PROTO", p),) for p in protos]
    if version is not None and version >= TUNER_CSV_SINCE:
        options += [(("NCCL_ALGO", a), ("NCCL_PROTO", p)) for a in ("Ring", "Tree") for p in protos]
    # Channel knobs were renamed in 2.17 (NCCL_MIN/MAX_NCHANNELS -> NCCL_MIN/MAX_CTAS): the catalogue says from when.
    if version is None or knowledge_base().catalogued("NCCL_MIN_CTAS").read_by(version):
        options += [(("NCCL_MIN_CTAS", "32"),), (("NCCL_MAX_CTAS", "8"),)]
    else:
        options += [(("NCCL_MIN_NCHANNELS", "32"),), (("NCCL_MAX_NCHANNELS", "8"),)]
    options += [(("NCCL_BUFFSIZE", str(n)),) for n in (2097152, 8388608, 16777216)]
    options += [(("NCCL_NTHREADS", "256"),)]
    return valid_only((Candidate(env) for env in options), version, validate)

def lint_validator() -> Validator:
    """Validity from the lint knowledge base: a value lint warns about, or NCCL's default, is not swept."""
    def validate(name: str, value: str, version: NcclVersion | None) -> bool:
        findings = lint_settings([Setting(name, value, "<sweep>", 1)], nccl_version=version)
        return not any(f.severity in ("error", "warning") or f.code == "DEFAULT_VALUE" for f in findings)

    return validate
