"""The registry of published claims: every observation and theorem of PAPERS.md in one place.

Each section's claims, with their rules and checks, live in one module (:mod:`~tailmem.claims.a1`
… :mod:`~tailmem.claims.related`); :data:`CLAIMS` joins them in PAPERS.md order. Experiments
measure, build the inputs dataclass their claims read (:func:`inputs_of`), call :func:`evaluate`
with it and write ``claims.json`` with their other outputs (:func:`tailmem.outputs.write`);
the report reads it back with :func:`read_claims` and lists the registry claims a run did not
measure.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence
from typing import Any

from tailmem.claims import a1, a2, a3, a3_map, a3_qk, a3_sensitivity, a4, b, related, rule_or_rate
from tailmem.claims.core import Claim, ClaimInputs, ClaimResult
from tailmem.errors import DataError

SECTIONS: dict[str, str] = {
    "A1": "Component ablation on LM pretraining",
    "A2": "Spectral isotropy",
    "A3": "Heavy-tailed knowledge QA",
    "A4": "One-layer associative memory theory",
    "B": "Paper B: training dynamics and scaling laws",
    "Related": "Related results worth reproducing or comparing with",
    "D": "Update rule or learning rate?",
}
"""PAPERS.md's sections that hold claims; every claim's ``source`` starts with one of the keys."""

_CLAIM_LIST: list[Claim] = [
    *a1.CLAIMS,
    *a2.CLAIMS,
    *a3.CLAIMS,
    *a3_qk.CLAIMS,
    *a3_sensitivity.CLAIMS,
    *a3_map.CLAIMS,
    *a4.CLAIMS,
    *related.MECHANISM_CLAIMS,  # A4's, then B's: section D's mechanism
    *b.CLAIMS,
    *related.CLAIMS,
    *rule_or_rate.CLAIMS,
]
CLAIMS: dict[str, Claim] = {c.id: c for c in _CLAIM_LIST}
"""Every claim of PAPERS.md by id, in PAPERS.md order."""
if len(CLAIMS) != len(_CLAIM_LIST):
    raise ValueError("duplicate ids in the claims registry")


def section_of(source: str) -> str:
    """The :data:`SECTIONS` key a claim's source names first (``"A (thesis); beyond A1"``: A1)."""
    found = [(m.start(), key) for key in SECTIONS if (m := re.search(rf"\b{key}\b", source))]
    if not found:
        raise ValueError(f"source {source!r} names none of the sections {list(SECTIONS)}")
    return min(found)[1]


for _claim in _CLAIM_LIST:
    section_of(_claim.source)
_FAMILIES = [c for c in _CLAIM_LIST if c.variant]

_INPUTS: dict[str, type[ClaimInputs]] = {}
"""Per experiment, the one inputs class its checked claims read."""
for _claim in _CLAIM_LIST:
    if _claim.experiment is not None and _claim.inputs is not None:
        _first = _INPUTS.setdefault(_claim.experiment, _claim.inputs)
        if _first is not _claim.inputs:
            raise ValueError(
                f"claim {_claim.id} reads {_claim.inputs.__qualname__}, but the other claims of "
                f"{_claim.experiment} read {_first.__qualname__}"
            )


def lookup(claim_id: str) -> Claim | None:
    """The registry claim of a result id (a family's results carry ``"<id>.<variant>"``)."""
    if claim_id in CLAIMS:
        return None if CLAIMS[claim_id].variant else CLAIMS[claim_id]
    return next((c for c in _FAMILIES if claim_id.startswith(f"{c.id}.")), None)


def check_id(claim_id: str, where: str) -> Claim:
    """:func:`lookup`, with an unknown id a one-line DataError naming ``where`` it was found."""
    claim = lookup(claim_id)
    if claim is None:
        raise DataError(
            f"{where}: unknown claim id {claim_id!r}; expected an id of the claims registry "
            "(see 'tailmem claims')"
        )
    return claim


def claims_of(experiment: str | None) -> list[Claim]:
    """The registry claims measured by ``experiment`` (``None``: those no experiment measures)."""
    return [c for c in CLAIMS.values() if c.experiment == experiment]


def inputs_of(experiment: str) -> type[ClaimInputs] | None:
    """The inputs class the checked claims of ``experiment`` read (None: it has none)."""
    return _INPUTS.get(experiment)


def evaluate(experiment: str, inputs: ClaimInputs) -> list[ClaimResult]:
    """Every claim of ``experiment`` that has a check, checked against ``inputs`` (an instance
    of :func:`inputs_of` ``experiment``: another type is a one-line TypeError)."""
    expected = _INPUTS.get(experiment)
    if expected is not None and not isinstance(inputs, expected):
        raise TypeError(
            f"the claims of {experiment} read {expected.__module__}.{expected.__qualname__}; "
            f"got {type(inputs).__qualname__}"
        )
    return [r for c in claims_of(experiment) if c.check for r in c.evaluate(inputs)]


def read_claims(run: Any) -> list[ClaimResult]:
    """Read and validate ``claims.json`` from ``run``; damage (an unknown field included) gives
    one clear DataError."""
    raw = run.read_json("claims.json")
    target = run.file("claims.json")
    if not isinstance(raw, list):
        raise DataError(f"{target}: expected a list of claims, got {type(raw).__name__}")
    names = [f.name for f in dataclasses.fields(ClaimResult)]
    required = {f.name for f in dataclasses.fields(ClaimResult) if f.default is dataclasses.MISSING}
    required -= {"details"}
    results = []
    for i, item in enumerate(raw):
        if not isinstance(item, dict) or not required <= set(item):
            raise DataError(f"{target}: entry {i} lacks the fields {sorted(required)}")
        unknown = [k for k in item if k not in names]
        if unknown:
            raise DataError(
                f"{target}: entry {i} has the unknown field {unknown[0]!r}; expected only "
                f"{', '.join(names)}"
            )
        try:
            results.append(ClaimResult(**item))
        except (TypeError, ValueError) as exc:
            raise DataError(f"{target}: entry {i} is invalid ({exc})") from None
        check_id(results[-1].id, str(target))
    return results


NOT_MEASURED_HERE = "this run's configuration does not emit it"


def not_measured(
    experiment: str, results: Sequence[ClaimResult], reason: str = NOT_MEASURED_HERE
) -> list[ClaimResult]:
    """The registry claims of ``experiment`` that ``results`` lack, as "not measured" results.

    A family counts as measured when any of its variants is among ``results``.
    """
    have = {check_id(r.id, experiment).id for r in results}
    return [
        ClaimResult(
            id=c.id,
            claim=c.describe(c.statement),
            source=c.source,
            published=c.with_versions(c.describe(c.published)),
            ours="—",
            rule=c.describe(c.rule),
            verdict="not measured",
            reason=reason,
            check=c.check_name,
        )
        for c in claims_of(experiment)
        if c.id not in have
    ]
