"""The map of Muon's tail edge over Adam on the heavy-tailed knowledge QA (issue 12, item 3).

Neither paper says where the effect appears. This study measures Muon vs Adam on paper A's
knowledge QA (:mod:`tailmem.experiments.knowledge_qa`) over a grid of

- ``width``: ``d_model``, with heads of ``head_dim`` (64, the 160M model's) where the width
  allows (one head of the whole width below it) and ``d_ff = ffn_mult · width``;
- ``depth``: layers;
- ``exposures``: how many times each fact of the rarest group is trained (= epochs × QA samples
  per attribute and selection); the steps follow from the data set's epoch length;
- ``m``: the number of frequency groups (``2**m`` people);
- ``frequency_exponent``: ``data.frequency_exponent``, 1 = the paper's power law, 0 = uniform
  (the reviewers' question: does the gap shrink as the data become uniform?).

Every point of the cartesian product is a knowledge-QA run of the Muon and Adam arms, each at
its own learning rate (swept on FTA over all people, the grid widened until the choice is
interior), ``seeds`` seeds each, on the knowledge-QA preset ``base`` with ``common`` overrides.
All points train on one worker pool (:mod:`tailmem.experiments.knowledge_qa.grid`).

Measures per point (:mod:`tailmem.metrics.qa_gaps`): the exposure-lag ratio of Adam behind
Muon, all groups pooled, at FTA 0.3 / 0.5 / 0.8 (seed mean ± SE, or a bound when a crossing is
not bracketed), and the peak FTA gap Muon − Adam of the rarest group (± SE over paired seeds).

Trend (:mod:`tailmem.metrics.lag_trend`): the lag ratio at ``trend.tau`` of the points at the
paper's frequency exponent is fitted as a power law of ``trend.features`` (width, facts per
parameter, depth; collinear ones are dropped in order) and extrapolated to the paper's point —
the 160M model (12 × 768) at m = 15 — with its confidence and prediction intervals.

*Facts* are ``6 · 2**m`` (people × attributes); *parameters* are those of the transformer blocks
(:func:`hidden_params`: no token embedding, no output head). The blocks hold the associative
memories (attention V/O and the FFN) that Muon trains and paper A's mechanism is about; the
embedding and head are trained by Adam in both arms and their size follows the vocabulary (ours
~1–2k BPE tokens, the paper's 50,304), which would make the ratio incomparable across the two.

Outputs: ``map.csv`` (a row per point), heat maps of the lag ratio and the peak rarest-group gap
over each pair of ``heat_maps`` (the other axes at the first value of their lists), the trend
figure, ``results.json`` (rows, fit, extrapolation, the paper's values) and ``report.json``.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from tailmem.config import PRESETS, check_range
from tailmem.data.bios import N_ATTRIBUTES, build_dataset, group_sizes
from tailmem.data.stream import QATrainStream
from tailmem.errors import ConfigError
from tailmem.experiments.knowledge_qa import gaps, grid
from tailmem.lm.plan import Plan
from tailmem.metrics.lag_trend import TrendError, fit_trend, independent_features
from tailmem.metrics.qa_gaps import POOLED, TAUS, gap_measures, paper_curves
from tailmem.models.gpt import GPTConfig, count_params, gpt_config
from tailmem.report.qa_map_figures import Cell, heat_map_figure, trend_figure
from tailmem.rundir import RunDir
from tailmem.train import distributed as D

NAME = "qa-map"
AXES = ("width", "depth", "exposures", "m", "frequency_exponent")
AXIS_LABELS = {
    "width": "width d_model",
    "depth": "layers",
    "exposures": "exposures per rarest fact",
    "m": "groups m",
    "frequency_exponent": "frequency exponent",
}
FEATURES = ("width", "depth", "facts_per_param")
"""What the trend may be fitted on: each is known at the paper's point."""
LEAD, LAG = "muon", "adam"
PAPER_VOCAB = 50304
PAPER_M = 15


def paper_point() -> dict[str, float]:
    """The paper's 160M model (12 × 768, GPT-2 small shape) at m = 15: width, depth and facts
    per block parameter (``6 · 2**15 = 196,608`` facts over 84.9M block parameters)."""
    model = gpt_config("gpt-160m", vocab_size=PAPER_VOCAB)
    return {
        "width": float(model.d_model),
        "depth": float(model.n_layer),
        "facts_per_param": facts(PAPER_M) / hidden_params(model),
    }


def facts(m: int) -> int:
    """Facts of the data set at ``m``: every person's six attributes (``2**m`` people)."""
    return N_ATTRIBUTES * int(group_sizes(m).sum())


def hidden_params(model: GPTConfig) -> int:
    """Parameters of the transformer blocks and the final norm: all but the token embedding
    and the output head (see the module docstring for why)."""
    head = 0 if model.tie_weights else model.vocab_size * model.d_model
    return count_params(model, non_embedding=True) - head


@dataclass
class AxesSection:
    """The grid: every combination of these values is a point (see the module docstring)."""

    width: list[int] = field(default_factory=lambda: [128])
    depth: list[int] = field(default_factory=lambda: [2])
    exposures: list[float] = field(default_factory=lambda: [6.0])
    m: list[int] = field(default_factory=lambda: [7])
    frequency_exponent: list[float] = field(default_factory=lambda: [1.0])

    def validate(self) -> None:
        for name in AXES:
            if not getattr(self, name):
                raise ConfigError(f"axes.{name}: got an empty list; expected at least one value")
        for name, low in (("width", 2), ("depth", 1), ("m", 1)):
            for value in getattr(self, name):
                check_range(f"axes.{name}", value, ge=low)
        for value in self.exposures:
            check_range("axes.exposures", value, gt=0.0)
        for value in self.frequency_exponent:
            check_range("axes.frequency_exponent", value, ge=0.0, le=4.0)


@dataclass
class TrendSection:
    """The fitted trend: the lag ratio at ``tau`` (pooled) of the points whose frequency
    exponent is ``exponent``, a power law of ``features`` (in order of preference), intervals
    at coverage ``level``."""

    tau: float = 0.5
    features: list[str] = field(default_factory=lambda: ["width", "facts_per_param"])
    exponent: float = 1.0
    level: float = 0.95

    def validate(self) -> None:
        if self.tau not in TAUS:
            raise ConfigError(f"trend.tau: got {self.tau}; expected one of {list(TAUS)}")
        unknown = [f for f in self.features if f not in FEATURES]
        if unknown or not self.features:
            raise ConfigError(f"trend.features: got {self.features}; expected some of "
                              f"{list(FEATURES)}")  # fmt: skip
        check_range("trend.level", self.level, gt=0.0, lt=1.0)


@dataclass
class Config:
    """The map (see the module docstring). ``base``: the knowledge-QA preset every point starts
    from; ``common``: dotted-key overrides of the knowledge-QA config for every point (e.g.
    ``seeds``, ``sweep.adam``); ``evals``: evaluations per run (every ``steps / evals``
    steps, and at step 0); ``warmup_frac``: warm-up as a fraction of the steps; ``heat_maps``:
    pairs of axes (x, y); ``workers``: runs trained at once."""

    seed: int = 0
    base: Literal["smoke", "cpu", "paper"] = "cpu"
    common: dict[str, Any] = field(default_factory=dict)
    axes: AxesSection = field(default_factory=AxesSection)
    head_dim: int = 64
    ffn_mult: int = 4
    evals: int = 10
    warmup_frac: float = 0.02
    heat_maps: list[list[str]] = field(default_factory=lambda: [["width", "exposures"]])
    tau: float = 0.5
    trend: TrendSection = field(default_factory=TrendSection)
    workers: int = 2
    note: str = ""

    def validate(self) -> None:
        self.axes.validate()
        self.trend.validate()
        if self.base not in PRESETS:
            raise ConfigError(f"base: got {self.base!r}; expected one of {list(PRESETS)}")
        check_range("head_dim", self.head_dim, ge=2)
        check_range("ffn_mult", self.ffn_mult, ge=1)
        check_range("evals", self.evals, ge=2)
        check_range("warmup_frac", self.warmup_frac, ge=0.0, le=0.5)
        check_range("workers", self.workers, ge=1)
        if self.tau not in TAUS:
            raise ConfigError(f"tau: got {self.tau}; expected one of {list(TAUS)}")
        for pair in self.heat_maps:
            if len(pair) != 2 or pair[0] == pair[1] or not set(pair) <= set(AXES):
                raise ConfigError(
                    f"heat_maps: got {pair}; expected two different axes of {list(AXES)}"
                )
        blocked = [k for k in self.common if k.split(".")[0] in ("seed", "workers", "arms")
                   or k in OWNED]  # fmt: skip
        if blocked:
            raise ConfigError(f"common: {blocked} are set by the map (axes, seed, workers, "
                              "arms); remove them")  # fmt: skip


OWNED = ("model.d_model", "model.n_head", "model.n_layer", "model.d_ff", "data.m",
         "data.frequency_exponent", "train.steps", "train.eval_every", "train.log_every",
         "train.warmup_steps")  # fmt: skip
"""Knowledge-QA keys every point sets from its axes."""


@dataclass(frozen=True)
class GridPoint:
    """One combination of the axes' values."""

    width: int
    depth: int
    exposures: float
    m: int
    frequency_exponent: float

    @property
    def label(self) -> str:
        return (f"d{self.width} L{self.depth} x{self.exposures:g} m{self.m} "
                f"rho{self.frequency_exponent:g}")  # fmt: skip

    def axes(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def grid_points(axes: AxesSection) -> list[GridPoint]:
    """The cartesian product of the axes, in the order of :data:`AXES` (the last fastest)."""
    values = [getattr(axes, name) for name in AXES]
    return [GridPoint(*combo) for combo in itertools.product(*values)]


def model_overrides(point: GridPoint, head_dim: int, ffn_mult: int) -> dict[str, int]:
    """Width and depth as knowledge-QA overrides: heads of ``head_dim`` where the width is a
    multiple of it, one head of the whole width below it."""
    width = point.width
    if width >= head_dim and width % head_dim:
        raise ConfigError(
            f"axes.width: got {width}; expected a multiple of head_dim {head_dim} (or less than it)"
        )
    return {
        "model.d_model": width,
        "model.n_head": max(1, width // head_dim),
        "model.n_layer": point.depth,
        "model.d_ff": ffn_mult * width,
    }


def data_overrides(point: GridPoint) -> dict[str, Any]:
    return {"data.m": point.m, "data.frequency_exponent": point.frequency_exponent}


def schedule_overrides(steps: int, evals: int, warmup_frac: float) -> dict[str, int]:
    """Steps, evaluation and log cadence (``evals`` evaluations) and warm-up of a run."""
    every = max(1, steps // evals)
    return {
        "train.steps": steps,
        "train.eval_every": every,
        "train.log_every": every,
        "train.warmup_steps": max(1, round(warmup_frac * steps)),
    }


def steps_for(exposures: float, steps_per_epoch: float, qa_per_selection: int) -> int:
    """Steps that train each rarest-group fact ``exposures`` times: the rarest group has one
    selection, so an epoch trains each of its facts ``qa_per_selection`` times."""
    return max(1, round(exposures * steps_per_epoch / qa_per_selection))


@dataclass(frozen=True)
class Planned:
    """A point ready to run: its axes, engine point, model size and schedule."""

    point: GridPoint
    engine: grid.Point
    hidden_params: int
    facts: int
    steps: int
    steps_per_epoch: float


def plan_points(cfg: Config, root: Path) -> list[Planned]:
    """Every point's knowledge-QA overrides, its steps computed from its data set's epoch
    (the data sets are built, once each, in ``root/data``, where the engine finds them)."""
    common = {**cfg.common, "seed": cfg.seed, "arms": [LEAD, LAG]}
    out = []
    epochs: dict[str, float] = {}
    for point in grid_points(cfg.axes):
        fixed = {**model_overrides(point, cfg.head_dim, cfg.ffn_mult), **data_overrides(point)}
        ((_, first),) = grid.configure([grid.Point(point.label, fixed)], cfg.base, common).values()
        key = repr((dataclasses.asdict(first.data), first.train.batch_size, first.train.seq_len,
                    first.loss_on))  # fmt: skip
        if key not in epochs:
            dataset = build_dataset(first.data, root / "data")
            stream = QATrainStream(dataset, first.train.batch_size, first.train.seq_len,
                                   first.seed, first.loss_on)  # fmt: skip
            epochs[key] = stream.steps_per_epoch
        steps = steps_for(point.exposures, epochs[key], first.data.n_qa // N_ATTRIBUTES)
        overrides = {**fixed, **schedule_overrides(steps, cfg.evals, cfg.warmup_frac)}
        model = first.model.build(1, first.ffns[0], first.train.seq_len)
        out.append(Planned(point, grid.Point(point.label, overrides), hidden_params(model),
                           facts(point.m), steps, epochs[key]))  # fmt: skip
    return out


def configure(cfg: Config, planned: Sequence[Planned]) -> dict[str, Any]:
    """The engine's configs of every planned point (validated, nothing written)."""
    common = {**cfg.common, "seed": cfg.seed, "arms": [LEAD, LAG]}
    return grid.configure([p.engine for p in planned], cfg.base, common)


def preflight(cfg: Config) -> None:
    """Refuse a grid the engine would refuse (bad width, model too big for this machine) before
    anything is written: every point is configured with the base preset's steps."""
    configs = {}
    for point in grid_points(cfg.axes):
        fixed = {**model_overrides(point, cfg.head_dim, cfg.ffn_mult), **data_overrides(point)}
        configs.update(grid.configure([grid.Point(point.label, fixed)], cfg.base,
                                      {**cfg.common, "seed": cfg.seed, "arms": [LEAD, LAG]}))  # fmt: skip
    grid.preflight(configs)


def run(cfg: Config, run: RunDir) -> None:
    """Plan every point, train them all on one pool, then write the map, figures and report."""
    planned = plan_points(cfg, run.path)
    results = grid.run_points(configure(cfg, planned), run.path, cfg.workers)
    if D.is_main_process():
        rows = [point_row(p, results[p.point.label]) for p in planned]
        write_outputs(cfg, run, rows)


# --------------------------------------------------------------------------- measures


def _pair(measures: Mapping[str, Any]) -> Mapping[str, Any] | None:
    for pair in measures.get("pairs", []):
        if (pair["lead"], pair["lag"]) == (LEAD, LAG) and pair["status"] == "measured":
            return pair
    return None


def interior(plan: Plan, ffn: str, arm: str) -> bool | None:
    """Whether the arm's chosen learning rate is inside its (widened) sweep (None: no choice)."""
    entry = (ffn, arm)
    if entry not in plan.chosen:
        return None
    points = sorted(p for p, _ in plan.sweeps[entry])
    return len(points) < 2 or points[0] < plan.chosen[entry] < points[-1]


def point_row(planned: Planned, result: Any) -> dict[str, Any]:
    """One row of ``map.csv``: the axes, sizes, lag ratios per tau, peak gaps, chosen LRs."""
    ffn = result.plan.ffns[0]
    row: dict[str, Any] = {
        **planned.point.axes(),
        "n_head": result.config.model.n_head,
        "hidden_params": planned.hidden_params,
        "facts": planned.facts,
        "facts_per_param": planned.facts / planned.hidden_params,
        "steps": planned.steps,
        "steps_per_epoch": round(planned.steps_per_epoch, 3),
        "seeds": result.config.seeds,
    }
    pair = _pair(result.measures.get(ffn, {}))
    for tau in TAUS:
        key = f"lag_{tau:g}"
        entry = None if pair is None else _pooled(pair, tau)
        row.update(lag_columns(key, entry))
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


def _pooled(pair: Mapping[str, Any], tau: float) -> Mapping[str, Any]:
    (entry,) = [r for r in pair["lag_ratio"] if r["group"] == POOLED and r["tau"] == tau]
    return entry


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


# --------------------------------------------------------------------------- outputs


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


def paper_ratios(tau: float) -> dict[str, dict[str, Any]]:
    """The paper's pooled lag ratio of Adam behind Muon at ``tau``, per table version, computed
    as ours are (:func:`~tailmem.metrics.qa_gaps.paper_curves`): the ratio or its bounds."""
    out = {}
    for version in gaps.VERSION_LABELS:
        measures = gap_measures(paper_curves(version), (tau,), [(LEAD, LAG)])
        out[version] = _pooled(measures["pairs"][0], tau)["of_mean"]
    return out


def fit(cfg: Config, rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The trend of :class:`TrendSection` through the measured points and its extrapolation to
    the paper's point; ``status`` "fitted" or "not fitted" with the reason."""
    key = f"lag_{cfg.trend.tau:g}"
    used = [r for r in rows if r["frequency_exponent"] == cfg.trend.exponent
            and r[f"{key}_kind"] == "measured" and (r[f"{key}_se"] or 0) > 0]  # fmt: skip
    columns = {f: [float(r[f]) for r in used] for f in cfg.trend.features}
    kept = independent_features(columns) if len(used) > 1 else []
    base = {"tau": cfg.trend.tau, "exponent": cfg.trend.exponent, "n_points": len(used),
            "features": kept, "dropped": [f for f in cfg.trend.features if f not in kept],
            "paper_point": paper_point()}  # fmt: skip
    try:
        if not kept:
            raise TrendError(f"no feature varies over the {len(used)} measured point(s)")
        trend = fit_trend({f: columns[f] for f in kept}, [r[key] for r in used],
                          [r[f"{key}_se"] for r in used])  # fmt: skip
    except TrendError as exc:
        return {**base, "status": "not fitted", "reason": str(exc)}
    at = {f: base["paper_point"][f] for f in kept}
    prediction = trend.predict(at, level=cfg.trend.level)
    return {**base, "status": "fitted", "fit": trend.to_json(),
            "extrapolation": prediction.to_json(), "_trend": trend, "_used": used}  # fmt: skip


def write_outputs(cfg: Config, run: RunDir, rows: list[dict[str, Any]]) -> None:
    """``map.csv``, heat maps, trend figure, ``results.json`` and ``report.json``."""
    run.write_csv("map.csv", rows)
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
        shown = {gaps.VERSION_LABELS[v]: r["ratio"] for v, r in published.items()
                 if r["ratio"] is not None}  # fmt: skip
        figures.append(run.save_report_figure(
            trend_figure(model, {f: [r[f] for r in used] for f in trend["features"]},
                         [r[f"lag_{cfg.trend.tau:g}"] for r in used],
                         [r[f"lag_{cfg.trend.tau:g}_se"] for r in used], along=along,
                         at={f: trend["paper_point"][f] for f in trend["features"]},
                         at_label="paper's 160M, m = 15", published=shown,
                         title=f"Lag ratio at FTA {cfg.trend.tau:g} vs {along}"),
            "lag_ratio_trend",
            f"Exposure-lag ratio at FTA {cfg.trend.tau:g} (frequency exponent "
            f"{cfg.trend.exponent:g}) against {along}, with the fitted power law in "
            f"{' and '.join(trend['features'])} and its {cfg.trend.level:.0%} band, extrapolated "
            "to the paper's 160M model at m = 15 (thick: confidence, thin: prediction "
            "interval)" + (f"; points moved to the paper's {', '.join(trend['features'][1:])} by "
                           "the fitted slopes" if len(trend["features"]) > 1 else "")
            + "; open markers: the paper's tables computed the same way.",
        ))  # fmt: skip
    results = {"rows": rows, "trend": trend, "paper": published, "reference": reference}
    run.write_json("results.json", results)
    run.write_json("report.json", {
        "title": "The map: where Muon's tail edge over Adam appears (knowledge QA)",
        "summary": summary(cfg, rows, trend, published),
        "figures": figures,
        "tables": [{"file": "map.csv", "caption": "Every point of the grid", "columns": COLUMNS}],
    })  # fmt: skip


COLUMNS = {
    "width": "d_model (heads of 64 where the width allows)",
    "depth": "layers",
    "exposures": "times each rarest-group fact is trained",
    "m": "frequency groups (2^m people)",
    "frequency_exponent": "1: the paper's power law; 0: uniform",
    "hidden_params": "parameters of the blocks (no embedding, no head)",
    "facts_per_param": "6 · 2^m facts ÷ hidden_params",
    "lag_0.5": "pooled exposure-lag ratio Adam ÷ Muon at FTA 0.5 (also 0.3, 0.8): seed mean "
    "(_se: its SE), or a bound of the seed-mean curves (_kind lower/upper)",
    "peak_rarest_gap": "largest seed-mean FTA gap Muon − Adam of the rarest group (± _se)",
    "lr_muon": "each arm's chosen LR (_interior: inside its widened sweep)",
}


def _ratio_text(row: Mapping[str, Any], key: str) -> str:
    kind = row[f"{key}_kind"]
    if kind is None:
        return "not measured"
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
            published: Mapping[str, Mapping[str, Any]]) -> str:  # fmt: skip
    """The report's paragraph: the grid, where the gap is largest and where it vanishes, the
    extrapolation beside the paper's values, and the LRs at a grid edge."""
    key = f"lag_{cfg.tau:g}"
    axes = ", ".join(f"{AXIS_LABELS[a]} {getattr(cfg.axes, a)}" for a in AXES)
    parts = [f"{len(rows)} points ({axes}), Muon vs Adam, each at its own tuned LR."]
    measured = [r for r in rows if r[f"{key}_kind"] == "measured"]
    if measured:
        top = max(measured, key=lambda r: r[key])
        parts.append(f"Largest lag ratio at FTA {cfg.tau:g}: {_ratio_text(top, key)} ({_where(top)}).")
    gapped = [r for r in rows if r.get("peak_rarest_gap") is not None]
    if gapped:
        top = max(gapped, key=lambda r: r["peak_rarest_gap"])
        se = top["peak_rarest_gap_se"]
        parts.append(f"Largest peak rarest-group gap: {top['peak_rarest_gap']:+.3f}"
                     + ("" if se is None else f" ± {se:.3f}") + f" ({_where(top)}).")  # fmt: skip
    gone = [r for r in rows if vanishes(r, key)]
    parts.append(
        "Muon's edge vanishes (lag ratio within 2 SE of 1 and peak rarest gap within 2 SE of 0) "
        + ("at: " + "; ".join(_where(r) for r in gone) + "." if gone else "at no point of the grid.")
    )
    paper = "; ".join(f"{gaps.VERSION_LABELS[v]} " + _paper_text(r) for v, r in published.items())
    if trend["status"] == "fitted":
        e = trend["extrapolation"]
        lo, hi = e["confidence"]
        plo, phi = e["prediction"]
        parts.append(
            f"Trend (lag ratio at FTA {trend['tau']:g} ∝ power law in "
            f"{' and '.join(trend['features'])}, {trend['n_points']} points"
            + (f"; {', '.join(trend['dropped'])} dropped: collinear over this grid"
               if trend["dropped"] else "")
            + f") extrapolated to the paper's 160M model at m = 15: {e['ratio']:.2f} "
            f"({e['level']:.0%} confidence {lo:.2f}–{hi:.2f}, prediction {plo:.2f}–{phi:.2f}); "
            f"the paper's tables give {paper}."
        )  # fmt: skip
    else:
        parts.append(f"No trend fitted: {trend['reason']}. The paper's tables give {paper}.")
    edges = [f"{_where(r)} ({arm})" for r in rows for arm in (LEAD, LAG)
             if r[f"{arm}_interior"] is False]  # fmt: skip
    if edges:
        parts.append("Chosen LR at the end of its widened grid: " + "; ".join(edges) + ".")
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
