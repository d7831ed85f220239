"""A training run as one typed value: :class:`RunSpec` in, :class:`RunResult` out.

The parent process builds every run of a study as a frozen :class:`RunSpec` — arm, FFN type,
seed, length, the model's :class:`~tailmem.models.gpt.GPTConfig`, the loop's
:class:`~tailmem.train.TrainConfig`, the batch shape, the data's identity and one
:class:`~tailmem.optim.registry.OptimizerSetting` per optimiser kind of the arm's recipe. Its
:attr:`~RunSpec.digest` is the sub-run's identity (``spec.json``); a worker receives it whole
and reads no config code. The run returns a :class:`RunResult`, stored as ``result.json``.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

from tailmem.claims.core import DivergedRun
from tailmem.errors import DataError
from tailmem.lm.arms import Arm
from tailmem.models.gpt import GPTConfig
from tailmem.optim.registry import OptimizerSetting
from tailmem.provenance import config_digest
from tailmem.train import TrainConfig
from tailmem.train.state import COMPLETE, DIVERGED


@dataclass(frozen=True)
class BatchShape:
    """Rows per update, tokens per row and rows per evaluation batch."""

    batch_size: int
    seq_len: int
    eval_batch_size: int


@dataclass(frozen=True, eq=False)
class RunSpec:
    """Everything that determines one training run's numbers (equal specs: equal digests).

    ``optimizers`` holds one setting per kind of ``arm.recipe``, in registry order; ``data`` is
    the identity of the study's data (:class:`~tailmem.lm.subrun.Materials`); ``loop`` the
    training loop's config (its ``progress`` flag and ``log_to`` trackers are how the run is
    shown, not part of it).
    """

    arm: Arm
    ffn: str
    seed: int
    steps: int
    model: GPTConfig
    loop: TrainConfig
    batch: BatchShape
    data: Mapping[str, Any]
    optimizers: tuple[OptimizerSetting, ...]
    initial_eval: bool = False

    def __eq__(self, other: object) -> bool:
        return isinstance(other, RunSpec) and other.digest == self.digest

    def __hash__(self) -> int:
        return hash(self.digest)

    @property
    def lrs(self) -> dict[str, float]:
        """The learning rate of every kind, in registry order."""
        return {setting.kind.name: setting.lr for setting in self.optimizers}

    def record(self) -> dict[str, Any]:
        """What ``spec.json`` stores (besides the digest). The loop's ``compile`` appears only
        when set: runs trained before it existed were eager, and their digests still hold. Its
        ``progress`` and ``log_to`` are how the run is watched, not what it computes."""
        watched = ("progress", "log_to")
        loop = {k: v for k, v in dataclasses.asdict(self.loop).items() if k not in watched}
        if not self.loop.compile:
            del loop["compile"]
        return {
            "arm": dataclasses.asdict(self.arm),
            "ffn": self.ffn,
            "lrs": self.lrs,
            "seed": self.seed,
            "steps": self.steps,
            "hparams": {s.kind.name: s.record() for s in self.optimizers},
            "model": self.model.record(),
            "train": loop,
            "batch": [self.batch.batch_size, self.batch.seq_len, self.batch.eval_batch_size],
            "data": dict(self.data),
            "initial_eval": self.initial_eval,
        }

    @cached_property
    def digest(self) -> str:
        return config_digest("lm-subrun", self.record())

    @property
    def key(self) -> str:
        """The sub-run folder, relative to the study's run directory: readable learning rates
        (4 significant digits) plus, when a rate needs more digits than that, a short hash of
        their exact values, so two rates never share a folder."""
        lrs = "-".join(f"{kind}{lr:.4g}" for kind, lr in self.lrs.items())
        if any(float(f"{lr:.4g}") != lr for lr in self.lrs.values()):
            exact = ",".join(f"{kind}={lr!r}" for kind, lr in self.lrs.items())
            lrs += "-" + hashlib.sha256(exact.encode()).hexdigest()[:8]
        return f"runs/{self.ffn}/{self.arm.name}/{lrs}-seed{self.seed}-steps{self.steps}"

    @property
    def label(self) -> str:
        """How printed lines name the run: arm, learning rates and seed."""
        lrs = " ".join(f"{kind}={lr:.3g}" for kind, lr in self.lrs.items())
        return f"{self.ffn}/{self.arm.name} {lrs} seed={self.seed}"


@dataclass(frozen=True)
class Divergence:
    """Where a diverged run stopped: the update (1-based) whose loss or gradient norm was
    non-finite, that loss, the message and the diagnostics file of the sub-run."""

    step: int
    loss: float | None
    message: str
    diagnostics: str | None = "nan_diagnostics.json"


NONFINITE_TEXT = ("nan", "inf", "-inf")
"""How a metrics line writes a non-finite number (:func:`tailmem.train.state.json_value`)."""


def _nonfinite(value: object) -> bool:
    """Whether an evaluation's value is, or holds, a non-finite number (as a float or as the
    text a metrics line writes for one)."""
    if isinstance(value, list):
        return any(_nonfinite(v) for v in value)
    if isinstance(value, str):
        return value in NONFINITE_TEXT
    return isinstance(value, float) and not math.isfinite(value)


def eval_divergence(evals: Sequence[Mapping[str, Any]]) -> Divergence | None:
    """The divergence of a run whose every update was finite but whose last evaluation has a
    non-finite loss (a ``*loss*`` key: the weights overflowed where the training batches did
    not show it); None when the last evaluation's losses are finite or there is none. Such a
    run is a diverged run, reported as one, not a result with a NaN in it."""
    if not evals:
        return None
    last = evals[-1]
    for key, value in last.items():
        if "loss" in key and _nonfinite(value):
            step = int(last.get("step", 0))
            message = (f"the evaluation after update {step} has a non-finite {key} ({value}); "
                       "the run diverged")  # fmt: skip
            return Divergence(step, None, message, diagnostics=None)
    return None


EvalValue = float | int | list[float] | None
"""One number of an evaluation: a scalar, one value per group, or null (a non-finite number,
with ``<key>_status`` beside it: :func:`tailmem.atomic.finite_json`)."""
Eval = Mapping[str, EvalValue]
"""One evaluation: ``step`` and every eval hook's numbers (a study's own metric names); read
them with :func:`step_of`, :func:`number` and :func:`per_group`."""


def step_of(evaluation: Eval) -> int:
    """The step an evaluation was made at."""
    step = evaluation["step"]
    if not isinstance(step, int):
        raise TypeError(f"an evaluation's step is {step!r}; expected an integer")
    return step


def number(evaluation: Eval, key: str) -> float:
    """The scalar ``key`` of an evaluation; NaN where it is absent or was not finite (null)."""
    value = evaluation.get(key)
    if value is None:
        return math.nan
    if isinstance(value, list):
        raise TypeError(f"evaluation {key!r} is one value per group; expected a scalar")
    return float(value)


def per_group(evaluation: Eval, key: str) -> list[float]:
    """The per-group values ``key`` of an evaluation (group 0 first)."""
    value = evaluation[key]
    if not isinstance(value, list):
        raise TypeError(f"evaluation {key!r} is {value!r}; expected one value per group")
    return value


@dataclass(frozen=True)
class RunResult:
    """What a run produced (``result.json``; :meth:`to_json` keeps its format).

    ``status`` is "complete" or "diverged"; ``evals`` the evaluation history (step 0 first when
    the spec asks for an initial evaluation); ``final`` the last evaluation of a complete run
    (empty otherwise); ``wall_seconds`` the training time when it was trained; ``reused``: it
    was found complete on disk (not stored).
    """

    digest: str
    key: str
    arm: str
    recipe: str
    ffn: str
    lrs: Mapping[str, float]
    seed: int
    steps: int
    status: str
    message: str
    steps_done: int
    final_loss: float | None
    tokens: int
    evals: Sequence[Eval]
    final: Eval
    diverged: Divergence | None
    wall_seconds: float
    reused: bool = field(default=False, compare=False)

    @property
    def ok(self) -> bool:
        return self.status == COMPLETE

    @property
    def is_diverged(self) -> bool:
        return self.status == DIVERGED

    def metric(self, name: str) -> EvalValue:
        """A number of the final evaluation (None when the run has none)."""
        return self.final.get(name)

    def to_json(self) -> dict[str, Any]:
        out = dataclasses.asdict(self)
        del out["reused"]
        out["lrs"], out["evals"], out["final"] = dict(self.lrs), list(self.evals), self.final
        return out

    @staticmethod
    def from_json(data: Mapping[str, Any], reused: bool = False) -> RunResult:
        """The result stored as ``data`` (a ``result.json``); a missing or mistyped field is a
        KeyError/TypeError for the caller to treat as "not a result"."""
        names = {f.name for f in dataclasses.fields(RunResult)} - {"reused", "diverged"}
        values = {name: data[name] for name in names}
        stopped = data.get("diverged")
        diverged = None
        if stopped is not None:  # a NaN loss is stored as null beside "loss_status"
            kept = {f.name for f in dataclasses.fields(Divergence)}
            diverged = Divergence(**{k: v for k, v in stopped.items() if k in kept})
        return RunResult(**values, diverged=diverged, reused=reused)


def diverged_runs(results: Sequence[RunResult]) -> list[DivergedRun]:
    """The diverged runs among ``results``, each with the update it diverged at (a run stored
    without its :class:`Divergence`: the updates it finished)."""
    return [
        DivergedRun(
            r.arm,
            r.ffn,
            r.seed,
            dict(r.lrs),
            r.key,
            r.diverged.step if r.diverged is not None else r.steps_done,
        )
        for r in results
        if r.is_diverged
    ]


def read_results(root: Path) -> dict[str, RunResult]:
    """Every training run under the run folder ``root``, by its folder relative to it
    (``runs/plain/muon/muon0.02-adam0.003-seed0-steps40``): the result its ``result.json``
    records (none for a study that trains no language model). A file that is not a result is
    a one-line :class:`~tailmem.errors.DataError`."""
    found = {}
    for path in sorted(root.rglob("result.json")):
        try:
            result = RunResult.from_json(json.loads(path.read_text()))
        except (json.JSONDecodeError, UnicodeDecodeError, KeyError, TypeError) as exc:
            raise DataError(
                f"{path} is not a training run's result ({type(exc).__name__}: {exc}); "
                "expected the result.json tailmem wrote"
            ) from None
        found[path.parent.relative_to(root).as_posix()] = result
    return found
