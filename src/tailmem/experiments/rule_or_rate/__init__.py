"""Update rule or learning rate? The controlled study of Muon's tail edge (issue 31; PAPERS.md D).

Paper A credits Muon's tail edge to its update rule, comparing Muon on the hidden matrices (Adam
on the rest, each at its own rate) with Adam everywhere at one rate: two tuned rates against one.
This study separates the two on knowledge QA (:mod:`tailmem.experiments.knowledge_qa`):

- **The factorial** (the base point): update rule {Muon, Adam, a sign method} × hidden-matrix
  rate {shared with the rest, its own} (:mod:`.arms`), every arm tuning one rate by the same rule
  and budget on tuning seeds apart from its ``seeds`` evaluation seeds. For each arm: the
  exposure-lag ratio of Adam-shared and of Adam-own behind it (τ 0.3/0.5/0.8, per group and
  pooled, 95 % t intervals), the rarest and second-rarest groups' FTA and exact match, and the
  *share* of Muon's edge over Adam-shared that the rate split alone recovers
  (:mod:`tailmem.metrics.share`: ``log lag(Adam-shared behind Adam-own) ÷ log lag(Adam-shared
  behind Muon-own)``).
- **Regime axes**, one at a time from the base (``axes``: width, facts per parameter, answer
  tokens, training length, Adam's betas, the loss's tokens, the norm, positions and init), each
  level with Muon-own, Adam-own and Adam-shared: its share and Muon ÷ Adam-own. A level tunes
  its rates (``rates: tune``) or reuses the base's (``rates: base``: a cheaper look, which reads
  a shifted optimum as a change of the edge; the table says which). The width levels' ratios
  are fitted as a power law and extrapolated to paper A's 12 × 768 model
  (:mod:`tailmem.metrics.lag_trend`).
- **One-factor walks** (``walks``): from a starting configuration — an independent
  implementation's settings, as far as the config expresses them — to the base, one factor a
  step (:class:`~.config.Walk`), every point tuned with the three regime arms at the same
  exposures per fact (``epochs``): which factor moves Adam's tail, and under which settings the
  answer holds (:mod:`.outputs`' walk table, with each arm's 95 % interval and the share's
  Fieller interval).

Claims (:mod:`tailmem.claims.rule_or_rate`): ``A3.beyond.rule_not_rate`` per width (with equal
tuning freedom Muon still leads Adam beyond noise) and ``D.wen.fair_edge_shrinks`` (the fair
edge's trend in width). Outputs: ``factorial.csv``, ``regime.csv``, ``lag_ratio.csv``, the
``share`` and ``factorial`` figures, ``results.json``, ``claims.json``, ``report.json`` (with
``answers``); every point's runs and tuning tables under ``points/<label>/``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from tailmem.experiments import knowledge_qa as kqa
from tailmem.experiments.knowledge_qa import grid
from tailmem.experiments.rule_or_rate import outputs
from tailmem.experiments.rule_or_rate.arms import factorial_entries, fixed_entries
from tailmem.experiments.rule_or_rate.config import (
    BASE,
    NAME,
    Axis,
    Config,
    Level,
    RuleSection,
    Walk,
    WalkStep,
    axis_of,
    labels,
)
from tailmem.lm.plan import TrainedPlan, run_plans, tidy
from tailmem.lm.store import load_store, missing_rates, stored_choices
from tailmem.lm.sweeps import gathered_outputs, tuning_outputs
from tailmem.outputs import write
from tailmem.rundir import RunDir
from tailmem.studies import Preset, Provenance, Study
from tailmem.train import distributed as D

__all__ = ["BASE", "NAME", "Axis", "Config", "Level", "RuleSection", "Walk",
           "WalkStep", "axis_of", "labels", "preflight", "run"]  # fmt: skip


def preflight(cfg: Config) -> None:
    """Knowledge-QA's checks for every point, and with ``tuning.rates: stored`` every tuned
    point's stored rates (refused in one line when one is missing), before anything is
    written."""
    configs = cfg.configs()
    grid.preflight(configs, cfg.common)
    for label, (_, qa) in configs.items():
        if cfg.rates_of(label) == "tune":
            _stored(cfg, label, qa)


def _entries(cfg: Config, label: str, qa: kqa.Config) -> tuple[Any, ...]:
    return factorial_entries(qa.ffns[0], cfg.arms(label), cfg.grids(), qa.tuning, qa.seed,
                             qa.train.steps, kqa.SCORES)  # fmt: skip


def _stored(cfg: Config, label: str, qa: kqa.Config) -> dict[tuple[str, str], Any]:
    """The stored rates of a tuned point (``rates: stored``), or none."""
    if cfg.rates != "stored" or cfg.tune_only:
        return {}
    found, missing = stored_choices(_entries(cfg, label, qa), qa.tuning_record(),
                                    load_store(qa.tuning.store))  # fmt: skip
    if missing:
        where = qa.tuning.store or "the package's rate store"
        raise missing_rates(missing, f"{where} (point {label!r})")
    return found


def _train(
    cfg: Config,
    root: Path,
    configs: Mapping[str, tuple[grid.Point, kqa.Config]],
    base: TrainedPlan | None,
    more: bool,
) -> dict[str, tuple[kqa.Prepared, TrainedPlan]]:
    """Prepare every point of ``configs`` (its data, its factorial entries: tuned, stored, or
    at the ``base`` point's chosen rates) and train them on one pool."""
    prepared: dict[str, kqa.Prepared] = {}
    for label, (_, qa) in configs.items():
        if qa.cache_dir is None:
            qa = dataclasses.replace(qa, cache_dir=str(root / "data"))
        if cfg.tune_only:
            qa = dataclasses.replace(qa, tuning=dataclasses.replace(qa.tuning, rates="sweep",
                                                                    only=True))  # fmt: skip
        study = kqa.prepare(qa, root / "points" / grid.slug(label))
        if base is not None:
            chosen = {arm: base.best[(qa.ffns[0], arm)] for arm in base.arms}
            entries = fixed_entries(qa.ffns[0], cfg.arms(label), chosen)
            stored: dict[tuple[str, str], Any] = {}
        else:
            entries, stored = _entries(cfg, label, qa), _stored(cfg, label, qa)
        plan = dataclasses.replace(study.plan, entries=entries, stored=stored,
                                   catalogue={e.arm.name: e.arm for e in entries})  # fmt: skip
        prepared[label] = dataclasses.replace(study, plan=plan)
    trained = run_plans({label: (s.plan, s.context) for label, s in prepared.items()},
                        cfg.workers, kqa.summary, more=more)  # fmt: skip
    return {label: (prepared[label], trained[label]) for label in prepared}


def run(cfg: Config, run: RunDir, provenance: Provenance) -> None:
    """The tuned points on one pool, then the points at the base's rates, then the tables,
    claims and report."""
    configs = cfg.configs()
    tuned = {k: v for k, v in configs.items() if cfg.rates_of(k) == "tune"}
    done = _train(cfg, run.path, tuned, None, more=False)
    if D.is_main_process():
        for label, (study, trained) in done.items():
            folder = RunDir(study.context.root)
            record = configs[label][1].tuning_record()
            write(folder, tuning_outputs(trained, record, NAME, provenance))
    if cfg.tune_only:
        if D.is_main_process():
            write(run, gathered_outputs(run.path))
        return
    reuse = {k: v for k, v in configs.items() if cfg.rates_of(k) == "base"}
    if reuse:
        done |= _train(cfg, run.path, reuse, done[BASE][1], more=True)
    grid.prune_points(run.path, list(configs))
    for label, (study, trained) in done.items():
        tidy(trained, study.context.root, configs[label][1].train.keep_checkpoints)
    if D.is_main_process():
        points = {label: grid.point_result(*configs[label], study, trained,
                                           lambda plan: outputs.pairs(plan.arms))
                  for label, (study, trained) in done.items()}  # fmt: skip
        write(run, outputs.outputs(cfg, points))


STUDY = Study(
    name=NAME,
    config=Config,
    run=run,
    preflight=preflight,
    reproduces="beyond the papers (D): is Muon's tail edge its update rule or its learning rate?",
    presets=(
        Preset("smoke", "", 30.7),
        Preset("cpu", "6 arms + 2 walks of 13 points x 3 arms x 3 seeds, stored rates", None),
        Preset("paper", "160M GPT", None),
    ),
    question="is Muon's tail edge its update rule or its learning rate?",
    in_reproduce=False,
    on_results_page=True,
    tune_overrides=("tune_only=true",),  # every tuning point's trials only
)
"""This study's record (:class:`~tailmem.studies.Study`)."""
