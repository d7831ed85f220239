"""Tuning as its own phase: a :class:`Sweep`, the trials it runs and a pure :func:`choose`.

A learning rate is tuned the same way in every study and for every arm, so that a comparison
between arms gives each the same tuning freedom (issue "A fair comparison"):

- **Tuning seeds apart from evaluation seeds.** Every candidate is trained on each of the
  sweep's ``seeds`` (:func:`tuning_seeds`: ``seed + 1000 + i``), never on a seed whose run is
  scored: a winner picked on the seed it is then evaluated on carries the winner's curse.
- **A declared score.** The study names what ranks the candidates (``tuning.score``; each study
  lists its scores and says why its default is not the quantity its claims measure); the mean
  over the tuning seeds decides, and a candidate with a failed trial (diverged, non-finite)
  ranks below every candidate without one. Ties go to the point tried first. When every
  candidate failed, nothing is chosen (:attr:`Choice.failed`): the arm is reported as diverged
  in tuning, not evaluated at a rate no trial supports.
- **One widening rule, one budget.** A winner at an end of the points tried may not be the
  optimum: the sweep then tries one more point a grid step beyond that end (the ratio of the
  end point to its neighbour), up to ``max_extend`` times, and chooses again. Every arm has the
  same budget — ``(len(grid) + max_extend) × len(seeds)`` trials — and its cost (trials used)
  is reported beside its result.

:func:`choose` is a pure function of the sweep and the scores so far: it either names the
chosen point or the next point to try (:class:`Widen`). :mod:`tailmem.lm.plan` schedules the
trials; :mod:`tailmem.lm.store` keeps chosen rates with their provenance, so a preset can
evaluate fresh seeds at stored rates and one command re-tunes.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

from tailmem.errors import ConfigError

TUNE_ONLY = ("tuning.rates=sweep", "tuning.only=true")
"""The overrides that make an LM study's run train its tuning trials only and write the
choices (``tailmem tune``; :class:`TuningSection`)."""
TUNING_SEED_OFFSET = 1000
"""Tuning seeds are ``seed + TUNING_SEED_OFFSET + i``: apart from every evaluation seed
(``seed .. seed + seeds − 1``) as long as a study runs fewer than this many seeds."""
MIN_TUNING_SEEDS = 2
"""A candidate's score is a mean over at least this many tuning seeds."""


@dataclass(frozen=True)
class Sweep:
    """One arm's tuning problem: the declared candidate ``grid`` (a learning rate, or a factor
    of the base rates), the tuning ``seeds``, the trials' length ``steps``, the name of the
    ``score`` that ranks them and how many points the widening rule may add (``max_extend``)."""

    grid: tuple[float, ...]
    seeds: tuple[int, ...]
    steps: int
    score: str
    max_extend: int = 0

    def __post_init__(self) -> None:
        if not self.grid or len(set(self.grid)) != len(self.grid):
            raise ValueError(f"a sweep needs distinct candidate points, got {self.grid}")
        if not self.seeds:
            raise ValueError("a sweep needs at least one tuning seed")

    @property
    def budget(self) -> int:
        """The most trials this sweep may run: every candidate, widening included, on every
        tuning seed (the same for every arm with the same grid length and rule)."""
        return (len(self.grid) + self.max_extend) * len(self.seeds)


@dataclass(frozen=True)
class Trial:
    """One candidate on one tuning seed: its score (higher is better), or None when the run
    failed (diverged, or a non-finite score)."""

    point: float
    seed: int
    score: float | None


@dataclass(frozen=True)
class Choice:
    """A sweep's outcome: the chosen ``point``; ``edge`` when it still sits at an end of the
    points tried (the budget ran out before it became interior: it may not be the optimum);
    every point tried in order (the grid, then widened points) with its mean score (None: a
    trial failed) and the trials run."""

    point: float
    edge: Literal["lowest", "highest"] | None
    points: tuple[float, ...]
    means: tuple[float | None, ...]
    trials: tuple[Trial, ...] = field(default=())

    @property
    def cost(self) -> int:
        """Trials run to make this choice."""
        return len(self.trials)

    @property
    def failed(self) -> bool:
        """Every candidate tried had a failed trial (diverged, or a non-finite score): no rate
        is chosen; ``point`` is only where the ranking's tie rule stopped."""
        return all(mean is None for mean in self.means)


@dataclass(frozen=True)
class Widen:
    """The sweep's next candidate: one grid step beyond the end its winner sits at."""

    point: float


def mean_score(trials: Sequence[Trial]) -> float | None:
    """The mean score of a candidate's trials; None when any failed."""
    scores = [t.score for t in trials]
    if not scores or any(s is None or not math.isfinite(s) for s in scores):
        return None
    return sum(s for s in scores if s is not None) / len(scores)


def edge_of(point: float, points: Sequence[float]) -> Literal["lowest", "highest"] | None:
    """``"lowest"``/``"highest"`` when ``point`` is an end of two or more ``points``."""
    if len(points) < 2:
        return None
    if point == min(points):
        return "lowest"
    if point == max(points):
        return "highest"
    return None


def beyond(points: Sequence[float], end: Literal["lowest", "highest"]) -> float:
    """The point one grid step beyond ``end`` of ``points``: the end times its ratio to its
    neighbour (a geometric grid continued), to 4 significant digits (a rate a person can
    read and type)."""
    ordered = sorted(points)
    point = ordered[0] ** 2 / ordered[1] if end == "lowest" else ordered[-1] ** 2 / ordered[-2]
    return float(f"{point:.4g}")


def choose(sweep: Sweep, points: Sequence[float], trials: Sequence[Trial]) -> Choice | Widen:
    """The sweep's decision after every trial of ``points`` (the grid, then the widened points
    in the order they were added) on every tuning seed: the best mean score wins (a failed
    trial ranks its point last; ties go to the earlier point); a winner at an end of ``points``
    widens the sweep while fewer than ``max_extend`` points were added, else it is chosen."""
    by_point = {p: [t for t in trials if t.point == p] for p in points}
    for p, found in by_point.items():
        if sorted(t.seed for t in found) != sorted(sweep.seeds):
            raise ValueError(
                f"point {p}: trials on seeds {[t.seed for t in found]}, expected "
                f"every tuning seed {list(sweep.seeds)}"
            )
    means = tuple(mean_score(by_point[p]) for p in points)

    def rank(i: int) -> tuple[bool, float, int]:
        mean = means[i]
        return (mean is not None, -math.inf if mean is None else mean, -i)

    winner = points[max(range(len(points)), key=rank)]
    edge = edge_of(winner, points)
    added = len(points) - len(sweep.grid)
    if edge is not None and added < sweep.max_extend:
        return Widen(beyond(points, edge))
    return Choice(winner, edge, tuple(points), means, tuple(trials))


def tuning_seeds(seed: int, count: int) -> tuple[int, ...]:
    """The tuning seeds of a study whose evaluation seeds start at ``seed``."""
    return tuple(seed + TUNING_SEED_OFFSET + i for i in range(count))


@dataclass(frozen=True)
class TuningSection:
    """``tuning``: how every learning rate given as a grid is tuned (module docstring).

    ``seeds``: tuning seeds per candidate (≥ 2; ``seed + 1000 + i``, apart from the evaluation
    seeds); ``score``: what ranks candidates (the study's choices; ``None``: its default);
    ``max_extend``: points the widening rule may add beyond an end; ``steps``: length of the
    trials (``None``: ``train.steps``); ``rates``: ``sweep`` (tune in this run), ``stored``
    (the rates stored for exactly this tuning problem, :mod:`tailmem.lm.store`: no trial is
    trained; refused when one is missing) or ``fill`` (the stored rate where the store holds
    one, a sweep in this run for every other entry: after a change that re-keys some entries,
    only those re-tune); ``store``: the store to read (``None``: the
    package's); ``only``: train the trials alone and write the choices (``tailmem tune``);
    ``rest_lr``: the rate of every arm's *rest* — the parameters trained by a kind that trains
    none of its hidden matrices (the Adam-trained embedding, head and norms of a Muon arm) —
    when that kind is swept: ``None`` borrows the rate the arm training everything with it
    chose (:mod:`tailmem.lm.rates`, the default), a number fixes it for every arm (the rest's
    rate held apart from the all-Adam arm's tuned one, as an implementation that sets it by
    hand does)."""

    seeds: int = MIN_TUNING_SEEDS
    score: str | None = None
    max_extend: int = 2
    steps: int | None = None
    rates: Literal["sweep", "stored", "fill"] = "sweep"
    store: str | None = None
    only: bool = False
    rest_lr: float | None = None

    def validate(self) -> None:
        """One-line :class:`ConfigError` for a bad field (the study's own checks:
        :meth:`check`)."""
        if self.seeds < MIN_TUNING_SEEDS:
            raise ConfigError(
                f"tuning.seeds: got {self.seeds}; expected >= {MIN_TUNING_SEEDS} (a candidate's "
                "score is a mean over tuning seeds apart from the evaluation seeds)"
            )
        if self.max_extend < 0:
            raise ConfigError(f"tuning.max_extend: got {self.max_extend}; expected >= 0")
        if self.rest_lr is not None and not (math.isfinite(self.rest_lr) and self.rest_lr > 0):
            raise ConfigError(f"tuning.rest_lr: got {self.rest_lr!r}; expected null (borrowed "
                              "from the arm that tunes it) or a positive rate")  # fmt: skip
        if self.steps is not None and self.steps < 1:
            raise ConfigError(f"tuning.steps: got {self.steps!r}; expected a positive integer")
        if self.only and self.rates == "stored":
            raise ConfigError("tuning.only: true with tuning.rates: stored trains nothing; "
                              "expected tuning.rates=sweep to tune")  # fmt: skip

    def check(self, scores: Mapping[str, str], eval_seeds: int) -> None:
        """One-line :class:`ConfigError` for a score the study does not have (``scores``: its
        named scores) or evaluation seeds that would reach the tuning seeds."""
        if eval_seeds >= TUNING_SEED_OFFSET:
            raise ConfigError(
                f"seeds: got {eval_seeds}; expected < {TUNING_SEED_OFFSET} (tuning seeds start "
                f"{TUNING_SEED_OFFSET} above the first evaluation seed)"
            )
        if self.score is not None and self.score not in scores:
            raise ConfigError(f"tuning.score: got {self.score!r}; expected one of "
                              f"{', '.join(scores)}")  # fmt: skip

    def score_name(self, scores: Mapping[str, str]) -> str:
        """The declared score, or the study's default (the first of ``scores``)."""
        return self.score if self.score is not None else next(iter(scores))

    def sweep(
        self, grid: Sequence[float], seed: int, steps: int, scores: Mapping[str, str]
    ) -> Sweep:
        """The :class:`Sweep` of a grid under this section (trials of ``steps`` unless
        ``tuning.steps`` is set)."""
        return Sweep(
            tuple(grid),
            tuning_seeds(seed, self.seeds),
            self.steps or steps,
            self.score_name(scores),
            self.max_extend,
        )
