"""First-token accuracy (FTA) per frequency group, as an eval hook of the training loop (A3).

The model is asked every evaluation question (one per person and attribute); the question is
answered correctly when the arg-max of the next-token logits after the prompt is the first token
of the answer. FTA of a group is the fraction of its questions answered correctly. Under
``torchrun`` each rank scores every ``world_size``-th batch and the counts are summed.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
import torch.distributed as dist
from torch import Tensor, nn

from tailmem.data.bios import BiosDataset
from tailmem.experiments.qa.model_io import logits_at

DIGITS = 5
"""FTA values are rounded to this many decimals in metrics (they are ratios of small counts)."""


def chance_fta(dataset: BiosDataset) -> float:
    """FTA of answering each attribute with its most common first token, averaged over the six
    attributes (every group asks each attribute equally often, so this is every group's floor)."""
    return float(np.mean(list(dataset.first_token_chance().values())))


class FTAEvaluator:
    """``hook(step, model) -> {"fta": [per group], "fta_mean": over all questions}`` (rounded to
    :data:`DIGITS` decimals).

    The questions are packed once into right-padded batches of ``batch_size`` (sorted by prompt
    length so that little padding is computed); the hook runs them under ``no_grad`` (the training
    loop already sets eval mode and ``no_grad``).
    """

    def __init__(self, dataset: BiosDataset, batch_size: int, device: str | torch.device) -> None:
        self.device = torch.device(device)
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
        rank, world = (dist.get_rank(), dist.get_world_size()) if dist.is_initialized() else (0, 1)
        correct = torch.zeros(self.n_groups, dtype=torch.float64, device=self.device)
        for tokens, last, first, group in self.batches[rank::world]:
            pred = logits_at(model, tokens.to(self.device), last.to(self.device)).argmax(-1)
            hit = (pred == first.to(self.device)).double()
            correct.index_add_(0, group.to(self.device), hit)
        if world > 1:
            dist.all_reduce(correct)
        return correct.cpu()

    def __call__(self, step: int, model: nn.Module) -> dict[str, Any]:
        correct = self.correct_by_group(model)
        fta = (correct / self.counts.clamp(min=1)).tolist()
        mean = float(correct.sum() / self.counts.sum())
        return {"fta": [round(v, DIGITS) for v in fta], "fta_mean": round(mean, DIGITS)}
