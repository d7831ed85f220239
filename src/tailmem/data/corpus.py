"""Text corpora for language-model training: documents -> byte-level BPE -> token shards.

Pipeline (:func:`build_corpus`)
    documents (one of three sources, optionally the first ``max_docs``)
    -> train/val split by document -> tokenizer (trained on the train documents, or given)
    -> ``train.npy`` / ``val.npy`` token shards (each document followed by the end-of-text token)
    -> ``unigram_counts.npy`` (training-split token counts, for head/body/tail buckets).

Sources (``CorpusConfig.source``, read by :mod:`tailmem.data.text_sources`)
    ``"stdlib"``  the English text every CPython installation ships — standard-library docstrings
                  and pydoc topics (:mod:`tailmem.data.stdlib_text`, about 1.7 MB); no download.
    ``"files"``   local ``.txt`` files (one document per file, paragraph or line: ``txt_mode``)
                  and ``.jsonl`` files (one JSON object per line, text in ``text_field``);
                  directories are searched recursively, in sorted order.
    ``"hf"``      the first ``max_docs`` documents of a Hugging Face data set, streamed
                  (``load_dataset(hf_name, name=hf_config, split=hf_split, streaming=True)``, e.g.
                  FineWeb-Edu), or a local ``save_to_disk`` folder; needs ``tailmem[hf]``.

Split
    A document goes to validation when ``u < val_fraction`` with ``u`` the first 8 bytes of the
    SHA-256 of its text read as a fraction of 2^64: deterministic, independent of document order,
    and identical documents always land in the same split (no leakage through duplicates). If no
    document is drawn while ``val_fraction > 0``, the one with the smallest ``u`` is used.

Cache
    Everything a build produces lives in ``cache_dir/corpus-<fingerprint[:16]>/`` with
    ``meta.json`` written last; it records the SHA-256 of every other file, and a folder whose
    files do not match (a truncated or edited ``train.npy``, say) is not reused but rebuilt. The
    fingerprint is the SHA-256 of the build recipe: the SHA-256 of
    the document texts (after ``max_docs``), the split fraction, the tokenizer (training settings
    and the ``tokenizers`` version, or the SHA-256 of a given tokenizer file) and the format
    version. A folder whose ``meta.json`` carries the same fingerprint is reused; anything else
    is rebuilt in a temporary folder and renamed into place, so readers never see a half-written
    corpus. Extracted standard-library text and fetched Hugging Face documents are cached as
    JSON lines under ``cache_dir/text/`` (keyed by interpreter, resp. data set spec) with their
    SHA-256 beside them (``*.jsonl.sha256``) and are not fetched again while they match it; delete
    that file to refetch.

Batches for training and evaluation come from :mod:`tailmem.data.token_stream`; head/body/tail
token buckets from :func:`frequency_buckets`.
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import shutil
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal, TypeGuard

import numpy as np
import tokenizers
from tokenizers import Tokenizer

from tailmem.atomic import atomic_write_bytes, file_sha256, strict_json
from tailmem.data.bpe import load_tokenizer, token_dtype, token_id, train_bpe
from tailmem.data.text_sources import (
    Document,
    digest,
    hf_text_file,
    read_jsonl,
    read_local_documents,
    stdlib_text_file,
)
from tailmem.errors import ConfigError, DataError

FORMAT_VERSION = 1
MAX_VOCAB = 1 << 20
"""The largest BPE vocabulary trained here (real ones stay below 300k ids)."""
_ENCODE_CHUNK = 1024  # documents per encode_batch call
_COPY_CHUNK = 1 << 24  # tokens per copy from the raw file into the .npy file


@dataclass(frozen=True)
class CorpusConfig:
    """What text to read and how to tokenise it (see the module docstring)."""

    source: Literal["stdlib", "files", "hf"] = "stdlib"
    paths: list[str] = field(default_factory=list)
    text_field: str = "text"
    txt_mode: Literal["file", "paragraph", "line"] = "file"
    hf_name: str = "HuggingFaceFW/fineweb-edu"
    hf_config: str | None = "sample-10BT"
    hf_split: str = "train"
    hf_data_files: list[str] = field(default_factory=list)
    max_docs: int | None = None
    val_fraction: float = 0.05
    tokenizer: str | None = None
    vocab_size: int = 4096
    min_frequency: int = 2
    eos_token: str = "<|endoftext|>"

    def validate(self) -> None:
        """Raise :class:`ConfigError` naming the first invalid field (by its name here; the config
        loader prefixes the section's key, e.g. ``data.corpus.``)."""
        if self.source not in ("stdlib", "files", "hf"):
            raise ConfigError(f"source: got {self.source!r}; expected 'stdlib', 'files' or 'hf'")
        if self.source == "files" and not self.paths:
            raise ConfigError("paths: empty; source 'files' needs .txt/.jsonl files or dirs")
        if self.txt_mode not in ("file", "paragraph", "line"):
            raise ConfigError(
                f"txt_mode: got {self.txt_mode!r}; expected 'file', 'paragraph' or 'line'"
            )
        if self.max_docs is not None and (not _is_int(self.max_docs) or self.max_docs < 1):
            raise ConfigError(f"max_docs: got {self.max_docs!r}; expected null or >= 1")
        if self.source == "hf" and self.max_docs is None:
            raise ConfigError("max_docs: null; source 'hf' streams the first max_docs docs")
        if self.source == "hf" and not self.hf_name:
            raise ConfigError("hf_name: empty; expected a data set name or local folder")
        fraction = self.val_fraction
        if (
            isinstance(fraction, bool)
            or not isinstance(fraction, (int, float))
            or not (0.0 <= fraction <= 0.5)
        ):
            raise ConfigError(
                f"val_fraction: got {self.val_fraction!r}; expected a number in [0, 0.5]"
            )
        if self.tokenizer is None and (
            not _is_int(self.vocab_size) or not 258 <= self.vocab_size <= MAX_VOCAB
        ):
            raise ConfigError(
                f"vocab_size: got {self.vocab_size!r}; expected an integer in [258, {MAX_VOCAB}] "
                "(256 bytes + end-of-text + at least one merge; the BPE trainer aborts the "
                "process far beyond any real vocabulary)"
            )
        if not _is_int(self.min_frequency) or self.min_frequency < 1:
            raise ConfigError(f"min_frequency: got {self.min_frequency!r}; expected >= 1")
        for name in ("text_field", "eos_token"):
            if not getattr(self, name):
                raise ConfigError(f"{name}: got an empty string; expected a non-empty one")


def _is_int(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def read_documents(cfg: CorpusConfig, cache_dir: str | Path) -> list[Document]:
    """All documents of ``cfg``'s source in source order, the first ``max_docs`` of them."""
    cfg.validate()
    if cfg.source == "stdlib":
        docs = read_jsonl(stdlib_text_file(cache_dir), "text")
    elif cfg.source == "files":
        docs = list(read_local_documents(cfg.paths, cfg.text_field, cfg.txt_mode))
    else:
        assert cfg.max_docs is not None  # validate() requires it for "hf"
        path = hf_text_file(
            cache_dir,
            name=cfg.hf_name,
            config=cfg.hf_config,
            split=cfg.hf_split,
            max_docs=cfg.max_docs,
            text_field=cfg.text_field,
            data_files=cfg.hf_data_files,
        )
        docs = read_jsonl(path, "text")
    if cfg.max_docs is not None:
        docs = docs[: cfg.max_docs]
    if not docs:
        raise DataError(f"corpus source {cfg.source!r} produced no non-empty documents")
    return docs


# ----------------------------------------------------------------------------------------------
# split, tokenizer, shards


def split_documents(texts: Sequence[str], val_fraction: float) -> np.ndarray:
    """Boolean mask of validation documents (hash rule of the module docstring)."""
    u = np.array(
        [int.from_bytes(hashlib.sha256(t.encode()).digest()[:8], "big") / 2.0**64 for t in texts]
    )
    is_val = u < val_fraction
    if val_fraction > 0 and not is_val.any():
        if len(texts) < 2:
            raise DataError("corpus has 1 document; a validation split needs at least 2")
        is_val[int(np.argmin(u))] = True
    if is_val.all():
        raise DataError("every document fell into the validation split; lower val_fraction")
    return is_val


def _encode_to_raw(
    tok: Tokenizer, texts: Sequence[str], eos_id: int, dtype: np.dtype, raw: Path
) -> int:
    """Append the ids of every text, each followed by ``eos_id``, to ``raw``; return the count."""
    encode = getattr(tok, "encode_batch_fast", tok.encode_batch)
    total = 0
    with open(raw, "wb") as handle:
        for start in range(0, len(texts), _ENCODE_CHUNK):
            encodings = encode(list(texts[start : start + _ENCODE_CHUNK]), add_special_tokens=False)
            flat: list[int] = []
            for enc in encodings:
                flat.extend(enc.ids)
                flat.append(eos_id)
            ids = np.array(flat, dtype=dtype)
            handle.write(ids.tobytes())
            total += len(ids)
    return total


def _raw_to_npy(raw: Path, dest: Path, dtype: np.dtype, count: int) -> None:
    out = np.lib.format.open_memmap(dest, mode="w+", dtype=dtype, shape=(count,))
    if count:
        src = np.memmap(raw, dtype=dtype, mode="r", shape=(count,))
        for start in range(0, count, _COPY_CHUNK):
            out[start : start + _COPY_CHUNK] = src[start : start + _COPY_CHUNK]
        del src
    out.flush()
    del out
    raw.unlink()


# ----------------------------------------------------------------------------------------------
# the cached corpus


@dataclass(frozen=True)
class Corpus:
    """A built corpus folder: token shards (memory-mapped), counts, tokenizer and metadata."""

    path: Path
    meta: dict[str, Any]

    @property
    def fingerprint(self) -> str:
        return str(self.meta["fingerprint"])

    @property
    def vocab_size(self) -> int:
        return int(self.meta["vocab_size"])

    @property
    def eos_id(self) -> int:
        return int(self.meta["eos_id"])

    @property
    def tokenizer_path(self) -> Path:
        return self.path / "tokenizer.json"

    @property
    def train(self) -> np.ndarray:
        """Training tokens, memory-mapped read-only (every document ends with ``eos_id``)."""
        return np.load(self.path / "train.npy", mmap_mode="r")

    @property
    def val(self) -> np.ndarray:
        """Validation tokens, memory-mapped read-only."""
        return np.load(self.path / "val.npy", mmap_mode="r")

    @property
    def unigram_counts(self) -> np.ndarray:
        """Occurrences of every token id in the training split (``int64``, ``vocab_size``)."""
        return np.load(self.path / "unigram_counts.npy")

    def tokenizer(self) -> Tokenizer:
        return load_tokenizer(self.tokenizer_path)


_CORPUS_FILES = ("meta.json", "tokenizer.json", "train.npy", "val.npy", "unigram_counts.npy")


def load_corpus(path: str | Path) -> Corpus:
    """Open a folder written by :func:`build_corpus` (:class:`DataError` if incomplete)."""
    path = Path(path)
    missing = [name for name in _CORPUS_FILES if not (path / name).is_file()]
    if missing:
        raise DataError(f"{path}: not a complete corpus folder (missing {', '.join(missing)})")
    try:
        meta = json.loads((path / "meta.json").read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise DataError(f"{path / 'meta.json'}: invalid JSON ({exc})") from None
    if not isinstance(meta, dict) or meta.get("format") != FORMAT_VERSION:
        raise DataError(f"{path / 'meta.json'}: expected corpus format {FORMAT_VERSION}")
    files = meta.get("files")
    if not isinstance(files, dict):
        raise DataError(
            f"{path / 'meta.json'}: records no file hashes; delete the folder {path} and rerun: "
            "the corpus is built again"
        )
    for name in _CORPUS_FILES[1:]:
        if file_sha256(path / name) != files.get(name):
            raise DataError(
                f"{path / name} does not match the hash in meta.json; the corpus cache is "
                "damaged: delete the folder (a rebuild replaces it)"
            )
    return Corpus(path, meta)


def _recipe(cfg: CorpusConfig, docs: Sequence[Document]) -> dict[str, Any]:
    """Everything that determines a build's output (its SHA-256 is the fingerprint)."""
    text_hash = hashlib.sha256()
    for doc in docs:
        data = doc.text.encode()
        text_hash.update(len(data).to_bytes(8, "little"))
        text_hash.update(data)
    if cfg.tokenizer is not None:
        tok_spec: dict[str, Any] = {"file_sha256": file_sha256(Path(cfg.tokenizer))}
    else:
        tok_spec = {
            "bpe_vocab_size": cfg.vocab_size,
            "min_frequency": cfg.min_frequency,
            "tokenizers": ".".join(tokenizers.__version__.split(".")[:2]),
        }
    return {
        "format": FORMAT_VERSION,
        "text_sha256": text_hash.hexdigest(),
        "n_docs": len(docs),
        "val_fraction": float(cfg.val_fraction),
        "tokenizer": tok_spec,
        "eos_token": cfg.eos_token,
    }


def build_corpus(cfg: CorpusConfig, cache_dir: str | Path) -> Corpus:
    """Build (or reuse) the corpus of ``cfg`` under ``cache_dir``; see the module docstring.

    Bad config raises :class:`ConfigError`; missing or malformed input files, a tokenizer without
    ``cfg.eos_token``, or too little text raise :class:`DataError`.
    """
    cfg.validate()
    cache_dir = Path(cache_dir)
    started = time.perf_counter()
    docs = read_documents(cfg, cache_dir)
    read_seconds = time.perf_counter() - started
    given = None if cfg.tokenizer is None else given_tokenizer(cfg.tokenizer, cfg.eos_token)
    recipe = _recipe(cfg, docs)
    fingerprint = digest(recipe)
    final = cache_dir / f"corpus-{fingerprint[:16]}"
    try:
        existing = load_corpus(final)
        if existing.fingerprint == fingerprint:
            return existing
    except DataError:
        pass
    cache_dir.mkdir(parents=True, exist_ok=True)
    tmp = cache_dir / f".{final.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp"
    tmp.mkdir(mode=0o777)  # the umask applies (mkdtemp would make it 0700)
    try:
        meta = _write_corpus(cfg, docs, given, recipe, fingerprint, tmp)
        meta["seconds"]["read"] = round(read_seconds, 3)
        meta["files"] = {name: file_sha256(tmp / name) for name in _CORPUS_FILES[1:]}
        atomic_write_bytes(tmp / "meta.json", strict_json(meta, indent=1).encode())
        _install(tmp, final, fingerprint)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return load_corpus(final)


def given_tokenizer(path: str, eos_token: str) -> Tokenizer:
    """The tokenizer file ``path`` (``corpus.tokenizer``), which must hold ``eos_token``."""
    tok = load_tokenizer(path)
    if tok.token_to_id(eos_token) is None:
        raise DataError(
            f"{path}: tokenizer has no token {eos_token!r}; set data.corpus.eos_token to its "
            "end-of-text token"
        )
    return tok


def _write_corpus(
    cfg: CorpusConfig,
    docs: Sequence[Document],
    given: Tokenizer | None,
    recipe: dict[str, Any],
    fingerprint: str,
    out: Path,
) -> dict[str, Any]:
    t0 = time.perf_counter()
    texts = [d.text for d in docs]
    is_val = split_documents(texts, cfg.val_fraction)
    train_texts = [t for t, v in zip(texts, is_val, strict=True) if not v]
    val_texts = [t for t, v in zip(texts, is_val, strict=True) if v]
    if given is None:
        tok = train_bpe(train_texts, cfg.vocab_size, cfg.eos_token, cfg.min_frequency)
    else:
        tok = given
    t1 = time.perf_counter()
    eos_id = token_id(tok, cfg.eos_token)
    vocab_size = tok.get_vocab_size()
    dtype = token_dtype(vocab_size)
    tok.save(str(out / "tokenizer.json"))
    counts = {}
    for split, split_texts in (("train", train_texts), ("val", val_texts)):
        raw = out / f"{split}.bin"
        counts[split] = _encode_to_raw(tok, split_texts, eos_id, dtype, raw)
        _raw_to_npy(raw, out / f"{split}.npy", dtype, counts[split])
    train = np.load(out / "train.npy", mmap_mode="r")
    unigram = np.zeros(vocab_size, dtype=np.int64)
    for start in range(0, len(train), _COPY_CHUNK):
        unigram += np.bincount(train[start : start + _COPY_CHUNK], minlength=vocab_size)
    del train
    np.save(out / "unigram_counts.npy", unigram)
    t2 = time.perf_counter()
    return {
        "format": FORMAT_VERSION,
        "fingerprint": fingerprint,
        "recipe": recipe,
        "config": asdict(cfg),
        "vocab_size": vocab_size,
        "eos_id": eos_id,
        "dtype": dtype.name,
        "docs": {"train": len(train_texts), "val": len(val_texts)},
        "tokens": counts,
        "chars": {"train": sum(map(len, train_texts)), "val": sum(map(len, val_texts))},
        "seconds": {"tokenizer": round(t1 - t0, 3), "encode": round(t2 - t1, 3)},
    }


def _install(tmp: Path, final: Path, fingerprint: str) -> None:
    """Rename the finished ``tmp`` folder to ``final`` (replacing a stale one)."""
    try:
        os.rename(tmp, final)
        return
    except OSError:
        pass
    try:  # another process may just have finished the same build
        if load_corpus(final).fingerprint == fingerprint:
            return
    except DataError:
        pass
    trash = final.with_name(f".{final.name}.{os.getpid()}.stale")
    os.rename(final, trash)
    os.rename(tmp, final)
    shutil.rmtree(trash, ignore_errors=True)


# ----------------------------------------------------------------------------------------------
# frequency buckets


def frequency_buckets(counts: np.ndarray, edges: Sequence[float] = (0.5, 0.9)) -> np.ndarray:
    """Bucket of every token id by training frequency: 0 = head, ..., ``len(edges)`` = tail.

    Let ``M(t)`` be the share of all training occurrences that belong to tokens strictly more
    frequent than ``t``. Token ``t`` falls in bucket ``#{e in edges : M(t) >= e}``. With the
    default edges ``(0.5, 0.9)``: the head is the most frequent tokens that together make up
    (at least) the first 50% of occurrences, the body the next 40%, the tail the rest, including
    every token never seen in training. Tokens with equal counts always share a bucket.
    """
    counts = np.asarray(counts)
    edge_arr = np.asarray(edges, dtype=np.float64)
    if counts.ndim != 1 or counts.size == 0 or (counts < 0).any():
        raise ValueError(
            f"counts must be a non-empty 1-D array of non-negative counts, got {counts}"
        )
    if (
        edge_arr.ndim != 1
        or not ((edge_arr > 0) & (edge_arr < 1)).all()
        or (np.diff(edge_arr) <= 0).any()
    ):
        raise ConfigError(
            f"frequency bucket edges: got {list(edges)}; expected increasing fractions in (0, 1)"
        )
    total = counts.sum()
    if total <= 0:
        raise DataError("unigram counts sum to zero; cannot bucket tokens by frequency")
    order = np.lexsort((np.arange(counts.size), -counts.astype(np.int64)))
    sorted_counts = counts[order].astype(np.float64)
    before = (np.cumsum(sorted_counts) - sorted_counts) / float(total)
    new_group = np.r_[True, sorted_counts[1:] != sorted_counts[:-1]]
    first = np.maximum.accumulate(np.where(new_group, np.arange(counts.size), 0))
    buckets = np.empty(counts.size, dtype=np.int64)
    buckets[order] = np.searchsorted(edge_arr, before[first], side="right")
    return buckets
