"""Loss and predictions that apply the LM head only where they are needed.

Knowledge-QA trains on answer tokens only (about 3 of every 21 tokens) and evaluates one next-token
prediction per question, so computing ``(B, T, vocab)`` logits at every position wastes most of
the head's matmul and of the cross-entropy. These functions run the GPT's trunk (embedding,
blocks, final norm — the same modules, in the same order, as :meth:`GPT.forward`) and the head on
the selected positions only. A model wrapped in ``DistributedDataParallel`` must be called
through the wrapper (it prepares gradient synchronisation in ``forward``), so for any other
module the plain full-logit path is used.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from tailmem.models.gpt import GPT
from tailmem.train import token_loss_sum
from tailmem.train.loop import IGNORE_INDEX


def final_hidden(model: GPT, idx: Tensor) -> Tensor:
    """The final-normed hidden states ``(B, T, d_model)`` that :meth:`GPT.forward` feeds the
    head."""
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
    ``loss_fn``), with the head applied at those positions only when ``model`` is a plain GPT."""
    if type(model) is not GPT:
        return token_loss_sum(model, x, y)
    keep = y != IGNORE_INDEX
    hidden = final_hidden(model, x)[keep]
    logits = model.head(hidden)
    return F.cross_entropy(logits.float(), y[keep], reduction="sum")


def logits_at(model: nn.Module, idx: Tensor, positions: Tensor) -> Tensor:
    """Next-token logits ``(B, vocab)`` of row ``b`` at position ``positions[b]``."""
    rows = torch.arange(len(positions), device=positions.device)
    if type(model) is not GPT:
        out = model(idx)
        logits = out[0] if isinstance(out, tuple) else out
        return logits[rows, positions]
    return model.head(final_hidden(model, idx)[rows, positions])
