"""The gap measures of knowledge-QA (:mod:`tailmem.metrics.qa_gaps`) on a finished plan, beside
the paper's values computed the same way from its tables, and our ratios on the paper's cells
(like for like with the paper's: the same groups, steps and anchors).

For every FFN type and every pair of arms (Muon first where it is run, then the arms in the
plan's order): the FTA curves of the seeds both arms finished (paired by seed), the exposures of
each group at each evaluated step (:class:`Exposures`), and from them the peak gap and the
exposure-lag ratio at each tau. The paper's values are those of
:func:`~tailmem.metrics.qa_gaps.paper_curves` for each version of
:data:`~tailmem.claims.paper_a_qa_tables.VERSIONS`, for the same pairs.

Everything here is JSON-ready (no NaN: a number that does not exist is ``None`` with a status).
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from tailmem.claims.paper_a_qa_tables import STEPS as PAPER_STEPS
from tailmem.claims.paper_a_qa_tables import VERSIONS, Version
from tailmem.experiments.knowledge_qa.tables import history
from tailmem.lm.plan import Plan
from tailmem.metrics.qa_gaps import (
    POOLED,
    TAUS,
    FTACurves,
    cells_lag_ratios,
    exposures_per_group,
    gap_measures,
    paper_curves,
)

LEAD_FIRST = "muon"
"""The arm listed first in every pair it is in: ratios read "Adam needs x times Muon's"."""

VERSION_LABELS: dict[Version, str] = {"arxiv-v2": "paper arXiv v2", "iclr": "paper ICLR"}
REFERENCE: Version = "arxiv-v2"
"""The paper version drawn beside ours in the lag-ratio figure (the tables list both)."""
HEADLINE = ("muon", "adam")
"""The pair the report leads with (paper A's headline: Muon's tail edge over Adam)."""
CELLS = "paper_cells_lag_ratio"
"""The key of a pair's lag ratios on the paper's cells (:func:`~tailmem.metrics.qa_gaps.
paper_cells`): like for like with the paper's, which are computed from those cells alone."""
CELLS_SOURCE = "tailmem, paper's cells"
"""The source label of our ratios on the paper's cells in the lag-ratio tables."""

LAG_RATIO_COLUMNS = {
    "source": "tailmem (this run, every group and evaluation), tailmem on the paper's cells "
    "(groups m−4, m−2, m at 20/50/100% of training, no step 0: like for like with the paper's "
    "rows) or the paper's published tables (m = 15, groups 11/13/15)",
    "group": "frequency group; pooled = all groups' (exposures, FTA) points as one curve",
    f"τ = {TAUS[0]:g}": f"lag ratio at FTA {TAUS[0]:g}: mean ± SE over seeds (k/n seeds: "
    "measured in k of them); ≥ / ≤ a bound of the seed-mean curves' ratio where a crossing is not "
    "bracketed by two evaluations, naming the arm that never reaches τ",
    **{f"τ = {tau:g}": f"the same at FTA {tau:g}" for tau in TAUS[1:]},
}
PEAK_GAP_COLUMNS = {
    "source": "tailmem (this run) or the paper's published tables",
    "lead": "the arms compared: the gap is FTA of lead − FTA of lag",
    "peak_gap": "largest seed-mean FTA gap lead − lag over all groups and evaluations",
    "se": "its standard error over paired seeds (empty for one seed or the paper)",
    "group": "the group where the peak occurs",
    "step": "the evaluated step where it occurs",
    "fraction": "that step as a fraction of training",
    "rarest_peak_gap": "the largest gap of the rarest group, its SE and step",
}


@dataclass(frozen=True)
class Exposures:
    """How often one fact of each group is trained per epoch, and the epoch's length in steps:
    ``selections[g] * qa_per_selection`` trainings per ``steps_per_epoch`` steps."""

    selections: tuple[int, ...]
    qa_per_selection: int
    steps_per_epoch: float

    def at(self, steps: Sequence[float] | np.ndarray) -> np.ndarray:
        """Exposures of one fact of each group by each step, ``(n_groups, n_steps)``."""
        return exposures_per_group(
            self.selections, steps, self.steps_per_epoch, self.qa_per_selection
        )


def pairs(arms: Sequence[str]) -> list[tuple[str, str]]:
    """Every pair of ``arms`` once, :data:`LEAD_FIRST` leading where present."""
    ordered = sorted(arms, key=lambda arm: arm != LEAD_FIRST)  # stable: the rest keep their order
    return list(itertools.combinations(ordered, 2))


def pair_curves(
    plan: Plan, ffn: str, lead: str, lag: str, exposures: Exposures
) -> FTACurves | None:
    """FTA of ``lead`` and ``lag`` over the seeds both completed (paired by seed), at the steps
    all of those runs evaluated; ``None`` when no seed completed in both arms."""
    runs = {
        arm: {job.seed: plan.results[job] for job in plan.seed_runs.get((ffn, arm), [])}
        for arm in (lead, lag)
    }
    seeds = [
        seed
        for seed, result in runs[lead].items()
        if result.ok and seed in runs[lag] and runs[lag][seed].ok
    ]
    if not seeds:
        return None
    steps, fta = history([runs[arm][seed] for arm in (lead, lag) for seed in seeds])
    fta = fta.transpose(0, 2, 1)  # (runs, groups, steps)
    n = len(seeds)
    return FTACurves({lead: fta[:n], lag: fta[n:]}, steps, exposures.at(steps))


def measured_pair(
    measures: Mapping[str, Any], lead: str = "muon", lag: str = "adam"
) -> dict[str, Any] | None:
    """The ``lead``/``lag`` entry of :func:`measure`'s ``pairs`` if it was measured, else None."""
    for pair in measures.get("pairs", []):
        if (pair["lead"], pair["lag"]) == (lead, lag) and pair["status"] == "measured":
            return pair
    return None


def paper_pooled(
    version: Version, ffn: str, taus: Sequence[float], lead: str = "muon", lag: str = "adam"
) -> dict[float, dict[str, Any]]:
    """The pooled lag-ratio entry (:func:`~tailmem.metrics.qa_gaps.gap_measures`) of ``lag``
    behind ``lead`` in the paper's ``version`` tables, per τ, computed as ours are."""
    (pair,) = gap_measures(paper_curves(version, ffn), taus, [(lead, lag)])["pairs"]
    return {r["tau"]: r for r in pair["lag_ratio"] if r["group"] == POOLED}


def readings(entry: Mapping[str, Any]) -> dict[str, dict[float, Mapping[str, Any]]]:
    """A pair's lag-ratio rows per reading (:data:`~tailmem.claims.a3_sensitivity.READINGS`)
    and τ: ``paper_cells_group`` (group m − 2 of the paper's cells), ``paper_cells_pooled``
    and ``pooled`` (every group and evaluation; the paper's own entries have no such row)."""
    cells = entry.get(CELLS, [])
    groups = sorted({r["group"] for r in cells if r["group"] != POOLED})
    middle = groups[len(groups) // 2] if groups else None  # m − 2 of (m − 4, m − 2, m)
    pick = {
        "paper_cells_group": [r for r in cells if r["group"] == middle],
        "paper_cells_pooled": [r for r in cells if r["group"] == POOLED],
        "pooled": [r for r in entry.get("lag_ratio", []) if r["group"] == POOLED],
    }
    return {name: {r["tau"]: r for r in rows} for name, rows in pick.items()}


def paper_readings(
    version: Version, ffn: str, taus: Sequence[float], lead: str = "muon", lag: str = "adam"
) -> dict[str, dict[float, dict[str, Any]]]:
    """The paper's ``version`` tables' lag ratio of ``lag`` behind ``lead`` per like-for-like
    reading (``paper_cells_group``, ``paper_cells_pooled``) and τ: the ratio or its bounds
    (``ratio``, ``lower``, ``upper``), computed as ours are."""
    published = paper_curves(version, ffn)
    cells = cells_lag_ratios(published, PAPER_STEPS[-1], lead, lag, taus)
    found = readings({CELLS: cells})
    return {
        name: {tau: dict(row["of_mean"]) for tau, row in rows.items()}
        for name, rows in found.items()
        if name != "pooled"
    }


def measure(
    plan: Plan,
    ffn: str,
    exposures: Exposures,
    taus: Sequence[float] = TAUS,
    chosen: Sequence[tuple[str, str]] | None = None,
) -> tuple[dict[str, Any], dict[tuple[str, str], FTACurves]]:
    """The gap measures of one FFN type, ours and the paper's, and our curves of each pair.

    Returns ``({"taus", "exposures", "pairs": [...], "paper": {version: ...}}, curves)``: each
    of our pairs is :func:`~tailmem.metrics.qa_gaps.gap_measures`' entry with ``status``
    "measured", the paired ``seeds``, the evaluated ``steps`` and, under :data:`CELLS`, its
    lag ratios on the paper's cells (like for like with the paper's), or ``status`` "not
    measured" with the reason; ``paper[version]`` is ``gap_measures`` of the published table
    for the same pairs (the paper runs all five arms), with the same :data:`CELLS` entry.
    ``chosen``: the pairs (lead, lag) to measure (default: every pair of the plan's arms,
    :func:`pairs`).
    """
    chosen = pairs(plan.arms) if chosen is None else chosen
    out: list[dict[str, Any]] = []
    curves: dict[tuple[str, str], FTACurves] = {}
    for lead, lag in chosen:
        pair = pair_curves(plan, ffn, lead, lag, exposures)
        if pair is None:
            reason = "no seed completed in both arms"
            out.append({"lead": lead, "lag": lag, "status": "not measured", "reason": reason})
            continue
        curves[lead, lag] = pair
        (entry,) = gap_measures(pair, taus)["pairs"]
        cells = cells_lag_ratios(pair, plan.steps, lead, lag, taus)
        out.append(
            {**entry, CELLS: cells, "status": "measured", "n_seeds": pair.n_seeds,
             "steps": pair.steps.tolist()}
        )  # fmt: skip
    paper = {}
    for version in VERSIONS:
        published = paper_curves(version, ffn)
        known = [p for p in chosen if all(arm in published.fta for arm in p)]
        paper[version] = gap_measures(published, taus, known)
        for entry in paper[version]["pairs"]:  # the tables are the cells: the same ratios
            entry[CELLS] = cells_lag_ratios(published, PAPER_STEPS[-1], entry["lead"], entry["lag"],
                                           taus)  # fmt: skip
    described = {
        "selections_per_group": list(exposures.selections),
        "qa_per_selection": exposures.qa_per_selection,
        "steps_per_epoch": exposures.steps_per_epoch,
    }
    taus = [float(t) for t in taus]
    return {"taus": taus, "exposures": described, "pairs": out, "paper": paper}, curves


def headline_pair(measures: Mapping[str, Any]) -> tuple[str, str] | None:
    """:data:`HEADLINE` when measured, else the first measured pair (``None``: none)."""
    measured = [(p["lead"], p["lag"]) for p in measures["pairs"] if p["status"] == "measured"]
    return HEADLINE if HEADLINE in measured else next(iter(measured), None)


def summary_sentences(
    measures: Mapping[str, Any], ffn: str, labels: Mapping[str, str]
) -> list[str]:
    """The report summary's lead: the pooled lag ratio of the headline pair at each tau (every
    group and evaluation: ours alone), then like for like with the paper's tables (our ratios
    on the paper's cells: group m − 2 and pooled, beside the paper's), and its peak gap with
    where it occurs (arms named by ``labels``)."""
    pair = headline_pair(measures)
    if pair is None:
        return [f"Gap measures, {ffn} FFN: not measured (no seed completed in any pair of arms)."]
    lead, lag = (labels[arm] for arm in pair)

    def reading(pairs: Sequence[Mapping[str, Any]], key: str, group: int | str) -> str:
        (entry,) = [p for p in pairs if (p["lead"], p["lag"]) == pair]
        rows = entry.get(key, [])
        if group != POOLED:  # the middle group of the cells: m − 2
            groups = sorted({r["group"] for r in rows if r["group"] != POOLED})
            group = groups[len(groups) // 2] if groups else -1
        found = [r for r in rows if r["group"] == group]
        return ", ".join(f"τ {r['tau']:g}: {ratio_text(r, lead, lag)}" for r in found) or "—"

    ours = [p for p in measures["pairs"] if p["status"] == "measured"]
    like: list[str] = []
    for name, group in (("group m − 2", 0), ("pooled", POOLED)):
        papers = "; ".join(
            f"{VERSION_LABELS[v]} {reading(m['pairs'], CELLS, group)}"
            for v, m in measures["paper"].items()
        )
        like.append(f"{name} {reading(ours, CELLS, group)} ({papers})")
    (entry,) = [p for p in ours if (p["lead"], p["lag"]) == pair]
    peak = entry["peak_gap"]["overall"]
    se = "" if peak["se"] is None else f" ± {peak['se']:.3f}"
    return [
        f"Exposure-lag ratio, {ffn} FFN (exposures {lag} needs ÷ {lead}'s to reach FTA τ), every "
        f"group and evaluation pooled: {reading(ours, 'lag_ratio', POOLED)} (the paper's tables "
        "hold no such reading).",
        f"Like for like with the paper (groups m−4, m−2, m at 20/50/100% of training, no step "
        f"0): {'; '.join(like)}.",
        f"Peak FTA gap {lead} − {lag}: {peak['gap']:+.3f}{se} in group {peak['group']} at step "
        f"{int(peak['step'])}.",
    ]


def _sources(measures: Mapping[str, Any]) -> list[tuple[str, list[Mapping[str, Any]]]]:
    """(source label, measured pairs) of ours and of each paper version."""
    ours = [p for p in measures["pairs"] if p["status"] == "measured"]
    papers = [(VERSION_LABELS[v], m["pairs"]) for v, m in measures["paper"].items()]
    return [("tailmem", ours), *papers]


def _ratio_sources(measures: Mapping[str, Any]) -> list[tuple[str, list[Mapping[str, Any]]]]:
    """:func:`_sources` for the lag ratios, with ours on the paper's cells as a source of its
    own (``lag_ratio`` replaced by the :data:`CELLS` entry) after ours."""
    (ours, *papers) = _sources(measures)
    cells: list[Mapping[str, Any]] = [{**p, "lag_ratio": p.get(CELLS, [])} for p in ours[1]]
    return [ours, (CELLS_SOURCE, cells), *papers]


def ratio_status(row: Mapping[str, Any]) -> str:
    """One word for a lag-ratio summary: "measured" in every seed, "measured in k of n seeds",
    or (none measured) the status of the ratio of the seed-mean curves."""
    k, n = row["n_measured"], row["n_seeds"]
    if k == n:
        return "measured"
    return f"measured in {k} of {n} seeds" if k else row["of_mean"]["status"]


def ratio_text(row: Mapping[str, Any], lead: str, lag: str) -> str:
    """A lag-ratio summary as a table cell: ``2.10 ± 0.30`` (seed mean ± SE), else a bound of
    the seed-mean curves' ratio (``≥ 1.80``, ``≤ 1.20``) with which arm never reaches tau, or
    the status alone."""
    if row["mean"] is not None:
        se = "" if row["se"] is None else f" ± {row['se']:.2f}"
        k, n = row["n_measured"], row["n_seeds"]
        return f"{row['mean']:.2f}{se}" + ("" if k == n else f" ({k}/{n} seeds)")
    central = row["of_mean"]
    if central["lower"] is not None:  # the lagging arm crossed late or never
        bound, late = f"≥ {central['lower']:.2f}", lag
    elif central["upper"] is not None:
        bound, late = f"≤ {central['upper']:.2f}", lead
    else:
        return central["status"]
    return f"{bound} ({late} never reaches τ)" if central["status"] == "not reached" else bound


def lag_ratio_rows(ffn: str, measures: Mapping[str, Any]) -> list[dict[str, Any]]:
    """One row per source, pair, group (and pooled) and tau: seed mean ± SE of the lag ratio,
    how many seeds measured it, its status, and the ratio (or bounds) of the seed-mean curves;
    ours twice, from every group and evaluation and from the paper's cells alone."""
    rows = []
    for source, measured in _ratio_sources(measures):
        for pair in measured:
            for row in pair["lag_ratio"]:
                central = row["of_mean"]
                rows.append(
                    {
                        "ffn": ffn,
                        "source": source,
                        "lead": pair["lead"],
                        "lag": pair["lag"],
                        "group": row["group"],
                        "tau": row["tau"],
                        "mean": row["mean"],
                        "se": row["se"],
                        "n_measured": row["n_measured"],
                        "n_seeds": row["n_seeds"],
                        "status": ratio_status(row),
                        "of_mean": central["ratio"],
                        "lower": central["lower"],
                        "upper": central["upper"],
                    }
                )
    return rows


def lag_ratio_table(
    measures: Mapping[str, Any], lead: str, lag: str, labels: Mapping[str, str]
) -> list[dict[str, Any]]:
    """The report's table of one pair: a row per source and group (pooled last), a column per
    tau (:func:`ratio_text`; arms named by ``labels``); ours from every group and evaluation,
    then from the paper's cells alone (like for like with the paper's rows)."""
    rows = []
    named = (labels[lead], labels[lag])
    for source, measured in _ratio_sources(measures):
        for pair in measured:
            if (pair["lead"], pair["lag"]) != (lead, lag):
                continue
            for group in dict.fromkeys(r["group"] for r in pair["lag_ratio"]):
                cells = {
                    f"τ = {r['tau']:g}": ratio_text(r, *named)
                    for r in pair["lag_ratio"]
                    if r["group"] == group
                }
                rows.append({"source": source, "group": group, **cells})
    return rows


def peak_gap_rows(ffn: str, measures: Mapping[str, Any], steps: int) -> list[dict[str, Any]]:
    """One row per source and pair: the largest seed-mean FTA gap ``lead - lag`` over groups
    and steps, its SE over paired seeds, where it occurs (group, step, fraction of training),
    and the same for the rarest group."""
    rows = []
    for source, measured in _sources(measures):
        total = steps if source == "tailmem" else PAPER_STEPS[-1]
        for pair in measured:
            peak = pair["peak_gap"]
            overall, rarest = peak["overall"], peak["per_group"][-1]
            rows.append(
                {
                    "ffn": ffn,
                    "source": source,
                    "lead": pair["lead"],
                    "lag": pair["lag"],
                    "peak_gap": round(overall["gap"], 4),
                    "se": _round(overall["se"]),
                    "group": overall["group"],
                    "step": int(overall["step"]),
                    "fraction": round(overall["step"] / total, 3),
                    "rarest_group": rarest["group"],
                    "rarest_peak_gap": round(rarest["gap"], 4),
                    "rarest_se": _round(rarest["se"]),
                    "rarest_step": int(rarest["step"]),
                }
            )
    return rows


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 4)
