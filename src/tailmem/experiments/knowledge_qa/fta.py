"""The data and the metrics of knowledge-QA: batches of QA samples, the loss on answer tokens,
and first-token accuracy (FTA) and whole-answer exact match (EM) per frequency group as an eval
hook (paper A3).

The model is asked every evaluation question (one per person and attribute), or, with a
``sample`` of ``n`` questions per group, the same ``n`` randomly chosen questions of each group at
every evaluation (all of a group with fewer): a group's FTA is then the fraction of its sampled
questions, and ``fta_all`` weighs each group's fraction by its share of all questions (an
unbiased estimate of the fraction over all of them). Used where asking every question costs
more than the training it measures (m = 15 has 196,608 questions).

- **FTA**: the question counts as answered when the arg-max of the next-token logits after the
  prompt is the first token of the answer (the paper's metric).
- **EM**: the question counts as answered when greedy decoding from the prompt reproduces the
  whole answer, token by token, for the answer's length. The first BPE token of a date or a
  city is shared by many answers, so FTA measures a coarser memory than EM; ``EM <= FTA``
  always. Decoding stops at the answer's length and does not ask for EOS afterwards (with
  ``loss_on="answer"`` EOS is never a training target).

- **Answer loss**: the mean next-token cross-entropy of each group's answer tokens (``loss``),
  and ``loss_train``, the answer loss with every group weighted as training weighs it (its
  answer tokens times its selections ``S_g``): the training objective on the answers, measured
  on the whole evaluation set instead of one batch. It is the LR sweeps' default score: the
  rarest group carries about 1/(m+1) of it (FTA over all questions gives it half).

Greedy decoding needs no loop: it reproduces the answer exactly when, at every answer
position, the arg-max given the prompt and the *true* earlier answer tokens is the true next
token (by induction, greedy decoding then sees exactly those earlier tokens). So one forward
pass over ``prompt + answer`` scores both metrics: FTA reads the first answer position, EM all
of them. FTA (EM) of a group is the fraction of its questions answered; ``fta_all``
(``em_all``) is the fraction over all questions (groups hold different numbers of people, so it
is not the mean of the groups). Under ``torchrun`` each rank scores every ``world_size``-th
batch and the counts are summed.

Knowledge-QA trains on answer tokens only (about 3 of every 21 tokens) and evaluates one
next-token prediction per question, so the loss and the predictions run the GPT's trunk and
apply the LM head only at the positions needed (:func:`answer_loss_sum`, :func:`logits_at`).

With ``packing="document"`` a training batch's inputs are ``(rows, T, 3)``: token, position
within its item and the item's slot in the row (:func:`split_inputs`), so that the loss runs the
GPT with each item attending only to itself from position 0 — the context evaluation asks in.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any, Literal

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor, nn

from tailmem.data.bios import BiosDataset, load_dataset
from tailmem.data.stream import QATrainStream
from tailmem.lm.spec import BatchShape
from tailmem.models.gpt import GPT, GPTConfig
from tailmem.train import IGNORE_INDEX, EvalHook, shard_rows, token_loss_sum
from tailmem.train import distributed as D

DIGITS = 5
"""FTA and EM values are rounded to this many decimals in metrics (ratios of small counts)."""


def chance_fta(dataset: BiosDataset) -> float:
    """FTA of answering each attribute with its most common first token, averaged over the six
    attributes (every group asks each attribute equally often, so this is every group's floor)."""
    return float(np.mean(list(dataset.first_token_chance().values())))


def split_inputs(x: Tensor) -> tuple[Tensor, dict[str, Tensor]]:
    """Token ids and the GPT's packed-document arguments of a batch's inputs: ``(rows, T)``
    tokens alone, or ``(rows, T, 3)`` tokens, ``positions`` and ``doc_ids``."""
    if x.ndim == 2:
        return x, {}
    return x[..., 0], {"positions": x[..., 1], "doc_ids": x[..., 2]}


def answer_loss_sum(model: nn.Module, x: Tensor, y: Tensor) -> Tensor:
    """Summed next-token cross-entropy over the targets ``y != -100`` (the training loop's
    ``loss_fn``; ``x`` as :func:`split_inputs` reads it), with the head applied at those
    positions only when ``model`` is a plain GPT (a DDP wrapper must be called itself, so it
    takes the full-logit path)."""
    tokens, documents = split_inputs(x)
    if type(model) is not GPT:
        return token_loss_sum(functools.partial(model, **documents), tokens, y)
    keep = y != IGNORE_INDEX
    logits = model.head(model.hidden(tokens, **documents)[keep])
    return F.cross_entropy(logits.float(), y[keep], reduction="sum")


def logits_at(model: nn.Module, idx: Tensor, positions: Tensor) -> Tensor:
    """Next-token logits ``(B, vocab)`` of row ``b`` at position ``positions[b]``."""
    rows = torch.arange(len(positions), device=positions.device)
    return logits_of(model, idx, rows, positions)


def logits_of(model: nn.Module, idx: Tensor, rows: Tensor, positions: Tensor) -> Tensor:
    """Next-token logits ``(N, vocab)`` of row ``rows[i]`` at position ``positions[i]``."""
    if type(model) is not GPT:
        out = model(idx)
        logits = out[0] if isinstance(out, tuple) else out
        return logits[rows, positions]
    return model.head(model.hidden(idx)[rows, positions])


@dataclass(frozen=True)
class AnswerBatch:
    """Eval questions with their answers: ``tokens`` ``(B, W)`` holds prompt and answer (no
    EOS), right-padded; one entry per answer token of every question, the ``i``-th predicted by
    the logits of row ``row[i]`` at ``position[i]`` and ``target[i]`` the true token, ``first[i]``
    whether it is its question's first answer token; ``group`` ``(B,)``."""

    tokens: Tensor
    row: Tensor
    position: Tensor
    target: Tensor
    first: Tensor
    group: Tensor


def answer_batch(dataset: BiosDataset, index: np.ndarray) -> AnswerBatch:
    """The eval questions ``index`` as one :class:`AnswerBatch`. A question's row holds its
    prompt and its answer but the last answer token (whose next token, EOS, is not scored)."""
    index = np.asarray(index, dtype=np.int64)
    items = dataset.eval_items[index]
    prompt = dataset.item_loss_start[items].astype(np.int64)
    total = dataset.items.lengths[items].astype(np.int64) - 1  # prompt + answer, without EOS
    column = np.arange(int(total.max()))
    source = dataset.items.offsets[items][:, None] + column[None, :]
    inside = column[None, :] < total[:, None] - 1
    tokens = np.full((len(index), len(column) - 1), dataset.eos_id, dtype=np.int64)
    tokens[inside[:, :-1]] = dataset.items.flat[source[inside]]
    answer = (column[None, :] >= prompt[:, None]) & (column[None, :] < total[:, None])
    row, target_at = np.nonzero(answer)
    target = dataset.items.flat[source[row, target_at]].astype(np.int64)
    group = dataset.eval_group[index].astype(np.int64)
    arrays = (tokens, row, target_at - 1, target, target_at == prompt[row], group)
    return AnswerBatch(*(torch.from_numpy(a) for a in arrays))


def sample_questions(groups: np.ndarray, per_group: int, seed: int) -> np.ndarray:
    """Indices of ``per_group`` questions of every group (all of a smaller group), drawn without
    replacement by a generator seeded with ``seed``, in increasing order."""
    rng = np.random.default_rng([seed, 0x5A])
    chosen = []
    for group in np.unique(groups):
        members = np.flatnonzero(groups == group)
        if len(members) > per_group:
            members = rng.choice(members, per_group, replace=False)
        chosen.append(members)
    return np.sort(np.concatenate(chosen))


class FTAEvaluator:
    """``hook(step, model) -> {"fta": [per group], "fta_all", "em": [per group], "em_all",
    "loss": [per group], "loss_train"}`` (rounded to :data:`DIGITS` decimals): first-token
    accuracy, whole-answer exact match and the answer loss (module docstring).

    The questions — every one, or ``sample`` per group (see the module docstring; drawn with the
    data set's seed) — are packed once into right-padded batches of ``batch_size`` (sorted by
    the length of prompt plus answer so that little padding is computed).
    """

    def __init__(
        self,
        dataset: BiosDataset,
        batch_size: int,
        ctx: D.DistContext | None = None,
        sample: int | None = None,
    ) -> None:
        self.ctx = ctx or D.DistContext()
        self.n_groups = dataset.n_groups
        asked = np.arange(len(dataset.eval_items))
        if sample is not None:
            asked = sample_questions(dataset.eval_group, sample, dataset.cfg.seed)
        lengths = dataset.items.lengths[dataset.eval_items[asked]]
        order = asked[np.argsort(lengths, kind="stable")]
        self.batches = [
            answer_batch(dataset, order[start : start + batch_size])
            for start in range(0, len(order), batch_size)
        ]
        self.counts = torch.from_numpy(
            np.bincount(dataset.eval_group[asked], minlength=self.n_groups).astype(np.float64)
        )
        everyone = np.bincount(dataset.eval_group, minlength=self.n_groups).astype(np.float64)
        self.weights = torch.from_numpy(everyone) / self.counts.clamp(min=1)
        """Questions of a group per question asked (1 without a sample)."""
        self.selections = torch.from_numpy(dataset.selections_per_group().astype(np.float64))
        """How often training sees each fact of a group per epoch (``S_g``)."""

    @torch.no_grad()
    def correct_by_group(self, model: nn.Module) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        """Per group (summed over ranks, float64, each ``(n_groups,)``): questions answered by
        their first token, questions answered whole, the answer tokens' summed cross-entropy
        and the number of answer tokens."""
        first = next(model.parameters(), None)  # a model without parameters runs on the CPU
        device = first.device if first is not None else torch.device("cpu")
        sums = torch.zeros(4, self.n_groups, dtype=torch.float64, device=device)
        for batch in self.batches[self.ctx.rank :: self.ctx.world_size]:
            b = AnswerBatch(*(getattr(batch, f.name).to(device) for f in fields(batch)))
            logits = logits_of(model, b.tokens, b.row, b.position).float()
            hit = logits.argmax(-1) == b.target
            loss = F.cross_entropy(logits, b.target, reduction="none").double()
            misses = torch.zeros(len(b.group), device=device).index_add_(0, b.row, (~hit).float())
            token_group = b.group[b.row]
            sums[0].index_add_(0, b.group[b.row[b.first]], hit[b.first].double())
            sums[1].index_add_(0, b.group, (misses == 0).double())
            sums[2].index_add_(0, token_group, loss)
            sums[3].index_add_(0, token_group, torch.ones_like(loss))
        fta, em, loss_sum, tokens = D.all_reduce_sum(sums, self.ctx).cpu()
        return fta, em, loss_sum, tokens

    def __call__(self, step: int, model: nn.Module) -> dict[str, float | list[float]]:
        """FTA and exact match per group and over all questions, the answer tokens' loss per
        group and as training weighs them."""
        out: dict[str, float | list[float]] = {}
        fta, em, loss_sum, tokens = self.correct_by_group(model)
        for name, correct in (("fta", fta), ("em", em)):
            by_group = (correct / self.counts.clamp(min=1)).tolist()
            out[name] = [round(v, DIGITS) for v in by_group]
            everyone = correct * self.weights  # the count over all questions, estimated
            out[f"{name}_all"] = round(float(everyone.sum() / (self.counts * self.weights).sum()),
                                       DIGITS)  # fmt: skip
        out["loss"] = [round(v, DIGITS) for v in (loss_sum / tokens.clamp(min=1)).tolist()]
        trained = self.weights * self.selections  # training's weight of an asked answer token
        out["loss_train"] = round(float((loss_sum * trained).sum() / (tokens * trained).sum()),
                                  DIGITS)  # fmt: skip
        return out


def describe_fta(metrics: Mapping[str, Any]) -> str:
    """A log line's view of an evaluation: FTA by group (frequent first), FTA and exact match
    over all questions."""
    groups = " ".join(f"{v:.2f}" for v in metrics["fta"])
    return (
        f"FTA by group [{groups}], all questions {metrics['fta_all']:.3f} "
        f"(exact match {metrics['em_all']:.3f})"
    )


class QABatches:
    """The training loop's batch source over a :class:`QATrainStream`: targets outside the loss
    mask become ``-100``, each rank keeps its rows of the global batch, and with
    ``packing="document"`` the inputs carry positions and slots (:func:`split_inputs`)."""

    def __init__(self, stream: QATrainStream) -> None:
        self.stream = stream

    def batch(self, step: int, rank: int = 0, world_size: int = 1) -> tuple[Tensor, Tensor]:
        packed = self.stream.packed(step)
        x = packed.x
        if self.stream.packing == "document":
            x = np.stack([x, packed.positions, packed.doc_ids], axis=-1)
        rows = shard_rows(self.stream.batch_size, rank, world_size)
        y = np.where(packed.loss_mask, packed.y, IGNORE_INDEX)
        return torch.from_numpy(x[rows]), torch.from_numpy(y[rows])


@dataclass
class QAMaterials:
    """The loaded data set with its evaluators (a :class:`~tailmem.lm.subrun.Materials`);
    ``eval_sample``: questions asked per group (None: all of them); ``epoch_aligned``: every
    epoch a whole number of batches (:class:`~tailmem.data.stream.QATrainStream`)."""

    dataset: BiosDataset
    loss_on: Literal["answer", "all"]
    eval_batch_size: int
    packing: Literal["cross", "document"] = "cross"
    eval_sample: int | None = None
    epoch_aligned: bool = False

    @property
    def vocab_size(self) -> int:
        return self.dataset.vocab_size

    @property
    def identity(self) -> dict[str, Any]:
        """What determines a run's numbers; ``eval_sample`` and ``epoch_aligned`` only when
        set, so runs without them keep the identity they had before they existed."""
        later = {} if self.eval_sample is None else {"eval_sample": self.eval_sample}
        if self.epoch_aligned:
            later["epoch_aligned"] = True
        return {"bios": self.dataset.fingerprint, "loss_on": self.loss_on, "eval": "fta+em+loss",
                "packing": self.packing, **later}  # fmt: skip

    def batches(self, seed: int, batch: BatchShape) -> QABatches:
        return QABatches(
            QATrainStream(
                self.dataset,
                batch.batch_size,
                batch.seq_len,
                seed,
                self.loss_on,
                self.packing,
                self.epoch_aligned,
            )
        )

    def hooks(self, model_cfg: GPTConfig, ctx: D.DistContext) -> list[EvalHook]:
        dataset = self.dataset
        return [_evaluator(dataset.path, dataset.fingerprint, self.eval_batch_size, ctx,
                           self.eval_sample)]  # fmt: skip


@dataclass(frozen=True)
class QAData:
    """Picklable description of the data (a :class:`~tailmem.lm.subrun.DataSpec`): a built data
    set, what the loss counts, the evaluation batch size, how items share a row and how many
    questions per group an evaluation asks (None: all) and whether every epoch is a whole number
    of batches."""

    path: str
    fingerprint: str
    loss_on: Literal["answer", "all"]
    eval_batch_size: int
    packing: Literal["cross", "document"] = "cross"
    eval_sample: int | None = None
    epoch_aligned: bool = False

    def load(self, ctx: D.DistContext) -> QAMaterials:
        dataset = _dataset(self.path, self.fingerprint)
        return QAMaterials(
            dataset,
            self.loss_on,
            self.eval_batch_size,
            self.packing,
            self.eval_sample,
            self.epoch_aligned,
        )


@functools.lru_cache(maxsize=2)
def _dataset(path: str, fingerprint: str) -> BiosDataset:
    """The data set, loaded once per process."""
    return load_dataset(path, fingerprint)


@functools.lru_cache(maxsize=4)
def _evaluator(
    path: Any, fingerprint: str, batch_size: int, ctx: D.DistContext, sample: int | None
) -> FTAEvaluator:
    """The evaluator of a data set, packed once per process."""
    return FTAEvaluator(_dataset(str(path), fingerprint), batch_size, ctx, sample)
