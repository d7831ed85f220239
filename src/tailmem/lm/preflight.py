"""Checks an LM study makes before its run directory is written (its ``preflight(cfg)``).

The GPT of every FFN type is built on the ``meta`` device (shapes only, nothing allocated), so
an impossible shape is refused in one line, and the memory one run surely needs is estimated
and compared with what this machine has (:func:`tailmem.resources.require_memory`). The
estimate counts only what is certainly allocated — never more — so a config that fits is never
refused:

- the model is built on the host first: 4 bytes per parameter;
- training on the CPU adds the gradients and one optimiser buffer (4 bytes per parameter
  each: every kind keeps at least a momentum buffer or a moment), the fp32 logits of one
  micro-batch (``batch_size / grad_accum`` rows × ``seq_len`` × vocabulary) and the hidden
  state each block keeps for the backward pass (rows × ``seq_len`` × ``d_model`` per layer);
- a study adds what its data holds in memory (``extra_bytes``).

The vocabulary used is a lower bound: every tokenizer here is byte-level, so a vocabulary has
at least :data:`MIN_VOCAB` ids whatever the configured size.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import torch

from tailmem.errors import ConfigError
from tailmem.lm.config import LMConfig
from tailmem.models.gpt import GPT, GPTConfig
from tailmem.resources import require_memory
from tailmem.train import distributed as D

MIN_VOCAB = 256
"""Ids of a byte-level vocabulary before any merge: the fewest any of our tokenizers has."""


def parameter_count(model_cfg: GPTConfig) -> int:
    """Parameters of the GPT of ``model_cfg``, counted on the meta device: a one- and a two-layer
    model give the cost of one block, so a deep config is not built block by block."""

    def count(n_layer: int) -> int:
        with torch.device("meta"):
            model = GPT(replace(model_cfg, n_layer=n_layer))
        return sum(p.numel() for p in model.parameters())

    one = count(1)
    return one + (model_cfg.n_layer - 1) * (count(2) - one)


def run_bytes(cfg: LMConfig, model_cfg: GPTConfig) -> int:
    """Bytes one training run of ``model_cfg`` surely allocates on the host (module docstring)."""
    params = parameter_count(model_cfg)
    if torch.device(cfg.train.device).type != "cpu":
        return 4 * params
    rows = cfg.train.batch_size // cfg.train.grad_accum
    tokens = rows * cfg.train.seq_len
    activations = tokens * (model_cfg.vocab_size + model_cfg.n_layer * model_cfg.d_model)
    return 4 * (3 * params + activations)


def check_lm(cfg: LMConfig, ffns: Sequence[str], extra_bytes: int = 0) -> None:
    """Refuse (one-line :class:`~tailmem.errors.ConfigError`) a batch that the ranks and
    micro-batches cannot split evenly, and a model of any FFN type in ``ffns`` that one run on
    this machine cannot hold, with ``extra_bytes`` of study data."""
    world = D.launched_world_size()
    if cfg.train.batch_size % (world * cfg.train.grad_accum):
        raise ConfigError(
            f"train.batch_size: got {cfg.train.batch_size}; expected a multiple of {world} "
            f"rank(s) × train.grad_accum {cfg.train.grad_accum}"
        )
    for ffn in ffns:
        model_cfg = cfg.model.build(MIN_VOCAB, ffn, cfg.train.seq_len)
        need = run_bytes(cfg, model_cfg) + extra_bytes
        shape = (
            f"model {cfg.model.size} ({model_cfg.n_layer} layers × d_model {model_cfg.d_model}, "
            f"d_ff {model_cfg.d_ff}, {ffn} FFN) at batch {cfg.train.batch_size} × seq_len "
            f"{cfg.train.seq_len}"
        )
        require_memory(shape, need)
