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
- a study adds what its data holds in memory (``extra_bytes``);
- the list of seeds the study runs (``seed`` .. ``seed + seeds − 1``: one Python int each).

Every user optimiser an arm trains with (``optim.<kind>.factory``) is imported, built and stepped
once on a tiny GPT of each FFN type, routed as that arm routes it
(:func:`check_user_optimizers`, :mod:`tailmem.optim.trial`): whatever its code raises is refused
here, not after the other arms have trained.

The vocabulary used is a lower bound: every tokenizer here is byte-level, so a vocabulary has
at least :data:`MIN_VOCAB` ids whatever the configured size (a study without a vocabulary, such
as in-context regression, passes its own). The seeds must stay within the seed range of
:data:`tailmem.config.SEED_MAX`.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import replace

import torch

from tailmem.errors import ConfigError
from tailmem.lm.config import LMConfig
from tailmem.lm.tuning import TUNING_SEED_OFFSET
from tailmem.models.gpt import GPT, GPTConfig
from tailmem.optim.trial import trial_step
from tailmem.resources import require_memory
from tailmem.train import distributed as D
from tailmem.typecheck import SEED_MAX

MIN_VOCAB = 256
"""Ids of a byte-level vocabulary before any merge: the fewest any of our tokenizers has."""


def parameter_count(model_cfg: GPTConfig) -> int:
    """Parameters of the GPT of ``model_cfg``, counted on the meta device: a one- and a two-layer
    model give the cost of one block, so a deep config is not built block by block."""

    def count(n_layer: int) -> int:
        try:
            with torch.device("meta"):
                model = GPT(replace(model_cfg, n_layer=n_layer))
        except RuntimeError as exc:  # a shape past int64 bytes: torch's size check overflows
            if "overflow" not in str(exc):
                raise
            raise ConfigError(
                f"model of d_model {model_cfg.d_model}, d_ff {model_cfg.d_ff}: a weight matrix "
                "has more bytes than a 64-bit size holds; expected a smaller model"
            ) from None
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


def seed_list_bytes(seeds: int) -> int:
    """Bytes of the list of ``seeds`` seeds a study runs: a pointer and an int object each."""
    return seeds * (8 + sys.getsizeof(SEED_MAX))


def check_lm(
    cfg: LMConfig,
    ffns: Sequence[str],
    extra_bytes: int = 0,
    vocab_size: int = MIN_VOCAB,
    extra: str = "the study's data",
) -> None:
    """Refuse (one-line :class:`~tailmem.errors.ConfigError`) a batch that the ranks and
    micro-batches cannot split evenly, seeds past the seed range, and a model of any FFN type in
    ``ffns`` (with at least ``vocab_size`` ids) that one run on this machine cannot hold, with
    ``extra_bytes`` of study data (``extra`` says what they are) and the list of seeds."""
    world = D.launched_world_size()
    if cfg.train.batch_size % (world * cfg.train.grad_accum):
        raise ConfigError(
            f"train.batch_size: got {cfg.train.batch_size}; expected a multiple of {world} "
            f"rank(s) × train.grad_accum {cfg.train.grad_accum}"
        )
    last = cfg.seed + cfg.seeds - 1
    if last > SEED_MAX:
        raise ConfigError(
            f"seeds: got {cfg.seeds} from seed {cfg.seed}, up to seed {last}; expected seeds "
            f"within [0, {SEED_MAX}] (fewer seeds or a smaller seed)"
        )
    tuned = any(e.sweep is not None for e in cfg.entries())
    last_tuning = cfg.seed + TUNING_SEED_OFFSET + cfg.tuning.seeds - 1
    if tuned and last_tuning > SEED_MAX:
        most = SEED_MAX - TUNING_SEED_OFFSET - cfg.tuning.seeds + 1
        raise ConfigError(
            f"seed: got {cfg.seed}; expected at most {most} (its tuning seeds run "
            f"{TUNING_SEED_OFFSET} above it, up to seed {last_tuning})"
        )
    seed_list = seed_list_bytes(cfg.seeds)
    require_memory(f"the list of seeds={cfg.seeds} seeds", seed_list)
    require_memory(extra, extra_bytes)
    for ffn in ffns:
        model_cfg = cfg.model.build(vocab_size, ffn, cfg.train.seq_len)
        need = run_bytes(cfg, model_cfg) + extra_bytes + seed_list
        shape = (
            f"model {cfg.model.size} ({model_cfg.n_layer} layers × d_model {model_cfg.d_model}, "
            f"d_ff {model_cfg.d_ff}, {ffn} FFN) at batch {cfg.train.batch_size} × seq_len "
            f"{cfg.train.seq_len}"
        )
        require_memory(shape, need)
    check_user_optimizers(cfg, ffns)


TRIAL_MODEL = {"vocab_size": 37, "n_layer": 1, "n_head": 2, "d_model": 8, "d_ff": 24}
"""The tiny GPT a user's optimiser takes its trial step on (every role, no size in common with
another, so no matrix looks vocabulary-shaped by accident)."""


def check_user_optimizers(cfg: LMConfig, ffns: Sequence[str]) -> None:
    """Step every arm that trains with a user's optimiser once, at each of its learning rates,
    on a tiny GPT of each FFN type in ``ffns`` with the config's model options (see
    :func:`tailmem.optim.trial.trial_step`); one ConfigError line naming the arm otherwise."""
    user = {name for name, section in cfg.optim.items() if section.kind.path is not None}
    for arm in cfg.run_arms():
        if not user & set(arm.kinds):
            continue
        sections = {kind: cfg.optim[kind] for kind in arm.kinds}
        trials = max(len(section.grid) for section in sections.values())
        for ffn in ffns:
            for i in range(trials):
                settings = {
                    kind: section.at(section.grid[min(i, len(section.grid) - 1)])
                    for kind, section in sections.items()
                }
                try:
                    with torch.random.fork_rng(devices=[]):  # the caller's random state stays
                        trial_step(_trial_model(cfg, ffn), arm.recipe, settings)
                except ConfigError as exc:
                    raise ConfigError(f"arm {arm.name!r}: {exc}") from None


def _trial_model(cfg: LMConfig, ffn: str) -> GPT:
    """The tiny GPT of :data:`TRIAL_MODEL` with ``ffn`` and the config's model options."""
    model = cfg.model
    return GPT(
        GPTConfig(
            ffn=ffn,
            qk_norm=model.qk_norm,
            tie_weights=model.tie_weights,
            pos_encoding=model.pos_encoding,
            norm=model.norm,
            residual_init=model.residual_init,
            max_seq_len=8,
            vocab_size=TRIAL_MODEL["vocab_size"],
            n_layer=TRIAL_MODEL["n_layer"],
            n_head=TRIAL_MODEL["n_head"],
            d_model=TRIAL_MODEL["d_model"],
            d_ff=TRIAL_MODEL["d_ff"],
        )
    )
