"""The map's outputs from its finished points: a ``map.csv`` row per point, heat maps, the
fitted trend and its extrapolation, ``results.json``, ``claims.json`` and ``report.json`` (see
:mod:`tailmem.experiments.qa_map`).

``map.csv`` columns: ``point`` (its label) and the axes; ``n_head``; ``hidden_params`` (the
blocks' parameters), ``facts`` (``6 · 2**m``) and ``facts_per_param``; ``steps`` and
``steps_per_epoch``; ``seeds``; per tau ``lag_<tau>`` (pooled lag ratio Adam ÷ Muon over every
group and evaluation: the seed mean when every seed measured it, else a bound of the seed-mean
curves), ``lag_<tau>_se``, ``lag_<tau>_kind`` (measured / lower / upper / empty) and
``lag_<tau>_status`` (in words), and the same as ``m2_lag_<tau>…`` for group m − 2 on the paper's
cells (like for like with the paper's tables: the reading the trend fits and extrapolates);
``peak_rarest_gap`` (largest seed-mean FTA gap Muon − Adam of the rarest group) with ``_se`` and
``peak_rarest_step``; ``peak_gap`` over all groups with ``_se`` and ``peak_gap_group``;
``lr_muon``, ``lr_adam`` and ``muon_interior``, ``adam_interior`` (chosen LR inside its widened
grid). The report shows :func:`summary_rows` of it (``map_summary.csv``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from tailmem.claims.a3_map import CLAIMS as MAP_CLAIMS
from tailmem.claims.a3_map import A3MapInputs
from tailmem.claims.a3_sensitivity import READING as LIKE_FOR_LIKE
from tailmem.claims.core import ClaimResult
from tailmem.claims.paper_a_qa_tables import VERSIONS, Version
from tailmem.claims.registry import write_claims
from tailmem.experiments.knowledge_qa import gaps
from tailmem.experiments.knowledge_qa.grid import chosen_edge
from tailmem.experiments.qa_map.points import AXES, AXIS_LABELS, LAG, LEAD, paper_point
from tailmem.lm.plan import Plan
from tailmem.metrics.lag_trend import TrendError, fit_trend, independent_features
from tailmem.metrics.qa_gaps import TAUS
from tailmem.report.qa_map_figures import Cell, heat_map_figure, trend_figure
from tailmem.rundir import RunDir

if TYPE_CHECKING:
    from tailmem.experiments.qa_map import Config, Planned

LIKE = "m2_lag"
"""The column prefix of the like-for-like lag ratio (group m − 2 on the paper's cells)."""


def interior(plan: Plan, ffn: str, arm: str) -> bool | None:
    """Whether the arm's chosen learning rate is inside its (widened) sweep (None: no choice)."""
    if (ffn, arm) not in plan.chosen:
        return None
    return chosen_edge(plan, ffn, arm) is None


def point_row(planned: Planned, result: Any) -> dict[str, Any]:
    """One row of ``map.csv``: the axes, sizes, lag ratios per tau, peak gaps, chosen LRs."""
    ffn = result.plan.ffns[0]
    row: dict[str, Any] = {
        "point": planned.point.label,
        **planned.point.axes(),
        "n_head": result.config.model.n_head,
        "hidden_params": planned.hidden_params,
        "facts": planned.facts,
        "facts_per_param": planned.facts / planned.hidden_params,
        "steps": planned.steps,
        "steps_per_epoch": round(planned.steps_per_epoch, 3),
        "seeds": result.config.seeds,
    }
    pair = gaps.measured_pair(result.measures.get(ffn, {}), LEAD, LAG)
    found = gaps.readings(pair) if pair is not None else {}
    for prefix, reading in (("lag", "pooled"), (LIKE, LIKE_FOR_LIKE)):
        for tau in TAUS:
            row.update(lag_columns(f"{prefix}_{tau:g}", found.get(reading, {}).get(tau)))
    if pair is not None:
        peak = pair["peak_gap"]
        rarest, overall = peak["per_group"][-1], peak["overall"]
        row.update(peak_rarest_gap=rarest["gap"], peak_rarest_gap_se=rarest["se"],
                   peak_rarest_step=rarest["step"], peak_gap=overall["gap"],
                   peak_gap_se=overall["se"], peak_gap_group=overall["group"])  # fmt: skip
    for arm in (LEAD, LAG):
        lrs = result.plan.best.get((ffn, arm))
        row[f"lr_{arm}"] = None if lrs is None else lrs[arm]
        row[f"{arm}_interior"] = interior(result.plan, ffn, arm)
    return row


def seed_ratios(result: Any) -> dict[str, list[dict[str, float | None]]]:
    """A point's pooled lag ratio of Adam behind Muon (every group and evaluation) per seed, by
    tau, as ``ratio`` / ``lower`` / ``upper`` (a censored seed keeps its bound; empty: the pair
    was not measured)."""
    pair = gaps.measured_pair(result.measures.get(result.plan.ffns[0], {}), LEAD, LAG)
    if pair is None:
        return {f"{tau:g}": [] for tau in TAUS}
    pooled = gaps.readings(pair)["pooled"]
    return {
        f"{tau:g}": [{k: s[k] for k in ("ratio", "lower", "upper")} for s in pooled[tau]["seeds"]]
        for tau in TAUS
    }


def lag_columns(key: str, entry: Mapping[str, Any] | None) -> dict[str, Any]:
    """A pooled lag ratio as columns: seed mean and SE when every seed measured it, else the
    bound of the seed-mean curves (``<key>_kind`` "lower"/"upper") or nothing; ``<key>_status``
    in words (:func:`.gaps.ratio_status`)."""
    if entry is None:
        return {key: None, f"{key}_se": None, f"{key}_kind": None, f"{key}_status": "not measured"}
    central = entry["of_mean"]
    if entry["mean"] is not None and entry["n_measured"] == entry["n_seeds"]:
        value, se, kind = entry["mean"], entry["se"], "measured"
    elif central["lower"] is not None:
        value, se, kind = central["lower"], None, "lower"
    elif central["upper"] is not None:
        value, se, kind = central["upper"], None, "upper"
    else:
        value, se, kind = None, None, None
    return {key: value, f"{key}_se": se, f"{key}_kind": kind,
            f"{key}_status": gaps.ratio_status(entry)}  # fmt: skip


def cells(rows: Sequence[Mapping[str, Any]], x: str, y: str, value: str,
          fixed: Mapping[str, Any]) -> dict[tuple[Any, Any], Cell | None]:  # fmt: skip
    """Heat-map cells of column ``value`` over axes ``x`` and ``y``, the other axes at
    ``fixed``; a lag ratio's bound is a bound cell, a missing value ``None``."""
    out: dict[tuple[Any, Any], Cell | None] = {}
    for row in rows:
        if any(row[a] != v for a, v in fixed.items() if a not in (x, y)):
            continue
        number = row.get(value)
        kind = row.get(f"{value}_kind", "measured")
        out[row[x], row[y]] = None if number is None else Cell(number, row.get(f"{value}_se"),
                                                                kind)  # fmt: skip
    return out


def paper_ratios(tau: float) -> dict[Version, dict[str, dict[str, Any]]]:
    """The paper's lag ratio of Adam behind Muon at ``tau`` per table version and like-for-like
    reading (``paper_cells_group``: group m − 2 of its cells, the one the trend is judged
    against; ``paper_cells_pooled``), computed as ours are: the ratio or its bounds."""
    return {
        version: {
            name: by_tau[tau] for name, by_tau in gaps.paper_readings(
                version, "plain", (tau,), LEAD, LAG).items()
        }
        for version in VERSIONS
    }  # fmt: skip


def paper_point_text(trend: Mapping[str, Any], short: bool = False) -> str:
    """Where the trend is extrapolated: the paper's 160M / m = 15 values of the fitted features,
    saying so when a feature was dropped (then the other axes stay as in the grid, which is not
    the paper's point in them); ``short`` for a legend."""
    values = ", ".join(
        f"{f.replace('_', ' ')} {trend['paper_point'][f]:.3g}" for f in trend["features"]
    )
    if trend["dropped"]:
        if short:
            return f"paper's {values}, rest as grid"
        return f"the paper's {values} (160M model; depth and m as in the grid, not the paper's)"
    return "paper's 160M, m = 15" if short else f"the paper's 160M model at m = 15 ({values})"


def _excluded_because(row: Mapping[str, Any], key: str) -> str:
    """Why a point stays out of the weighted fit ("" when it is in): a ratio that is only a
    bound (some seed never crossed: censored, often the largest lag), or no positive seed SE
    (one seed, or every seed crossing between the same two evaluations)."""
    if row[f"{key}_kind"] != "measured":
        return f"{row[f'{key}_status']} (a bound, not a ratio)"
    if not (row[f"{key}_se"] or 0) > 0:
        return "no positive seed SE"
    return ""


def fit(cfg: Config, rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The trend of :class:`TrendSection` through the measured points of the like-for-like
    reading (``m2_lag_<tau>``: group m − 2 on the paper's cells) and its extrapolation to the
    paper's point, where the paper's tables give the same reading; ``status`` "fitted" or "not
    fitted" with the reason."""
    key = f"{LIKE}_{cfg.trend.tau:g}"
    at_exponent = [r for r in rows if r["frequency_exponent"] == cfg.trend.exponent]
    used, excluded = [], []
    for r in at_exponent:
        why = _excluded_because(r, key)
        if why:
            excluded.append({"point": r["point"], "why": why})
        else:
            used.append(r)
    columns = {f: [float(r[f]) for r in used] for f in cfg.trend.features}
    kept = independent_features(columns) if len(used) > 1 else []
    base: dict[str, Any] = {
        "tau": cfg.trend.tau, "exponent": cfg.trend.exponent, "n_points": len(used),
        "excluded": excluded, "features": kept,
        "dropped": [f for f in cfg.trend.features if f not in kept], "paper_point": paper_point(),
    }  # fmt: skip
    try:
        if not kept:
            raise TrendError(
                f"no feature varies over the {len(used)} point(s) with a measured ratio and a "
                "seed SE (a seed SE needs ≥ 2 seeds)"
            )
        trend = fit_trend({f: columns[f] for f in kept}, [r[key] for r in used],
                          [r[f"{key}_se"] for r in used])  # fmt: skip
    except TrendError as exc:
        return {**base, "status": "not fitted", "reason": str(exc)}
    at = {f: base["paper_point"][f] for f in kept}
    prediction = trend.predict(at, level=cfg.trend.level)
    return {**base, "status": "fitted", "fit": trend.to_json(),
            "extrapolation": prediction.to_json(), "_trend": trend, "_used": used}  # fmt: skip


def write_outputs(
    cfg: Config,
    run: RunDir,
    rows: list[dict[str, Any]],
    seeds: Mapping[str, Mapping[str, list[dict[str, float | None]]]],
) -> None:
    """``map.csv``, heat maps, trend figure, ``results.json``, ``claims.json`` and
    ``report.json`` from the rows (:func:`point_row`) and each point's per-seed lag ratios
    (:func:`seed_ratios`, by label)."""
    run.write_csv("map.csv", rows)
    run.write_csv("map_summary.csv", summary_rows(rows))
    figures = []
    reference = {a: getattr(cfg.axes, a)[0] for a in AXES}
    key = f"lag_{cfg.tau:g}"
    for x, y in cfg.heat_maps:
        xs, ys = getattr(cfg.axes, x), getattr(cfg.axes, y)
        others = ", ".join(f"{AXIS_LABELS[a]} {v:g}" for a, v in reference.items()
                           if a not in (x, y))  # fmt: skip
        figures += [
            run.save_report_figure(
                heat_map_figure(cells(rows, x, y, key, reference), (AXIS_LABELS[x], xs),
                                (AXIS_LABELS[y], ys), title=f"Adam/Muon exposure-lag ratio, "
                                f"FTA {cfg.tau:g}", colorbar="lag ratio", center=1.0, log=True),
                f"lag_ratio_{x}_{y}",
                f"Exposure-lag ratio (exposures Adam needs ÷ Muon's to bring the pooled groups "
                f"to FTA {cfg.tau:g}) over {AXIS_LABELS[x]} × {AXIS_LABELS[y]} ({others}): "
                "seed mean ± SE; hatched ≥/≤: a bound where a crossing is not bracketed in "
                "every seed; red: Adam lags.",
            ),
            run.save_report_figure(
                heat_map_figure(cells(rows, x, y, "peak_rarest_gap", reference),
                                (AXIS_LABELS[x], xs), (AXIS_LABELS[y], ys),
                                title="Peak rarest-group FTA gap, Muon − Adam",
                                colorbar="FTA gap", center=0.0, digits=2),
                f"peak_gap_{x}_{y}",
                f"Largest seed-mean FTA gap Muon − Adam of the rarest group over training, over "
                f"{AXIS_LABELS[x]} × {AXIS_LABELS[y]} ({others}): mean ± SE over paired seeds.",
            ),
        ]  # fmt: skip
    trend = fit(cfg, rows)
    published = paper_ratios(cfg.trend.tau)
    if trend["status"] == "fitted":
        used = trend.pop("_used")
        model = trend.pop("_trend")
        along = trend["features"][0]
        shown = {gaps.VERSION_LABELS[v]: r[LIKE_FOR_LIKE]["ratio"] for v, r in published.items()
                 if r[LIKE_FOR_LIKE]["ratio"] is not None}  # fmt: skip
        figures.append(run.save_report_figure(
            trend_figure(model, {f: [r[f] for r in used] for f in trend["features"]},
                         [r[f"{LIKE}_{cfg.trend.tau:g}"] for r in used],
                         [r[f"{LIKE}_{cfg.trend.tau:g}_se"] for r in used], along=along,
                         at={f: trend["paper_point"][f] for f in trend["features"]},
                         at_label=paper_point_text(trend, short=True),
                         published=shown,
                         title=f"Lag ratio at FTA {cfg.trend.tau:g} vs {along}"),
            "lag_ratio_trend",
            f"Exposure-lag ratio at FTA {cfg.trend.tau:g} of group m − 2 on the paper's cells "
            f"(like for like with the paper's tables; frequency exponent "
            f"{cfg.trend.exponent:g}) against {along}, with the fitted power law in "
            f"{' and '.join(trend['features'])} and its {cfg.trend.level:.0%} band, extrapolated "
            f"to {paper_point_text(trend)} (thick: confidence, thin: prediction "
            "interval)" + (f"; points moved to the paper's {', '.join(trend['features'][1:])} by "
                           "the fitted slopes" if len(trend["features"]) > 1 else "")
            + "; open markers: the paper's tables computed the same way.",
        ))  # fmt: skip
    results = {"rows": rows, "trend": trend, "paper": published, "reference": reference,
               "seed_ratios": dict(seeds)}  # fmt: skip
    run.write_json("results.json", results)
    claims = [r for c in MAP_CLAIMS for r in c.evaluate(A3MapInputs.of(results))]
    write_claims(run, claims)
    run.write_json("report.json", {
        "title": "The map: where Muon's tail edge over Adam appears (knowledge QA)",
        "summary": summary(cfg, rows, trend, published, claims),
        "figures": figures,
        "tables": [{"file": "map_summary.csv", "caption": "Every point of the grid (all numbers: "
                    "map.csv)", "columns": SUMMARY_COLUMNS}],
    })  # fmt: skip


def summary_rows(rows: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The report's table: a point per row, its lag ratios and peak rarest gap as text (mean
    ± SE, or a bound), facts per parameter and the chosen LRs (* at a grid edge)."""

    def lr(row: Mapping[str, Any], arm: str) -> str:
        rate, edge = row[f"lr_{arm}"], row[f"{arm}_interior"] is False
        return "" if rate is None else f"{rate:g}" + ("*" if edge else "")

    out = []
    for row in rows:
        gap, se = row.get("peak_rarest_gap"), row.get("peak_rarest_gap_se")
        gap_text = "" if gap is None else f"{gap:+.3f}" + ("" if se is None else f" ± {se:.3f}")
        out.append({
            "point": row["point"],
            "facts/param": f"{row['facts_per_param']:.2e}",
            **{f"lag τ {t:g}": _ratio_text(row, f"lag_{t:g}") for t in TAUS},
            "peak rarest gap": gap_text,
            "LR muon": lr(row, LEAD),
            "LR adam": lr(row, LAG),
        })  # fmt: skip
    return out


SUMMARY_COLUMNS = {
    "point": "d<width> L<layers> x<exposures per rarest fact> m<groups> rho<frequency exponent>",
    "facts/param": "6 · 2^m facts ÷ the blocks' parameters (no embedding, no head)",
    "lag τ 0.3": "pooled exposure-lag ratio Adam ÷ Muon at FTA 0.3 (0.5, 0.8 alike): seed mean ± "
    "SE, or ≥ / ≤ a bound of the seed-mean curves where a crossing is not bracketed in every seed",
    "peak rarest gap": "largest seed-mean FTA gap Muon − Adam of the rarest group ± SE",
    "LR muon": "each arm's chosen LR; * at an end of its widened grid",
}


def _ratio_text(row: Mapping[str, Any], key: str) -> str:
    kind = row[f"{key}_kind"]
    if kind is None:  # neither a value nor a bound: why, in words
        return row[f"{key}_status"]
    if kind != "measured":
        return f"{'≥' if kind == 'lower' else '≤'} {row[key]:.2f}"
    se = row[f"{key}_se"]
    return f"{row[key]:.2f}" + ("" if se is None else f" ± {se:.2f}")


def _where(row: Mapping[str, Any]) -> str:
    return (f"width {row['width']}, {row['depth']} layers, {row['exposures']:g} exposures, "
            f"m = {row['m']}, exponent {row['frequency_exponent']:g}")  # fmt: skip


def vanishes(row: Mapping[str, Any], key: str) -> bool:
    """Whether Muon's edge is within noise at a point: its lag ratio is measured and within 2
    SE of 1 (or below), and its peak rarest gap within 2 SE of 0 (or below)."""
    ratio, se = row[key], row[f"{key}_se"] or 0.0
    gap, gap_se = row.get("peak_rarest_gap"), row.get("peak_rarest_gap_se") or 0.0
    if row[f"{key}_kind"] != "measured" or gap is None:
        return False
    return ratio - 1 <= 2 * se and gap <= 2 * gap_se


def summary(cfg: Config, rows: Sequence[Mapping[str, Any]], trend: Mapping[str, Any],
            published: Mapping[Version, Mapping[str, Any]],
            claims: Sequence[ClaimResult] = ()) -> str:  # fmt: skip
    """The report's paragraph: the grid, where the gap is largest and where it vanishes, the
    extrapolation beside the paper's values, the LRs at a grid edge and the claims' verdicts."""
    key = f"lag_{cfg.tau:g}"
    axes = ", ".join(f"{AXIS_LABELS[a]} {getattr(cfg.axes, a)}" for a in AXES)
    points = f"{len(rows)} point{'s' if len(rows) != 1 else ''}"
    parts = [f"{points} ({axes}), Muon vs Adam, each at its own tuned LR."]
    measured = [r for r in rows if r[f"{key}_kind"] == "measured"]
    if measured:
        top = max(measured, key=lambda r: r[key])
        parts.append(
            f"Largest lag ratio at FTA {cfg.tau:g}: {_ratio_text(top, key)} ({_where(top)})."
        )
    gapped = [r for r in rows if r.get("peak_rarest_gap") is not None]
    if gapped:
        top = max(gapped, key=lambda r: r["peak_rarest_gap"])
        se = top["peak_rarest_gap_se"]
        parts.append(f"Largest peak rarest-group gap: {top['peak_rarest_gap']:+.3f}"
                     + ("" if se is None else f" ± {se:.3f}") + f" ({_where(top)}).")  # fmt: skip
    gone = [r for r in rows if vanishes(r, key)]
    parts.append(
        "Muon's edge vanishes (lag ratio within 2 SE of 1 and peak rarest gap within 2 SE of 0) "
        + (
            "at: " + "; ".join(_where(r) for r in gone) + "."
            if gone
            else "at no point of the grid."
        )
    )

    def versions(reading: str) -> str:
        return "; ".join(f"{gaps.VERSION_LABELS[v]} " + _paper_text(r[reading])
                         for v, r in published.items())  # fmt: skip

    paper = (
        f"{versions(LIKE_FOR_LIKE)} for group m − 2 on its cells, like for like (pooled over "
        f"its cells, which mixes groups' crossings and is not judged: "
        f"{versions('paper_cells_pooled')})"
    )
    if trend["status"] == "fitted":
        e = trend["extrapolation"]
        lo, hi = e["confidence"]
        plo, phi = e["prediction"]
        parts.append(
            f"Trend (lag ratio of group m − 2 on the paper's cells at FTA {trend['tau']:g} ∝ "
            f"power law in "
            f"{' and '.join(trend['features'])}, {trend['n_points']} points"
            + (
                "; left out: " + "; ".join(f"{e['point']} ({e['why']})" for e in trend["excluded"])
                if trend["excluded"]
                else ""
            )
            + (f"; {', '.join(trend['dropped'])} dropped: collinear over this grid"
               if trend["dropped"] else "")
            + f") extrapolated to {paper_point_text(trend)}: {e['ratio']:.2f} "
            f"({e['level']:.0%} confidence {lo:.2f}–{hi:.2f}, prediction {plo:.2f}–{phi:.2f}); "
            f"the paper's tables give {paper}."
        )  # fmt: skip
    else:
        parts.append(f"No trend fitted: {trend['reason']}. The paper's tables give {paper}.")
    edges = [f"{r['point']} ({', '.join(arms)})" for r in rows
             if (arms := [a for a in (LEAD, LAG) if r[f"{a}_interior"] is False])]  # fmt: skip
    if edges:
        parts.append("Chosen LR at the end of its widened grid: " + "; ".join(edges) + ".")
    for claim in claims:
        said = [t for t in (claim.ours, claim.reason) if t and t != claim.verdict]
        parts.append(
            f"Claim {claim.id}: {claim.verdict}" + (f" ({'; '.join(said)})." if said else ".")
        )
    if cfg.note:
        parts.append(cfg.note.strip())
    return " ".join(parts)


def _paper_text(ratio: Mapping[str, Any]) -> str:
    if ratio["ratio"] is not None:
        return f"{ratio['ratio']:.2f}"
    if ratio["lower"] is not None:
        return f"≥ {ratio['lower']:.2f}"
    if ratio["upper"] is not None:
        return f"≤ {ratio['upper']:.2f}"
    return ratio["status"]
