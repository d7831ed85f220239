"""The data and the metric of knowledge-QA: batches of QA samples, the loss on answer tokens, and
first-token accuracy (FTA) per frequency group as an eval hook (paper A3).

The model is asked every evaluation question (one per person and attribute); the question is
answered correctly when the arg-max of the next-token logits after the prompt is the first token
of the answer. FTA of a group is the fraction of its questions answered correctly; ``fta_all``
is the fraction over all questions (groups hold different numbers of people, so it is not the
mean of the groups). Under ``torchrun`` each rank scores every ``world_size``-th batch and the
counts are summed.

Knowledge-QA trains on answer tokens only (about 3 of every 21 tokens) and evaluates one
next-token prediction per question, so the loss and the predictions run the GPT's trunk and
apply the LM head only at the positions needed (:func:`answer_loss_sum`, :func:`logits_at`).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor, nn

from tailmem.data.bios import BiosDataset, load_dataset
from tailmem.data.stream import QATrainStream
from tailmem.lm.config import TrainSection
from tailmem.models.gpt import GPT, GPTConfig
from tailmem.train import IGNORE_INDEX, EvalHook, shard_rows, token_loss_sum
from tailmem.train import distributed as D

DIGITS = 5
"""FTA values are rounded to this many decimals in metrics (they are ratios of small counts)."""


def chance_fta(dataset: BiosDataset) -> float:
    """FTA of answering each attribute with its most common first token, averaged over the six
    attributes (every group asks each attribute equally often, so this is every group's floor)."""
    return float(np.mean(list(dataset.first_token_chance().values())))


def final_hidden(model: GPT, idx: Tensor) -> Tensor:
    """The final-normed hidden states ``(B, T, d_model)`` that :meth:`GPT.forward` feeds the
    head (the same modules, in the same order)."""
    if idx.shape[1] > model.cfg.max_seq_len:
        raise ValueError(
            f"sequence length {idx.shape[1]} exceeds max_seq_len {model.cfg.max_seq_len}"
        )
    x = model.drop(model.embed(idx))
    for block in model.blocks:
        x = block(x, model.rope_cos, model.rope_sin)
    return model.final_norm(x)


def answer_loss_sum(model: nn.Module, x: Tensor, y: Tensor) -> Tensor:
    """Summed next-token cross-entropy over the targets ``y != -100`` (the training loop's
    ``loss_fn``), with the head applied at those positions only when ``model`` is a plain GPT
    (a DDP wrapper must be called itself, so it takes the full-logit path)."""
    if type(model) is not GPT:
        return token_loss_sum(model, x, y)
    keep = y != IGNORE_INDEX
    logits = model.head(final_hidden(model, x)[keep])
    return F.cross_entropy(logits.float(), y[keep], reduction="sum")


def logits_at(model: nn.Module, idx: Tensor, positions: Tensor) -> Tensor:
    """Next-token logits ``(B, vocab)`` of row ``b`` at position ``positions[b]``."""
    rows = torch.arange(len(positions), device=positions.device)
    if type(model) is not GPT:
        out = model(idx)
        logits = out[0] if isinstance(out, tuple) else out
        return logits[rows, positions]
    return model.head(final_hidden(model, idx)[rows, positions])


class FTAEvaluator:
    """``hook(step, model) -> {"fta": [per group], "fta_all": over all questions}`` (rounded to
    :data:`DIGITS` decimals).

    The questions are packed once into right-padded batches of ``batch_size`` (sorted by prompt
    length so that little padding is computed).
    """

    def __init__(
        self, dataset: BiosDataset, batch_size: int, ctx: D.DistContext | None = None
    ) -> None:
        self.ctx = ctx or D.DistContext()
        self.n_groups = dataset.n_groups
        order = np.argsort(dataset.item_loss_start[dataset.eval_items], kind="stable")
        self.batches: list[tuple[Tensor, Tensor, Tensor, Tensor]] = []
        for start in range(0, len(order), batch_size):
            b = dataset.eval_batch(order[start : start + batch_size])
            self.batches.append(
                (
                    torch.from_numpy(b.tokens),
                    torch.from_numpy(b.lengths - 1),
                    torch.from_numpy(b.first_token),
                    torch.from_numpy(b.group),
                )
            )
        self.counts = torch.from_numpy(
            np.bincount(dataset.eval_group, minlength=self.n_groups).astype(np.float64)
        )

    @torch.no_grad()
    def correct_by_group(self, model: nn.Module) -> Tensor:
        """Number of correctly answered questions per group (summed over ranks), float64."""
        first = next(model.parameters(), None)  # a model without parameters runs on the CPU
        device = first.device if first is not None else torch.device("cpu")
        correct = torch.zeros(self.n_groups, dtype=torch.float64, device=device)
        for tokens, last, first, group in self.batches[self.ctx.rank :: self.ctx.world_size]:
            pred = logits_at(model, tokens.to(device), last.to(device)).argmax(-1)
            hit = (pred == first.to(device)).double()
            correct.index_add_(0, group.to(device), hit)
        return D.all_reduce_sum(correct, self.ctx).cpu()

    def __call__(self, step: int, model: nn.Module) -> dict[str, Any]:
        correct = self.correct_by_group(model)
        fta = (correct / self.counts.clamp(min=1)).tolist()
        overall = float(correct.sum() / self.counts.sum())
        return {"fta": [round(v, DIGITS) for v in fta], "fta_all": round(overall, DIGITS)}


def describe_fta(metrics: Mapping[str, Any]) -> str:
    """A log line's view of an evaluation: FTA by group (frequent first) and over all questions."""
    groups = " ".join(f"{v:.2f}" for v in metrics["fta"])
    return f"FTA by group [{groups}], all questions {metrics['fta_all']:.3f}"


class QABatches:
    """The training loop's batch source over a :class:`QATrainStream`: targets outside the loss
    mask become ``-100``, and each rank keeps its rows of the global batch."""

    def __init__(self, stream: QATrainStream) -> None:
        self.stream = stream

    def batch(self, step: int, rank: int = 0, world_size: int = 1) -> tuple[Tensor, Tensor]:
        x, y, mask = self.stream.batch(step)
        rows = shard_rows(self.stream.batch_size, rank, world_size)
        y = np.where(mask, y, IGNORE_INDEX)
        return torch.from_numpy(x[rows]), torch.from_numpy(y[rows])


@dataclass
class QAMaterials:
    """The loaded data set with its evaluators (a :class:`~tailmem.lm.subrun.Materials`)."""

    dataset: BiosDataset
    loss_on: str
    eval_batch_size: int

    @property
    def vocab_size(self) -> int:
        return self.dataset.vocab_size

    @property
    def identity(self) -> dict[str, Any]:
        return {"bios": self.dataset.fingerprint, "loss_on": self.loss_on}

    def batches(self, seed: int, train: TrainSection) -> QABatches:
        return QABatches(
            QATrainStream(self.dataset, train.batch_size, train.seq_len, seed, self.loss_on)
        )

    def hooks(self, model_cfg: GPTConfig, ctx: D.DistContext) -> list[EvalHook]:
        return [_evaluator(self.dataset.path, self.dataset.fingerprint, self.eval_batch_size, ctx)]


@dataclass(frozen=True)
class QAData:
    """Picklable description of the data (a :class:`~tailmem.lm.subrun.DataSpec`): a built data
    set, what the loss counts, and the evaluation batch size."""

    path: str
    fingerprint: str
    loss_on: str
    eval_batch_size: int

    def load(self, ctx: D.DistContext) -> QAMaterials:
        dataset = _dataset(self.path, self.fingerprint)
        return QAMaterials(dataset, self.loss_on, self.eval_batch_size)


@functools.lru_cache(maxsize=2)
def _dataset(path: str, fingerprint: str) -> BiosDataset:
    """The data set, loaded once per process."""
    return load_dataset(path, fingerprint)


@functools.lru_cache(maxsize=4)
def _evaluator(path: Any, fingerprint: str, batch_size: int, ctx: D.DistContext) -> FTAEvaluator:
    """The evaluator of a data set, packed once per process."""
    return FTAEvaluator(_dataset(str(path), fingerprint), batch_size, ctx)
