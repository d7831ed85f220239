"""The rule-or-rate study's configuration: the update rules, the regime axes and the reference
point, each point built as a knowledge-QA config (:mod:`tailmem.experiments.knowledge_qa.grid`)."""

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
        grid.refuse_owned(self.common, self.owned(), NAME)
        for point in self.points():
            grid.refuse_owned(point.overrides, ["tuning.rates"], NAME, f"point {point.label!r}")
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
    """(axis name, level label) of a point, None for the base and the reference."""
    for axis in cfg.axes:
        for level in axis.levels:
            if level_label(axis, level) == label:
                return axis.name, level.label
    return None


def labels(cfg: Config) -> Sequence[str]:
    return [p.label for p in cfg.points()]
