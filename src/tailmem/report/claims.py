"""Claims: a published statement, our measurement, the rule that compares them and the verdict.

The published claims themselves — statement, value, rule and tolerances — are in the registry
(:data:`CLAIMS`, :mod:`tailmem.report.registry`, re-exported here). Experiments measure, call
:meth:`Claim.result` and write a ``claims.json`` (a list of :class:`ClaimResult`) into their run
directory; verdicts are computed by the experiment from its results with an explicit rule, never
typed in, and every id must be a registry id.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from tailmem.errors import DataError
from tailmem.report.registry import (
    CLAIMS,
    SECTIONS,
    Claim,
    check_id,
    claims_of,
    lookup,
    section_of,
)

__all__ = [
    "CLAIMS",
    "SECTIONS",
    "VERDICTS",
    "Claim",
    "ClaimResult",
    "Verdict",
    "check_id",
    "claims_of",
    "lookup",
    "not_measured",
    "read_claims",
    "section_of",
    "verdict",
    "write_claims",
]

Verdict = Literal["reproduced", "not reproduced", "not measured"]
VERDICTS: tuple[str, ...] = ("reproduced", "not reproduced", "not measured")


@dataclass(frozen=True)
class ClaimResult:
    """One published claim set beside our measurement.

    ``id`` is stable across runs (e.g. ``"A4.thm53.gd_rate"``); ``source`` points into PAPERS.md
    (e.g. ``"A4, Theorem 5.3"``); ``published`` and ``ours`` are short human-readable values;
    ``rule`` states how the verdict was decided, with its tolerance.
    """

    id: str
    claim: str
    source: str
    published: str
    ours: str
    rule: str
    verdict: Verdict
    details: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.verdict not in VERDICTS:
            raise ValueError(f"verdict {self.verdict!r} is not one of {VERDICTS}")


def verdict(passed: bool | None) -> Verdict:
    """Map a rule's outcome to a verdict; ``None`` means the preset could not measure it."""
    if passed is None:
        return "not measured"
    return "reproduced" if passed else "not reproduced"


def write_claims(run: Any, results: list[ClaimResult]) -> None:
    """Write ``claims.json`` into ``run`` (a :class:`~tailmem.rundir.RunDir`)."""
    ids = [r.id for r in results]
    duplicates = sorted({i for i in ids if ids.count(i) > 1})
    if duplicates:
        raise ValueError(f"duplicate claim ids: {', '.join(duplicates)}")
    run.write_json("claims.json", [dataclasses.asdict(r) for r in results])


def read_claims(run: Any) -> list[ClaimResult]:
    """Read and validate ``claims.json`` from ``run``; damage gives one clear DataError."""
    raw = run.read_json("claims.json")
    target = run.file("claims.json")
    if not isinstance(raw, list):
        raise DataError(f"{target}: expected a list of claims, got {type(raw).__name__}")
    names = {f.name for f in dataclasses.fields(ClaimResult)}
    results = []
    for i, item in enumerate(raw):
        if not isinstance(item, dict) or not names - {"details"} <= set(item):
            raise DataError(f"{target}: entry {i} lacks the fields {sorted(names)}")
        try:
            results.append(ClaimResult(**{k: v for k, v in item.items() if k in names}))
        except (TypeError, ValueError) as exc:
            raise DataError(f"{target}: entry {i} is invalid ({exc})") from None
        check_id(results[-1].id, str(target))
    return results


NOT_MEASURED_HERE = "not measured at this preset"


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
            published=c.describe(c.published),
            ours=reason,
            rule=c.describe(c.rule),
            verdict="not measured",
        )
        for c in claims_of(experiment)
        if c.id not in have
    ]
