"""Heavy-tailed knowledge QA: which optimiser learns the rare facts (paper A, Sec. 4.3; A3).

A GPT is trained on question–answer pairs about synthetic people whose frequencies follow the
paper's power law (:mod:`tailmem.data.bios`: group ``g`` has ``2**(g-1)`` people, each asked
``2**(m-g)`` times per epoch about each of six attributes). First-token accuracy (FTA) per
frequency group (:mod:`.fta`) is measured during training for the five arms of :mod:`.arms` —
Muon, Adam, SGD+momentum and the two hybrids — for a plain and/or gated FFN.

Protocol (run by :mod:`tailmem.lm.plan` on the shared worker pool; :mod:`tailmem.lm.tuning`)
    1. Tuning per arm: every candidate of the grid of the kind the arm tunes (``optim.<kind>.lr``
       given as a list; one number: nothing to tune) trains on ``tuning.seeds`` tuning seeds,
       apart from the evaluation seeds, and is ranked by the mean of the declared score
       (``tuning.score``; default ``answer_loss``: the answer-token loss weighted as training
       weighs each group — the training objective, in which the rarest group carries about
       1/(m+1) — not the tail FTA the claims measure; ``fta_all``, FTA over all questions, gives
       the rarest group half the weight). A winner at an end widens the grid by one point beyond
       it, up to ``tuning.max_extend`` times: the same budget for every arm. Hybrids borrow the
       tuned LRs of the base arms for their other optimiser (:mod:`tailmem.lm.rates`), so Muon
       and ``adam_split`` each tune one rate over the same Adam-trained rest.
       ``tuning.rates: stored`` evaluates at the rates stored for exactly this config
       (:mod:`tailmem.lm.store`; ``tailmem tune`` re-tunes) and trains no trial.
    2. ``seeds`` evaluation runs per arm at its chosen learning rate; seeds change the
       initialisation and the data order, not the people.
    Every run has its own resumable sub-run directory (:mod:`tailmem.lm.subrun`): re-running
    after an interruption reuses finished runs and resumes unfinished ones from their
    checkpoints. ``train.keep_checkpoints`` (``first_seed`` in the presets) keeps the final
    checkpoint of each arm's first-seed run, for ``tailmem diagnose``.

Every run is evaluated at step 0 (the initialised model) and every ``train.eval_every`` steps,
so a crossing of an FTA level early in training is bracketed by two evaluations. Each
evaluation scores first-token accuracy (FTA, the paper's metric) and whole-answer exact match
(EM, greedy decoding of the whole answer) per group (:mod:`.fta`).

Outputs (in the run directory), the gap measures first (:mod:`.gaps`)
    ``fta_vs_exposures_<ffn>`` (Muon vs Adam, FTA against exposures per fact, seed bands) and
    ``lag_ratio_<ffn>`` (exposure-lag ratio against tau, the paper's beside) figures;
    ``lag_ratio_summary_<ffn>.csv`` (that pair per group and tau, ours and the paper's),
    ``lag_ratio_<ffn>.csv`` (every pair), ``peak_gap_<ffn>.csv``;
    ``fta_by_group_<ffn>.png/.svg`` (paper Fig. 3: FTA per group over steps, one panel per arm),
    ``fta_final_<ffn>`` (final FTA and EM by group), ``lr_sweep_<ffn>`` figures;
    ``tail_table_<ffn>.csv`` (paper Tables 3–8: the tail groups at 20/50/100% of training, mean
    and SE over seeds in numeric columns, published values and EM beside); ``tail_table_long.csv``,
    ``head_tail_gap.csv``, ``lr_sweep.csv`` (every trial), ``tuning.csv`` (every arm's choice,
    cost and budget), ``tuned_rates.json`` (the choices made in this run, for the rate store),
    ``results.json`` (with ``gap_measures``, ``final_by_group`` and every seed run),
    ``claims.json`` and ``report.json``. With ``tuning.only`` (``tailmem tune``) the run trains
    the trials alone and writes the tuning tables and ``tuned_rates.json``.

``note`` (free text, e.g. what the preset's scale was chosen to show) ends the report summary.

Unpublished choices (documented here and in the presets): batch size, sequence length, schedule
(warmup, then constant, then a linear decay to 0 over the last ``train.decay_frac``), no gradient
clipping, SGD momentum 0.9, the learning-rate grids, the tuning score and the seed count.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from tailmem.data.bios import N_ATTRIBUTES, BiosConfig, build_dataset
from tailmem.data.stream import QATrainStream
from tailmem.data.templates import QA_TEMPLATES
from tailmem.errors import ConfigError
from tailmem.experiments import TUNE_OVERRIDES_OF_LM_STUDIES
from tailmem.experiments.knowledge_qa import answers, gaps, plots, tables
from tailmem.experiments.knowledge_qa.arms import ARMS
from tailmem.experiments.knowledge_qa.fta import QAData, answer_loss_sum, chance_fta, describe_fta
from tailmem.lm import sweeps
from tailmem.lm.arms import Arm, select_arms
from tailmem.lm.config import LMConfig
from tailmem.lm.plan import Entry, Plan, TrainedPlan, run_plan, tidy
from tailmem.lm.preflight import check_lm
from tailmem.lm.rates import rate_entries
from tailmem.lm.spec import RunResult, diverged_runs
from tailmem.lm.subrun import RunContext, template
from tailmem.lm.sweeps import choice_rows, trial_rows
from tailmem.optim.registry import AdamHParams, MuonHParams
from tailmem.outputs import Figure, Outputs, Report, Table, write
from tailmem.report.qa_gap_figures import fta_vs_exposures_figure, lag_ratio_figure
from tailmem.resources import check_writable_folder
from tailmem.rundir import RunDir
from tailmem.train import distributed as D

NAME = "knowledge-qa"
TUNE_OVERRIDES = TUNE_OVERRIDES_OF_LM_STUDIES
"""``tailmem tune``: train the tuning trials only and write ``tuned_rates.json``."""
FFNS = ("plain", "gated")


SCORES = {
    "answer_loss": "minus the answer-token cross-entropy on every evaluation question, each "
    "group weighted as training weighs it (loss_train at the last evaluation): the training "
    "objective, in which the rarest group carries about 1/(m+1)",
    "fta_all": "FTA over all questions at the last evaluation (about half of them are the "
    "rarest group's: it tunes on the tail the claims measure)",
}
"""The tuning scores a knowledge-QA sweep may be ranked by (``tuning.score``; the first is the
default)."""


def score_of(name: str) -> Callable[[RunResult], float | None]:
    """The score :data:`SCORES` names, of a finished run's last evaluation (higher is better;
    None when the run has no finite value)."""
    key, sign = {"answer_loss": ("loss_train", -1.0), "fta_all": ("fta_all", 1.0)}[name]

    def score(result: RunResult) -> float | None:
        value = result.evals[-1].get(key) if result.evals else None
        if not isinstance(value, (int, float)) or not math.isfinite(value):
            return None
        return sign * float(value)

    return score


@dataclass
class Config(LMConfig):
    """The knowledge-QA experiment (see the module docstring).

    ``arms``: names from :data:`.arms.ARMS`, or recipes (:func:`~tailmem.lm.arms.select_arms`).
    ``ffn``: ``plain``, ``gated`` or ``both``. Training
    batches pack QA samples into ``train.batch_size`` rows of ``train.seq_len`` tokens
    (:class:`~tailmem.data.stream.QATrainStream`), with the loss on ``loss_on``. ``packing``:
    ``cross`` lets an item attend to the earlier items of its row at their row positions;
    ``document`` makes each item attend only to itself with positions from 0, so training sees
    a question in the context evaluation asks it in (alone). FTA is evaluated
    every ``train.eval_every`` steps; the evaluations nearest to ``table_fracs`` of training and
    the groups ``m - o`` for ``o`` in ``tail_offsets`` make the tail tables; the
    ``head_groups`` most frequent groups are the "head". ``eval_sample``: questions asked per
    group at every evaluation (null: all; a number: that many, the same ones each time, with
    ``fta_all`` weighted by group size, :mod:`.fta`), for a model that asking all
    2**m · 6 questions would slow down more than training it; it is part of every run's data
    identity. ``cache_dir``: where the data set is built (default: the run directory's
    ``data/``). ``tuning``: how the grids are tuned (module docstring).
    """

    seeds: int = 3
    arms: list[str] = field(default_factory=lambda: list(ARMS))
    ffn: Literal["plain", "gated", "both"] = "plain"
    data: BiosConfig = field(default_factory=lambda: BiosConfig(m=8))
    loss_on: Literal["answer", "all"] = "answer"
    packing: Literal["cross", "document"] = "cross"
    table_fracs: list[float] = field(default_factory=lambda: [0.2, 0.5, 1.0])
    tail_offsets: list[int] = field(default_factory=lambda: [2, 1, 0])
    head_groups: int = 3
    eval_sample: int | None = None
    cache_dir: str | None = None
    note: str = ""

    @property
    def ffns(self) -> list[str]:
        return list(FFNS) if self.ffn == "both" else [self.ffn]

    def run_arms(self) -> list[Arm]:
        return select_arms(self.arms, ARMS)

    def tuning_scores(self) -> dict[str, str]:
        return dict(SCORES)

    def tuning_record(self) -> dict[str, Any]:
        """:meth:`LMConfig.tuning_record` without the output fields (tables and heads)."""
        record = super().tuning_record()
        for name in ("table_fracs", "tail_offsets", "head_groups", "ffn"):
            record.pop(name, None)
        return record

    def validate(self) -> None:
        """One-line :class:`ConfigError` for the first invalid field."""
        super().validate()
        self.entries()  # every borrowed rate has an arm to borrow from
        if not 1 <= self.head_groups <= self.data.m:
            raise ConfigError(
                f"head_groups: got {self.head_groups}; expected 1..m = 1..{self.data.m}"
            )
        if any(not 0 <= o <= self.data.m for o in self.tail_offsets) or not self.tail_offsets:
            raise ConfigError(
                f"tail_offsets: got {self.tail_offsets}; expected distances 0..m from the rarest "
                "group"
            )
        if not self.table_fracs or any(not 0 < f <= 1 for f in self.table_fracs):
            raise ConfigError(
                f"table_fracs: got {self.table_fracs}; expected fractions of training in (0, 1]"
            )
        if self.eval_sample is not None and self.eval_sample < 1:
            raise ConfigError(
                f"eval_sample: got {self.eval_sample}; expected null (every question) or a "
                "number of questions per group >= 1"
            )
        if self.train.seq_len > 4096:
            raise ConfigError(f"train.seq_len: got {self.train.seq_len}; expected at most 4096")
        if self.tuning.steps is not None:
            try:
                self.train.loop_config(self.tuning.steps, seed=0).validate()
            except ConfigError as exc:
                raise ConfigError(f"tuning.steps: {exc}") from None

    def entries(self) -> list[Entry]:
        """One plan entry per FFN type and arm (:func:`~tailmem.lm.rates.rate_entries`)."""
        return rate_entries(self.ffns, self.run_arms(), self.optim, self.tuning, self.seed,
                            self.train.steps, SCORES)  # fmt: skip

    def check_overrides(self, keys: Sequence[str]) -> None:
        """Besides :meth:`LMConfig.check_overrides`: ``tuning.*`` reaches nothing when no rate
        the arms use is a grid."""
        super().check_overrides(keys)
        tuned = any(self.optim[k].tuned for arm in self.run_arms() for k in arm.kinds)
        for key in keys:
            if key.startswith("tuning.") and not tuned:
                raise ConfigError(
                    f"{key}: no learning rate of this run is tuned (every optim.<kind>.lr the "
                    "arms use is one number); expected a list of rates to tune"
                )


def preflight(cfg: Config) -> None:
    """Refuse, before anything is written, a cache folder this process cannot write, a given
    tokenizer that does not load, a model, batch or data set this machine cannot hold
    (:func:`tailmem.lm.preflight.check_lm`) and a ``train.seq_len`` whose rows cannot hold a QA
    item.

    The shortest a training item can be: one token per word of its question template (the
    byte-level pre-tokenizer never merges across words), two for the name (first name and
    surname), one for the answer and the end-of-text token. A custom ``tokenizer_path`` may
    merge across words, so then an item counts one token and only the build checks the length.
    The data set surely holds, per training item, an int64 offset and its tokens (2 bytes
    each at least)."""
    if cfg.cache_dir is not None:
        check_writable_folder(cfg.cache_dir, "cache_dir", "null: the run folder's data/")
    cfg.data.check_tokenizer()
    words = max(
        len(re.findall(r"\w+", template.replace("{name}", "")))
        for templates in QA_TEMPLATES.values()
        for template in templates[: cfg.data.templates_per_attribute]
    )
    shortest = 1 if cfg.data.tokenizer_path is not None else words + 2 + 1 + 1
    items = cfg.data.train_items
    what = f"a data set of {items} training items (data.m {cfg.data.m}, data.n_qa {cfg.data.n_qa})"
    check_lm(cfg, cfg.ffns, items * (8 + 2 * shortest), extra=what)
    cfg.stored_rates()  # tuning.rates: stored with a rate missing is refused here
    if cfg.train.seq_len + 1 < shortest:
        raise ConfigError(
            f"train.seq_len: got {cfg.train.seq_len}; expected at least {shortest - 1} (a row of "
            f"seq_len + 1 tokens holds whole QA items, and an item here has at least {shortest} "
            "tokens)"
        )


def summary(result: RunResult) -> str:
    """A finished run's printed summary: FTA over all questions and of the rarest group."""
    if not result.evals:
        return "no evaluation"
    return (
        f"FTA all questions {tables.fta_all(result):.3f}, rarest group "
        f"{tables.rarest(result):.3f}, answer loss {result.evals[-1].get('loss_train', 0):.3f}"
    )


@dataclass(frozen=True)
class Prepared:
    """A study ready to train: how its runs train, its plan, the exposures per group and step
    (:class:`.gaps.Exposures`), chance FTA and the data set's summary."""

    context: RunContext
    plan: Plan
    exposures: gaps.Exposures
    chance: float
    data_summary: dict[str, Any]


def prepare(cfg: Config, root: Path) -> Prepared:
    """Build (or load) the data set of ``cfg`` and declare its plan, its runs under ``root``
    (the data under ``cfg.cache_dir``, default ``root/data``)."""
    cache = Path(cfg.cache_dir) if cfg.cache_dir else root / "data"
    dataset = build_dataset(cfg.data, cache)
    stream = QATrainStream(dataset, cfg.train.batch_size, cfg.train.seq_len, cfg.seed, cfg.loss_on)
    exposures = gaps.Exposures(
        tuple(int(s) for s in dataset.selections_per_group()),
        cfg.data.n_qa // N_ATTRIBUTES,
        stream.steps_per_epoch,
    )
    data = QAData(
        str(dataset.path), dataset.fingerprint, cfg.loss_on, cfg.train.eval_batch_size,
        cfg.packing, cfg.eval_sample,
    )  # fmt: skip
    context = RunContext(
        str(root), data, loss_fn=answer_loss_sum, describe=describe_fta,
        show_progress=cfg.workers == 1, threads=cfg.train.threads,
    )  # fmt: skip
    runs = template(data.load(D.DistContext()), cfg.model, cfg.train, cfg.optim, cfg.ffns, True)
    seeds = () if cfg.tuning.only else tuple(cfg.seed_list)
    score = score_of(cfg.tuning.score_name(SCORES))
    plan = Plan(tuple(cfg.entries()), seeds, cfg.train.steps, runs, score, cfg.stored_rates())
    return Prepared(context, plan, exposures, chance_fta(dataset), dataset.summary())


def run(cfg: Config, run: RunDir) -> None:
    """Tune, train every seed, then write tables, figures, claims and ``report.json`` (with
    ``tuning.only``: tune, then write the tuning tables alone)."""
    study = prepare(cfg, run.path)
    trained = run_plan(study.plan, study.context, cfg.workers, summary)
    tidy(trained, study.context.root, cfg.train.keep_checkpoints)
    if not D.is_main_process():
        return
    if cfg.tuning.only:
        write(run, tuning_outputs(cfg, run, trained))
        return
    store = sweeps.store_record(trained, cfg.tuning_record(), NAME, sweeps.run_preset(run))
    found = outputs(cfg, trained, study.chance, study.data_summary, study.exposures)
    write(run, found + Outputs(records=store))


def tuning_outputs(cfg: Config, run: RunDir, trained: TrainedPlan) -> Outputs:
    """The tuning tables and ``tuned_rates.json`` (:func:`tailmem.lm.sweeps.tuning_outputs`)."""
    return sweeps.tuning_outputs(run, trained, cfg.tuning_record(), NAME)


def outputs(
    cfg: Config,
    trained: TrainedPlan,
    chance: float,
    data_summary: dict[str, Any],
    exposures: gaps.Exposures,
) -> Outputs:
    """Tables, figures, results, claims and the report of a finished plan (its tables read the
    runs that did not diverge; ``results.json`` lists those that did). The gap measures lead
    the report, then each FFN type's tail table and figures, then the head–tail gap and the
    tuning."""
    diverged = diverged_runs(list(trained.results.values()))
    plan = trained.completed()
    score = cfg.tuning.score_name(SCORES)
    sweep_rows = [r.record(plan.kinds) for r in trial_rows(plan)]
    choices = [r.record() for r in choice_rows(plan)]
    captions = (
        f"Tuning: every arm's choice, cost and budget (score {score}: {SCORES[score]})",
        "Every tuning trial",
    )
    tuning = sweeps.tuning_tables(plan, captions if choices else None)  # none tuned: not shown
    measured = {ffn: gap_outputs(cfg, plan, ffn, exposures) for ffn in plan.ffns}
    measures = {ffn: found for ffn, (found, _) in measured.items()}
    fracs, offsets, m = cfg.table_fracs, cfg.tail_offsets, cfg.data.m
    long_rows = [
        row for f in plan.ffns for row in tables.tail_table_long(plan, f, fracs, offsets, m)
    ]
    gaps_rows = [row for f in plan.ffns for row in tables.gap_rows(plan, f, cfg.head_groups)]
    claims = tables.claims(plan, m, cfg.head_groups, chance)
    finals = {ffn: tables.final_by_group(plan, ffn) for ffn in cfg.ffns}
    per_ffn = [_ffn_outputs(cfg, plan, ffn, chance, sweep_rows) for ffn in plan.ffns]
    last = (
        Table("tail_table_long.csv", long_rows),
        Table("head_tail_gap.csv", gaps_rows, f"Head (groups 0..{cfg.head_groups - 1}) vs "
              "rarest group at the end: the head–tail gap, mean and std over seeds",
              tables.HEAD_TAIL_COLUMNS),
        *tuning,
    )  # fmt: skip
    results = {
        "data": data_summary,
        "chance_fta": chance,
        "best_lr": {f"{ffn}/{arm}": lrs for (ffn, arm), lrs in plan.best.items()},
        "tuning": {"score": score, "choices": choices, "trials": sweep_rows},
        "runs": [plan.results[job].to_json() for jobs in plan.seed_runs.values() for job in jobs],
        "diverged": diverged,
        "head_tail_gap": gaps_rows,
        "tail_table": long_rows,
        "gap_measures": {ffn: found.to_json() for ffn, found in measures.items()},
        "final_by_group": finals,
        "config_model": dataclasses.asdict(cfg.model),
    }
    report = Report(
        "Knowledge QA: FTA of rare facts by optimiser (paper A, Sec. 4.3)",
        report_summary(cfg, gaps_rows, claims, choices, data_summary, chance, measures),
        tuple(a for ffn, found in measures.items()
              for a in answers.answers(found, ffn, plan.labels)),
    )  # fmt: skip
    done = Outputs(tables=last, records={"results.json": results}, claims=tuple(claims),
                   report=report)  # fmt: skip
    return sum([shown for _, shown in measured.values()] + per_ffn, Outputs()) + done


def _ffn_outputs(
    cfg: Config, plan: TrainedPlan, ffn: str, chance: float, sweep_rows: list[dict[str, Any]]
) -> Outputs:
    """One FFN type's tail table and figures (an FFN type whose every seed run diverged has
    none)."""
    m = cfg.data.m
    table = Table(
        f"tail_table_{ffn}.csv",
        tables.tail_table(plan, ffn, cfg.table_fracs, cfg.tail_offsets, m),
        f"Tail groups (m = {m}) at 20/50/100% of {cfg.train.steps} steps, {ffn} FFN, mean ± SE "
        f"over {cfg.seeds} seed(s); 'paper' columns: the published m = 15 value of the group "
        "at the same distance from the rarest (empty where not published)",
        tables.tail_columns(plan),
        tables.tail_mean_se([plan.arm(arm).label for arm in plan.arms]),
    )
    figures = [
        Figure(
            f"fta_by_group_{ffn}",
            plots.fta_by_group_figure(plan, ffn, chance),
            f"FTA per frequency group over training, {ffn} FFN, mean ± std over "
            f"{cfg.seeds} seed(s) (paper Fig. 3); dashed: chance {chance:.3f}",
        ),
        Figure(
            f"fta_final_{ffn}",
            plots.final_fta_figure(plan, ffn, chance),
            f"First-token accuracy (left) and whole-answer exact match (right: greedy "
            f"decoding reproduces every answer token) at the last step by frequency group, "
            f"{ffn} FFN, mean ± std over seeds",
        ),
    ]
    if any(r["ffn"] == ffn for r in sweep_rows):
        figures.append(Figure(
            f"lr_sweep_{ffn}",
            plots.sweep_figure(sweep_rows, ffn, plan.labels),
            f"Tuning, {ffn} FFN: each candidate's score ({cfg.tuning.score_name(SCORES)}), "
            f"mean over the tuning seeds (dots: each seed; star: chosen)",
        ))  # fmt: skip
    return Outputs(tables=(table,), figures=tuple(figures))


def gap_outputs(
    cfg: Config, plan: TrainedPlan, ffn: str, exposures: gaps.Exposures
) -> tuple[gaps.QAGaps, Outputs]:
    """The gap measures of one FFN type and their tables and figures (per headline pair: the
    fair comparison, then paper A's)."""
    found, curves = gaps.measure(plan, ffn, exposures)
    figures, listed = [], [Table(f"lag_ratio_{ffn}.csv", gaps.lag_ratio_rows(ffn, found))]
    tail = sorted({cfg.data.m - o for o in cfg.tail_offsets if o <= cfg.data.m})
    for lead_arm, lag_arm in found.headlines():
        pair = found.pair(lead_arm, lag_arm)
        assert pair is not None
        lead, lag = plan.arm(lead_arm).label, plan.arm(lag_arm).label
        stem = f"{ffn}" if (lead_arm, lag_arm) == found.headline() else f"{ffn}_{lag_arm}"
        labels = {lead_arm: lead, lag_arm: lag}
        reference = found.paper[gaps.REFERENCE].pair(lead_arm, lag_arm)
        paper_note = (
            "beside the paper's tables computed the same way (grey, arXiv v2; the ICLR values "
            "are in the table; the paper's groups 11/13/15 are our m−4/m−2/m)"
            if reference is not None else "(the paper did not run this pair)"
        )  # fmt: skip
        figures += [
            Figure(
                f"fta_vs_exposures_{stem}",
                fta_vs_exposures_figure(
                    curves[lead_arm, lag_arm], lead_arm, lag_arm, groups=tail,
                    taus=found.ours.taus, title=f"{lead} (solid) vs {lag} (dashed), {ffn} FFN",
                ),
                f"FTA of the tail groups against exposures per fact (times one fact has been "
                f"trained), {lead} vs {lag}, {ffn} FFN, mean ± SE band over "
                f"{curves[lead_arm, lag_arm].n_seeds} paired seed(s): how far right {lag}'s "
                "curve sits at an FTA level (dotted) is the exposure-lag ratio",
            ),
            Figure(
                f"lag_ratio_{stem}",
                lag_ratio_figure(
                    pair, reference=reference,
                    reference_label=gaps.VERSION_LABELS[gaps.REFERENCE],
                    title=f"Exposure-lag ratio of {lag} behind {lead}, {ffn} FFN "
                    "(▲ at least, ▼ at most)",
                ),
                f"Exposure-lag ratio, {ffn} FFN: exposures {lag} needs ÷ exposures {lead} needs "
                "to bring a group to FTA τ (read on each curve's monotone envelope, "
                "interpolated between evaluations; geometric mean over seeds with its 95 % t "
                "interval; ▲/▼: bounds where a crossing is not bracketed; pooled: the geometric "
                f"mean over the groups measured in every seed), {paper_note}",
            ),
        ]  # fmt: skip
        listed.append(Table(
            f"lag_ratio_summary_{stem}.csv",
            gaps.lag_ratio_table(found, lead_arm, lag_arm, labels),
            f"Exposure-lag ratio of {lag} behind {lead}, {ffn} FFN, per group (pooled: the "
            "geometric mean over the groups measured in every seed) and FTA level τ; ours "
            "(geometric mean [95 % t interval] over seeds) and the paper's m = 15 tables. "
            f"Every pair of arms: lag_ratio_{ffn}.csv",
            gaps.LAG_RATIO_COLUMNS,
        ))  # fmt: skip
    listed.append(Table(
        f"gap_{ffn}.csv",
        gaps.gap_rows(ffn, found, plan.steps),
        f"FTA gaps per pair of arms, {ffn} FFN: the tail gap (rarest group at the end, the "
        "pre-specified cell) and, descriptive only, the peak gap (the largest seed-mean gap "
        "over groups and evaluations); ours and the paper's",
        gaps.GAP_COLUMNS,
    ))  # fmt: skip
    return found, Outputs(tables=tuple(listed), figures=tuple(figures))


def choices_sentence(cfg: Config) -> str:
    """The unpublished QA choices this run made, in words (``qa-sensitivity`` varies them)."""
    answers = {"bpe": "BPE tokens", "single": "one token per answer value"}
    packing = {"cross": "packed items attending to earlier items", "document": "each item "
               "attending only to itself from position 0"}  # fmt: skip
    optim = []
    adam, muon = cfg.optim.get("adam"), cfg.optim.get("muon")
    if adam is not None and isinstance(adam.hparams, AdamHParams):
        optim.append(f"Adam β {tuple(adam.hparams.betas)}")
    if muon is not None and isinstance(muon.hparams, MuonHParams):
        nesterov = "on" if muon.hparams.nesterov else "off"
        optim.append(f"Muon Nesterov {nesterov} with the {muon.hparams.scale} update scale")
    return (
        f"Unpublished choices: loss on {cfg.loss_on} tokens, answers as "
        f"{answers[cfg.data.answer_tokens]}, {packing[cfg.packing]}, "
        f"{cfg.data.templates_per_attribute} template(s) per attribute, "
        + "".join(f"{text}, " for text in optim)
        + f"QK-norm {'on' if cfg.model.qk_norm else 'off'} "
        "(`tailmem run qa-sensitivity` measures the lag ratio as each changes)."
    )


def report_summary(
    cfg: Config,
    head_tail: list[dict[str, Any]],
    claims: list[Any],
    choices: list[dict[str, Any]],
    data_summary: dict[str, Any],
    chance: float,
    measures: dict[str, gaps.QAGaps],
) -> str:
    """One paragraph: the setting, the lag ratio and peak gap of the headline pair beside the
    paper's, the final rarest-group FTA and EM per arm, and the verdicts."""
    model = cfg.model.build(1, "plain", cfg.train.seq_len)
    train = cfg.train
    labels = {g["arm"]: g["label"] for g in head_tail}
    parts = [
        f"{model.n_layer} layers × d={model.d_model} (d_ff {model.d_ff}), "
        f"m = {cfg.data.m} ({data_summary['n_people']} people, "
        f"{data_summary['n_train_items']} QA samples per epoch), {train.steps} steps of "
        f"{train.batch_size}×{train.seq_len} tokens, {cfg.seeds} seed(s), chance FTA {chance:.3f}.",
        choices_sentence(cfg),
    ]
    if cfg.eval_sample is not None:
        parts.append(
            f"Evaluations ask a fixed sample of {cfg.eval_sample} questions per group (all of a "
            "smaller group); FTA over all questions weighs each group by its size."
        )
    for ffn in measures:  # FFN types with a finished run (every run of one may diverge)
        parts += gaps.summary_sentences(measures[ffn], ffn, labels)
        finals = ", ".join(
            f"{labels[g['arm']]} {g['rarest_mean']:.3f}±{g['rarest_std']:.3f} "
            f"(EM {g['em_rarest_mean']:.3f})"
            for g in head_tail
            if g["ffn"] == ffn
        )
        parts.append(f"Rarest group (group {cfg.data.m}) FTA at the end, {ffn} FFN: {finals}.")
    counts: dict[str, int] = {}
    for c in claims:
        counts[c.verdict] = counts.get(c.verdict, 0) + 1
    parts.append("Claims: " + ", ".join(f"{n} {v}" for v, n in counts.items()) + ".")
    score = cfg.tuning.score_name(SCORES)
    tuned = [r for r in choices if r["trials"]]
    if tuned:
        sources = sorted({r["source"] for r in tuned})
        parts.append(
            f"Every arm tuned its one rate by the same rule ({cfg.tuning.seeds} tuning seeds "
            f"apart from the evaluation seeds, score {score}, up to {cfg.tuning.max_extend} "
            f"widenings; {', '.join(sources)})."
        )
    edges = [f"{r['ffn']}/{r['arm']}" for r in choices if r["edge"]]
    if edges:
        parts.append(
            f"Chosen LR at the end of the candidates tried (may not be the optimum): "
            f"{', '.join(edges)}."
        )
    if cfg.note:
        parts.append(cfg.note.strip())
    return " ".join(parts)
