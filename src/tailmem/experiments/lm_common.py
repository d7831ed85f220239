"""What the language-model experiments (``ablation``, ``spectra``) share.

Not an experiment itself (it is not registered): config sections, the text corpus and its
batches, validation loss by token-frequency bucket, and :func:`run_arm` — one model trained with
one optimiser recipe in its own sub-run directory, so an interrupted experiment resumes and a
finished arm is reused.

Sub-run directory of an arm (a ``train()`` run directory)::

    arm.json          what the arm is (recipe, seed, hyperparameters) and its digest
    gpt_config.json   the model config (read by ``tailmem diagnose``)
    metrics.jsonl     the training loop's log, with the eval hooks' numbers
    ckpt/step_*.pt    checkpoints (the newest is kept)
    initial.json      the eval hooks on the freshly initialised model (step 0)
    result.json       written last: status, evaluation curve, final numbers

An arm whose ``result.json`` carries the same digest is reused as is; a sub-run with a different
digest (the config changed) is deleted and trained again; otherwise ``train()`` resumes from the
newest checkpoint. Under ``torchrun`` every rank calls the same functions; only rank 0 writes.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import torch
from torch import Tensor, nn

from tailmem import progress
from tailmem.data.corpus import Corpus, CorpusConfig, build_corpus, frequency_buckets
from tailmem.data.token_stream import TokenStream, eval_batches
from tailmem.errors import ConfigError
from tailmem.metrics.token_buckets import bucket_loss_sums, bucket_means, bucket_names
from tailmem.models.gpt import GPT, SIZES, GPTConfig, gpt_config
from tailmem.models.gpt_io import write_gpt_config
from tailmem.optim.routing import build_optimizer, parse_recipe
from tailmem.rundir import atomic_write_text, config_digest
from tailmem.train import TrainConfig, read_metrics, seed_everything
from tailmem.train import distributed as D
from tailmem.train import train as train_model

EvalHook = Callable[[int, nn.Module], Mapping[str, Any]]

HIDDEN_MATRICES = ("q", "k", "v", "o", "w_in", "w_gate", "w_out")


def muon_recipe(roles: Sequence[str]) -> str:
    """``muon:<roles> adam:*``, or ``adam:*`` when ``roles`` is empty."""
    return f"muon:{','.join(roles)} adam:*" if roles else "adam:*"


# ----------------------------------------------------------------------------------------------
# config sections


@dataclass
class ModelSection:
    """The GPT: a named size of ``tailmem.models.gpt.SIZES`` plus field overrides.

    ``vocab_size`` comes from the corpus, ``ffn`` from the experiment and ``max_seq_len`` from
    ``data.seq_len``; any other :class:`~tailmem.models.gpt.GPTConfig` field may be overridden.
    """

    size: str = "cpu-small"
    overrides: dict[str, Any] = field(default_factory=dict)

    def validate(self) -> None:
        if self.size not in SIZES:
            raise ConfigError(f"model.size: got {self.size!r}; expected one of {', '.join(SIZES)}")
        allowed = {f.name for f in dataclasses.fields(GPTConfig)} - {
            "vocab_size",
            "ffn",
            "max_seq_len",
        }
        bad = sorted(set(self.overrides) - allowed)
        if bad:
            raise ConfigError(
                f"model.overrides: unknown or fixed field {bad[0]!r}; expected some of "
                f"{', '.join(sorted(allowed))}"
            )

    def build_config(self, vocab_size: int, ffn: str, seq_len: int) -> GPTConfig:
        return gpt_config(
            self.size, vocab_size=vocab_size, ffn=ffn, max_seq_len=seq_len, **self.overrides
        )


@dataclass
class DataSection:
    """The corpus, training batches, validation set and token-frequency buckets.

    ``eval_batches`` validation batches of ``eval_batch_size`` rows are chunks evenly spaced over
    the validation split (the same tokens at every evaluation). ``bucket_edges`` split token ids
    by training frequency (see :func:`tailmem.data.corpus.frequency_buckets`). ``cache_dir``
    holds built corpora; null means ``$TAILMEM_CACHE`` or ``~/.cache/tailmem``.
    """

    corpus: CorpusConfig = field(default_factory=CorpusConfig)
    seq_len: int = 128
    batch_size: int = 16
    eval_batch_size: int = 16
    eval_batches: int = 8
    bucket_edges: list[float] = field(default_factory=lambda: [0.5, 0.9])
    cache_dir: str | None = None

    def validate(self) -> None:
        for name in ("seq_len", "batch_size", "eval_batch_size", "eval_batches"):
            if getattr(self, name) < 1:
                raise ConfigError(f"data.{name}: got {getattr(self, name)}; expected >= 1")
        edges = self.bucket_edges
        if not edges or any(not 0 < e < 1 for e in edges) or sorted(set(edges)) != list(edges):
            raise ConfigError(
                f"data.bucket_edges: got {edges}; expected increasing fractions in (0, 1)"
            )


TRAIN_FIELDS: tuple[str, ...] = ("steps", "schedule", "warmup_steps", "decay_frac",
    "min_lr_frac", "grad_clip", "grad_accum", "log_every", "eval_every", "ckpt_every", "device",
    "precision")  # fmt: skip
"""The :class:`~tailmem.train.TrainConfig` fields an experiment's ``train:`` section sets."""

TRAIN_DEFAULTS: dict[str, Any] = {
    "steps": 400,
    "schedule": "cosine",
    "warmup_steps": 20,
    "eval_every": 50,
    "ckpt_every": 100,
}
"""Where the experiments' defaults differ from ``TrainConfig``'s."""


class _TrainSectionMethods:
    def validate(self) -> None:
        self.to_train_config(0).validate()
        if self.threads is not None and self.threads < 1:
            raise ConfigError(f"train.threads: got {self.threads}; expected null or >= 1")

    def to_train_config(self, seed: int) -> TrainConfig:
        own = {name: getattr(self, name) for name in TRAIN_FIELDS}
        return TrainConfig(**own, seed=seed, keep_ckpts=1, progress=True)


def _train_section() -> type:
    """The ``TrainSection`` dataclass: :data:`TRAIN_FIELDS` with ``TrainConfig``'s types and
    defaults (:data:`TRAIN_DEFAULTS` where the experiments differ), then ``threads``. Built from
    ``TrainConfig`` so the two cannot drift apart."""
    loop_fields = {f.name: f for f in dataclasses.fields(TrainConfig)}
    specs: list[tuple[str, Any, Any]] = [
        (
            name,
            loop_fields[name].type,
            field(default=TRAIN_DEFAULTS.get(name, loop_fields[name].default)),
        )
        for name in TRAIN_FIELDS
    ]
    specs.append(("threads", "int | None", field(default=None)))
    doc = """How every arm trains (fields of :class:`~tailmem.train.TrainConfig`, same meaning).

    ``threads`` sets ``torch.set_num_threads`` for the experiment (null leaves it alone).
    """
    namespace = {"__module__": __name__, "__doc__": doc}
    return dataclasses.make_dataclass(
        "TrainSection", specs, bases=(_TrainSectionMethods,), namespace=namespace
    )


TrainSection = _train_section()


@dataclass
class OptimSection:
    """Optimiser hyperparameters shared by every arm (paper A1 protocol by default).

    Paper A1: no weight decay and no Nesterov for either optimiser, Adam betas (0.8, 0.95), Muon
    momentum 0.95, one Muon learning rate for every arm. Embedding, head and norms are always
    trained by Adam (every recipe ends in ``adam:*``). ``muon_scale`` is the Muon shape factor
    (``original``: sqrt(max(1, rows/cols))).
    """

    muon_lr: float = 0.02
    muon_momentum: float = 0.95
    muon_nesterov: bool = False
    muon_method: str = "ns5"
    muon_scale: str = "original"
    adam_lr: float = 3e-3
    adam_betas: tuple[float, float] = (0.8, 0.95)
    adam_eps: float = 1e-8
    weight_decay: float = 0.0

    def validate(self) -> None:
        for name in ("muon_lr", "adam_lr", "adam_eps"):
            if not getattr(self, name) > 0:
                raise ConfigError(f"optim.{name}: got {getattr(self, name)}; expected > 0")
        if not 0 <= self.muon_momentum < 1 or not all(0 <= b < 1 for b in self.adam_betas):
            raise ConfigError("optim.muon_momentum and optim.adam_betas must lie in [0, 1)")
        if self.weight_decay < 0:
            raise ConfigError(f"optim.weight_decay: got {self.weight_decay}; expected >= 0")

    def hparams(self, recipe: str, lr_factor: Mapping[str, float] | None = None) -> dict:
        """``build_optimizer`` keyword arguments for the kinds ``recipe`` uses."""
        factor = dict(lr_factor or {})
        kinds = parse_recipe(recipe)
        out: dict[str, dict[str, Any]] = {}
        if "muon" in kinds:
            out["muon"] = {
                "lr": self.muon_lr * factor.get("muon", 1.0),
                "momentum": self.muon_momentum,
                "nesterov": self.muon_nesterov,
                "method": self.muon_method,
                "scale": self.muon_scale,
                "weight_decay": self.weight_decay,
            }
        if "adam" in kinds:
            out["adam"] = {
                "lr": self.adam_lr * factor.get("adam", 1.0),
                "betas": tuple(self.adam_betas),
                "eps": self.adam_eps,
                "weight_decay": self.weight_decay,
            }
        return out


# ----------------------------------------------------------------------------------------------
# data


def default_cache_dir() -> Path:
    """``$TAILMEM_CACHE`` if set, else ``~/.cache/tailmem``."""
    return Path(os.environ.get("TAILMEM_CACHE") or Path.home() / ".cache" / "tailmem")


@dataclass
class LMData:
    """A built corpus with its validation batches and the frequency bucket of every token id."""

    corpus: Corpus
    section: DataSection
    val: list[tuple[Tensor, Tensor]]
    token_bucket: Tensor
    n_buckets: int

    @property
    def vocab_size(self) -> int:
        return self.corpus.vocab_size

    def stream(self, seed: int) -> TokenStream:
        """Training batches of the global batch size, ordered by ``seed``."""
        return TokenStream(self.corpus.train, self.section.batch_size, self.section.seq_len, seed)

    def bucket_shares(self) -> list[float]:
        """Share of validation targets in each bucket."""
        counts = np.zeros(self.n_buckets)
        for _, y in self.val:
            ids = self.token_bucket[y.reshape(-1)].numpy()
            counts += np.bincount(ids, minlength=self.n_buckets)
        return (counts / counts.sum()).tolist()


def prepare_data(section: DataSection, ctx: D.DistContext) -> LMData:
    """Build (rank 0) or reuse the corpus, then the fixed validation batches and buckets."""
    cache = Path(section.cache_dir) if section.cache_dir else default_cache_dir()
    if ctx.is_main:
        build_corpus(section.corpus, cache)
    D.barrier(ctx)
    corpus = build_corpus(section.corpus, cache)
    val = eval_batches(corpus.val, section.eval_batch_size, section.seq_len, section.eval_batches)
    buckets = frequency_buckets(corpus.unigram_counts, section.bucket_edges)
    return LMData(
        corpus, section, val, torch.from_numpy(buckets), n_buckets=len(section.bucket_edges) + 1
    )


def val_loss_hook(data: LMData, ctx: D.DistContext) -> EvalHook:
    """Eval hook: ``val_loss`` and ``val_loss_<bucket>`` over the fixed validation batches.

    Under ``torchrun`` each rank evaluates every ``world_size``-th batch and the sums are added
    over ranks, so every rank returns the same numbers.
    """
    names = bucket_names(data.n_buckets)

    def hook(step: int, model: nn.Module) -> dict[str, float]:
        device = next(model.parameters()).device
        sums = torch.zeros(2, data.n_buckets, dtype=torch.float64, device=device)
        for i, (x, y) in enumerate(data.val):
            if i % ctx.world_size == ctx.rank:
                out = model(x.to(device))
                logits = out[0] if isinstance(out, tuple) else out
                sums += bucket_loss_sums(logits, y.to(device), data.token_bucket, data.n_buckets)
        sums = D.all_reduce_sum(sums, ctx).cpu()
        total = sums.sum(dim=1)
        result = {"val_loss": float(total[0] / total[1])}
        for name, value in zip(names, bucket_means(sums), strict=True):
            result[f"val_loss_{name}"] = value
        return result

    return hook


# ----------------------------------------------------------------------------------------------
# one arm


@dataclass(frozen=True)
class ArmSpec:
    """One training run of an experiment: where it lives, what it trains, with which seed."""

    key: str
    recipe: str
    seed: int
    lr_factor: tuple[tuple[str, float], ...] = ()

    @property
    def factor(self) -> dict[str, float]:
        return dict(self.lr_factor)


def _json_text(obj: Any) -> str:
    return json.dumps(obj, indent=1, default=float) + "\n"


def run_arm(
    root: Path,
    arm: ArmSpec,
    *,
    model_cfg: GPTConfig,
    train: TrainSection,
    optim: OptimSection,
    data: LMData,
    hooks: Sequence[EvalHook],
    ctx: D.DistContext,
    device: torch.device,
    extra_digest: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Train ``arm`` in ``root/arm.key`` (or reuse it) and return its ``result.json`` content.

    The result holds ``status`` ("complete" or "failed" on divergence), ``evals`` (one dict per
    evaluation with ``step`` and every hook's numbers, step 0 from ``initial.json`` first),
    ``final`` (the last evaluation) and ``hparams``. Every rank returns the same result.
    """
    sub = root / arm.key
    hparams = optim.hparams(arm.recipe, arm.factor)
    tcfg = train.to_train_config(arm.seed)
    spec = {
        "recipe": arm.recipe,
        "seed": arm.seed,
        "hparams": hparams,
        "model": dataclasses.asdict(model_cfg),
        "train": {k: v for k, v in dataclasses.asdict(tcfg).items() if k != "progress"},
        "data": {
            "corpus": data.corpus.fingerprint,
            **{k: v for k, v in dataclasses.asdict(data.section).items() if k != "cache_dir"},
        },
        "extra": dict(extra_digest or {}),
    }
    digest = config_digest("arm", spec)
    reused = None
    if ctx.is_main:
        reused = _reusable(sub, digest)
    reused = D.broadcast_object(reused, ctx)
    if reused is not None:
        progress.skip(tcfg.steps)
        return reused
    started = time.perf_counter()
    seed_everything(arm.seed)
    model = GPT(model_cfg)
    if ctx.is_main:
        sub.mkdir(parents=True, exist_ok=True)
        atomic_write_text(sub / "arm.json", _json_text({"digest": digest, **spec}))
        write_gpt_config(sub, model_cfg)
    D.barrier(ctx)
    initial = _initial_eval(sub, model, hooks, device, ctx)
    optimizer = build_optimizer(model, arm.recipe, **hparams)
    outcome = train_model(model, optimizer, data.stream(arm.seed), tcfg, sub, eval_hooks=hooks)
    progress.skip(tcfg.steps - outcome.step)  # the steps a diverged run will never take
    evals = [{"step": 0, **initial}] + [
        {"step": row["step"], **row["eval"]}
        for row in read_metrics(sub / "metrics.jsonl")
        if "eval" in row
    ]
    result = {
        "digest": digest,
        "key": arm.key,
        "recipe": arm.recipe,
        "seed": arm.seed,
        "lr_factor": arm.factor,
        "hparams": hparams,
        "status": outcome.status,
        "message": outcome.message,
        "steps_done": outcome.step,
        "evals": evals,
        "final": evals[-1] if outcome.ok else {},
        "wall_seconds": round(time.perf_counter() - started, 3),
    }
    if ctx.is_main:
        atomic_write_text(sub / "result.json", _json_text(result))
    return D.broadcast_object(result if ctx.is_main else None, ctx)


def _reusable(sub: Path, digest: str) -> dict[str, Any] | None:
    """The stored result of ``sub`` if its digest matches; a stale sub-run is deleted."""
    for name in ("result.json", "arm.json"):
        path = sub / name
        if not path.is_file():
            continue
        try:
            stored = json.loads(path.read_text())
        except (json.JSONDecodeError, UnicodeDecodeError):
            stored = {}
        if stored.get("digest") != digest:
            shutil.rmtree(sub)
            return None
        if name == "result.json":
            return stored
    return None


def _initial_eval(
    sub: Path, model: nn.Module, hooks: Sequence[EvalHook], device: torch.device, ctx: D.DistContext
) -> dict[str, Any]:
    """Eval hooks on the freshly initialised model (cached in ``initial.json``)."""
    path = sub / "initial.json"
    cached = None
    if ctx.is_main and path.is_file():
        cached = json.loads(path.read_text())
    cached = D.broadcast_object(cached, ctx)
    if cached is not None:
        return cached
    model.to(device).eval()
    merged: dict[str, Any] = {}
    with torch.no_grad():
        for hook in hooks:
            merged.update(hook(0, model))
    model.train()
    if ctx.is_main:
        atomic_write_text(path, _json_text(merged))
    return merged


def seed_list(first: int, count: int) -> list[int]:
    """``count`` consecutive seeds from ``first``."""
    return list(range(first, first + count))


# ----------------------------------------------------------------------------------------------
# one experiment run


class LMExperimentConfig(Protocol):
    """The sections every language-model experiment config has."""

    ffn: str
    model: ModelSection
    data: DataSection
    train: TrainSection
    optim: OptimSection


@dataclass
class LMSession:
    """What every arm of one experiment run shares: folder, ranks, device, data, model config."""

    root: Path
    ctx: D.DistContext
    device: torch.device
    data: LMData
    model_cfg: GPTConfig
    train: TrainSection
    optim: OptimSection

    def run_arm(
        self,
        arm: ArmSpec,
        hooks: Sequence[EvalHook],
        extra_digest: Mapping[str, Any] | None = None,
    ) -> dict[str, Any]:
        """:func:`run_arm` of ``arm`` in this run with the shared settings."""
        return run_arm(
            self.root,
            arm,
            model_cfg=self.model_cfg,
            train=self.train,
            optim=self.optim,
            data=self.data,
            hooks=hooks,
            ctx=self.ctx,
            device=self.device,
            extra_digest=extra_digest,
        )

    def finish(self, write_outputs: Callable[[], None]) -> None:
        """Rank 0 writes the experiment's outputs; every rank waits for it."""
        if self.ctx.is_main:
            write_outputs()
        D.barrier(self.ctx)


def start_session(cfg: LMExperimentConfig, root: Path) -> LMSession:
    """Set the thread count, join the process group (if any), build the corpus and model config."""
    if cfg.train.threads is not None:
        torch.set_num_threads(cfg.train.threads)
    ctx, device = D.init_distributed(cfg.train.device)
    data = prepare_data(cfg.data, ctx)
    model_cfg = cfg.model.build_config(data.vocab_size, cfg.ffn, cfg.data.seq_len)
    return LMSession(root, ctx, device, data, model_cfg, cfg.train, cfg.optim)
