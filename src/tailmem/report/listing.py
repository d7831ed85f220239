"""The claims registry as text: ``tailmem claims`` prints it as a Markdown table or JSON."""

from __future__ import annotations

import json

from tailmem.errors import ConfigError
from tailmem.experiments import EXPERIMENTS
from tailmem.report.registry import CLAIMS, Claim, claims_of
from tailmem.report.render import md_table

UNCOVERED = "none"
"""``--experiment none`` selects the claims no experiment measures."""
HEADER = ["id", "experiment", "source", "claim", "published", "rule", "tolerances"]


def select(experiment: str | None) -> list[Claim]:
    """Every registry claim (``None``), one experiment's, or the uncovered ones (``"none"``)."""
    if experiment is None:
        return list(CLAIMS.values())
    if experiment != UNCOVERED and experiment not in EXPERIMENTS:
        known = ", ".join([*EXPERIMENTS, UNCOVERED])
        raise ConfigError(f"unknown experiment {experiment!r}; expected one of: {known}")
    return claims_of(None if experiment == UNCOVERED else experiment)


def _entry(claim: Claim) -> dict[str, object]:
    return {
        "id": claim.id if claim.variant is None else f"{claim.id}.{claim.variant}",
        "experiment": claim.experiment,
        "source": claim.source,
        "claim": claim.describe(claim.statement),
        "published": claim.describe(claim.published),
        "rule": claim.describe(claim.rule),
        "tolerances": dict(claim.tolerances),
    }


def as_json(claims: list[Claim]) -> str:
    return json.dumps([_entry(c) for c in claims], indent=2, ensure_ascii=False)


def as_markdown(claims: list[Claim]) -> str:
    rows = []
    for claim in claims:
        entry = _entry(claim)
        entry["experiment"] = entry["experiment"] or "— (not covered)"
        tolerances = ", ".join(f"{k} = {v:g}" for k, v in claim.tolerances.items())
        rows.append([*(str(entry[h]) for h in HEADER[:-1]), tolerances or "—"])
    title = f"# Claims registry ({len(claims)} claims, PAPERS.md order)"
    return f"{title}\n\n{md_table(HEADER, rows)}"
