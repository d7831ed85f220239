"""Text-corpus data of the ``ablation`` and ``spectra`` studies, and their validation loss.

The corpus (:mod:`tailmem.data.corpus`) is built once into a cache folder; training batches are
random windows of its training split; the validation set is ``eval_batches`` fixed batches of
``train.eval_batch_size`` rows evenly spaced over the validation split (the same tokens at every
evaluation); ``bucket_edges`` split token ids by training frequency
(:func:`tailmem.data.corpus.frequency_buckets`) so the loss is also reported on head, body and
tail target tokens.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import Tensor, nn

from tailmem.data.corpus import (
    Corpus,
    CorpusConfig,
    build_corpus,
    frequency_buckets,
    given_tokenizer,
)
from tailmem.data.text_sources import check_hf_source, local_files
from tailmem.data.token_stream import TokenStream, eval_batches
from tailmem.errors import ConfigError
from tailmem.lm.spec import BatchShape
from tailmem.metrics.token_buckets import bucket_loss_sums, bucket_means, bucket_names
from tailmem.models.gpt import GPTConfig
from tailmem.resources import check_writable_folder, default_cache_dir
from tailmem.train import EvalHook
from tailmem.train import distributed as D


@dataclass(frozen=True)
class CorpusSection:
    """The ``data`` section: corpus, validation batches, frequency buckets, cache folder
    (null: ``$TAILMEM_CACHE`` or ``~/.cache/tailmem``)."""

    corpus: CorpusConfig = field(default_factory=CorpusConfig)
    eval_batches: int = 8
    bucket_edges: list[float] = field(default_factory=lambda: [0.5, 0.9])
    cache_dir: str | None = None

    def validate(self) -> None:
        if self.eval_batches < 1:
            raise ConfigError(f"data.eval_batches: got {self.eval_batches}; expected >= 1")
        edges = self.bucket_edges
        if not edges or any(not 0 < e < 1 for e in edges) or sorted(set(edges)) != list(edges):
            raise ConfigError(
                f"data.bucket_edges: got {edges}; expected increasing fractions in (0, 1)"
            )

    @property
    def n_buckets(self) -> int:
        return len(self.bucket_edges) + 1


def cache_dir_of(section: CorpusSection) -> tuple[Path, str]:
    """The cache folder of ``section`` and where it came from, as a message names it."""
    if section.cache_dir:
        return Path(section.cache_dir), "data.cache_dir"
    if os.environ.get("TAILMEM_CACHE"):
        return default_cache_dir(), "TAILMEM_CACHE"
    return default_cache_dir(), "the default cache folder"


def corpus_preflight(cfg: Any) -> None:
    """The preflight of a study that trains one FFN type (``cfg.ffn``) on a corpus
    (``cfg.data``): refuse, before anything is written, a corpus this machine cannot build
    (:func:`check_corpus`) and a model or batch it cannot train
    (:func:`tailmem.lm.preflight.check_lm`)."""
    from tailmem.lm.preflight import check_lm

    check_corpus(cfg.data)
    check_lm(cfg, [cfg.ffn])


def check_corpus(section: CorpusSection) -> None:
    """Refuse, before a run folder exists, a corpus this machine cannot build: a cache folder
    it cannot write, local files that are missing, empty folders, devices or of another type,
    a given tokenizer that does not load or lacks the end-of-text token, and a Hugging Face
    data set that cannot be fetched (offline, no network; :func:`check_hf_source`)."""
    cache, what = cache_dir_of(section)
    check_writable_folder(cache, what, "set data.cache_dir or TAILMEM_CACHE to another")
    cfg = section.corpus
    if cfg.source == "files":
        local_files(cfg.paths)
    elif cfg.source == "hf":
        assert cfg.max_docs is not None  # CorpusConfig.validate requires it for "hf"
        check_hf_source(cache, cfg.hf_name, cfg.hf_config, cfg.hf_split, cfg.max_docs,
                        cfg.text_field, cfg.hf_data_files)  # fmt: skip
    if cfg.tokenizer is not None:
        given_tokenizer(cfg.tokenizer, cfg.eos_token)


@dataclass(frozen=True)
class DataProvenance:
    """What a study trains and evaluates on (:meth:`LMData.provenance`): the corpus in words,
    its ``source`` kind, the training and validation token counts, the tokenizer in words and
    the corpus's fingerprint."""

    corpus: str
    source: str
    train_tokens: int
    val_tokens: int
    tokenizer: str
    fingerprint: str

    def to_json(self) -> dict[str, object]:
        """Its record in ``results.json`` and the report (``data``)."""
        return dataclasses.asdict(self)


@dataclass
class LMData:
    """A built corpus with its validation batches and the frequency bucket of every token id."""

    corpus: Corpus
    val: list[tuple[Tensor, Tensor]]
    token_bucket: Tensor
    n_buckets: int
    identity: dict[str, Any]

    @property
    def vocab_size(self) -> int:
        return self.corpus.vocab_size

    def batches(self, seed: int, batch: BatchShape) -> TokenStream:
        """Training batches of the global batch size, ordered by ``seed``."""
        return TokenStream(self.corpus.train, batch.batch_size, batch.seq_len, seed)

    def hooks(self, model_cfg: GPTConfig, ctx: D.DistContext) -> list[EvalHook]:
        return [val_loss_hook(self, ctx)]

    def provenance(self) -> DataProvenance:
        """What the study trains and evaluates on (corpus, token counts, tokenizer), from the
        corpus's own record: printed beside any published loss, which was measured on other
        data (paper A: FineWeb with the GPT-2 tokenizer)."""
        meta = self.corpus.meta
        config = meta["config"]
        corpus = {
            "stdlib": "the embedded Python standard-library documentation corpus",
            "hf": f"Hugging Face {config['hf_name']} ({config['hf_config']})",
        }.get(config["source"], f"local text files ({len(config['paths'])})")
        if "file_sha256" in meta["recipe"]["tokenizer"]:
            tokenizer = f"{config['tokenizer']} (given), {meta['vocab_size']} ids"
        else:
            tokenizer = f"byte-level BPE trained on the corpus, {meta['vocab_size']} ids"
        return DataProvenance(
            corpus=corpus,
            source=config["source"],
            train_tokens=int(meta["tokens"]["train"]),
            val_tokens=int(meta["tokens"]["val"]),
            tokenizer=tokenizer,
            fingerprint=meta["fingerprint"],
        )

    def bucket_shares(self) -> list[float]:
        """Share of validation targets in each bucket."""
        counts = np.zeros(self.n_buckets)
        for _, y in self.val:
            ids = self.token_bucket[y.reshape(-1)].numpy()
            counts += np.bincount(ids, minlength=self.n_buckets)
        return (counts / counts.sum()).tolist()


@dataclass(frozen=True)
class CorpusData:
    """Picklable description of a corpus study's data (:class:`~tailmem.lm.subrun.DataSpec`)."""

    section: CorpusSection
    seq_len: int
    eval_batch_size: int

    def load(self, ctx: D.DistContext) -> LMData:
        """Build (rank 0) or reuse the corpus, then the validation batches and buckets (once per
        process)."""
        key = json.dumps(dataclasses.asdict(self), sort_keys=True, default=str)
        if ctx.is_main:
            _load(key)
        D.barrier(ctx)
        return _load(key)


@functools.lru_cache(maxsize=2)
def _load(key: str) -> LMData:
    raw = json.loads(key)
    section = CorpusSection(
        CorpusConfig(**raw["section"]["corpus"]),
        raw["section"]["eval_batches"],
        raw["section"]["bucket_edges"],
        raw["section"]["cache_dir"],
    )
    corpus = build_corpus(section.corpus, cache_dir_of(section)[0])
    val = eval_batches(corpus.val, raw["eval_batch_size"], raw["seq_len"], section.eval_batches)
    buckets = frequency_buckets(corpus.unigram_counts, section.bucket_edges)
    identity = {
        "corpus": corpus.fingerprint,
        "eval_batches": section.eval_batches,
        "bucket_edges": section.bucket_edges,
    }
    return LMData(corpus, val, torch.from_numpy(buckets), section.n_buckets, identity)


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
