"""Paper A1 (Table 1, Fig. 1): which blocks of a transformer need Muon?

Every arm trains the same GPT on the same batches (same seed) with Muon on a subset of the hidden
matrices and Adam on everything else — embedding, head and norms always on Adam. Arms are the
rows of the paper's Table 1 that exist for the chosen FFN (``ffn: plain | gated``), written as
role recipes, e.g. VO + FFN is ``muon:v,o,w_in,w_gate,w_out adam:*``.

Protocol (paper): one Muon learning rate for every arm, Adam betas (0.8, 0.95), no weight decay,
no Nesterov. Option ``tune_lr`` (off by default) instead tunes each arm's Adam and/or Muon
learning rate: every factor of ``tune_factors`` (and 1) scales the base rate, each candidate is
a full run on the first seed, and the lowest final validation loss wins (the other seeds reuse
that factor).

Outputs: ``table1.csv`` (our final validation loss beside the paper's, gains as a fraction of
full Muon's gain over all-Adam, and the loss on head / body / tail target tokens),
``val_curves.png`` (paper Fig. 1: independent blocks and combinations), ``bucket_gain.png``
(beyond the paper: each arm's gain over all-Adam per token-frequency bucket),
``results.json`` (curves, sample efficiency: the step at which full Muon reaches all-Adam's
final loss) and ``claims.json``.

Claims: the study collects per-seed final losses (overall and per frequency bucket) and the
chance loss (unigram cross-entropy) into :class:`tailmem.claims.a1.A1Inputs`; the rules and
their numbers live in :mod:`tailmem.claims.a1` (``tailmem claims --experiment ablation``). Every
comparison between arms is a seed mean ± SE over ≥ 3 seeds, decided only beyond the 95 %
two-sided Welch t interval; a model at chance, or too few seeds, is "inconclusive"; a claim whose
arms are not in the run is "not measured". O vs V and W_out vs W_in are stated for the plain FFN
only (the paper's own gated numbers have O behind V).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Literal

import numpy as np

from tailmem.claims.a1 import A1Inputs
from tailmem.claims.core import ClaimResult, mean_se
from tailmem.claims.registry import evaluate
from tailmem.columns import column, column_docs, records
from tailmem.errors import ConfigError
from tailmem.lm.arms import HIDDEN_MATRICES, Arm, muon_recipe, select_arms
from tailmem.lm.config import LMConfig
from tailmem.lm.corpus import CorpusData, CorpusSection, DataProvenance, LMData, corpus_preflight
from tailmem.lm.entries import Entry, Rates
from tailmem.lm.plan import Plan, run_plan, tidy
from tailmem.lm.spec import RunResult, diverged_runs, number, step_of
from tailmem.lm.subrun import RunContext, template
from tailmem.lm.sweeps import tuning_outputs
from tailmem.lm.tuning import TUNE_ONLY
from tailmem.metrics.curves import first_crossing
from tailmem.metrics.token_buckets import bucket_names
from tailmem.outputs import Figure, Outputs, Report, Table, write
from tailmem.plotting import legend_outside, pyplot
from tailmem.rundir import RunDir
from tailmem.studies import Preset, Provenance, Study
from tailmem.train import distributed as D

if TYPE_CHECKING:
    from matplotlib.figure import Figure as PlotFigure

NAME = "ablation"
"""``tailmem tune``: train the tuning trials only and write ``tuned_rates.json``."""


@dataclass(frozen=True)
class Row:
    """One row of the paper's Table 1: Muon on ``muon`` (roles), Adam on the rest.

    ``paper`` maps the FFN type to the published validation loss at step 10,000; a row exists
    for the FFN types it has a number for. ``group`` places it in a panel of Fig. 1. A row
    beyond the paper (an ``arms`` entry given as a recipe) has its own ``recipe`` and no
    published number.
    """

    id: str
    label: str
    muon: tuple[str, ...]
    paper: dict[str, float]
    group: Literal["reference", "block", "combined", "beyond"]
    recipe: str | None = None

    def roles(self, ffn: str) -> tuple[str, ...]:
        """The Muon roles that exist in a model with this FFN (no ``w_gate`` in a plain one)."""
        return tuple(r for r in self.muon if ffn == "gated" or r != "w_gate")

    def arm(self, ffn: str) -> Arm:
        recipe = self.recipe if self.recipe is not None else muon_recipe(self.roles(ffn))
        return Arm(self.id, self.label, recipe)

    @staticmethod
    def beyond(recipe: str) -> Row:
        """The row of an arm given as a recipe (beyond Table 1)."""
        arm = Arm.of_recipe(recipe)
        return Row(arm.name, arm.label, (), {}, "beyond", arm.recipe)


_FFN = ("w_in", "w_gate", "w_out")
ROWS: tuple[Row, ...] = (
    Row("full", "all attention + FFN (full Muon)", HIDDEN_MATRICES,
        {"plain": 3.5654, "gated": 3.5125}, "reference"),
    Row("adam", "nothing (all Adam)", (), {"plain": 3.9242, "gated": 3.8837}, "reference"),
    Row("qk", "QK", ("q", "k"), {"plain": 3.8925, "gated": 3.8518}, "block"),
    Row("vo", "VO", ("v", "o"), {"plain": 3.7644, "gated": 3.6874}, "block"),
    Row("v", "V", ("v",), {"plain": 3.8301, "gated": 3.7482}, "block"),
    Row("o", "O", ("o",), {"plain": 3.7712, "gated": 3.7604}, "block"),
    Row("w_in", "W_in", ("w_in",), {"plain": 3.7170, "gated": 3.7918}, "block"),
    Row("w_out", "W_out", ("w_out",), {"plain": 3.7023, "gated": 3.7843}, "block"),
    Row("w_gate", "W_gate", ("w_gate",), {"gated": 3.7847}, "block"),
    Row("vo_ffn", "VO + FFN", ("v", "o", *_FFN), {"plain": 3.5858, "gated": 3.5312}, "combined"),
    Row("vo_w_in", "VO + W_in", ("v", "o", "w_in"), {"plain": 3.6778}, "combined"),
    Row("vo_w_out", "VO + W_out", ("v", "o", "w_out"), {"plain": 3.6054}, "combined"),
    Row("vo_w_in_w_gate", "VO + W_in + W_gate", ("v", "o", "w_in", "w_gate"),
        {"gated": 3.5681}, "combined"),
    Row("vo_w_out_w_gate", "VO + W_out + W_gate", ("v", "o", "w_out", "w_gate"),
        {"gated": 3.5833}, "combined"),
    Row("vo_w_in_w_out", "VO + W_in + W_out", ("v", "o", "w_in", "w_out"),
        {"gated": 3.5482}, "combined"),
    Row("v_ffn", "V + FFN", ("v", *_FFN), {"plain": 3.6702, "gated": 3.7185}, "combined"),
    Row("o_ffn", "O + FFN", ("o", *_FFN), {"plain": 3.6042, "gated": 3.5634}, "combined"),
)  # fmt: skip
ROWS_BY_ID = {row.id: row for row in ROWS}


def short_label(row: Row) -> str:
    """``full Muon``, ``all-Adam`` or the row's label (``VO + FFN``)."""
    return {"full": "full Muon", "adam": "all-Adam"}.get(row.id, row.label)


def rows_for(ffn: str) -> list[Row]:
    """Every row of Table 1 that exists for this FFN type, in table order."""
    return [row for row in ROWS if ffn in row.paper]


@dataclass(frozen=True)
class Config(LMConfig):
    """Ablation config; see the module docstring. ``arms: null`` runs every row of the FFN type;
    an ``arms`` entry is a row id or a recipe (an arm beyond Table 1, e.g. a user's optimiser
    on the hidden matrices). Each kind's ``optim.<kind>.lr`` is one number (the paper's
    protocol: one Muon rate for every arm); ``tune_lr`` tunes them by factors."""

    ffn: Literal["plain", "gated"] = "plain"
    arms: list[str] | None = None
    tune_lr: Literal["off", "adam", "muon", "both"] = "off"
    tune_factors: list[float] = field(default_factory=lambda: [0.5, 2.0])
    data: CorpusSection = field(default_factory=CorpusSection)

    def run_arms(self) -> list[Arm]:
        return [row.arm(self.ffn) for row in self.selected()]

    def validate(self) -> None:
        super().validate()
        self.fixed_rates("the ablation holds one rate per kind across arms; tune_lr tunes it")
        if self.tune_lr != "off" and (
            not self.tune_factors or any(not f > 0 for f in self.tune_factors)
        ):
            raise ConfigError(
                f"tune_factors: got {self.tune_factors}; expected positive learning-rate factors"
            )

    def selected(self) -> list[Row]:
        """The rows run: Table 1's of this FFN type (those ``arms`` names), then the arms
        ``arms`` gives as recipes."""
        rows = {row.id: row for row in rows_for(self.ffn)}
        if self.arms is None:
            return list(rows.values())
        arms = select_arms(self.arms, {i: row.arm(self.ffn) for i, row in rows.items()})
        chosen = {arm.name for arm in arms}
        beyond = [Row.beyond(arm.recipe) for arm in arms if arm.name not in rows]
        return [row for row in rows.values() if row.id in chosen] + beyond

    def check_overrides(self, keys: Sequence[str]) -> None:
        """Besides :meth:`LMConfig.check_overrides`: ``tune_factors`` reaches nothing while
        ``tune_lr`` is off."""
        super().check_overrides(keys)
        if self.tune_lr == "off" and "tune_factors" in keys:
            raise ConfigError(
                "tune_factors: tune_lr is off, so no rate is tuned; expected tune_lr=adam, "
                "muon or both with it"
            )

    def entries(self) -> list[Entry]:
        return plan_entries(self)

    def tuning_scores(self) -> dict[str, str]:
        return dict(SCORES)

    def tuned_kinds(self, row: Row) -> tuple[str, ...]:
        """The kinds whose learning rate the sweep scales for ``row`` (adam before muon)."""
        kinds = {"adam": ("adam",), "muon": ("muon",), "both": ("adam", "muon"), "off": ()}
        return tuple(k for k in kinds[self.tune_lr] if k in row.arm(self.ffn).kinds)

    def points(self, row: Row) -> tuple[float, ...]:
        """Learning-rate factors tried for ``row`` (just 1 when nothing of it is tuned)."""
        if self.tune_lr == "off" or not self.tuned_kinds(row):
            return (1.0,)
        return (1.0, *sorted(f for f in set(self.tune_factors) if f != 1.0))


def _factor_name(factor: float) -> str:
    return f"lr_x{factor:g}"


def _final_loss(result: RunResult) -> float:
    value = result.metric("val_loss")
    return float(value) if isinstance(value, (int, float)) and math.isfinite(value) else math.inf


SCORES = {"val_loss": "minus the validation loss at the end (the paper's Table 1 metric)"}
"""The tuning score of the factor sweep (``tune_lr``)."""


def plan_entries(cfg: Config) -> list[Entry]:
    """One plan entry per selected row: with ``tune_lr``, a sweep of a factor of the base rates
    of its tuned kinds (:data:`SCORES`; the factor 1 first, so a tie keeps the base rates)."""
    base = cfg.fixed_rates("ablation")

    def entry(row: Row) -> Entry:
        tuned = cfg.tuned_kinds(row)
        kinds = row.arm(cfg.ffn).kinds
        rates = Rates(fixed={k: base[k] for k in kinds if k not in tuned}, swept=tuned,
                      base={k: base[k] for k in tuned})  # fmt: skip
        points = cfg.points(row)
        sweep = None if len(points) < 2 else cfg.tuning.sweep(points, cfg.seed, cfg.train.steps,
                                                              SCORES)  # fmt: skip
        if sweep is None:
            rates = Rates(fixed={k: base[k] for k in kinds})
        return Entry(cfg.ffn, row.arm(cfg.ffn), rates, sweep)

    return [entry(row) for row in cfg.selected()]


def _score(result: RunResult) -> float | None:
    """Lowest final validation loss wins."""
    loss = _final_loss(result)
    return -loss if math.isfinite(loss) else None


def preflight(cfg: Config) -> None:
    """The corpus, model and batch checks before anything is written (:func:`corpus_preflight`)."""
    corpus_preflight(cfg)


def run(cfg: Config, run: RunDir, provenance: Provenance) -> None:
    """Train every selected arm (reusing finished ones), then write table, figures and claims."""
    ctx, _ = D.init_distributed(cfg.train.device)
    spec = CorpusData(cfg.data, cfg.train.seq_len, cfg.train.eval_batch_size)
    data = spec.load(ctx)
    context = RunContext(
        str(run.path), spec, show_progress=cfg.workers == 1, threads=cfg.train.threads
    )
    runs = template(data, cfg.model, cfg.train, cfg.optim, [cfg.ffn], initial_eval=True)
    seeds = () if cfg.tuning.only else tuple(cfg.seed_list)
    plan = Plan(tuple(cfg.entries()), seeds, cfg.train.steps, runs, _score, cfg.stored_rates())
    trained = run_plan(plan, context, cfg.workers, _summary)
    tidy(trained, context.root, cfg.train.keep_checkpoints)
    if cfg.tuning.only:
        if ctx.is_main:
            write(run, tuning_outputs(trained, cfg.tuning_record(), NAME, provenance))
        D.barrier(ctx)
        return
    results = {row.id: trained.seed_results((cfg.ffn, row.id)) for row in cfg.selected()}
    chosen = {entry_id: choice.point for entry_id, choice in trained.choices.items()}
    chosen |= {entry_id: stored.point for entry_id, stored in trained.stored.items()}
    factors = {
        row.id: {k: chosen.get((cfg.ffn, row.id), 1.0) for k in cfg.tuned_kinds(row)}
        for row in cfg.selected()
    }
    tuning = {
        arm_id: {_factor_name(p): -m if m is not None else math.inf
                 for p, m in zip(choice.points, choice.means, strict=True)}
        for (_, arm_id), choice in trained.choices.items()
    }  # fmt: skip
    if ctx.is_main:
        write(run, outputs(cfg, data, results, factors, tuning))
    D.barrier(ctx)


def _summary(result: RunResult) -> str:
    return f"val_loss {_final_loss(result):.4f}"


# ----------------------------------------------------------------------------------------------
# summarising


def _mean(values: Sequence[float]) -> float:
    """Mean, or NaN if there is nothing to average or a run diverged."""
    return statistics.fmean(values) if values and all(map(math.isfinite, values)) else math.nan


def _se(values: Sequence[float]) -> float | None:
    """Standard error of the mean over seeds (None for one seed or a diverged run)."""
    if len(values) < 2 or not all(map(math.isfinite, values)):
        return None
    return mean_se(values).se


def _final(results: Sequence[RunResult], key: str = "val_loss") -> list[float]:
    out = []
    for r in results:
        value = r.metric(key)
        out.append(float(value) if isinstance(value, (int, float)) else math.nan)
    return out


BUCKETS = {
    "head": "the most frequent bucket",
    "body": "the middle bucket",
    "tail": "the rarest bucket",
}
"""The frequency buckets :func:`~tailmem.metrics.token_buckets.bucket_names` names in words."""


@dataclass(frozen=True)
class Table1Row:
    """One arm of ``table1.csv``: the paper's final loss beside ours. ``bucket_losses`` spreads
    over one ``ours_loss_<bucket>`` column per frequency bucket (its note names the bucket at
    ``{bucket}``: :func:`table1_columns`); ``ours_se`` is a column only over more than one
    seed (an SE needs two): it maps ``""`` to the SE, or is empty."""

    arm: str = column("arm id (tailmem run ablation arms=[...])")
    muon_on: str = column("matrices on Muon; all others (embedding, head, norms included) on Adam")
    recipe: str = column("the optimiser routing of the arm")
    paper_val_loss: float | None = column(
        "published final validation loss (160M model, FineWeb, 10k steps)"
    )
    ours_val_loss: float = column("our final validation loss, mean over seeds (nats)")
    ours_se: Mapping[str, float | None] = column(
        "standard error of that mean over seeds", each="ours_se{}"
    )
    paper_gain_frac: float | None = column(
        "published (L(all-Adam) − L(arm)) / (L(all-Adam) − L(full Muon))"
    )
    ours_gain_frac: float | None = column("the same fraction from our seed means")
    bucket_losses: Mapping[str, float | None] = column(
        "our loss on target tokens of {bucket}", each="ours_loss_{}"
    )
    lr_factor: str = column("learning-rate factor chosen by tune_lr (1: the preset's rates)")
    status: str = column("status of the arm's seed runs")


def table1_columns(rows: Sequence[Table1Row]) -> dict[str, str]:
    """``table1.csv``'s columns, in order, with their notes (:func:`~tailmem.columns.column_docs`),
    each bucket's naming the bucket in words."""
    out = column_docs(Table1Row, rows)
    for bucket in rows[0].bucket_losses if rows else ():
        name = f"ours_loss_{bucket}"
        out[name] = out[name].format(bucket=BUCKETS.get(bucket, f"bucket {bucket}"))
    return out


def summarise(
    cfg: Config,
    results: dict[str, list[RunResult]],
    n_buckets: int,
    factors: Mapping[str, Mapping[str, float]] | None = None,
) -> list[Table1Row]:
    """One table row per arm: paper vs our final loss, gain fractions, per-bucket losses."""
    names = bucket_names(n_buckets)
    ours = {arm_id: _mean(_final(rs)) for arm_id, rs in results.items()}
    paper_adam = ROWS_BY_ID["adam"].paper[cfg.ffn]
    paper_full = ROWS_BY_ID["full"].paper[cfg.ffn]
    rows = []
    for arm in cfg.selected():
        rs = results[arm.id]
        losses = _final(rs)
        paper = arm.paper.get(cfg.ffn)
        factor = (factors or {}).get(arm.id, {})
        rows.append(
            Table1Row(
                arm=arm.id,
                muon_on=arm.label,
                recipe=arm.arm(cfg.ffn).recipe,
                paper_val_loss=paper,
                ours_val_loss=round(ours[arm.id], 4),
                ours_se={"": _round(_se(losses), 4)} if cfg.seeds > 1 else {},
                paper_gain_frac=None
                if paper is None
                else round((paper_adam - paper) / (paper_adam - paper_full), 3),
                ours_gain_frac=_round(gain_fraction(ours, arm.id), 3),
                bucket_losses={
                    name: _round(_mean(_final(rs, f"val_loss_{name}")), 4) for name in names
                },
                lr_factor=",".join(f"{k}x{v:g}" for k, v in factor.items()) or "1",
                status=",".join(sorted({r.status for r in rs})),
            )
        )
    return rows


def _round(value: float | None, digits: int) -> float | None:
    return None if value is None or not math.isfinite(value) else round(value, digits)


def gain_fraction(losses: dict[str, float], arm_id: str) -> float | None:
    """(L(all-Adam) − L(arm)) / (L(all-Adam) − L(full)); None without both references."""
    if "adam" not in losses or "full" not in losses or arm_id not in losses:
        return None
    full_gain = losses["adam"] - losses["full"]
    if not math.isfinite(full_gain) or full_gain == 0:
        return None
    return (losses["adam"] - losses[arm_id]) / full_gain


@dataclass(frozen=True)
class SampleEfficiency:
    """Full Muon's sample efficiency (:func:`sample_efficiency`): whether it was ``measured``
    (both arms run), all-Adam's final validation loss (seed mean) and last step, the step at
    which full Muon's seed-mean curve first reaches that loss (None: never) and all-Adam's
    steps ÷ that step."""

    measured: bool
    adam_final_val_loss: float | None = None
    adam_steps: int | None = None
    full_muon_reaches_at_step: float | None = None
    step_ratio: float | None = None

    def to_json(self) -> dict[str, object]:
        """Its ``results.json`` record: ``{"measured": false}`` alone when not measured."""
        return asdict(self) if self.measured else {"measured": False}


def sample_efficiency(results: dict[str, list[RunResult]]) -> SampleEfficiency:
    """Step at which full Muon's (seed-mean) curve reaches all-Adam's final validation loss."""
    if "full" not in results or "adam" not in results:
        return SampleEfficiency(measured=False)
    target = _mean(_final(results["adam"]))
    steps, values = _mean_curve(results["full"])
    total = max(steps) if steps else 0
    reached = first_crossing(steps, values, target) if math.isfinite(target) else None
    return SampleEfficiency(
        measured=True,
        adam_final_val_loss=target,
        adam_steps=total,
        full_muon_reaches_at_step=reached,
        step_ratio=(total / reached) if reached else None,
    )


def _columns(results: Sequence[RunResult], key: str) -> tuple[list[int], list[list[float]]]:
    """The evaluation steps of the first seed and, per step, every seed's ``key`` (NaN where a
    seed stopped before it)."""
    steps = [step_of(e) for e in results[0].evals]
    columns = [
        [number(r.evals[i], key) if i < len(r.evals) else math.nan for r in results]
        for i in range(len(steps))
    ]
    return steps, columns


def _mean_curve(
    results: Sequence[RunResult], key: str = "val_loss"
) -> tuple[list[int], list[float]]:
    steps, columns = _columns(results, key)
    return steps, [_mean(column) for column in columns]


def chance_loss(data: LMData) -> float:
    """Validation loss (nats) of a model that learned only unigram frequencies: the cross-entropy
    of the validation targets under the training unigram distribution (add-one smoothed, so a
    token unseen in training still has a finite loss)."""
    counts = np.asarray(data.corpus.unigram_counts, dtype=np.float64) + 1.0
    log_p = np.log(counts / counts.sum())
    targets = np.concatenate([y.reshape(-1).numpy() for _, y in data.val])
    return float(-log_p[targets].mean())


def claim_inputs(
    cfg: Config, results: dict[str, list[RunResult]], n_buckets: int, chance: float | None
) -> A1Inputs:
    """The inputs of the A1 checks (:class:`~tailmem.claims.a1.A1Inputs`): per-seed final
    losses (overall and per frequency bucket) of every arm, over the seeds at which every arm
    finished with finite losses (a diverged seed drops out of every arm, so per-seed lists stay
    aligned)."""
    names = bucket_names(n_buckets)
    keys = ["val_loss", *(f"val_loss_{name}" for name in names)]

    def finished(r: RunResult) -> bool:
        return r.ok and all(math.isfinite(number(r.final, k)) for k in keys)

    by_seed = {arm: {r.seed: r.final for r in rs if finished(r)} for arm, rs in results.items()}
    seeds = [s for s in cfg.seed_list if all(s in runs for runs in by_seed.values())]
    return A1Inputs(
        ffn=cfg.ffn,
        seeds=seeds,
        losses={arm: [number(runs[s], "val_loss") for s in seeds] for arm, runs in by_seed.items()},
        buckets=names,
        bucket_losses={
            arm: {n: [number(runs[s], f"val_loss_{n}") for s in seeds] for n in names}
            for arm, runs in by_seed.items()
        },
        chance_loss=chance,
        diverged=diverged_runs([r for rs in results.values() for r in rs]),
        model=cfg.model.scale(),
    )


def claims(
    cfg: Config,
    results: dict[str, list[RunResult]],
    n_buckets: int,
    chance: float | None = None,
) -> list[ClaimResult]:
    """Every claim the ablation measures, checked by :mod:`tailmem.claims.a1`."""
    return evaluate(NAME, claim_inputs(cfg, results, n_buckets, chance))


# ----------------------------------------------------------------------------------------------
# outputs


def outputs(
    cfg: Config,
    data: LMData,
    results: dict[str, list[RunResult]],
    factors: Mapping[str, Mapping[str, float]],
    tuning: dict[str, dict[str, float]],
) -> Outputs:
    """Table 1, the figures, ``results.json``, the claims and the report of the finished arms
    (``factors``: each arm's chosen learning-rate factors; ``tuning``: every factor's loss)."""
    table_rows = summarise(cfg, results, data.n_buckets, factors)
    rows = records(table_rows)
    columns = table1_columns(table_rows)
    efficiency = sample_efficiency(results)
    chance = chance_loss(data)
    provenance = data.provenance()
    record = {
        "ffn": cfg.ffn,
        "seeds": cfg.seed_list,
        "data": provenance.to_json(),
        "chance_loss": chance,
        "table": rows,
        "sample_efficiency": efficiency.to_json(),
        "bucket_shares": dict(zip(bucket_names(data.n_buckets), data.bucket_shares(), strict=True)),
        "lr_tuning": tuning,
        "curves": {
            arm_id: dict(zip(("steps", "val_loss"), _mean_curve(rs), strict=True))
            for arm_id, rs in results.items()
        },
        "runs": {arm_id: [r.key for r in rs] for arm_id, rs in results.items()},
        "diverged": [
            d.to_json() for d in diverged_runs([r for rs in results.values() for r in rs])
        ],
    }
    table = Table(
        "table1.csv",
        rows,
        "Final validation loss per arm, ours beside the paper's (different data: the paper's are "
        "FineWeb losses of a 160M model). " + provenance_text(provenance),
        columns,
    )
    return Outputs(
        (table,),
        _figures(cfg, results, data.n_buckets),
        {"results.json": record},
        tuple(claims(cfg, results, data.n_buckets, chance)),
        _report(cfg, efficiency, provenance),
    )


def provenance_text(provenance: DataProvenance) -> str:
    """One sentence naming the data behind our losses."""
    return (
        f"Our losses: {provenance.corpus}, {provenance.train_tokens:,} training and "
        f"{provenance.val_tokens:,} validation tokens, tokenizer: {provenance.tokenizer}."
    )


def _report(cfg: Config, efficiency: SampleEfficiency, provenance: DataProvenance) -> Report:
    """The report's title and summary: the set-up, the data and full Muon's sample efficiency."""
    rates = ", ".join(
        f"{section.kind.label} lr {section.grid[0]:g}" for section in cfg.optim.values()
    )
    summary = (
        f"Muon on subsets of the hidden matrices, Adam on the rest ({cfg.ffn} FFN, "
        f"{cfg.model.size} model, {cfg.train.steps} steps, {cfg.seeds} seed(s), {rates}, "
        f"LR tuning {cfg.tune_lr}). "
        "The paper's numbers are for a 160M model after 10,000 steps on FineWeb (GPT-2 "
        f"tokenizer). {provenance_text(provenance)}"
    )
    reached = efficiency.full_muon_reaches_at_step
    if reached and efficiency.step_ratio is not None:
        summary += (
            f" Sample efficiency: full Muon reaches all-Adam's final validation loss "
            f"({efficiency.adam_final_val_loss:.4f}) at step "
            f"{reached:.0f} of {efficiency.adam_steps} "
            f"({efficiency.step_ratio:.2f}x fewer steps)."
        )
    elif efficiency.measured:
        summary += " Full Muon never reached all-Adam's final validation loss."
    return Report(f"A1 component ablation ({cfg.ffn} FFN)", summary, data=provenance.to_json())


def _figures(
    cfg: Config, results: dict[str, list[RunResult]], n_buckets: int
) -> tuple[Figure, ...]:
    """The validation curves (paper Fig. 1) and, with an all-Adam arm, the gain per bucket."""
    curves = Figure(
        "val_curves", _val_curves(cfg, results), "Validation loss per arm (paper Fig. 1 panels)"
    )
    if "adam" not in results:
        return (curves,)
    gain = Figure(
        "bucket_gain",
        _bucket_gain(cfg, results, n_buckets),
        "Beyond the paper: gain over all-Adam on head / body / tail tokens (bars: ± SE over "
        "seeds, the two arms' in quadrature)",
    )
    return (curves, gain)


def _val_curves(cfg: Config, results: dict[str, list[RunResult]]) -> PlotFigure:
    """Validation loss over training per arm: independent blocks, then combinations."""
    plt = pyplot()
    panels = [
        ("independent blocks", ("reference", "block")),
        ("combinations", ("reference", "combined", "beyond")),
    ]
    fig, axes = plt.subplots(2, 1, figsize=(8, 8), sharex=True, layout="constrained")
    for ax, (title, groups) in zip(axes, panels, strict=True):
        for arm in cfg.selected():
            if arm.group not in groups:
                continue
            steps, columns = _columns(results[arm.id], "val_loss")
            kept = [(s, _mean(c), _se(c)) for s, c in zip(steps, columns, strict=True) if s > 0]
            if not kept:
                continue
            style = "--" if arm.group == "reference" else "-"
            x, mean = [k[0] for k in kept], np.array([k[1] for k in kept])
            (line,) = ax.plot(x, mean, style, marker=".", label=short_label(arm))
            se = np.array([math.nan if k[2] is None else k[2] for k in kept])
            if np.isfinite(se).any():  # a band where two or more seeds give a spread
                ax.fill_between(x, mean - se, mean + se, color=line.get_color(), alpha=0.15)
        ax.set_title(f"Muon on {title}, Adam on the rest")
        ax.set_ylabel("validation loss")
        ax.grid(alpha=0.3)
    axes[1].set_xlabel("step")
    for ax in axes:
        if ax.get_legend_handles_labels()[0]:
            legend_outside(ax)
    spread = ", band: ± SE" if cfg.seeds > 1 else ""
    fig.suptitle(f"Validation loss ({cfg.ffn} FFN, mean over {cfg.seeds} seed(s){spread})")
    return fig


def _gain_se(base: Sequence[float], arm: Sequence[float]) -> float:
    """Standard error of mean(base) − mean(arm) over their seeds (the two SEs in quadrature;
    NaN with fewer than two seeds in either, so no bar is drawn)."""
    parts = (_se(base), _se(arm))
    return math.nan if None in parts else math.hypot(*(p or 0.0 for p in parts))


def _bucket_gain(cfg: Config, results: dict[str, list[RunResult]], n_buckets: int) -> PlotFigure:
    """Each arm's final-loss gain over all-Adam per target-token frequency bucket, with its
    standard error over the seeds (where there are two or more)."""
    plt = pyplot()
    names = bucket_names(n_buckets)
    arms = [a for a in cfg.selected() if a.id != "adam"]
    fig, ax = plt.subplots(figsize=(8, 4))
    width = 0.8 / n_buckets
    for j, name in enumerate(names):
        key = f"val_loss_{name}"
        base = _final(results["adam"], key)
        gains = [_mean(base) - _mean(_final(results[a.id], key)) for a in arms]
        errors = [_gain_se(base, _final(results[a.id], key)) for a in arms]
        ax.bar([i + j * width for i in range(len(arms))], gains, width, label=name,
               yerr=errors, capsize=2, error_kw={"elinewidth": 0.8})  # fmt: skip
    ax.set_xticks([i + width * (n_buckets - 1) / 2 for i in range(len(arms))])
    ax.set_xticklabels([short_label(a) for a in arms], rotation=45, ha="right")
    ax.axhline(0, color="black", lw=0.5)
    ax.set_ylabel("L(all-Adam) − L(arm), nats")
    seeds = f"mean ± SE over {cfg.seeds} seeds" if cfg.seeds > 1 else "one seed"
    ax.set_title(f"Gain over all-Adam by target-token frequency bucket ({seeds})")
    legend_outside(ax, title="target bucket")
    return fig


STUDY = Study(
    name=NAME,
    config=Config,
    run=run,
    preflight=preflight,
    reproduces="paper A Sec. 4.1 (Table 1, Fig. 1): which blocks need Muon",
    presets=(
        Preset("smoke", "", 11.9),
        Preset("cpu", "8 arms × 3 seeds", 720.0),
        Preset("paper", "160M GPT", None),
    ),
    on_results_page=True,
    tune_overrides=TUNE_ONLY,
)
"""This study's record (:class:`~tailmem.studies.Study`)."""
