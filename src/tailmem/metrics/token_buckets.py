"""Validation loss split by how frequent the *target* token is in the training data.

Paper A's thesis is that Muon learns rare ("tail") associations better than Adam. On a text
corpus the closest observable is the next-token loss on rare target tokens: every token id gets a
bucket from its training unigram frequency (``tailmem.data.corpus.frequency_buckets``: with edges
(0.5, 0.9) the head is the most frequent ids covering the first half of all occurrences, the
body the next 40 %, the tail the rest), and the loss of each target position is credited to its
target's bucket. The helpers here only sum and average; they do not pick the buckets.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor

IGNORE_INDEX = -100


def bucket_names(n_buckets: int) -> tuple[str, ...]:
    """``head, body, tail`` for three buckets; ``head, tail`` for two; ``b0 ... b{n-1}`` else."""
    if n_buckets == 3:
        return ("head", "body", "tail")
    if n_buckets == 2:
        return ("head", "tail")
    return tuple(f"b{i}" for i in range(n_buckets))


def bucket_loss_sums(
    logits: Tensor, targets: Tensor, token_bucket: Tensor, n_buckets: int
) -> Tensor:
    """Per-bucket summed cross-entropy and target counts, shape ``(2, n_buckets)`` (float64).

    ``logits`` ``(..., vocab)``, ``targets`` the matching integer ids (``-100`` = not counted),
    ``token_bucket`` ``(vocab,)`` the bucket of every id. Row 0 holds loss sums, row 1 counts, so
    sums from several batches (or ranks) add up before :func:`bucket_means`.
    """
    flat_targets = targets.reshape(-1)
    losses = F.cross_entropy(
        logits.reshape(-1, logits.shape[-1]).float(),
        flat_targets,
        ignore_index=IGNORE_INDEX,
        reduction="none",
    )
    keep = flat_targets != IGNORE_INDEX
    buckets = token_bucket.to(flat_targets.device)[flat_targets[keep]]
    sums = torch.zeros(2, n_buckets, dtype=torch.float64, device=logits.device)
    sums[0].index_add_(0, buckets, losses[keep].double())
    sums[1].index_add_(0, buckets, torch.ones_like(buckets, dtype=torch.float64))
    return sums


def bucket_means(sums: Tensor) -> list[float]:
    """Mean loss per bucket from :func:`bucket_loss_sums` (NaN for an empty bucket)."""
    totals, counts = sums[0].tolist(), sums[1].tolist()
    return [t / c if c > 0 else math.nan for t, c in zip(totals, counts, strict=True)]
