"""The rule-or-rate study's configuration: the update rules, the regime axes and the one-factor
walks, each point built as a knowledge-QA config (:mod:`tailmem.experiments.knowledge_qa.grid`)."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from tailmem.errors import ConfigError
from tailmem.experiments import knowledge_qa as kqa
from tailmem.experiments.knowledge_qa import grid
from tailmem.experiments.rule_or_rate.arms import (
    ADAM_SHARED,
    OWN,
    FactorialArm,
    arm_name,
    factorial_arms,
)
from tailmem.lm.arms import matrix_recipe

NAME = "rule-or-rate"
BASE = "base"
"""The label of the base point (the factorial)."""


@dataclass(frozen=True)
class RuleSection:
    """One update rule: the optimiser ``kind`` on the hidden matrices at its own rate (Adam's:
    ``adam_split``), its ``label``, and the candidate rates of its ``own`` and ``shared`` arms
    (a shared arm's rate trains every parameter)."""

    kind: str
    label: str
    own: list[float]
    shared: list[float]


@dataclass(frozen=True)
class Level:
    """One level of a regime axis: its label, the knowledge-QA overrides that make it, and
    whether it tunes its rates or reuses the base point's."""

    label: str
    overrides: dict[str, Any] = field(default_factory=dict)
    rates: Literal["tune", "base"] = "tune"


@dataclass(frozen=True)
class Axis:
    """A regime axis: its name, levels (the base is its own level) and why it is varied."""

    name: str
    levels: list[Level]
    why: str = ""


@dataclass(frozen=True)
class WalkStep:
    """One step of a walk: its ``label`` (the factor, for people) and the keys of the walk's
    ``start`` it reverts to the base's values (one factor: one key or a few that belong
    together)."""

    label: str
    revert: list[str]


@dataclass(frozen=True)
class Walk:
    """A one-factor walk from a starting configuration to the base (``common`` and the preset):
    ``start`` holds the changes that make the first point, ``steps`` revert them in order, one
    factor a step, so the last point is the base itself under the walk's own ``fixed`` changes
    (e.g. a width and FFN type the whole walk holds) — the base point itself when there are
    none. Every point tunes its rates and runs Adam-shared and the regime rules' own arms: the
    walk shows which factor moves each arm's tail and the share the rate split recovers."""

    name: str
    start: dict[str, Any]
    steps: list[WalkStep]
    fixed: dict[str, Any] = field(default_factory=dict)
    why: str = ""

    def labels(self) -> list[str]:
        """Its points' labels, start first (the last one :data:`BASE` when ``fixed`` is
        empty: the walk ends at the base point)."""
        out = [walk_label(self, i) for i in range(len(self.steps) + 1)]
        return out if self.fixed else [*out[:-1], BASE]

    def points(self) -> list[grid.Point]:
        """Its points other than the base: ``fixed`` ∪ ``start`` less what the steps so far
        reverted."""
        out: list[grid.Point] = []
        reverted: set[str] = set()
        for i, label in enumerate(self.labels()):
            if i:
                reverted |= set(self.steps[i - 1].revert)
            kept = {k: v for k, v in self.start.items() if k not in reverted}
            if label != BASE:
                out.append(grid.Point(label, {**self.fixed, **kept}))
        return out

    def validate(self) -> None:
        """Every key of ``start`` reverted by exactly one step, and nothing else."""
        where = f"walks: {self.name!r}"
        reverted = [k for step in self.steps for k in step.revert]
        unknown = sorted(set(reverted) - set(self.start))
        if unknown:
            raise ConfigError(f"{where}: steps revert {unknown}, which start does not set; "
                              "expected keys of start")  # fmt: skip
        twice = sorted({k for k in reverted if reverted.count(k) > 1})
        if twice:
            raise ConfigError(f"{where}: {twice} reverted by more than one step; expected each "
                              "key of start reverted once")  # fmt: skip
        left = sorted(set(self.start) - set(reverted))
        if left:
            raise ConfigError(f"{where}: start keys {left} are never reverted; expected the "
                              "walk to end at the base")  # fmt: skip
        if not self.steps or any(not step.revert for step in self.steps):
            raise ConfigError(f"{where}: expected steps, each reverting at least one key")


def walk_label(walk: Walk, index: int) -> str:
    """``"<walk>: <index> <factor>"`` (index 0: the start)."""
    what = "start" if index == 0 else f"+ {walk.steps[index - 1].label}"
    return f"{walk.name}: {index} {what}"


@dataclass(frozen=True)
class Config:
    """The study (module docstring). ``preset`` + ``common``: the knowledge-QA config of the
    base point; ``rules``: the update rules (``adam`` required: its shared arm sets the rest's
    rate); ``regime_rules``: the rules whose own arms the regime levels run (Adam-shared always);
    ``walks``: one-factor walks from a starting configuration to the base (:class:`Walk`);
    ``rates``: ``sweep`` (tune in this run) or ``stored`` (every tuned point at the rates stored
    for exactly its tuning problems, :mod:`tailmem.lm.store`; refused when one is missing);
    ``tune_only``: train the tuning trials only (``tailmem tune``)."""

    seed: int = 0
    preset: str = "cpu"
    common: dict[str, Any] = field(default_factory=dict)
    rules: dict[str, RuleSection] = field(default_factory=dict)
    regime_rules: list[str] = field(default_factory=lambda: ["muon", "adam"])
    axes: list[Axis] = field(default_factory=list)
    walks: list[Walk] = field(default_factory=list)
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
        grid.refuse_owned(self.common, self.owned(), NAME)
        study_sets = [key for key in self.owned() if key != "seed"]  # a point's seed applies
        for point in self.points():
            grid.refuse_owned(point.overrides, study_sets, NAME, f"point {point.label!r}")
        if self.workers < 1:
            raise ConfigError(f"workers: got {self.workers}; expected >= 1")
        if self.tune_only and all(len(rates) == 1 for rates in self.grids().values()):
            raise ConfigError("tune_only: every rate of rules is one number, so nothing is "
                              "tuned; expected a list of rates to tune, e.g. "
                              "rules.muon.own=[0.01,0.02,0.05]")  # fmt: skip
        for walk in self.walks:
            walk.validate()
        self.arms(BASE)  # every arm's name is checked (a rule's name names its folders)
        labels = [p.label for p in self.points()]
        if len(set(labels)) != len(labels):
            raise ConfigError(f"axes: level labels repeat ({labels}); expected each once")
        self.configs()

    # ---------------------------------------------------------------- the points

    def points(self) -> list[grid.Point]:
        """The base, every axis level and every walk's points, as knowledge-QA points."""
        out = [grid.Point(BASE)]
        out += [grid.Point(level_label(a, lv), lv.overrides) for a in self.axes for lv in a.levels]
        for walk in self.walks:
            out += walk.points()
        return out

    def rates_of(self, label: str) -> str:
        """``tune`` or ``base``: whether the point ``label`` tunes its rates."""
        for axis in self.axes:
            for level in axis.levels:
                if level_label(axis, level) == label:
                    return level.rates
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

    def owned(self) -> list[str]:
        """The knowledge-QA keys the study sets in every point (``common`` may not): the seed,
        workers, arms, every rule's rate and whether the rates are tuned here (``rates``)."""
        rates = [f"optim.{kind}.lr" for kind in ("adam", *(r.kind for r in self.rules.values()))]
        return ["seed", "workers", "arms", "tuning.rates", *dict.fromkeys(rates)]

    def settle(self, qa: kqa.Config) -> kqa.Config:
        """What the study sets in every point's knowledge-QA config: its seed and workers, an
        arm per kind (so every kind's optimiser section is built and checked; the study
        replaces the plan's entries), each kind's own grid as its rate (Adam's: its shared
        grid) and ``tuning.rates`` ``sweep``: the study stores and reads its own rates
        (``rates``), so no point reads knowledge-QA's stored rates."""
        kinds = dict.fromkeys(r.kind for r in self.rules.values())
        arms = ["adam:*", *(matrix_recipe(k) for k in kinds if k != "adam")]
        rates = {"adam": list(self.rules["adam"].shared)}
        rates |= {r.kind: list(r.own) for r in self.rules.values()}
        sweep = dataclasses.replace(qa.tuning, rates="sweep")
        optim = qa.optim.with_rates(rates)
        return dataclasses.replace(
            qa, seed=self.seed, workers=self.workers, arms=arms, optim=optim, tuning=sweep
        )

    def configs(self) -> dict[str, tuple[grid.Point, kqa.Config]]:
        """Every point's validated knowledge-QA config (:func:`.grid.configure`)."""
        return grid.configure(self.points(), self.preset, self.common, self.settle)


def level_label(axis: Axis, level: Level) -> str:
    return f"{axis.name}: {level.label}"


def axis_of(cfg: Config, label: str) -> tuple[str, str] | None:
    """(axis name, level label) of a point — for a walk's point ("walk <name>", its step) —
    None for the base."""
    for axis in cfg.axes:
        for level in axis.levels:
            if level_label(axis, level) == label:
                return axis.name, level.label
    for walk in cfg.walks:
        for i, walk_point in enumerate(walk.labels()):
            if walk_point == label != BASE:
                return f"walk {walk.name}", walk_label(walk, i).split(": ", 1)[1]
    return None


def labels(cfg: Config) -> Sequence[str]:
    return [p.label for p in cfg.points()]
