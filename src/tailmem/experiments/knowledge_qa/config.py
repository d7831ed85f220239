"""The knowledge-QA config: arms, FFN types, the QA data, what the loss is on, the tail tables'
cells, and the tuning scores a sweep may be ranked by (the experiment:
:mod:`tailmem.experiments.knowledge_qa`)."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

from tailmem.data.bios import BiosConfig, fingerprint, generate
from tailmem.data.bpe import load_tokenizer
from tailmem.data.stream import pack_rows
from tailmem.errors import ConfigError
from tailmem.experiments.knowledge_qa.arms import ARMS
from tailmem.lm.arms import Arm, select_arms
from tailmem.lm.config import LMConfig
from tailmem.lm.entries import Entry
from tailmem.lm.rates import rate_entries
from tailmem.lm.spec import RunResult

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


@dataclass(frozen=True)
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
    identity. ``epochs``: train exactly this many epochs — every epoch is a whole number of
    batches (its last batch holds the rows left, :class:`~tailmem.data.stream.QATrainStream`
    ``epoch_aligned``) and ``train.steps`` must be ``epochs`` times that number (refused
    otherwise, naming it; :func:`at_epochs` sets it); null: ``train.steps`` alone decides and a
    batch may straddle two epochs. So every rarest fact is seen exactly ``epochs`` times
    whatever the tokenisation, batch or row length. ``cache_dir``: where the data set is built
    (default: the run directory's ``data/``). ``tuning``: how the grids are tuned (module
    docstring).
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
    epochs: int | None = None
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
        if self.epochs is not None and self.epochs < 1:
            raise ConfigError(
                f"epochs: got {self.epochs}; expected null (train.steps decides) or a whole "
                "number of epochs >= 1"
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


_PACKED_ROWS: dict[tuple[str, int], int] = {}


def packed_rows(data: BiosConfig, seq_len: int) -> int:
    """Rows of ``seq_len + 1`` tokens one epoch of ``data`` packs into (built in memory once
    per data set and row length; :func:`~tailmem.data.stream.pack_rows`)."""
    key = (fingerprint(data), seq_len)
    if key not in _PACKED_ROWS:
        tokenizer = load_tokenizer(data.tokenizer_path) if data.tokenizer_path else None
        arrays = generate(data, tokenizer).arrays
        lengths = np.diff(arrays["item_offsets"])[arrays["train_items"]]
        _PACKED_ROWS[key] = pack_rows(lengths, seq_len + 1)[1]
    return _PACKED_ROWS[key]


def epoch_steps(cfg: Config) -> int:
    """Steps of one epoch with ``epochs`` set: the packed rows in whole batches."""
    return -(-packed_rows(cfg.data, cfg.train.seq_len) // cfg.train.batch_size)


def check_epochs(cfg: Config) -> None:
    """With ``epochs`` set, refuse (one line naming the number) a ``train.steps`` that is not
    ``epochs`` whole epochs."""
    if cfg.epochs is None:
        return
    per_epoch = epoch_steps(cfg)
    if cfg.train.steps != cfg.epochs * per_epoch:
        raise ConfigError(
            f"train.steps: got {cfg.train.steps}; expected {cfg.epochs * per_epoch} for epochs "
            f"{cfg.epochs} ({per_epoch} steps an epoch at batch {cfg.train.batch_size} x "
            f"{cfg.train.seq_len} tokens), or epochs: null"
        )


def at_epochs(cfg: Config) -> Config:
    """``cfg`` with ``train.steps`` set to ``epochs`` whole epochs (unchanged when ``epochs``
    is null), and the warm-up, evaluation, logging and checkpoint cadences scaled with it (the
    same fractions of training; at least one step each where set)."""
    if cfg.epochs is None:
        return cfg
    steps = cfg.epochs * epoch_steps(cfg)
    old = cfg.train

    def scaled(value: int) -> int:
        return max(1, round(value * steps / old.steps)) if value else 0

    train = dataclasses.replace(
        old, steps=steps, warmup_steps=scaled(old.warmup_steps),
        eval_every=min(steps, scaled(old.eval_every)), log_every=scaled(old.log_every),
        ckpt_every=scaled(old.ckpt_every),
    )  # fmt: skip
    return dataclasses.replace(cfg, train=train)
