"""In-context linear regression with a rarely sampled task group (paper A's QK control task).

Paper A's camera-ready answers the reviewers' "task that depends mainly on QK" with in-context
linear regression (the authors' public config: 9 dimensions, 20 in-context examples, batch 150,
3 task groups sampled with ratio 8^g, the rarest being the tail). How the groups' tasks differ
was not available here; this module's choice, made so that a group is a task the model must
learn from that group's own (rare) sequences:

- **Groups and frequencies.** Groups ``g = 0 .. G-1``; a training sequence belongs to group
  ``g`` with probability ``p_g ∝ ratio^(-g)`` — group 0 is the most frequent (the head), group
  ``G-1`` the rarest (the tail). With ``ratio = 8`` and ``G = 3``: 64 : 8 : 1, i.e.
  ``p = (0.877, 0.110, 0.0137)``.
- **Each group its own input subspace.** A fixed random rotation of R^d (from ``task_seed``)
  gives each group ``k`` orthonormal directions ``U_g`` (``d × k``), the groups' subspaces
  mutually orthogonal (``k = d // G``: 3 at d = 9). A sequence of group g has inputs
  ``x_i = U_g z_i``, ``z_i ~ N(0, I_k)``, and a fresh weight vector ``w = U_g v``,
  ``v ~ N(0, I_k / k)``; targets ``y_i = w · x_i`` (no noise), so ``E[y²] = 1`` in every group.
  Solving a group's regressions in context means attending by the similarity of inputs in that
  group's directions — the query–key work the control task is meant to load — and the tail's
  directions occur only in the tail's sequences.
- **Tokens** (Garg et al. 2022 format): ``x_1, y_1, …, x_n, y_n`` as ``2n`` tokens of ``d + 1``
  features, ``[x_i, 0]`` and ``[0, …, 0, y_i]``. The prediction at the token of ``x_i`` is the
  model's guess of ``y_i`` from the ``i - 1`` examples before it; every such position is a query
  (targets there, -100 at the ``y`` tokens).

A batch is addressed by step (:mod:`tailmem.train.data`): its groups and draws come from a
generator seeded with ``(seed, step)``, so resumed and multi-rank runs see the same batches.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from tailmem.errors import ConfigError
from tailmem.train import IGNORE_INDEX, shard_rows

EVAL_STREAM = 7_777_777
"""Offset of the evaluation generator's seed from ``task_seed`` (apart from training draws)."""


@dataclass(frozen=True)
class ICLTaskConfig:
    """The ``data`` section of ``icl-regression``: dimensions ``n_dims`` (d), in-context examples
    per sequence ``n_points`` (n), ``n_groups`` (G) sampled with probability ``∝ ratio^(-g)``,
    each with a ``subspace_dim``-dimensional input subspace (null: ``n_dims // n_groups``) drawn
    from ``task_seed``; ``eval_per_group`` held-out sequences per group measure the test MSE."""

    n_dims: int = 9
    n_points: int = 20
    n_groups: int = 3
    ratio: float = 8.0
    subspace_dim: int | None = None
    task_seed: int = 0
    eval_per_group: int = 256

    def validate(self) -> None:
        for name in ("n_dims", "n_points", "n_groups", "eval_per_group"):
            if getattr(self, name) < 1:
                raise ConfigError(f"data.{name}: got {getattr(self, name)}; expected >= 1")
        if not self.ratio >= 1:
            raise ConfigError(f"data.ratio: got {self.ratio}; expected >= 1 (1 = uniform groups)")
        if self.subspace_dim is not None and self.subspace_dim < 1:
            raise ConfigError(f"data.subspace_dim: got {self.subspace_dim}; expected null or >= 1")
        if self.k * self.n_groups > self.n_dims or self.k < 1:
            raise ConfigError(
                f"data.subspace_dim: {self.n_groups} groups × {self.k} dimensions do not fit in "
                f"n_dims = {self.n_dims}; expected n_groups × subspace_dim <= n_dims"
            )

    @property
    def k(self) -> int:
        """The dimension of each group's input subspace."""
        return self.subspace_dim if self.subspace_dim is not None else self.n_dims // self.n_groups

    @property
    def seq_len(self) -> int:
        """Tokens per sequence: ``2 n``."""
        return 2 * self.n_points

    @property
    def features(self) -> int:
        """Features per token: ``d + 1``."""
        return self.n_dims + 1


def group_probs(n_groups: int, ratio: float) -> Tensor:
    """``p_g = ratio^(-g) / Σ_h ratio^(-h)`` for ``g = 0 .. n_groups - 1`` (float64)."""
    weights = torch.tensor(float(ratio), dtype=torch.float64) ** -torch.arange(
        n_groups, dtype=torch.float64
    )
    return weights / weights.sum()


@dataclass(frozen=True)
class Sequences:
    """Token vectors ``(B, 2n, d+1)``, targets ``(B, 2n)`` (-100 off the query positions), the
    group of each row ``(B,)`` and its weight vector ``(B, d)``."""

    tokens: Tensor
    targets: Tensor
    groups: Tensor
    weights: Tensor


class ICLTasks:
    """The task groups of a :class:`ICLTaskConfig` and sequences drawn from them."""

    def __init__(self, cfg: ICLTaskConfig) -> None:
        cfg.validate()
        self.cfg = cfg
        gen = torch.Generator().manual_seed(cfg.task_seed)
        rotation, _ = torch.linalg.qr(torch.randn(cfg.n_dims, cfg.n_dims, generator=gen))
        k = cfg.k
        self.bases = torch.stack(  # (G, d, k): orthonormal columns, groups orthogonal
            [rotation[:, g * k : (g + 1) * k] for g in range(cfg.n_groups)]
        )
        self.probs = group_probs(cfg.n_groups, cfg.ratio)

    def sample(self, gen: torch.Generator, groups: Tensor) -> Sequences:
        """One sequence per entry of ``groups`` (group ids), drawn with ``gen``."""
        cfg, rows = self.cfg, len(groups)
        n, d, k = cfg.n_points, cfg.n_dims, cfg.k
        z = torch.randn(rows, n, k, generator=gen)
        v = torch.randn(rows, k, generator=gen) / k**0.5
        basis = self.bases[groups]  # (B, d, k)
        xs = torch.einsum("bdk,bnk->bnd", basis, z)
        weights = torch.einsum("bdk,bk->bd", basis, v)
        ys = torch.einsum("bnk,bk->bn", z, v)
        tokens = torch.zeros(rows, 2 * n, d + 1)
        tokens[:, 0::2, :d] = xs
        tokens[:, 1::2, d] = ys
        targets = torch.full((rows, 2 * n), float(IGNORE_INDEX))
        targets[:, 0::2] = ys
        return Sequences(tokens, targets, groups, weights)

    def train_groups(self, gen: torch.Generator, rows: int) -> Tensor:
        """``rows`` group ids drawn with probabilities :attr:`probs`."""
        return torch.multinomial(self.probs.float(), rows, replacement=True, generator=gen)

    def eval_set(self) -> Sequences:
        """``eval_per_group`` held-out sequences of every group, group 0 first (fixed draws)."""
        gen = torch.Generator().manual_seed(self.cfg.task_seed + EVAL_STREAM)
        groups = torch.arange(self.cfg.n_groups).repeat_interleave(self.cfg.eval_per_group)
        return self.sample(gen, groups)


class ICLBatches:
    """Training batches of ``batch_size`` sequences for step ``s``, drawn with a generator seeded
    by ``(seed, s)`` (a :class:`~tailmem.train.data.BatchSource`); each rank keeps its rows."""

    def __init__(self, tasks: ICLTasks, batch_size: int, seed: int) -> None:
        self.tasks, self.batch_size, self.seed = tasks, batch_size, seed

    def sequences(self, step: int) -> Sequences:
        """The whole global batch of ``step``."""
        gen = torch.Generator().manual_seed(self.seed * 1_000_003 + step)
        return self.tasks.sample(gen, self.tasks.train_groups(gen, self.batch_size))

    def batch(self, step: int, rank: int = 0, world_size: int = 1) -> tuple[Tensor, Tensor]:
        seqs = self.sequences(step)
        rows = shard_rows(self.batch_size, rank, world_size)
        return seqs.tokens[rows], seqs.targets[rows]
