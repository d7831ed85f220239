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
- **The reference point** (``reference``): tailmem at an independent implementation's settings,
  where the config can express them, to reconcile the two implementations' answers.

Claims (:mod:`tailmem.claims.rule_or_rate`): ``A3.beyond.rule_not_rate`` per width (with equal
tuning freedom Muon still leads Adam beyond noise) and ``D.wen.fair_edge_shrinks`` (the fair
edge's trend in width). Outputs: ``factorial.csv``, ``regime.csv``, ``lag_ratio.csv``, the
``share`` and ``factorial`` figures, ``results.json``, ``claims.json``, ``report.json`` (with
``answers``); every point's runs and tuning tables under ``points/<label>/``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from tailmem.errors import ConfigError
from tailmem.experiments import knowledge_qa as kqa
from tailmem.experiments.knowledge_qa import grid
from tailmem.experiments.rule_or_rate import outputs
from tailmem.experiments.rule_or_rate.arms import (
    ADAM_SHARED,
    OWN,
    FactorialArm,
    arm_name,
    factorial_arms,
    factorial_entries,
    fixed_entries,
)
from tailmem.lm import store
from tailmem.lm.arms import matrix_recipe
from tailmem.lm.plan import TrainedPlan, run_plans, tidy
from tailmem.lm.store import load_store, missing_rates, stored_choices
from tailmem.lm.sweeps import write_tuning
from tailmem.rundir import RunDir
from tailmem.train import distributed as D

NAME = "rule-or-rate"
TUNE_OVERRIDES = ("tune_only=true",)
"""``tailmem tune``: every tuning point's trials only, the choices in ``tuned_rates.json``."""
BASE = "base"
"""The label of the base point (the factorial)."""
REFERENCE = "reference"
"""The label of the point at the independent implementation's settings."""


@dataclass
class RuleSection:
    """One update rule: the optimiser ``kind`` on the hidden matrices at its own rate (Adam's:
    ``adam_split``), its ``label``, and the candidate rates of its ``own`` and ``shared`` arms
    (a shared arm's rate trains every parameter)."""

    kind: str
    label: str
    own: list[float]
    shared: list[float]


@dataclass
class Level:
    """One level of a regime axis: its label, the knowledge-QA overrides that make it, and
    whether it tunes its rates or reuses the base point's."""

    label: str
    overrides: dict[str, Any] = field(default_factory=dict)
    rates: Literal["tune", "base"] = "tune"


@dataclass
class Axis:
    """A regime axis: its name, levels (the base is its own level) and why it is varied."""

    name: str
    levels: list[Level]
    why: str = ""


@dataclass
class Config:
    """The study (module docstring). ``preset`` + ``common``: the knowledge-QA config of the
    base point; ``rules``: the update rules (``adam`` required: its shared arm sets the rest's
    rate); ``regime_rules``: the rules whose own arms the regime levels run (Adam-shared always);
    ``reference``: the independent implementation's settings (None: no such point);
    ``rates``: ``sweep`` (tune in this run) or ``stored`` (every tuned point at the rates stored
    for exactly its tuning problems, :mod:`tailmem.lm.store`; refused when one is missing);
    ``tune_only``: train the tuning trials only (``tailmem tune``)."""

    seed: int = 0
    preset: str = "cpu"
    common: dict[str, Any] = field(default_factory=dict)
    rules: dict[str, RuleSection] = field(default_factory=dict)
    regime_rules: list[str] = field(default_factory=lambda: ["muon", "adam"])
    axes: list[Axis] = field(default_factory=list)
    reference: Level | None = None
    workers: int = 2
    note: str = ""
    rates: Literal["sweep", "stored"] = "sweep"
    tune_only: bool = False

    def validate(self) -> None:
        """One-line :class:`ConfigError` for a bad field; every point's knowledge-QA config is
        built and checked (:meth:`configs`)."""
        if "adam" not in self.rules:
            raise ConfigError(f"rules: got {list(self.rules)}; expected adam among them (its "
                              "shared arm sets the rate of the rest in every own arm)")  # fmt: skip
        unknown = [r for r in self.regime_rules if r not in self.rules]
        if unknown:
            raise ConfigError(f"regime_rules: {unknown[0]!r} is not in rules {list(self.rules)}")
        for name, rule in self.rules.items():
            for which in ("own", "shared"):
                grid_ = getattr(rule, which)
                if not grid_ or any(not lr > 0 for lr in grid_):
                    raise ConfigError(f"rules.{name}.{which}: got {grid_}; expected positive "
                                      "learning rates")  # fmt: skip
        if self.workers < 1:
            raise ConfigError(f"workers: got {self.workers}; expected >= 1")
        labels = [p.label for p in self.points()]
        if len(set(labels)) != len(labels):
            raise ConfigError(f"axes: level labels repeat ({labels}); expected each once")
        self.configs()

    # ---------------------------------------------------------------- the points

    def points(self) -> list[grid.Point]:
        """The base, every axis level and the reference, as knowledge-QA points."""
        out = [grid.Point(BASE)]
        out += [grid.Point(level_label(a, lv), lv.overrides) for a in self.axes for lv in a.levels]
        if self.reference is not None:
            out.append(grid.Point(REFERENCE, self.reference.overrides))
        return out

    def rates_of(self, label: str) -> str:
        """``tune`` or ``base``: whether the point ``label`` tunes its rates."""
        for axis in self.axes:
            for level in axis.levels:
                if level_label(axis, level) == label:
                    return level.rates
        if self.reference is not None and label == REFERENCE:
            return self.reference.rates
        return "tune"

    def arms(self, label: str) -> list[FactorialArm]:
        """The base runs the whole factorial; every other point Adam-shared and the own arms of
        ``regime_rules``."""
        rules = {name: (r.kind, r.label) for name, r in self.rules.items()}
        every = factorial_arms(rules)
        if label == BASE:
            return every
        keep = {ADAM_SHARED} | {arm_name(r, OWN) for r in self.regime_rules}
        return [a for a in every if a.name in keep]

    def grids(self) -> dict[str, list[float]]:
        """Every arm's candidate rates, by arm name."""
        out = {}
        for name, rule in self.rules.items():
            out[arm_name(name, OWN)] = rule.own
            out[arm_name(name, "shared")] = rule.shared
        return out

    def qa_overrides(self) -> dict[str, Any]:
        """The knowledge-QA overrides of every point: ``common``, an arm per kind (so every
        kind's optimiser section is built and checked; the study replaces the plan's entries)
        and each kind's own grid (Adam's: its shared grid) as its rate."""
        kinds = dict.fromkeys(r.kind for r in self.rules.values())
        arms = ["adam:*", *(matrix_recipe(k) for k in kinds if k != "adam")]
        rates = {f"optim.{r.kind}.lr": list(r.own) for r in self.rules.values()}
        return {"seed": self.seed, "workers": self.workers, **self.common, "arms": arms,
                "optim.adam.lr": list(self.rules["adam"].shared), **rates}  # fmt: skip

    def configs(self) -> dict[str, tuple[grid.Point, kqa.Config]]:
        """Every point's validated knowledge-QA config."""
        return grid.configure(self.points(), self.preset, self.qa_overrides())


def level_label(axis: Axis, level: Level) -> str:
    return f"{axis.name}: {level.label}"


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


def run(cfg: Config, run: RunDir) -> None:
    """The tuned points on one pool, then the points at the base's rates, then the tables,
    claims and report."""
    configs = cfg.configs()
    tuned = {k: v for k, v in configs.items() if cfg.rates_of(k) == "tune"}
    done = _train(cfg, run.path, tuned, None, more=False)
    if D.is_main_process():
        for label, (study, trained) in done.items():
            write_tuning(RunDir(study.context.root), trained, configs[label][1].tuning_record(),
                         NAME)  # fmt: skip
    if cfg.tune_only:
        if D.is_main_process():
            store.gather(run.path)
        return
    reuse = {k: v for k, v in configs.items() if cfg.rates_of(k) == "base"}
    if reuse:
        done |= _train(cfg, run.path, reuse, done[BASE][1], more=True)
    grid.prune_points(run.path, list(configs))
    for label, (study, trained) in done.items():
        tidy(trained, study.context.root, configs[label][1].train.keep_checkpoints)
    if D.is_main_process():
        outputs.write(cfg, run, {label: _point(label, configs[label], s, t)
                                 for label, (s, t) in done.items()})  # fmt: skip


def _point(
    label: str, config: tuple[grid.Point, kqa.Config], study: kqa.Prepared, trained: TrainedPlan
) -> grid.PointResult:
    point, qa = config
    plan = trained.completed()
    pairs = outputs.pairs(plan.arms)
    measures = {ffn: kqa.gaps.measure(plan, ffn, study.exposures, chosen=pairs)[0]
                for ffn in plan.ffns}  # fmt: skip
    return grid.PointResult(point, qa, plan, study.exposures, study.chance, study.data_summary,
                            measures)  # fmt: skip


def axis_of(cfg: Config, label: str) -> tuple[str, str] | None:
    """(axis name, level label) of a point, None for the base and the reference."""
    for axis in cfg.axes:
        for level in axis.levels:
            if level_label(axis, level) == label:
                return axis.name, level.label
    return None


def labels(cfg: Config) -> Sequence[str]:
    return [p.label for p in cfg.points()]
