"""The map's grid: points, their model shape and schedule, facts and block parameters, and the
paper's point (see :mod:`tailmem.experiments.qa_map`)."""

from __future__ import annotations

import dataclasses
import itertools
from dataclasses import dataclass, field

from tailmem.data.bios import N_ATTRIBUTES, group_sizes
from tailmem.errors import ConfigError
from tailmem.lm.config import ModelSection, TrainSection
from tailmem.models.gpt import GPTConfig, count_params, gpt_config
from tailmem.typecheck import check_range

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


@dataclass(frozen=True)
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

    def axes(self) -> dict[str, float]:
        """Each axis's value, by name (:data:`AXES`)."""
        return dataclasses.asdict(self)


def grid_points(axes: AxesSection) -> list[GridPoint]:
    """The cartesian product of the axes, in the order of :data:`AXES` (the last fastest)."""
    values = [getattr(axes, name) for name in AXES]
    return [GridPoint(*combo) for combo in itertools.product(*values)]


@dataclass(frozen=True)
class Shape:
    """A point's model shape: width, heads, layers and FFN width."""

    d_model: int
    n_head: int
    n_layer: int
    d_ff: int

    def of(self, model: ModelSection) -> ModelSection:
        """``model`` at this shape."""
        return dataclasses.replace(model, d_model=self.d_model, n_head=self.n_head,
                                   n_layer=self.n_layer, d_ff=self.d_ff)  # fmt: skip


def model_shape(point: GridPoint, head_dim: int, ffn_mult: int) -> Shape:
    """Width and depth as a model shape: heads of ``head_dim`` where the width is a multiple of
    it, one head of the whole width below it."""
    width = point.width
    if width >= head_dim and width % head_dim:
        raise ConfigError(
            f"axes.width: got {width}; expected a multiple of head_dim {head_dim} (or less than it)"
        )
    return Shape(width, max(1, width // head_dim), point.depth, ffn_mult * width)


@dataclass(frozen=True)
class Schedule:
    """A run's steps, evaluation and log cadence and warm-up."""

    steps: int
    eval_every: int
    log_every: int
    warmup_steps: int

    def of(self, train: TrainSection) -> TrainSection:
        """``train`` on this schedule."""
        return dataclasses.replace(
            train, steps=self.steps, eval_every=self.eval_every, log_every=self.log_every,
            warmup_steps=self.warmup_steps,
        )  # fmt: skip


def schedule(steps: int, evals: int, warmup_frac: float) -> Schedule:
    """The schedule of a run of ``steps`` with ``evals`` evaluations (and log lines) and a
    warm-up of ``warmup_frac`` of the steps (at least one)."""
    every = max(1, steps // evals)
    return Schedule(steps, every, every, max(1, round(warmup_frac * steps)))


def steps_for(exposures: float, steps_per_epoch: float, qa_per_selection: int) -> int:
    """Steps that train each rarest-group fact ``exposures`` times: the rarest group has one
    selection, so an epoch trains each of its facts ``qa_per_selection`` times."""
    return max(1, round(exposures * steps_per_epoch / qa_per_selection))
