"""Knowledge-QA sensitivity: which of tailmem's unpublished QA choices moves Muon's lead over Adam.

Paper A leaves most of its QA set-up unpublished (loss target, templates, batch, Adam's β and
ε, Muon's Nesterov and update scale, architecture details); tailmem chose each one. Starting
from a knowledge-QA preset (``preset`` plus ``common`` overrides: the *base*), this study
changes one factor at a time (``factors``: each level is a set of dotted-key overrides of the
knowledge-QA config, several keys at once where a level needs them, e.g. the batch with the
steps that keep the epochs) and measures Muon vs Adam at every level the way knowledge-QA does
(:mod:`tailmem.lm.tuning`): each arm tunes its one rate on tuning seeds apart from the
evaluation seeds, ranked by knowledge-QA's declared score (``tuning.score``, default the answer
loss) and widened by up to ``tuning.max_extend`` points beyond an end, every evaluation seed at
the chosen rates. A level may instead give both arms one shared learning rate (``shared_lr``:
:mod:`.knowledge_qa.grid`). Every point's runs train on one pool
(:func:`.knowledge_qa.grid.run_points`).

Per point (Muon–Adam pair, the first FFN type of the config; :class:`PointMeasures`): the
exposure-lag ratio at τ = 0.3/0.5/0.8, pooled over groups and per group (geometric mean over
seeds with its 95 % t interval, :mod:`tailmem.metrics.qa_gaps`); the final FTA and exact-match
(EM) gaps Muon − Adam of the rarest group (the tail gap, the pre-specified cell) and the
second-rarest (paired by seed, mean ± SE); the peak FTA gap, descriptive only; each arm's
chosen rate, where it sits among the candidates tried and its tuning cost.

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
from dataclasses import asdict, dataclass, field, replace
from typing import Any

import numpy as np

from tailmem.claims.a3_sensitivity import CLAIMS as SENSITIVITY_CLAIMS
from tailmem.claims.a3_sensitivity import READING as LIKE_FOR_LIKE
from tailmem.claims.a3_sensitivity import (
    READINGS,
    REFERENCE,
    A3SensitivityInputs,
    LevelPoint,
    PerSeed,
)
from tailmem.claims.core import Bound, ClaimResult, MeanSE, mean_se
from tailmem.columns import column, column_docs, records
from tailmem.errors import ConfigError
from tailmem.experiments import knowledge_qa as kqa
from tailmem.experiments.knowledge_qa import SCORES, gaps, grid
from tailmem.experiments.knowledge_qa.curves import METRICS
from tailmem.experiments.knowledge_qa.gaps import TAU_HIGH, TAU_LOW, TAU_MIDDLE
from tailmem.experiments.qa_map.measures import ArmChoice, arm_choice, final_gaps, seed_ratios
from tailmem.lm.sweeps import choice_rows
from tailmem.metrics.qa_gaps import TAUS, Gap, Group, LagRatio
from tailmem.outputs import Figure, Outputs, Report, Table, write
from tailmem.plotting import legend_outside, pyplot
from tailmem.rundir import RunDir
from tailmem.studies import Preset, Provenance, Study
from tailmem.train import distributed as D

NAME = "qa-sensitivity"
BASE = "base"
"""The label of the base point (every factor's base level)."""
PAIR = ("muon", "adam")


@dataclass(frozen=True)
class Level:
    """One level of a factor: its label, the dotted-key overrides of the knowledge-QA config
    that make it, and whether Muon and Adam share one learning rate there."""

    label: str
    overrides: dict[str, Any] = field(default_factory=dict)
    shared_lr: bool = False


@dataclass(frozen=True)
class Factor:
    """One factor: its name, the label of its base level (the base point) and its other
    levels; ``why`` says what it tests."""

    name: str
    base: str
    levels: list[Level]
    why: str = ""


@dataclass(frozen=True)
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

    def configure(self) -> dict[str, tuple[grid.Point, kqa.Config]]:
        """Every point's validated knowledge-QA config (:func:`.grid.configure`): the preset,
        ``common``, the study's seed and workers, the point's overrides."""
        return grid.configure(self.points(), self.preset, self.common, self.settle)

    def settle(self, qa: kqa.Config) -> kqa.Config:
        """What the study sets in every point's knowledge-QA config: its seed and workers."""
        return replace(qa, seed=self.seed, workers=self.workers)

    def validate(self) -> None:
        """One-line :class:`ConfigError` for a bad field, factor, level key or value."""
        if self.workers < 1:
            raise ConfigError(f"workers: got {self.workers}; expected >= 1")
        grid.refuse_owned(self.common, ("seed", "workers"), NAME)
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


def run(cfg: Config, run: RunDir, provenance: Provenance) -> None:
    """Train every point on one pool, then write the table, figure, claims and report."""
    results = grid.run_points(cfg.configure(), run.path, cfg.workers, provenance=provenance)
    grid.prune_points(run.path, list(results))
    if D.is_main_process():
        write(run, outputs(cfg, results))


# --------------------------------------------------------------------------- measures

FINALS = (("rarest", 1), ("second", 2))
"""The final gaps of the table: the rarest group (the tail gap) and the second-rarest."""


@dataclass(frozen=True)
class PointMeasures:
    """What the table, figure and claim read of one point: each arm's learning rate
    (:class:`~.qa_map.measures.ArmChoice`), the seeds both arms completed, the Muon–Adam
    lag ratios per reading and τ (:func:`.knowledge_qa.gaps.readings`), the final FTA and EM
    gaps Muon − Adam of the rarest and second-rarest groups (paired seed mean ± SE, by
    ``(metric, name)``) and the descriptive peak gap."""

    arms: Mapping[str, ArmChoice]
    n_seeds: int
    readings: Mapping[str, Mapping[float, LagRatio]]
    finals: Mapping[tuple[str, str], MeanSE]
    peak: Gap | None

    def ratio(self, reading: str, tau: float) -> LagRatio | None:
        return self.readings.get(reading, {}).get(tau)


def point_measures(point: grid.PointResult) -> PointMeasures:
    """The :class:`PointMeasures` of a point (its config's first FFN type)."""
    ffn = point.config.ffns[0]
    arms = {arm: arm_choice(point, ffn, arm) for arm in PAIR}
    found = point.measures.get(ffn)
    pair = None if found is None else found.pair(*PAIR)
    finals = {}
    for metric in METRICS:
        seeds, diff = final_gaps(point, ffn, *PAIR, metric=metric)
        for name, offset in FINALS if seeds else ():
            finals[metric, name] = mean_se(diff[:, -offset].tolist())
    if pair is None:
        return PointMeasures(arms, 0, {}, finals, None)
    return PointMeasures(arms, len(pair.seeds), gaps.readings(pair), finals, pair.peak_gap)


def _round(value: float | None) -> float | None:
    return None if value is None else round(float(value), 4)


@dataclass(frozen=True)
class RatioCells:
    """A lag ratio as table cells: the geometric mean over seeds with its 95 % t interval,
    rounded to 4 decimals, and its status (:func:`.knowledge_qa.gaps.ratio_status`). A row's
    field of this type is four columns, headed by the field's header and these suffixes."""

    value: float | None = column("the ratio (explained by the field that holds these cells)",
                                 name="")  # fmt: skip
    low: float | None = column("its 95 % two-sided t interval, low end", name="_lo")
    high: float | None = column("its 95 % two-sided t interval, high end", name="_hi")
    status: str = column(
        "measured, measured in k of n seeds, or the bound of the seed-mean curves",
        name="_status",
    )

    @classmethod
    def of(cls, row: LagRatio | None) -> RatioCells:
        if row is None:
            return cls(None, None, None, "not measured")
        interval = row.interval()
        low, high = (None, None) if interval is None else (_round(interval[0]), _round(interval[1]))
        return cls(_round(row.ratio), low, high, gaps.ratio_status(row))


def _trials(choice: ArmChoice) -> str:
    return f"{choice.trials}/{choice.budget}" if choice.budget else ""


@dataclass(frozen=True)
class SensitivityRow:
    """One factor level's measures (a row of ``sensitivity.csv``)."""

    factor: str = column("the factor changed (one at a time from the base)")
    level: str = column(
        "its level; base = True marks the base's level (the same base runs in every factor)"
    )
    base: bool = column("whether this is the base's level")
    muon_lr: float | None = column(
        "the chosen learning rate of the kind each arm tunes (adam_lr alike)"
    )
    muon_lr_where: str = column(
        "where it sits among the candidates tried (the declared grid, widened by up to "
        "tuning.max_extend points): interior, lowest/highest edge (still at an end), set (one "
        "number: not tuned) or shared (Muon at Adam's rate)"
    )
    muon_trials: str = column(
        "tuning trials run / budget (candidates × tuning seeds, apart from the evaluation seeds)"
    )
    adam_lr: float | None = column("the chosen learning rate of the kind Adam tunes")
    adam_lr_where: str = column("where it sits among the candidates tried (as muon_lr_where)")
    adam_trials: str = column("Adam's tuning trials run / budget")
    n_seeds: int = column("seeds completed by both arms (paired by seed)")
    lag_low: RatioCells = column(
        "exposure-lag ratio of Adam behind Muon pooled over groups (per seed the geometric mean "
        "over the groups measured in every seed) at FTA 0.3: geometric mean over seeds, _lo and "
        "_hi its 95 % two-sided t interval, _status measured in how many seeds; likewise lag_0.5 "
        "and lag_0.8",
        name=f"lag_{TAU_LOW:g}",
    )
    lag_middle: RatioCells = column(
        f"the lag ratio pooled over groups at FTA {TAU_MIDDLE:g}",
        name=f"lag_{TAU_MIDDLE:g}",
    )
    lag_high: RatioCells = column(
        f"the lag ratio pooled over groups at FTA {TAU_HIGH:g}",
        name=f"lag_{TAU_HIGH:g}",
    )
    m2_lag_low: RatioCells = column(
        "the same of group m − 2 on the paper's cells (groups m−4, m−2, m at 20/50/100% of "
        "training, no step 0): like for like with the paper's tables, the reading the claim judges",
        name=f"m2_lag_{TAU_LOW:g}",
    )
    m2_lag_middle: RatioCells = column(
        f"the lag ratio of group m − 2 on the paper's cells at FTA {TAU_MIDDLE:g}",
        name=f"m2_lag_{TAU_MIDDLE:g}",
    )
    m2_lag_high: RatioCells = column(
        f"the lag ratio of group m − 2 on the paper's cells at FTA {TAU_HIGH:g}",
        name=f"m2_lag_{TAU_HIGH:g}",
    )
    rarest_fta_gap: float | None = column(
        "the tail gap, the pre-specified cell: final FTA Muon − Adam of the rarest group, paired "
        "seed mean (_se); second_: the second-rarest group; _em_: whole-answer exact match"
    )
    rarest_fta_gap_se: float | None = column("its SE over paired seeds")
    second_fta_gap: float | None = column(
        "final FTA Muon − Adam of the second-rarest group, paired seed mean"
    )
    second_fta_gap_se: float | None = column("its SE over paired seeds")
    rarest_em_gap: float | None = column(
        "final EM Muon − Adam of the rarest group, paired seed mean"
    )
    rarest_em_gap_se: float | None = column("its SE over paired seeds")
    second_em_gap: float | None = column(
        "final EM Muon − Adam of the second-rarest group, paired seed mean"
    )
    second_em_gap_se: float | None = column("its SE over paired seeds")
    peak_gap: float | None = column(
        "descriptive only — the largest seed-mean FTA gap Muon − Adam over groups and evaluations "
        "(a maximum over many noisy cells: in no verdict; _se: that one cell's; peak_group: where)"
    )
    peak_gap_se: float | None = column("that one cell's SE")
    peak_group: int | None = column("the group where the peak gap occurs")


def sensitivity_row(factor: str, level: str, base: bool, found: PointMeasures) -> SensitivityRow:
    """The :class:`SensitivityRow` of one factor level measured as ``found``."""
    muon, adam = (found.arms[arm] for arm in PAIR)
    lag = {tau: RatioCells.of(found.ratio("pooled", tau)) for tau in TAUS}
    m2 = {tau: RatioCells.of(found.ratio(LIKE_FOR_LIKE, tau)) for tau in TAUS}
    finals = {key: (_round(s.mean), _round(s.se)) for key, s in found.finals.items()}
    none = (None, None)
    rarest_fta, second_fta = (
        finals.get(("fta", "rarest"), none),
        finals.get(("fta", "second"), none),
    )
    rarest_em, second_em = finals.get(("em", "rarest"), none), finals.get(("em", "second"), none)
    peak = found.peak
    return SensitivityRow(
        factor=factor, level=level, base=base,
        muon_lr=muon.rate, muon_lr_where=muon.where, muon_trials=_trials(muon),
        adam_lr=adam.rate, adam_lr_where=adam.where, adam_trials=_trials(adam),
        n_seeds=found.n_seeds,
        lag_low=lag[TAU_LOW], lag_middle=lag[TAU_MIDDLE], lag_high=lag[TAU_HIGH],
        m2_lag_low=m2[TAU_LOW], m2_lag_middle=m2[TAU_MIDDLE], m2_lag_high=m2[TAU_HIGH],
        rarest_fta_gap=rarest_fta[0], rarest_fta_gap_se=rarest_fta[1],
        second_fta_gap=second_fta[0], second_fta_gap_se=second_fta[1],
        rarest_em_gap=rarest_em[0], rarest_em_gap_se=rarest_em[1],
        second_em_gap=second_em[0], second_em_gap_se=second_em[1],
        peak_gap=None if peak is None else _round(peak.gap),
        peak_gap_se=None if peak is None else _round(peak.se),
        peak_group=None if peak is None else peak.group,
    )  # fmt: skip


@dataclass(frozen=True)
class LevelRow:
    """One row of the table: a factor's level (``base``: the base's level) and its point's
    measures."""

    factor: str
    level: str
    base: bool
    measures: PointMeasures

    def row(self) -> SensitivityRow:
        """Its row of ``sensitivity.csv``."""
        return sensitivity_row(self.factor, self.level, self.base, self.measures)


def level_rows(cfg: Config, measures: Mapping[str, PointMeasures]) -> list[LevelRow]:
    """One row per factor level, the base level first in each factor."""
    rows = []
    for factor in cfg.factors:
        rows.append(LevelRow(factor.name, factor.base, True, measures[BASE]))
        for level in factor.levels:
            rows.append(LevelRow(factor.name, level.label, False,
                                 measures[level_label(factor, level)]))  # fmt: skip
    return rows


@dataclass(frozen=True)
class LagRatioRow:
    """One point's Muon–Adam lag ratio at one group (or pooled) and τ (a row of
    ``sensitivity_lag_ratio.csv``)."""

    point: str = column("the point (factor level)")
    group: Group = column("the frequency group, or pooled")
    tau: float = column("the FTA level τ")
    ratio: float | None = column("exposures Adam needs ÷ Muon's: geometric mean over seeds")
    ci_low: float | None = column("its 95 % t interval, low end")
    ci_high: float | None = column("its 95 % t interval, high end")
    se_log: float | None = column("SE of the mean log ratio (floored at the resolution)")
    resolution: float | None = column("the log ratios' resolution (RMS over measured seeds)")
    n_measured: int = column("seeds in which the ratio was measured")
    n_seeds: int = column("seeds")
    status: str = column("the ratio's status in words")


def lag_ratio_long(results: Mapping[str, grid.PointResult]) -> list[LagRatioRow]:
    """Every point's Muon–Adam lag ratio per group (and pooled) and τ: the geometric mean
    over seeds, its 95 % t interval, SE of the mean log ratio (floored), resolution, seeds
    measured and status."""
    rows = []
    for label, point in results.items():
        found = point.measures.get(point.config.ffns[0])
        pair = None if found is None else found.pair(*PAIR)
        for r in () if pair is None else pair.lag_ratios:
            interval = r.interval()
            rows.append(LagRatioRow(
                point=label, group=r.group, tau=r.tau, ratio=_round(r.ratio),
                ci_low=None if interval is None else _round(interval[0]),
                ci_high=None if interval is None else _round(interval[1]),
                se_log=_round(r.se_log), resolution=_round(r.resolution),
                n_measured=r.n_measured, n_seeds=r.n_seeds, status=gaps.ratio_status(r),
            ))  # fmt: skip
    return rows


def paper_values(ffn: str) -> dict[str, dict[str, dict[float, PerSeed]]]:
    """The paper's Muon–Adam lag ratio per table version (its label), like-for-like reading
    and τ, computed as ours are: the ratio, or a bound."""
    return {
        gaps.VERSION_LABELS[v]: {
            name: {tau: ratio.value for tau, ratio in by_tau.items()}
            for name, by_tau in gaps.paper_readings(v, ffn, TAUS, *PAIR).items()
        }
        for v in gaps.VERSION_LABELS
    }


def claim_inputs(
    cfg: Config, results: Mapping[str, grid.PointResult], measures: Mapping[str, PointMeasures]
) -> A3SensitivityInputs:
    """The inputs of :mod:`tailmem.claims.a3_sensitivity`: per point, the per-seed ratios of
    every reading (like for like on the paper's cells, and pooled over every group), and the
    paper's ratios of the like-for-like readings in both versions of its tables."""
    points = {
        label: {name: {tau: seed_ratios(found.ratio(name, tau)) for tau in TAUS}
                for name in READINGS}
        for label, found in measures.items()
    }  # fmt: skip
    levels = [LevelPoint(f.name, lv.label, level_label(f, lv)) for f in cfg.factors
              for lv in f.levels]  # fmt: skip
    choices = [f"{f.name} = {f.base}" for f in cfg.factors]
    base = results[BASE].config
    return A3SensitivityInputs(
        paper=paper_values(base.ffns[0]), base=BASE, base_choices=choices,
        points=points, levels=levels, model=base.model.scale(base.data.m),
    )  # fmt: skip


# --------------------------------------------------------------------------- outputs


def sensitivity_figure(rows: Sequence[LevelRow], paper: Mapping[float, PerSeed]) -> Any:
    """The like-for-like lag ratio (group m − 2 on the paper's cells: geometric mean over
    seeds with its 95 % t interval) per factor level (one row each) and τ on a log axis; base
    levels on a grey band, the paper's same ratio per τ as a vertical line of the same colour
    (where its tables measure it)."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(10.0, 0.32 * len(rows) + 1.6))
    y = np.arange(len(rows))[::-1]
    colours = plt.get_cmap("viridis")(np.linspace(0.1, 0.8, len(TAUS)))
    styles = ("--", ":", "-.")
    for position, row in zip(y, rows, strict=True):
        if row.base:
            ax.axhspan(position - 0.45, position + 0.45, color="0.9", lw=0, zorder=0)
    for k, (tau, colour) in enumerate(zip(TAUS, colours, strict=True)):
        found = [r.measures.ratio(LIKE_FOR_LIKE, tau) for r in rows]
        means = np.array([np.nan if f is None or f.ratio is None else f.ratio for f in found])
        intervals = [None if f is None else f.interval() for f in found]
        low = np.array(
            [0.0 if i is None else m - i[0] for m, i in zip(means, intervals, strict=True)]
        )
        high = np.array(
            [0.0 if i is None else i[1] - m for m, i in zip(means, intervals, strict=True)]
        )
        offset = ((len(TAUS) - 1) / 2 - k) * 0.22
        ax.errorbar(means, y + offset, xerr=[low, high], fmt="o", color=colour, capsize=3, ms=4,
                    label=f"τ = {tau:g}")  # fmt: skip
        if isinstance(paper.get(tau), float):
            ax.axvline(paper[tau], color=colour, ls=styles[k % len(styles)], lw=1.2,
                       label=f"paper, τ = {tau:g}")  # fmt: skip
    ax.axvline(1.0, color="grey", lw=0.8)
    ax.set_xscale("log")
    ax.set_yticks(y)
    ax.set_yticklabels([f"{r.factor}: {r.level}" + (" (base)" if r.base else "") for r in rows])
    ax.set_ylim(-0.6, len(rows) - 0.4)
    ax.set_xlabel("exposure-lag ratio, Adam ÷ Muon (group m − 2 on the paper's cells)")
    ax.grid(alpha=0.3, axis="x", which="both")
    legend_outside(ax)
    fig.tight_layout()
    return fig


def outputs(cfg: Config, results: Mapping[str, grid.PointResult]) -> Outputs:
    """The table, figure, claims, ``results.json`` and report of finished points."""
    measures = {label: point_measures(point) for label, point in results.items()}
    rows = level_rows(cfg, measures)
    inputs = claim_inputs(cfg, results, measures)
    claims = tuple(r for c in SENSITIVITY_CLAIMS for r in c.evaluate(inputs))
    like = inputs.paper.get(REFERENCE, {}).get(LIKE_FOR_LIKE, {})
    figure = Figure(
        "lag_ratio_by_level",
        sensitivity_figure(rows, like),
        "Exposure-lag ratio of Adam behind Muon per factor level, like for like with the paper's "
        "tables (group m − 2 on the paper's cells: groups m−4, m−2, m at 20/50/100% of "
        "training, no step 0), geometric mean over seeds with its 95 % t interval, at FTA "
        "0.3/0.5/0.8; grey band: the base level (the same runs in every factor); dashed: the "
        f"paper's tables ({REFERENCE}, group 13) computed the same way; a missing point: not "
        "measured in every seed",
    )
    results_json = {
        "rows": records(r.row() for r in rows),
        "paper": {version: {name: {f"{tau:g}": _plain(v) for tau, v in by_tau.items()}
                            for name, by_tau in readings.items()}
                  for version, readings in inputs.paper.items()},
        "claim_inputs": asdict(inputs),
        "points": {
            label: {
                "overrides": dict(p.point.overrides),
                "shared_lr": p.point.shared_lr,
                "best_lr": {f"{f}/{a}": lrs for (f, a), lrs in p.plan.best.items()},
                "tuning": records(choice_rows(p.plan)),
                "gap_measures": {ffn: found.to_json() for ffn, found in p.measures.items()},
                "data": p.data_summary.to_json(),
                "chance_fta": p.chance,
            }
            for label, p in results.items()
        },
    }  # fmt: skip
    csvs = (
        Table("sensitivity.csv", records(r.row() for r in rows), "One factor changed at a time "
              "from the base: Muon vs Adam, each at its own tuned learning rate unless shared",
              column_docs(SensitivityRow)),
        Table("sensitivity_lag_ratio.csv", records(lag_ratio_long(results))),
    )  # fmt: skip
    report = Report(
        "Knowledge QA sensitivity: the Muon–Adam lag under tailmem's unpublished choices",
        report_summary(cfg, results, rows, claims),
    )
    return Outputs(csvs, (figure,), {"results.json": results_json}, claims, report)


def _plain(value: PerSeed) -> float | dict[str, float | str] | None:
    """A paper ratio for JSON: the number, a bound as ``{"value", "side"}``, or null."""
    return asdict(value) if isinstance(value, Bound) else value


def _ratio_text(row: LagRatio) -> str:
    interval = row.interval()
    shown = "" if interval is None else f" [{interval[0]:.2f}, {interval[1]:.2f}]"
    return f"{row.ratio:.2f}{shown}"


def report_summary(
    cfg: Config,
    results: Mapping[str, grid.PointResult],
    rows: Sequence[LevelRow],
    claims: Sequence[ClaimResult],
) -> str:
    """The base set-up and tuning, the factor levels that move the τ = 0.5 pooled lag ratio
    most (in log ratio), and the headline verdict with its reason."""
    base = results[BASE].config
    model = base.model.build(1, "plain", base.train.seq_len)
    parts = [
        f"Base: knowledge-qa {cfg.preset} preset{' with ' + str(cfg.common) if cfg.common else ''}"
        f" ({model.n_layer} layers × d={model.d_model}, m = {base.data.m}, {base.train.steps} "
        f"steps of {base.train.batch_size}×{base.train.seq_len}, loss on {base.loss_on}, "
        f"{base.seeds} seeds); {len(results)} points, one factor changed at a time."
    ]
    tuned = any(c.budget for r in rows for c in r.measures.arms.values())
    if tuned:
        parts.append(
            f"Each tuned rate chosen on {base.tuning.seeds} tuning seeds apart from the "
            f"evaluation seeds by {base.tuning.score_name(SCORES)}, up to "
            f"{base.tuning.max_extend} widenings (trials per arm: sensitivity.csv)."
        )
    tau = 0.5
    base_ratio = next((r.measures.ratio("pooled", tau) for r in rows if r.base), None)
    centre = None if base_ratio is None else base_ratio.mean_log
    moved = [(r, found) for r in rows if not r.base
             if (found := r.measures.ratio("pooled", tau)) is not None
             and found.mean_log is not None]  # fmt: skip
    if base_ratio is not None and centre is not None and moved:
        moved.sort(key=lambda item: -abs((item[1].mean_log or 0.0) - centre))
        parts.append(
            f"Pooled lag ratio at τ {tau:g} (geometric mean [95 % t interval]): base "
            f"{_ratio_text(base_ratio)}; moved most by "
            + ", ".join(f"{r.factor} = {r.level} ({_ratio_text(found)})"
                        for r, found in moved[:3])
            + "."
        )  # fmt: skip
    for claim in claims:
        reason = f" ({claim.reason})" if claim.reason else ""
        parts.append(f"Headline {claim.id}: {claim.verdict}{reason}.")
    if cfg.note:
        parts.append(cfg.note.strip())
    return " ".join(parts)


STUDY = Study(
    name=NAME,
    config=Config,
    run=run,
    preflight=preflight,
    reproduces="paper A Sec. 4.3 (Tables 3–8): the QA lag under unpublished choices",
    presets=(
        Preset("smoke", "", 38.6),
        Preset("cpu", "9 factor levels × 3 seeds", 1462.0),
        Preset("paper", "160M GPT", None),
    ),
    in_reproduce=False,
)
"""This study's record (:class:`~tailmem.studies.Study`)."""
