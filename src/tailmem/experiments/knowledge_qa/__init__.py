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

Outputs (in the run directory, declared by :mod:`.outputs`), the gap measures first (:mod:`.gaps`)
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

import re
from dataclasses import dataclass
from pathlib import Path

from tailmem.data.bios import N_ATTRIBUTES, DataSummary, build_dataset
from tailmem.data.stream import QATrainStream
from tailmem.data.templates import qa_templates
from tailmem.errors import ConfigError
from tailmem.experiments.knowledge_qa import gaps, outputs, tables
from tailmem.experiments.knowledge_qa.config import (
    FFNS,
    SCORES,
    Config,
    at_epochs,
    check_epochs,
    score_of,
)
from tailmem.experiments.knowledge_qa.fta import QAData, answer_loss_sum, chance_fta, describe_fta
from tailmem.lm import sweeps
from tailmem.lm.plan import Plan, TrainedPlan, run_plan, tidy
from tailmem.lm.preflight import check_lm
from tailmem.lm.spec import RunResult
from tailmem.lm.subrun import RunContext, template
from tailmem.lm.tuning import TUNE_ONLY
from tailmem.outputs import Outputs, write
from tailmem.resources import check_writable_folder
from tailmem.rundir import RunDir
from tailmem.studies import Preset, Provenance, Study
from tailmem.train import distributed as D

__all__ = ["FFNS", "NAME", "SCORES", "Config", "Prepared", "at_epochs",
           "preflight", "prepare", "run", "score_of", "summary", "tuning_outputs"]  # fmt: skip

NAME = "knowledge-qa"
"""``tailmem tune``: train the tuning trials only and write ``tuned_rates.json``."""


def preflight(cfg: Config) -> None:
    """Refuse, before anything is written, a cache folder this process cannot write, a given
    tokenizer that does not load, a model, batch or data set this machine cannot hold
    (:func:`tailmem.lm.preflight.check_lm`), a ``train.seq_len`` whose rows cannot hold a QA
    item and, with ``epochs`` set, a ``train.steps`` that is not that many whole epochs.

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
        for templates in qa_templates(cfg.data.question_form).values()
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
    check_epochs(cfg)


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
    data_summary: DataSummary


def prepare(cfg: Config, root: Path) -> Prepared:
    """Build (or load) the data set of ``cfg`` and declare its plan, its runs under ``root``
    (the data under ``cfg.cache_dir``, default ``root/data``)."""
    cache = Path(cfg.cache_dir) if cfg.cache_dir else root / "data"
    dataset = build_dataset(cfg.data, cache)
    aligned = cfg.epochs is not None
    stream = QATrainStream(dataset, cfg.train.batch_size, cfg.train.seq_len, cfg.seed, cfg.loss_on,
                           cfg.packing, aligned)  # fmt: skip
    exposures = gaps.Exposures(
        tuple(int(s) for s in dataset.selections_per_group()),
        cfg.data.n_qa // N_ATTRIBUTES,
        stream.steps_per_epoch,
    )
    data = QAData(
        str(dataset.path), dataset.fingerprint, cfg.loss_on, cfg.train.eval_batch_size,
        cfg.packing, cfg.eval_sample, aligned,
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


def run(cfg: Config, run: RunDir, provenance: Provenance) -> None:
    """Tune, train every seed, then write tables, figures, claims and ``report.json`` (with
    ``tuning.only``: tune, then write the tuning tables alone)."""
    study = prepare(cfg, run.path)
    trained = run_plan(study.plan, study.context, cfg.workers, summary)
    tidy(trained, study.context.root, cfg.train.keep_checkpoints)
    if not D.is_main_process():
        return
    if cfg.tuning.only:
        write(run, tuning_outputs(cfg, trained, provenance))
        return
    found = outputs.outputs(cfg, trained, study.chance, study.data_summary, study.exposures)
    write(run, found + sweeps.store_outputs(trained, cfg.tuning_record(), NAME, provenance))


def tuning_outputs(cfg: Config, trained: TrainedPlan, provenance: Provenance) -> Outputs:
    """The tuning tables and ``tuned_rates.json`` (:func:`tailmem.lm.sweeps.tuning_outputs`)."""
    return sweeps.tuning_outputs(trained, cfg.tuning_record(), NAME, provenance)


STUDY = Study(
    name=NAME,
    config=Config,
    run=run,
    preflight=preflight,
    reproduces="paper A Sec. 4.3 (Fig. 3, Tables 3–8): tail-fact QA accuracy",
    presets=(
        Preset("smoke", "", 17.2),
        Preset("cpu", "6 arms × 2 FFN types × 3 seeds, d 256", 2073.0),
        Preset("paper", "160M GPT", None),
    ),
    question="does Muon learn the rare facts faster than Adam, also against an Adam "
    "tuned as freely?",
    on_results_page=True,
    tune_overrides=TUNE_ONLY,
)
"""This study's record (:class:`~tailmem.studies.Study`)."""
