"""The map's config: its grid (:class:`~.points.AxesSection`), the fitted trend and the
knowledge-QA base every point starts from (see :mod:`tailmem.experiments.qa_map`); and a point
planned from it (:class:`Planned`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from tailmem.config import PRESETS
from tailmem.errors import ConfigError
from tailmem.experiments import knowledge_qa as kqa
from tailmem.experiments.knowledge_qa import grid
from tailmem.experiments.qa_map.points import AXES, FEATURES, AxesSection, GridPoint
from tailmem.metrics.qa_gaps import TAUS
from tailmem.typecheck import check_range

NAME = "qa-map"


@dataclass(frozen=True)
class TrendSection:
    """The fitted trend: the lag ratio at ``tau`` of the points whose frequency exponent is
    ``exponent``, a power law of ``features`` (in order of preference), intervals at coverage
    ``level``. ``reading``: ``pooled`` (every group and evaluation: per seed the geometric mean
    over the groups measured in every seed; measured at most points) or ``paper_cells_group``
    (group m − 2 on the paper's cells: like for like with the paper's 2.59, but three
    evaluations bracket it, so it is often only a bound)."""

    tau: float = 0.5
    reading: Literal["pooled", "paper_cells_group"] = "pooled"
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


@dataclass(frozen=True)
class Config:
    """The map (see the module docstring). ``base``: the knowledge-QA preset every point starts
    from; ``common``: dotted-key overrides of the knowledge-QA config for every point (e.g.
    ``seeds``, ``optim.adam.lr``); ``evals``: evaluations per run (every ``steps / evals``
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
        grid.refuse_owned(self.common, ("seed", "workers", "arms", *OWNED), NAME)


OWNED = ("model.d_model", "model.n_head", "model.n_layer", "model.d_ff", "data.m",
         "data.frequency_exponent", "train.steps", "train.eval_every", "train.log_every",
         "train.warmup_steps")  # fmt: skip
"""Knowledge-QA keys every point sets from its axes."""


@dataclass(frozen=True)
class Planned:
    """A point ready to run: its axes, knowledge-QA config, model size and schedule."""

    point: GridPoint
    config: kqa.Config
    hidden_params: int
    facts: int
    steps: int
    steps_per_epoch: float
