"""Knowledge-QA sensitivity: which of tailmem's unpublished QA choices moves Muon's lead over Adam.

Paper A leaves most of its QA set-up unpublished (loss target, templates, batch, Adam's β and
ε, Muon's Nesterov and update scale, architecture details); tailmem chose each one. Starting
from a knowledge-QA preset (``preset`` plus ``common`` overrides: the *base*), this study
changes one factor at a time (``factors``: each level is a set of dotted-key overrides of the
knowledge-QA config, several keys at once where a level needs them, e.g. the batch with the
steps that keep the epochs) and measures Muon vs Adam at every level the way knowledge-QA does:
each arm at its own learning rate, tuned on FTA over all questions and widened until the choice
is interior (``sweep.max_extend``), every seed at the chosen rates. A level may instead give
both arms one shared learning rate (``shared_lr``: :mod:`.knowledge_qa.grid`). Every point's
runs train on one pool (:func:`.knowledge_qa.grid.run_points`).

Per point (Muon–Adam pair, the first FFN type of the config): the exposure-lag ratio at
τ = 0.3/0.5/0.8, pooled over groups and per group (mean ± SE over seeds); the peak FTA gap; the
final FTA and exact-match (EM) gaps Muon − Adam of the rarest and second-rarest groups (paired
by seed, mean ± SE); each arm's chosen rate and whether it is interior to its grid.

Outputs: ``sensitivity.csv`` (one row per factor level, the base level listed in every factor),
``sensitivity_lag_ratio.csv`` (every point, group and τ), ``lag_ratio_by_level`` figure,
``results.json``, ``claims.json`` (``A3.sensitivity.lag``: the headline at the base, and what
every level makes of it) and ``report.json``; each point's runs under ``points/<label>/``.

The base is a stated set-up, never chosen by the size of the gap: the preset's own choices,
which follow the paper where it publishes them (Adam β (0.8, 0.95), Muon without Nesterov,
QK-norm, no weight decay) and state an argument where it does not (``note``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from tailmem.claims.a3_sensitivity import CLAIMS as SENSITIVITY_CLAIMS
from tailmem.claims.a3_sensitivity import READING as LIKE_FOR_LIKE
from tailmem.claims.a3_sensitivity import READINGS, A3SensitivityInputs
from tailmem.claims.paper_a_qa_tables import Version
from tailmem.claims.registry import write_claims
from tailmem.errors import ConfigError
from tailmem.experiments.knowledge_qa import gaps, grid, tables
from tailmem.metrics.qa_gaps import TAUS, mean_se
from tailmem.plotting import legend_outside, pyplot
from tailmem.rundir import RunDir
from tailmem.train import distributed as D

NAME = "qa-sensitivity"
BASE = "base"
"""The label of the base point (every factor's base level)."""
PAIR = ("muon", "adam")


@dataclass
class Level:
    """One level of a factor: its label, the dotted-key overrides of the knowledge-QA config
    that make it, and whether Muon and Adam share one learning rate there."""

    label: str
    overrides: dict[str, Any] = field(default_factory=dict)
    shared_lr: bool = False


@dataclass
class Factor:
    """One factor: its name, the label of its base level (the base point) and its other
    levels; ``why`` says what it tests."""

    name: str
    base: str
    levels: list[Level]
    why: str = ""


@dataclass
class Config:
    """The study (see the module docstring). ``preset``: the knowledge-QA preset every point
    starts from; ``common``: overrides every point gets (the base is ``preset`` + ``common``);
    ``seed``: every point's first seed; ``workers``: runs trained at once, over all points."""

    seed: int = 0
    preset: str = "cpu"
    common: dict[str, Any] = field(default_factory=dict)
    factors: list[Factor] = field(default_factory=list)
    workers: int = 2
    note: str = ""

    def points(self) -> list[grid.Point]:
        """The base point, then one point per non-base level of every factor."""
        levels = [
            grid.Point(level_label(f, lv), lv.overrides, lv.shared_lr)
            for f in self.factors
            for lv in f.levels
        ]
        return [grid.Point(BASE), *levels]

    def configure(self) -> dict[str, tuple[grid.Point, Any]]:
        """Every point's validated knowledge-QA config (:func:`.grid.configure`)."""
        common = {"seed": self.seed, "workers": self.workers, **self.common}
        return grid.configure(self.points(), self.preset, common)

    def validate(self) -> None:
        """One-line :class:`ConfigError` for a bad field, factor, level key or value."""
        if self.workers < 1:
            raise ConfigError(f"workers: got {self.workers}; expected >= 1")
        if not self.factors:
            raise ConfigError("factors: got an empty list; expected at least one factor")
        for i, factor in enumerate(self.factors):
            labels = [factor.base, *(lv.label for lv in factor.levels)]
            if not factor.levels or len(set(labels)) != len(labels):
                raise ConfigError(
                    f"factors[{i}] ({factor.name}): got levels {labels}; expected a base and at "
                    "least one other level, all labels distinct"
                )
        for label, (_, cfg) in self.configure().items():
            if not set(PAIR) <= set(cfg.arms):
                raise ConfigError(f"point {label!r}: arms: got {cfg.arms}; expected muon, adam")


def level_label(factor: Factor, level: Level) -> str:
    """The point label of a non-base level: ``"<factor>: <level>"``."""
    return f"{factor.name}: {level.label}"


def preflight(cfg: Config) -> None:
    """Knowledge-QA's checks for every point, before anything is written."""
    grid.preflight(cfg.configure(), cfg.common)


def run(cfg: Config, run: RunDir) -> None:
    """Train every point on one pool, then write the table, figure, claims and report."""
    results = grid.run_points(cfg.configure(), run.path, cfg.workers)
    grid.prune_points(run.path, list(results))
    if D.is_main_process():
        write_outputs(cfg, run, results)


# --------------------------------------------------------------------------- measures


def lr_status(point: grid.PointResult, ffn: str, arm: str) -> tuple[float | None, str]:
    """An arm's chosen rate of the kind it sweeps and where it sits in its (widened) grid:
    "interior", "lowest edge"/"highest edge", "not swept" (one point) or "shared" (Muon at
    Adam's rate)."""
    best = point.plan.best.get((ffn, arm))
    if best is None:
        return None, "not run"
    if arm == "muon" and point.point.shared_lr:
        return best["muon"], "shared"
    tuned = point.plan.arm(arm).tuned
    if len(point.plan.sweeps[ffn, arm]) < 2:
        return best[tuned], "not swept"
    edge = grid.chosen_edge(point.plan, ffn, arm)
    return best[tuned], "interior" if edge is None else f"{edge} edge"


def final_gaps(point: grid.PointResult, ffn: str) -> dict[str, dict[str, float | None]]:
    """Muon − Adam at the end, paired by seed (seeds complete in both arms): per metric (FTA,
    EM) the rarest and second-rarest group's gap, mean and SE."""
    runs = {arm: {r.seed: r for r in point.plan.seed_results((ffn, arm))} for arm in PAIR}
    seeds = sorted(set(runs["muon"]) & set(runs["adam"]))
    out: dict[str, dict[str, float | None]] = {}
    for metric in tables.METRICS:
        if not seeds:
            out[metric] = {}
            continue
        finals = [
            tables.fta_at([runs[arm][s] for s in seeds], point.plan.steps, metric) for arm in PAIR
        ]
        diff = finals[0] - finals[1]  # (seeds, groups)
        out[metric] = {}
        for name, group in (("rarest", -1), ("second", -2)):
            out[metric][f"{name}_mean"], out[metric][f"{name}_se"] = mean_se(diff[:, group])
    return out


def pair_measures(point: grid.PointResult, ffn: str) -> dict[str, Any] | None:
    """The Muon–Adam entry of a point's gap measures (None: not measured)."""
    return gaps.measured_pair(point.measures.get(ffn, {}), *PAIR)


def point_row(point: grid.PointResult) -> dict[str, Any]:
    """The measures of one point as one flat row (see :data:`SENSITIVITY_COLUMNS`)."""
    ffn = point.config.ffns[0]
    row: dict[str, Any] = {}
    for arm in PAIR:
        row[f"{arm}_lr"], row[f"{arm}_lr_grid"] = lr_status(point, ffn, arm)
    pair = pair_measures(point, ffn)
    row["n_seeds"] = pair["n_seeds"] if pair else 0
    found = gaps.readings(pair) if pair else {}
    for prefix, name in (("lag", "pooled"), ("m2_lag", LIKE_FOR_LIKE)):
        for tau in TAUS:
            summary = found.get(name, {}).get(tau)
            key = f"{prefix}_{tau:g}"
            row[key] = None if summary is None else _round(summary["mean"])
            row[f"{key}_se"] = None if summary is None else _round(summary["se"])
            row[f"{key}_status"] = "not measured" if summary is None else gaps.ratio_status(summary)
    peak = pair["peak_gap"]["overall"] if pair else {}
    row["peak_gap"], row["peak_gap_se"] = _round(peak.get("gap")), _round(peak.get("se"))
    row["peak_group"] = peak.get("group")
    finals = final_gaps(point, ffn)
    for metric in tables.METRICS:
        for name in ("rarest", "second"):
            for stat in ("mean", "se"):
                value = finals[metric].get(f"{name}_{stat}")
                row[f"{name}_{metric}_gap" + ("_se" if stat == "se" else "")] = _round(value)
    return row


def _round(value: float | None) -> float | None:
    return None if value is None else round(float(value), 4)


def sensitivity_rows(cfg: Config, results: Mapping[str, grid.PointResult]) -> list[dict[str, Any]]:
    """One row per factor level, the base level first in each factor."""
    rows = []
    base = point_row(results[BASE])
    for factor in cfg.factors:
        rows.append({"factor": factor.name, "level": factor.base, "base": True, **base})
        for level in factor.levels:
            measured = point_row(results[level_label(factor, level)])
            rows.append({"factor": factor.name, "level": level.label, "base": False, **measured})
    return rows


def lag_ratio_long(results: Mapping[str, grid.PointResult]) -> list[dict[str, Any]]:
    """Every point's Muon–Adam lag ratio per group (and pooled) and τ: mean, SE, status."""
    rows = []
    for label, point in results.items():
        ffn = point.config.ffns[0]
        pair = pair_measures(point, ffn)
        for r in pair["lag_ratio"] if pair else []:
            rows.append(
                {
                    "point": label,
                    "group": r["group"],
                    "tau": r["tau"],
                    "mean": _round(r["mean"]),
                    "se": _round(r["se"]),
                    "n_measured": r["n_measured"],
                    "n_seeds": r["n_seeds"],
                    "status": gaps.ratio_status(r),
                }
            )
    return rows


def paper_pooled(ffn: str, version: Version = gaps.REFERENCE) -> dict[str, float]:
    """The paper's pooled Muon–Adam lag ratio per τ (the tables of ``version``, by default the
    reference, computed as ours is), ``{str(tau): ratio}``."""
    pooled = gaps.paper_pooled(version, ffn, TAUS, *PAIR)
    return {f"{tau:g}": r["mean"] for tau, r in pooled.items() if r["mean"] is not None}


def paper_like(ffn: str, version: Version = gaps.REFERENCE) -> dict[str, float]:
    """The paper's lag ratio of group m − 2 on its cells per τ where measured (the reading
    :data:`LIKE_FOR_LIKE` the claim judges), ``{str(tau): ratio}``."""
    found = gaps.paper_readings(version, ffn, TAUS, *PAIR)[LIKE_FOR_LIKE]
    return {f"{tau:g}": r["ratio"] for tau, r in found.items() if r["ratio"] is not None}


def _seed_entries(row: Mapping[str, Any] | None) -> list[dict[str, float | None]]:
    """A lag-ratio row's per-seed ratios as ``ratio`` / ``lower`` / ``upper`` (a censored seed
    keeps its bound); empty where the row does not exist."""
    if row is None:
        return []
    return [{k: s[k] for k in ("ratio", "lower", "upper")} for s in row["seeds"]]


def claim_inputs(cfg: Config, results: Mapping[str, grid.PointResult]) -> A3SensitivityInputs:
    """The inputs of :mod:`tailmem.claims.a3_sensitivity`: per point, per-seed ratios of every
    reading (like for like on the paper's cells, and pooled over every group), and the paper's
    ratios of the like-for-like readings in both versions of its tables."""
    points = {}
    for label, point in results.items():
        pair = pair_measures(point, point.config.ffns[0])
        found = gaps.readings(pair) if pair else {}
        points[label] = {
            name: {f"{tau:g}": _seed_entries(found.get(name, {}).get(tau)) for tau in TAUS}
            for name in READINGS
        }
    levels = [
        {"factor": f.name, "level": lv.label, "point": level_label(f, lv)}
        for f in cfg.factors
        for lv in f.levels
    ]
    choices = [f"{f.name} = {f.base}" for f in cfg.factors]
    ffn = results[BASE].config.ffns[0]
    paper = {
        gaps.VERSION_LABELS[v]: {
            name: {f"{tau:g}": entry for tau, entry in by_tau.items()}
            for name, by_tau in gaps.paper_readings(v, ffn, TAUS, *PAIR).items()
        }
        for v in gaps.VERSION_LABELS
    }
    return A3SensitivityInputs(
        paper=paper, base=BASE, base_choices=choices, points=points, levels=levels
    )


# --------------------------------------------------------------------------- outputs


def sensitivity_figure(rows: Sequence[Mapping[str, Any]], paper: Mapping[str, float]) -> Any:
    """The like-for-like lag ratio (group m − 2 on the paper's cells, mean ± SE) per factor
    level (one row each) and τ; base levels on a grey band, the paper's same ratio per τ as a
    vertical line of the same colour."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(10.0, 0.32 * len(rows) + 1.6))
    y = np.arange(len(rows))[::-1]
    colours = plt.get_cmap("viridis")(np.linspace(0.1, 0.8, len(TAUS)))
    styles = ("--", ":", "-.")
    for position, row in zip(y, rows, strict=True):
        if row["base"]:
            ax.axhspan(position - 0.45, position + 0.45, color="0.9", lw=0, zorder=0)
    for k, (tau, colour) in enumerate(zip(TAUS, colours, strict=True)):
        means = np.array([r[f"m2_lag_{tau:g}"] for r in rows], dtype=float)  # None: NaN
        ses = np.nan_to_num(np.array([r[f"m2_lag_{tau:g}_se"] for r in rows], dtype=float))
        offset = ((len(TAUS) - 1) / 2 - k) * 0.22
        ax.errorbar(means, y + offset, xerr=ses, fmt="o", color=colour, capsize=3, ms=4,
                    label=f"τ = {tau:g}")  # fmt: skip
        if f"{tau:g}" in paper:
            ax.axvline(paper[f"{tau:g}"], color=colour, ls=styles[k % len(styles)], lw=1.2,
                       label=f"paper, τ = {tau:g}")  # fmt: skip
    ax.axvline(1.0, color="grey", lw=0.8)
    ax.set_yticks(y)
    ax.set_yticklabels(
        [f"{r['factor']}: {r['level']}" + (" (base)" if r["base"] else "") for r in rows]
    )
    ax.set_ylim(-0.6, len(rows) - 0.4)
    ax.set_xlabel("exposure-lag ratio, Adam ÷ Muon (group m − 2 on the paper's cells)")
    ax.grid(alpha=0.3, axis="x")
    legend_outside(ax)
    fig.tight_layout()
    return fig


SENSITIVITY_COLUMNS = {
    "factor": "the factor changed (one at a time from the base)",
    "level": "its level; base = True marks the base's level (the same base runs in every factor)",
    "muon_lr": "the chosen learning rate of the kind each arm sweeps (adam_lr alike)",
    "muon_lr_grid": "where it sits in its grid, widened by up to sweep.max_extend points: "
    "interior, lowest/highest edge (still at an end), not swept, or shared (Muon at Adam's rate)",
    "n_seeds": "seeds completed by both arms (paired by seed)",
    "lag_0.3": "exposure-lag ratio of Adam behind Muon, every group and evaluation pooled, at "
    "FTA 0.3: mean over seeds (_se: its standard error; _status: measured in how many seeds); "
    "likewise lag_0.5 and lag_0.8",
    "m2_lag_0.3": "the same of group m − 2 on the paper's cells (groups m−4, m−2, m at 20/50/100% "
    "of training, no step 0): like for like with the paper's tables, the reading the claim "
    "judges",
    "peak_gap": "largest seed-mean FTA gap Muon − Adam over groups and evaluations (_se; "
    "peak_group: where)",
    "rarest_fta_gap": "final FTA Muon − Adam of the rarest group, paired seed mean (_se); "
    "second_: the second-rarest group; _em_: whole-answer exact match",
}


def write_outputs(cfg: Config, run: RunDir, results: Mapping[str, grid.PointResult]) -> None:
    """The table, figure, claims, ``results.json`` and ``report.json`` of finished points."""
    rows = sensitivity_rows(cfg, results)
    run.write_csv("sensitivity.csv", rows)
    run.write_csv("sensitivity_lag_ratio.csv", lag_ratio_long(results))
    paper = paper_pooled(results[BASE].config.ffns[0])
    like = paper_like(results[BASE].config.ffns[0])
    inputs = claim_inputs(cfg, results)
    claims = [r for c in SENSITIVITY_CLAIMS for r in c.evaluate(inputs)]
    write_claims(run, claims)
    figure = run.save_report_figure(
        sensitivity_figure(rows, like),
        "lag_ratio_by_level",
        "Exposure-lag ratio of Adam behind Muon per factor level, like for like with the paper's "
        "tables (group m − 2 on the paper's cells: groups m−4, m−2, m at 20/50/100% of "
        "training, no step 0), mean ± SE over seeds, at FTA 0.3/0.5/0.8; grey band: the base "
        "level (the same runs in every factor); dashed: the paper's tables "
        f"({gaps.VERSION_LABELS[gaps.REFERENCE]}, group 13) computed the same way; a missing "
        "point: not measured in every seed",
    )
    run.write_json(
        "results.json",
        {
            "rows": rows,
            "paper_pooled": paper,
            "paper_like_for_like": like,
            "claim_inputs": asdict(inputs),
            "points": {
                label: {
                    "overrides": dict(p.point.overrides),
                    "shared_lr": p.point.shared_lr,
                    "best_lr": {f"{f}/{a}": lrs for (f, a), lrs in p.plan.best.items()},
                    "extended": {f"{f}/{a}": n for (f, a), n in p.plan.extended.items()},
                    "gap_measures": p.measures,
                    "data": p.data_summary,
                    "chance_fta": p.chance,
                }
                for label, p in results.items()
            },
        },
    )
    run.write_json(
        "report.json",
        {
            "title": "Knowledge QA sensitivity: the Muon–Adam lag under tailmem's unpublished "
            "choices",
            "summary": report_summary(cfg, results, rows, claims),
            "figures": [figure],
            "tables": [
                {
                    "file": "sensitivity.csv",
                    "caption": "One factor changed at a time from the base: Muon vs Adam, each "
                    "at its own tuned learning rate unless shared",
                    "columns": SENSITIVITY_COLUMNS,
                }
            ],
        },
    )


def report_summary(
    cfg: Config,
    results: Mapping[str, grid.PointResult],
    rows: Sequence[Mapping[str, Any]],
    claims: Sequence[Any],
) -> str:
    """The base set-up, the factor levels that move the τ = 0.5 pooled lag ratio most, and the
    headline verdict with its reason."""
    base = results[BASE].config
    model = base.model.build(1, "plain", base.train.seq_len)
    parts = [
        f"Base: knowledge-qa {cfg.preset} preset{' with ' + str(cfg.common) if cfg.common else ''}"
        f" ({model.n_layer} layers × d={model.d_model}, m = {base.data.m}, {base.train.steps} "
        f"steps of {base.train.batch_size}×{base.train.seq_len}, loss on {base.loss_on}, "
        f"{base.seeds} seeds); {len(results)} points, one factor changed at a time."
    ]
    key = "lag_0.5"
    base_value = next((r[key] for r in rows if r["base"]), None)
    moved = [r for r in rows if not r["base"] and r[key] is not None]
    if base_value is not None and moved:
        moved.sort(key=lambda r: -abs(r[key] - base_value))
        parts.append(
            f"Pooled lag ratio at τ 0.5: base {base_value:.2f}; moved most by "
            + ", ".join(
                f"{r['factor']} = {r['level']} ({r[key]:.2f} ± {r['lag_0.5_se'] or 0:.2f})"
                for r in moved[:3]
            )
            + "."
        )
    for claim in claims:
        reason = f" ({claim.reason})" if claim.reason else ""
        parts.append(f"Headline {claim.id}: {claim.verdict}{reason}.")
    if cfg.note:
        parts.append(cfg.note.strip())
    return " ".join(parts)
