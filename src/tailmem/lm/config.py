"""The config tree every language-model study shares.

``model`` (which GPT), ``train`` (how every run trains: steps, batch, schedule, cadence, device,
threads), ``optim`` (the hyper-parameters of each optimiser kind), ``seeds`` (how many, from
``seed``) and ``workers`` (runs trained at once) have the same keys in ``ablation``, ``spectra``
and ``knowledge-qa``; a study adds its own ``data`` section and study fields.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from tailmem.errors import ConfigError
from tailmem.models.gpt import SIZES, GPTConfig, gated_d_ff, gpt_config
from tailmem.optim.orthogonalize import METHODS
from tailmem.optim.routing import parse_recipe
from tailmem.train import TrainConfig

KINDS = ("muon", "adam", "sgd")
"""The optimiser kinds a recipe may use, in the order learning rates are written."""


@dataclass
class ModelSection:
    """The GPT: a named size of :data:`tailmem.models.gpt.SIZES`, with optional overrides.

    ``d_ff`` is the plain-FFN width; a gated FFN gets :func:`~tailmem.models.gpt.gated_d_ff` of
    it (same parameter count). ``vocab_size`` comes from the data, the FFN type from the study
    and ``max_seq_len`` from ``train.seq_len``. ``tie_weights``: the LM head shares the token
    embedding's matrix (one parameter, role ``embed``, so it is trained once, by the optimiser
    of the embedding). ``pos_encoding``: ``rope`` (rotary, the paper's), ``learned`` (an
    absolute position embedding added to the token embedding, role ``embed``) or ``none``
    (NoPE).
    """

    size: str = "cpu-small"
    n_layer: int | None = None
    n_head: int | None = None
    d_model: int | None = None
    d_ff: int | None = None
    qk_norm: bool = True
    init_std: float = 0.02
    dropout: float = 0.0
    tie_weights: bool = False
    pos_encoding: Literal["rope", "learned", "none"] = "rope"

    def validate(self) -> None:
        if self.size not in SIZES:
            raise ConfigError(f"model.size: got {self.size!r}; expected one of {', '.join(SIZES)}")
        try:
            self.build(1024, "plain", 64)
        except ConfigError as exc:
            raise ConfigError(f"model: {exc}") from None

    def build(self, vocab_size: int, ffn: str, seq_len: int) -> GPTConfig:
        """The :class:`GPTConfig` of this section for a vocabulary, FFN type and length."""
        fields: dict[str, Any] = {
            name: getattr(self, name)
            for name in ("n_layer", "n_head", "d_model")
            if getattr(self, name) is not None
        }
        d_ff = self.d_ff if self.d_ff is not None else SIZES[self.size]["d_ff"]
        return gpt_config(
            self.size,
            vocab_size=vocab_size,
            ffn=ffn,
            d_ff=gated_d_ff(d_ff) if ffn == "gated" else d_ff,
            max_seq_len=seq_len,
            qk_norm=self.qk_norm,
            init_std=self.init_std,
            dropout=self.dropout,
            tie_weights=self.tie_weights,
            pos_encoding=self.pos_encoding,
            **fields,
        )


LOOP_FIELDS = ("schedule", "decay_frac", "min_lr_frac", "grad_clip", "grad_accum", "log_every",
               "eval_every", "ckpt_every", "precision", "device")  # fmt: skip
"""The :class:`~tailmem.train.TrainConfig` fields a ``train`` section passes on as they are."""


@dataclass
class TrainSection:
    """How every run of a study trains (the fields of :class:`tailmem.train.TrainConfig`, same
    meaning, plus the batch shape and where it runs).

    ``batch_size`` rows of ``seq_len`` tokens per update; ``eval_batch_size`` rows per evaluation
    batch. A run shorter than ``steps`` (an LR-sweep run) scales ``warmup_steps`` with its length.
    ``keep_checkpoints``: after a study, keep the final checkpoint of ``all`` its runs, of the
    ``first_seed`` run of each arm (the one ``tailmem diagnose`` reads), or ``none``.
    ``threads``: torch threads of each worker (null: torch's default).
    """

    steps: int = 400
    batch_size: int = 16
    seq_len: int = 128
    grad_accum: int = 1
    grad_clip: float | None = 1.0
    schedule: str = "cosine"
    warmup_steps: int = 20
    decay_frac: float = 0.2
    min_lr_frac: float = 0.0
    eval_every: int = 50
    eval_batch_size: int = 16
    log_every: int = 10
    ckpt_every: int = 100
    keep_checkpoints: Literal["all", "first_seed", "none"] = "all"
    device: str = "cpu"
    precision: str = "fp32"
    threads: int | None = 1

    def validate(self) -> None:
        for name in ("steps", "batch_size", "seq_len", "eval_batch_size", "grad_accum"):
            if getattr(self, name) < 1:
                raise ConfigError(f"train.{name}: got {getattr(self, name)}; expected >= 1")
        if self.batch_size % self.grad_accum:
            raise ConfigError(
                f"train.grad_accum: got {self.grad_accum}; expected a divisor of train.batch_size "
                f"({self.batch_size}): each update splits the batch into that many micro-batches"
            )
        if self.threads is not None and self.threads < 1:
            raise ConfigError(f"train.threads: got {self.threads}; expected null or >= 1")
        try:
            self.loop_config(self.steps, seed=0).validate()
        except ConfigError as exc:
            raise ConfigError(f"train.{exc}") from None

    def loop_config(self, steps: int, seed: int, progress: bool = True) -> TrainConfig:
        """The loop's config of one run of ``steps`` steps with ``seed``."""
        same = {name: getattr(self, name) for name in LOOP_FIELDS}
        warmup = round(self.warmup_steps * steps / self.steps)
        return TrainConfig(
            steps=steps, warmup_steps=warmup, keep_ckpts=1, seed=seed, progress=progress, **same
        )


@dataclass
class MuonSection:
    """Muon (momentum 0.95, no Nesterov: paper A1). ``scale`` is the shape factor
    (``original``: sqrt(max(1, rows/cols)))."""

    lr: float = 0.02
    momentum: float = 0.95
    nesterov: bool = False
    method: str = "ns5"
    scale: Literal["original", "match_rms_adamw", "none"] = "original"


@dataclass
class AdamSection:
    """Adam (betas (0.8, 0.95): paper A1)."""

    lr: float = 3e-3
    betas: tuple[float, float] = (0.8, 0.95)
    eps: float = 1e-8


@dataclass
class SGDSection:
    """SGD with momentum (0.9: not published by the paper)."""

    lr: float = 0.1
    momentum: float = 0.9
    nesterov: bool = False


@dataclass
class OptimSection:
    """Hyper-parameters of every optimiser kind; ``weight_decay`` for all of them (0: paper A1).

    A study's arms route roles to kinds (:class:`~tailmem.lm.arms.Arm`); each kind's ``lr`` is
    its learning rate unless the study sweeps it.
    """

    muon: MuonSection = field(default_factory=MuonSection)
    adam: AdamSection = field(default_factory=AdamSection)
    sgd: SGDSection = field(default_factory=SGDSection)
    weight_decay: float = 0.0

    def validate(self) -> None:
        for kind in KINDS:
            lr = getattr(self, kind).lr
            if not lr > 0:
                raise ConfigError(f"optim.{kind}.lr: got {lr}; expected > 0")
        for name, value in (
            ("muon.momentum", self.muon.momentum),
            ("sgd.momentum", self.sgd.momentum),
            ("adam.betas", min(self.adam.betas)),
            ("adam.betas", max(self.adam.betas)),
        ):
            if not 0 <= value < 1:
                raise ConfigError(f"optim.{name}: got {value}; expected values in [0, 1)")
        if not self.adam.eps > 0:
            raise ConfigError(f"optim.adam.eps: got {self.adam.eps}; expected > 0")
        if self.muon.method not in METHODS:
            raise ConfigError(
                f"optim.muon.method: got {self.muon.method!r}; expected one of {', '.join(METHODS)}"
            )
        if self.weight_decay < 0:
            raise ConfigError(f"optim.weight_decay: got {self.weight_decay}; expected >= 0")

    def base_lrs(self) -> dict[str, float]:
        """The configured learning rate of every kind."""
        return {kind: getattr(self, kind).lr for kind in KINDS}

    def hparams(self, recipe: str, lrs: Mapping[str, float]) -> dict[str, dict[str, Any]]:
        """``build_optimizer`` keyword arguments for the kinds ``recipe`` uses, with learning
        rate ``lrs[kind]``."""
        kinds = parse_recipe(recipe)
        out: dict[str, dict[str, Any]] = {}
        wd = self.weight_decay
        if "muon" in kinds:
            m = self.muon
            out["muon"] = {"lr": lrs["muon"], "momentum": m.momentum, "nesterov": m.nesterov,
                           "method": m.method, "scale": m.scale, "weight_decay": wd}  # fmt: skip
        if "adam" in kinds:
            a = self.adam
            out["adam"] = {"lr": lrs["adam"], "betas": tuple(a.betas), "eps": a.eps,
                           "weight_decay": wd}  # fmt: skip
        if "sgd" in kinds:
            s = self.sgd
            out["sgd"] = {"lr": lrs["sgd"], "momentum": s.momentum, "nesterov": s.nesterov,
                          "weight_decay": wd}  # fmt: skip
        return out


@dataclass
class LMConfig:
    """What every LM study config has. ``seed`` .. ``seed + seeds - 1`` are the seeds (weights
    and data order). ``workers`` runs train at once, each in its own process with
    ``train.threads`` threads (1: one after another in this process; under torchrun every rank
    trains each run together, one at a time)."""

    seed: int = 0
    seeds: int = 1
    workers: int = 2
    model: ModelSection = field(default_factory=ModelSection)
    train: TrainSection = field(default_factory=TrainSection)
    optim: OptimSection = field(default_factory=OptimSection)

    def validate(self) -> None:
        if self.seeds < 1:
            raise ConfigError(f"seeds: got {self.seeds}; expected >= 1")
        if self.workers < 1:
            raise ConfigError(f"workers: got {self.workers}; expected >= 1")

    @property
    def seed_list(self) -> list[int]:
        return list(range(self.seed, self.seed + self.seeds))
