"""The QK control task: in-context linear regression with a rare task group (paper A, reviewers).

Paper A attributes Muon's tail edge to the associative memories of V/O and the FFN, not to QK;
the reviewers asked for a task whose work is done by QK, where that account predicts the edge
mostly vanishes, and the ICLR camera-ready adds one: in-context linear regression with a rarely
sampled task group. Data (:mod:`tailmem.data.icl_tasks`): d-dimensional regressions, n examples
per sequence, G groups sampled ``∝ ratio^(-g)`` (group 0 the head, G-1 the tail), each group
with its own input subspace. Model (:class:`tailmem.models.icl.ICLRegressor`): the tailmem GPT
with a linear read-in of the (x, y) tokens and a linear read-out; loss: mean squared error of
the prediction of ``y_i`` at the token of every ``x_i``.

Arms (role recipes, as knowledge-QA's): ``muon`` — Muon on Q, K, V, O, W_in, W_out, Adam on the
read-in, read-out and norms; ``adam`` — Adam on everything.

Protocol (:mod:`tailmem.lm.plan`)
    1. LR sweep per arm over ``optim.<kind>.lr`` (a list; :mod:`tailmem.lm.rates`): one run per
       rate at the first seed, scored by
       the test MSE on the training mixture (groups weighted by frequency: what a practitioner
       would tune on; tuning on the tail would choose for the claim). The Muon arm's Adam part
       (read-in/out, norms) borrows the Adam arm's chosen rate. A rate chosen at an end of its
       grid is flagged in the summary and in ``lr_sweep.csv``. One-point grids (the ``paper``
       preset's equal LR 1e-4 for both, the authors' protocol) skip the sweep.
    2. ``seeds`` runs per arm at its chosen rate (seeds change initialisation and data order;
       the task groups are fixed by ``data.task_seed``).

Metrics, per group, every ``train.eval_every`` steps from step 0 on ``data.eval_per_group``
held-out sequences: **normalised MSE** — the squared error over all query positions divided by
the mean squared target there (1 = predicting 0, i.e. nothing learned; 0 = perfect). Its floor
is not 0: the first ``k`` queries of a sequence cannot be determined from fewer than ``k``
examples, so the Bayes-optimal value averaged over ``n`` positions is ``k(k+1)/2 / (k n)``
(:func:`bayes_floor`; 0.1 at k = 3, n = 20). The gap measures are knowledge-QA's
(:mod:`tailmem.metrics.qa_gaps`) on the accuracy-like score ``1 − nMSE``: the exposure-lag
ratio (sequences of a group Adam needs ÷ Muon needs to bring its score to tau; exposures of
group g by step s are ``p_g · batch · s``) and the peak gap.

Outputs: ``nmse_by_group`` (per-group nMSE over training, Muon vs Adam, seed bands),
``lag_ratio`` figures; ``lr_sweep.csv``, ``lag_ratio.csv``, ``peak_gap.csv``, ``results.json``,
``claims.json`` (claim ``A3.beyond.qk_task``), ``report.json``.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from torch import Tensor, nn

from tailmem.claims.a3_qk import A3QKInputs, QKLag
from tailmem.claims.core import ClaimResult
from tailmem.claims.registry import evaluate
from tailmem.columns import column, column_docs, records
from tailmem.data.icl_tasks import ICLBatches, ICLTaskConfig, ICLTasks
from tailmem.errors import ConfigError
from tailmem.experiments.qa_map.measures import seed_ratios
from tailmem.lm.arms import Arm, matrix_recipe, select_arms
from tailmem.lm.config import LMConfig
from tailmem.lm.entries import Entry
from tailmem.lm.plan import Plan, TrainedPlan, run_plan, tidy
from tailmem.lm.preflight import check_lm
from tailmem.lm.rates import rate_entries
from tailmem.lm.spec import BatchShape, RunResult
from tailmem.lm.subrun import RunContext, template
from tailmem.lm.sweeps import (
    ChoiceRow,
    TrialRow,
    choice_rows,
    store_outputs,
    trial_rows,
    tuning_outputs,
    tuning_tables,
)
from tailmem.lm.tuning import TUNE_ONLY
from tailmem.metrics.qa_gaps import (
    TAUS,
    FTACurves,
    Gap,
    GapMeasures,
    LagRatio,
    PairMeasure,
    band,
    gap_measures,
)
from tailmem.models.gpt import GPTConfig
from tailmem.models.icl import ICLRegressor
from tailmem.outputs import Figure, Outputs, Report, Table, write
from tailmem.plotting import legend_outside, pyplot
from tailmem.report.qa_gap_figures import lag_ratio_figure
from tailmem.rundir import RunDir
from tailmem.studies import Preset, Provenance, Study
from tailmem.train import IGNORE_INDEX, EvalHook
from tailmem.train import distributed as D

if TYPE_CHECKING:
    from matplotlib.figure import Figure as PlotFigure

NAME = "icl-regression"
"""``tailmem tune``: train the tuning trials only and write ``tuned_rates.json``."""
FFN = "plain"
ARMS: dict[str, Arm] = {
    "muon": Arm.of_recipe(matrix_recipe("muon")),
    "adam": Arm.of_recipe("adam:*"),
}
"""The arms: Muon on every hidden matrix (Adam on read-in, read-out, norms), and all-Adam."""
DIGITS = 5
"""Normalised MSEs are rounded to this many decimals in metrics."""
SCORES = {
    "nmse_mix": "minus the test nMSE on the training mixture at the end (groups weighted by "
    "frequency: what a practitioner would tune on; the tail is 1/73 of it at ratio 8)"
}
"""The tuning score of the LR sweeps (``tuning.score``)."""


@dataclass(frozen=True)
class Config(LMConfig):
    """The icl-regression experiment (see the module docstring). ``train.seq_len`` must be the
    sequence length ``2 × data.n_points``; ``arms``: ``muon``, ``adam`` or recipes
    (:func:`~tailmem.lm.arms.select_arms`); each kind's ``optim.<kind>.lr`` a rate or a grid to
    sweep (:mod:`tailmem.lm.rates`)."""

    seeds: int = 3
    arms: list[str] = field(default_factory=lambda: list(ARMS))
    data: ICLTaskConfig = field(default_factory=ICLTaskConfig)
    note: str = ""

    def run_arms(self) -> list[Arm]:
        return select_arms(self.arms, ARMS)

    def validate(self) -> None:
        super().validate()
        self.entries()  # every borrowed rate has an arm to borrow from
        self.data.validate()
        if self.model.tie_weights:
            raise ConfigError(
                "model.tie_weights: got true; expected false (the regressor's read-in and "
                "read-out are different maps)"
            )
        if self.train.seq_len != self.data.seq_len:
            raise ConfigError(
                f"train.seq_len: got {self.train.seq_len}; expected 2 × data.n_points = "
                f"{self.data.seq_len} (an x and a y token per example)"
            )

    def tuning_scores(self) -> dict[str, str]:
        return dict(SCORES)

    def entries(self) -> list[Entry]:
        """One plan entry per arm: its grid; Muon borrows Adam's chosen rate for its Adam part."""
        return rate_entries([FFN], self.run_arms(), self.optim, self.tuning, self.seed,
                            self.train.steps, SCORES)  # fmt: skip


def bayes_floor(k: int, n_points: int) -> float:
    """The least normalised MSE any predictor reaches, averaged over the ``n_points`` queries:
    query ``i`` (``i - 1`` examples before it) leaves ``max(k - i + 1, 0) / k`` of the target's
    variance undetermined (the weight vector has ``k`` isotropic Gaussian coordinates)."""
    return sum(max(k - i, 0) / k for i in range(n_points)) / n_points


# --------------------------------------------------------------------------- loss and metric


def mse_loss_sum(model: nn.Module, x: Tensor, y: Tensor) -> Tensor:
    """Summed squared error of the predictions at the query positions (``y != -100``)."""
    keep = y != IGNORE_INDEX
    return ((model(x)[keep].float() - y[keep]) ** 2).sum()


class NMSEEvaluator:
    """``hook(step, model) -> {"nmse": [per group], "nmse_mix": Σ p_g nmse_g}`` on the held-out
    sequences (rounded to :data:`DIGITS`); under torchrun each rank scores every
    ``world_size``-th batch and the sums are added."""

    def __init__(self, tasks: ICLTasks, batch_size: int, ctx: D.DistContext | None = None) -> None:
        self.ctx = ctx or D.DistContext()
        self.tasks = tasks
        seqs = tasks.eval_set()
        self.batches = [
            (seqs.tokens[i : i + batch_size], seqs.targets[i : i + batch_size],
             seqs.groups[i : i + batch_size])
            for i in range(0, len(seqs.groups), batch_size)
        ]  # fmt: skip
        keep = seqs.targets != IGNORE_INDEX
        energy = torch.zeros(tasks.cfg.n_groups, dtype=torch.float64)
        energy.index_add_(0, seqs.groups, (seqs.targets.double() ** 2 * keep).sum(1))
        self.energy = energy

    @torch.no_grad()
    def squared_errors(self, model: nn.Module) -> Tensor:
        """Summed squared error per group (over ranks), float64."""
        device = next(model.parameters()).device
        total = torch.zeros(self.tasks.cfg.n_groups, dtype=torch.float64, device=device)
        for tokens, targets, groups in self.batches[self.ctx.rank :: self.ctx.world_size]:
            targets = targets.to(device)
            keep = targets != IGNORE_INDEX
            err = ((model(tokens.to(device)).double() - targets.double()) ** 2 * keep).sum(1)
            total.index_add_(0, groups.to(device), err)
        return D.all_reduce_sum(total, self.ctx).cpu()

    def __call__(self, step: int, model: nn.Module) -> dict[str, float | list[float]]:
        nmse = (self.squared_errors(model) / self.energy).tolist()
        mix = float(sum(p * v for p, v in zip(self.tasks.probs.tolist(), nmse, strict=True)))
        return {"nmse": [round(v, DIGITS) for v in nmse], "nmse_mix": round(mix, DIGITS)}


def describe_nmse(metrics: Mapping[str, Any]) -> str:
    """A log line's view of an evaluation: nMSE by group (head first) and on the mixture."""
    groups = " ".join(f"{v:.3f}" for v in metrics["nmse"])
    return f"nMSE by group [{groups}], mixture {metrics['nmse_mix']:.4f}"


@dataclass
class ICLMaterials:
    """Tasks, batches and the evaluator of one process (a :class:`~tailmem.lm.subrun.Materials`)."""

    tasks: ICLTasks
    eval_batch_size: int
    vocab_size: int = 1

    @property
    def identity(self) -> dict[str, Any]:
        return {"icl": asdict(self.tasks.cfg), "model": "ICLRegressor"}

    def batches(self, seed: int, batch: BatchShape) -> ICLBatches:
        return ICLBatches(self.tasks, batch.batch_size, seed)

    def hooks(self, model_cfg: GPTConfig, ctx: D.DistContext) -> list[EvalHook]:
        return [NMSEEvaluator(self.tasks, self.eval_batch_size, ctx)]


@dataclass(frozen=True)
class ICLData:
    """Picklable description of the data (a :class:`~tailmem.lm.subrun.DataSpec`)."""

    cfg: ICLTaskConfig
    eval_batch_size: int

    def load(self, ctx: D.DistContext) -> ICLMaterials:
        return ICLMaterials(ICLTasks(self.cfg), self.eval_batch_size)


# --------------------------------------------------------------------------- the study


def _final_mix(result: RunResult) -> float | None:
    value = result.metric("nmse_mix")
    return float(value) if isinstance(value, int | float) and math.isfinite(value) else None


def _score(result: RunResult) -> float | None:
    mix = _final_mix(result)
    return None if mix is None else -mix


def _summary(result: RunResult) -> str:
    if not result.final:
        return "no final evaluation"
    return describe_nmse(result.final)


def preflight(cfg: Config) -> None:
    """Refuse, before anything is written, a model or batch this machine cannot train
    (:func:`tailmem.lm.preflight.check_lm`, without a vocabulary: one output per position) with
    the task draws it surely holds (float32): the task rotation (a d × d Gaussian and its QR
    factor) and, for the held-out set (``n_groups × eval_per_group`` sequences) and for one
    training batch, each row's tokens (2n × (d + 1)), inputs (n × d) and subspace basis
    (d × k); with ``tuning.rates: stored``, a rate missing from the store."""
    data = cfg.data
    d, n, k = data.n_dims, data.n_points, data.k

    def draw(rows: int) -> int:
        return 4 * rows * (2 * n * (d + 1) + n * d + d * k)

    held_out = draw(data.n_groups * data.eval_per_group)
    drawn = 8 * d * d + held_out + draw(cfg.train.batch_size)
    what = (
        f"drawing the tasks (data.n_dims {d}, {data.n_groups * data.eval_per_group} held-out rows)"
    )
    check_lm(cfg, [FFN], drawn, vocab_size=1, extra=what)
    cfg.stored_rates()  # tuning.rates: stored with a rate missing is refused here


def run(cfg: Config, run: RunDir, provenance: Provenance) -> None:
    """Sweep, train every seed, then write tables, figures, claims and ``report.json``."""
    spec = ICLData(cfg.data, cfg.train.eval_batch_size)
    model_fn = functools.partial(ICLRegressor, features=cfg.data.features)
    context = RunContext(
        str(run.path), spec, loss_fn=mse_loss_sum, describe=describe_nmse,
        show_progress=cfg.workers == 1, threads=cfg.train.threads, model_fn=model_fn,
    )  # fmt: skip
    runs = template(spec.load(D.DistContext()), cfg.model, cfg.train, cfg.optim, [FFN], True)
    seeds = () if cfg.tuning.only else tuple(cfg.seed_list)
    plan = Plan(tuple(cfg.entries()), seeds, cfg.train.steps, runs, _score, cfg.stored_rates())
    trained = run_plan(plan, context, cfg.workers, _summary)
    tidy(trained, context.root, cfg.train.keep_checkpoints)
    if not D.is_main_process():
        return
    if cfg.tuning.only:
        write(run, tuning_outputs(trained, cfg.tuning_record(), NAME, provenance))
        return
    stored = store_outputs(trained, cfg.tuning_record(), NAME, provenance)
    write(run, outputs(cfg, trained) + stored)


def curves(
    cfg: Config, plan: TrainedPlan
) -> tuple[FTACurves | None, dict[str, np.ndarray], list[int]]:
    """The score ``1 − nMSE`` of every arm as :class:`FTACurves` (exposures: sequences of each
    group trained by each evaluation step), the nMSE arrays ``(seeds, groups, steps)`` and the
    seeds they hold: those whose run completed in every arm (seeds stay paired across arms; a
    seed that diverged in one arm is left out of all). ``None`` and no arrays when no seed is
    left."""
    runs = {name: plan.seed_results((FFN, name)) for name in plan.arms}
    kept = [i for i in range(cfg.seeds) if all(r[i].ok for r in runs.values())]
    if not kept:
        return None, {}, []
    steps = [e["step"] for e in runs[plan.arms[0]][kept[0]].evals]
    nmse = {
        name: np.array([[e["nmse"] for e in rs[i].evals] for i in kept]).transpose(0, 2, 1)
        for name, rs in runs.items()
    }
    probs = ICLTasks(cfg.data).probs.numpy()
    exposures = np.outer(probs * cfg.train.batch_size, np.asarray(steps, dtype=np.float64))
    scores = {name: 1.0 - values for name, values in nmse.items()}
    seeds = [cfg.seed_list[i] for i in kept]
    return FTACurves(scores, np.asarray(steps), exposures, seeds=tuple(seeds)), nmse, seeds


@dataclass(frozen=True)
class LagRatioRow:
    """A row of ``lag_ratio.csv``: one pair's exposure-lag ratio at one group and tau."""

    lead: str = column("the arm in front (Muon)")
    lag: str = column("the arm measured behind it (Adam)")
    group: int | str = column("the task group (0 the head, the last the rarest; pooled: all)")
    tau: float = column("the score 1 − nMSE the group must reach")
    ratio: float | None = column(
        "sequences of the group the lag arm needs ÷ the lead arm needs to reach tau, geometric "
        "mean over the seeds measured"
    )
    ci_low: float | None = column("its 95 % t interval, low end")
    ci_high: float | None = column("its high end")
    se_log: float | None = column(
        "SE of the mean log ratio, floored at its interpolation resolution (empty below two seeds)"
    )
    n_measured: int = column("seeds whose ratio was measured (both arms reached tau)")
    n_seeds: int = column("seeds compared")
    of_mean: float | None = column("the ratio of the seed-mean curves")
    of_mean_status: str = column("measured, a lower or an upper bound, or undetermined")

    @classmethod
    def of(cls, pair: PairMeasure, row: LagRatio) -> LagRatioRow:
        """The row of ``pair``'s lag ratio ``row``."""
        ratio, low, high = row.summary()
        return cls(pair.lead, pair.lag, row.group, row.tau, ratio, low, high, row.se_log,
                   row.n_measured, row.n_seeds, row.of_mean.ratio, row.of_mean.status)  # fmt: skip


def lag_ratio_rows(measures: GapMeasures) -> list[LagRatioRow]:
    """``lag_ratio.csv``: every measured pair's lag ratios (every group and tau)."""
    return [LagRatioRow.of(pair, row) for pair in measures.measured for row in pair.lag_ratios]


@dataclass(frozen=True)
class GapRow:
    """A row of ``gap.csv``: one pair's seed-mean gap of the score at one cell."""

    lead: str = column("the arm in front (Muon)")
    lag: str = column("the arm behind (Adam)")
    group: int = column("the task group (0 the head, the last the rarest)")
    step: float = column("the evaluation step of the cell")
    gap: float = column("score 1 − nMSE of the lead arm − the lag arm's, mean over seeds")
    se: float | None = column("its SE over paired seeds (empty for one seed)")
    kind: str = column(
        "tail (pre-specified): the rarest group at the end; peak (descriptive): the group's "
        "largest gap over training"
    )

    @classmethod
    def of(cls, pair: PairMeasure, gap: Gap) -> GapRow:
        """The row of ``pair``'s gap ``gap`` (its tail gap or one of its peaks)."""
        kind = "tail (pre-specified)" if gap is pair.tail_gap else "peak (descriptive)"
        return cls(pair.lead, pair.lag, gap.group, gap.step, gap.gap, gap.se, kind)


def gap_rows(measures: GapMeasures) -> list[GapRow]:
    """``gap.csv``: every measured pair's tail gap, then its peak per group."""
    return [GapRow.of(pair, gap) for pair in measures.measured
            for gap in (pair.tail_gap, *pair.peak_per_group)]  # fmt: skip


@dataclass(frozen=True)
class Measured:
    """What the tables, figures and claims read of a finished plan: the score curves
    (:func:`curves`; None where no seed completed in every arm), the nMSE arrays, the seeds
    kept and the Muon–Adam gap measures."""

    curves: FTACurves | None
    nmse: Mapping[str, np.ndarray]
    seeds: list[int]
    measures: GapMeasures


def measured(cfg: Config, plan: TrainedPlan) -> Measured:
    """The :class:`Measured` of a completed plan (gap measures: Muon vs Adam where both ran)."""
    score_curves, nmse, seeds = curves(cfg, plan)
    pairs = [("muon", "adam")] if {"muon", "adam"} <= set(plan.arms) and seeds else []
    measures = (gap_measures(score_curves, TAUS, pairs) if score_curves
                else GapMeasures(tuple(TAUS), ()))  # fmt: skip
    return Measured(score_curves, nmse, seeds, measures)


def qk_lags(measures: GapMeasures) -> tuple[QKLag, ...]:
    """Adam's lag ratios behind Muon, every group and tau, as the claim reads them (none where
    the pair was not measured)."""
    pair = measures.pair("muon", "adam")
    if pair is None:
        return ()
    return tuple(
        QKLag(r.group, r.tau, r.ratio, r.statuses, seed_ratios(r)) for r in pair.lag_ratios
    )


@dataclass(frozen=True)
class Results:
    """A completed plan's results (what the claim, the summary and the figures read;
    ``results.json`` is :meth:`to_json`): the :class:`Measured` curves and gap measures, the
    seeds left out (a run diverged), the arms with their ``labels``, the ``rarest`` group, the
    groups' sampling ``group_probs``, the Bayes floor of the nMSE, each arm's chosen rates, the
    tuning (score, choices, trials over ``kinds``) and every seed run's key."""

    found: Measured
    seeds_left_out: tuple[int, ...]
    arms: tuple[str, ...]
    labels: Mapping[str, str]
    rarest: int
    group_probs: tuple[float, ...]
    bayes_floor_nmse: float
    best_lr: Mapping[str, Mapping[str, float]]
    tuning_score: str
    choices: tuple[ChoiceRow, ...]
    trials: tuple[TrialRow, ...]
    kinds: tuple[str, ...]
    runs: tuple[str, ...]

    def claim_inputs(self) -> A3QKInputs:
        """The claim's inputs: the seeds kept, the rarest group and Adam's lag ratios behind
        Muon."""
        return A3QKInputs(seeds=self.found.seeds, rarest=self.rarest,
                          lags=qk_lags(self.found.measures))  # fmt: skip

    def to_json(self) -> dict[str, Any]:
        """``results.json``."""
        score_curves = self.found.curves
        return {
            "seeds": self.found.seeds,
            "seeds_left_out": list(self.seeds_left_out),
            "arms": list(self.arms),
            "labels": dict(self.labels),
            "rarest": self.rarest,
            "group_probs": list(self.group_probs),
            "bayes_floor_nmse": self.bayes_floor_nmse,
            "best_lr": {arm: dict(lrs) for arm, lrs in self.best_lr.items()},
            "tuning": {
                "score": self.tuning_score,
                "choices": [r.record() for r in self.choices],
                "trials": records(self.trials),
            },
            "steps": score_curves.steps.tolist() if score_curves else [],
            "exposures": score_curves.exposures.tolist() if score_curves else [],
            "nmse": {arm: values.tolist() for arm, values in self.found.nmse.items()},
            "gap_measures": self.found.measures.to_json(),
            "runs": list(self.runs),
        }


def results_of(cfg: Config, plan: TrainedPlan, found: Measured) -> Results:
    """The :class:`Results` of a completed plan."""
    return Results(
        found=found,
        seeds_left_out=tuple(s for s in cfg.seed_list if s not in found.seeds),
        arms=tuple(plan.arms),
        labels={name: plan.arm(name).label for name in plan.arms},
        rarest=cfg.data.n_groups - 1,
        group_probs=tuple(ICLTasks(cfg.data).probs.tolist()),
        bayes_floor_nmse=bayes_floor(cfg.data.k, cfg.data.n_points),
        best_lr={arm: lrs for (_, arm), lrs in plan.best.items()},
        tuning_score=cfg.tuning.score_name(SCORES),
        choices=tuple(choice_rows(plan)),
        trials=tuple(trial_rows(plan)),
        kinds=tuple(plan.kinds),
        runs=tuple(r.key for name in plan.arms for r in plan.seed_results((FFN, name))),
    )


def figures(found: Measured, floor: float, labels: Mapping[str, str]) -> tuple[Figure, ...]:
    """The nMSE curves (where a seed completed) and the lag-ratio figure (where Muon and Adam
    were measured), in the report's order."""
    shown = []
    if found.curves:
        shown.append(Figure(
            "nmse_by_group",
            nmse_figure(found.curves.steps, found.nmse, floor, labels),
            f"Test MSE normalised by the group's target energy (1 = nothing learned) per "
            f"task group over training, Muon (solid) vs Adam (dashed), mean ± SE over "
            f"{len(found.seeds)} seed(s); dotted: the Bayes floor {floor:.3f}",
        ))  # fmt: skip
    pair = found.measures.pair("muon", "adam")
    if pair is not None:
        fig = lag_ratio_figure(pair, labels=labels)
        fig.axes[0].set_xlabel("score level tau (1 − normalised MSE)")
        shown.append(Figure(
            "lag_ratio",
            fig,
            "Exposure-lag ratio of Adam behind Muon per group (sequences "
            "of the group Adam needs ÷ Muon needs to reach 1 − nMSE = tau), geometric mean "
            "over seeds with its 95 % t interval",
        ))  # fmt: skip
    return tuple(shown)


def outputs(cfg: Config, trained: TrainedPlan) -> Outputs:
    """Tables, figures, results, claims and the report of a finished plan (its measures read
    the runs that did not diverge; the tuning tables every trial)."""
    plan = trained.completed()
    found = measured(cfg, plan)
    results = results_of(cfg, plan, found)
    claims = tuple(evaluate(NAME, results.claim_inputs()))
    captions = (
        "Every arm's tuning choice, cost and budget",
        "Every tuning trial (score: mixture nMSE at the end)",
    )
    tuned = bool(results.choices)  # at set rates the tuning tables are empty
    tables = (
        Table("lag_ratio.csv", records(lag_ratio_rows(found.measures)),
              "Exposure-lag ratio per group and tau", column_docs(LagRatioRow)),
        Table("gap.csv", records(gap_rows(found.measures)), "Gaps of the score 1 − nMSE: the "
              "tail gap (rarest group at the end, pre-specified) and each group's peak "
              "(descriptive)", column_docs(GapRow)),
        *tuning_tables(trained, captions if tuned else None),
    )  # fmt: skip
    report = Report(
        "QK control task: in-context linear regression with a rare task group",
        report_summary(cfg, results, claims),
    )
    shown = figures(found, results.bayes_floor_nmse, results.labels)
    return Outputs(tables, shown, {"results.json": results.to_json()}, claims, report)


def nmse_figure(
    steps: np.ndarray, nmse: Mapping[str, np.ndarray], floor: float, labels: Mapping[str, str]
) -> PlotFigure:
    """One panel per group: nMSE against step, seed mean ± SE, one line per arm (named by
    ``labels``; Muon solid, Adam dashed, any other arm dash-dotted)."""
    plt = pyplot()
    n_groups = next(iter(nmse.values())).shape[1]
    fig, axes = plt.subplots(1, n_groups, figsize=(4.2 * n_groups, 3.8), sharey=True)
    axes = np.atleast_1d(axes)
    styles = {"muon": ("-", "tab:blue"), "adam": ("--", "tab:orange")}
    for g, ax in enumerate(axes):
        for arm, values in nmse.items():
            style, colour = styles.get(arm, ("-.", None))
            mean, se = band(values[:, g, :])
            (line,) = ax.plot(steps, mean, style, color=colour, label=labels[arm])
            ax.fill_between(steps, mean - se, mean + se, color=line.get_color(), alpha=0.25)
        ax.axhline(floor, color="grey", linestyle=":", linewidth=0.8)
        ax.set(title=f"group {g}" + (" (head)" if g == 0 else " (tail)" * (g == n_groups - 1)))
        ax.set(xlabel="step", ylim=(0.0, 1.15))
        ax.grid(True, alpha=0.3)
    axes[0].set_ylabel("normalised test MSE")
    legend_outside(axes[-1])
    fig.tight_layout()
    return fig


def _final_by_group(values: np.ndarray) -> str:
    mean, se = band(values[:, :, -1])
    return ", ".join(f"g{g} {m:.3f}±{s:.3f}" for g, (m, s) in enumerate(zip(mean, se, strict=True)))


def report_summary(cfg: Config, results: Results, claims: Sequence[ClaimResult]) -> str:
    """One paragraph: the setting, final nMSE per arm and group, the tail lag ratio, verdicts."""
    model = cfg.model.build(1, FFN, cfg.train.seq_len)
    probs = ", ".join(f"{p:.4f}" for p in results.group_probs)
    parts = [
        f"{model.n_layer} layers × d={model.d_model} ({model.n_head} heads), d = "
        f"{cfg.data.n_dims}, n = {cfg.data.n_points} examples, {cfg.data.n_groups} groups "
        f"sampled with p = ({probs}), each in its own {cfg.data.k}-dimensional input subspace; "
        f"{cfg.train.steps} steps of {cfg.train.batch_size} sequences, {cfg.seeds} seed(s). "
        f"Bayes floor of the normalised MSE {results.bayes_floor_nmse:.3f}."
    ]
    nmse = results.found.nmse
    for arm, lrs in results.best_lr.items():
        rates = ", ".join(f"{k} {v:g}" for k, v in lrs.items())
        if arm in nmse:
            final = _final_by_group(nmse[arm])
            parts.append(f"{results.labels[arm]} ({rates}): final nMSE (mean ± SE) {final}.")
    if results.seeds_left_out:
        left = ", ".join(map(str, results.seeds_left_out))
        parts.append(f"Seeds left out (a run diverged): {left}.")
    edges = [f"{r.arm} ({r.edge})" for r in results.choices if r.edge]
    if edges:
        parts.append(
            f"Chosen LR at an end of the candidates tried (may not be the optimum): "
            f"{', '.join(edges)}."
        )
    parts += [f"{c.id}: {c.verdict} — {c.ours}." for c in claims]
    if cfg.note:
        parts.append(cfg.note.strip())
    return " ".join(parts)


STUDY = Study(
    name=NAME,
    config=Config,
    run=run,
    preflight=preflight,
    reproduces="paper A (ICLR, reviewers): QK control task, in-context regression",
    presets=(
        Preset("smoke", "", 8.3),
        Preset("cpu", "2 arms × 3 seeds", 114.0),
        Preset("paper", "10k steps, LR 1e-4", None),
    ),
    on_results_page=True,
    tune_overrides=TUNE_ONLY,
)
"""This study's record (:class:`~tailmem.studies.Study`)."""
