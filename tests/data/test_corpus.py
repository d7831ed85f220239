"""Corpus pipeline: text sources, split, BPE, token shards, cache, buckets and batches."""

from __future__ import annotations

import inspect
import json
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from tailmem.data.corpus import (
    CorpusConfig,
    build_corpus,
    frequency_buckets,
    load_corpus,
    read_documents,
    split_documents,
)
from tailmem.data.text_sources import read_jsonl, stdlib_text_file
from tailmem.data.token_stream import TokenStream, eval_batches
from tailmem.errors import ConfigError, DataError
from tailmem.typecheck import from_dict

SMALL = {"max_docs": 120, "vocab_size": 512, "val_fraction": 0.1}


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("corpus-cache")


@pytest.fixture(scope="module")
def stdlib_file(cache_dir) -> Path:
    """The standard-library text, extracted once for this module."""
    return stdlib_text_file(cache_dir)


@pytest.fixture(scope="module")
def stdlib_corpus(cache_dir, stdlib_file):
    return build_corpus(CorpusConfig(**SMALL), cache_dir)


def _split_at(tokens: np.ndarray, eos: int) -> list[list[int]]:
    ends = np.flatnonzero(tokens == eos)
    starts = np.r_[0, ends[:-1] + 1]
    return [tokens[s:e].tolist() for s, e in zip(starts, ends, strict=True)]


# --- standard-library text -----------------------------------------------------------------


def test_stdlib_text_holds_docstrings_and_topics(stdlib_file):
    import json as json_module
    from pydoc_data.topics import topics

    docs = read_jsonl(stdlib_file)
    by_name = {d.name: d.text for d in docs}
    assert len(by_name) == len(docs) > 300
    assert sum(len(d.text) for d in docs) > 1_000_000
    assert inspect.cleandoc(json_module.dumps.__doc__) in by_name["json"]
    assert by_name["pydoc topic assert"] == inspect.cleandoc(topics["assert"]).strip()
    modules = [d.name for d in docs if not d.name.startswith("pydoc topic ")]
    assert modules == sorted(modules)  # depth-first over sorted names is lexicographic
    for skipped in ("this", "antigravity", "tkinter", "idlelib", "test", "turtle"):
        assert skipped not in by_name
    assert not [n for n in by_name if n.split(".")[-1] in ("test", "tests", "__main__")]
    assert not [n for n in modules if any(p.startswith("_") for p in n.split("."))]
    assert len({d.text for d in docs}) == len(docs)


def test_stdlib_text_is_deterministic_and_cached(stdlib_file, tmp_path):
    again = stdlib_text_file(tmp_path)
    assert again.read_bytes() == stdlib_file.read_bytes()
    mtime = again.stat().st_mtime_ns
    assert stdlib_text_file(tmp_path) == again and again.stat().st_mtime_ns == mtime


# --- building ------------------------------------------------------------------------------


def test_stdlib_corpus_round_trips_documents(cache_dir, stdlib_corpus):
    corpus = stdlib_corpus
    docs = read_documents(CorpusConfig(**SMALL), cache_dir)
    texts = [d.text for d in docs]
    is_val = split_documents(texts, 0.1)
    assert corpus.meta["docs"] == {"train": int((~is_val).sum()), "val": int(is_val.sum())}
    assert 0 < is_val.sum() < 0.3 * len(texts)
    train, val = corpus.train, corpus.val
    assert train.dtype == np.uint16 and isinstance(train, np.memmap)
    assert corpus.meta["tokens"] == {"train": len(train), "val": len(val)}
    assert corpus.eos_id == 0 and corpus.vocab_size == 512 and int(train.max()) < 512
    tok = corpus.tokenizer()
    for shard, mask in ((train, ~is_val), (val, is_val)):
        expected = [t for t, keep in zip(texts, mask, strict=True) if keep]
        assert [tok.decode(ids) for ids in _split_at(np.asarray(shard), 0)] == expected
    counts = corpus.unigram_counts
    assert counts.shape == (512,) and counts.sum() == len(train)
    np.testing.assert_array_equal(counts, np.bincount(train, minlength=512))


def test_split_is_by_document_hash(tmp_path):
    texts = [f"document number {i}" for i in range(400)]
    mask = split_documents(texts, 0.25)
    assert 60 < mask.sum() < 140
    shuffled = texts[::-1]
    assert split_documents(shuffled, 0.25)[::-1].tolist() == mask.tolist()
    assert split_documents(texts[:2], 0.01).sum() == 1  # at least one validation document
    assert not split_documents(texts, 0.0).any()
    with pytest.raises(DataError, match="at least 2"):
        split_documents(texts[:1], 0.1)


def test_cache_is_reused_and_stale_folders_rebuilt(cache_dir, stdlib_corpus):
    corpus = stdlib_corpus
    mtime = (corpus.path / "train.npy").stat().st_mtime_ns
    again = build_corpus(CorpusConfig(**SMALL), cache_dir)
    assert again.path == corpus.path and again.meta == corpus.meta
    assert (corpus.path / "train.npy").stat().st_mtime_ns == mtime
    train_before = np.array(corpus.train)
    (corpus.path / "meta.json").unlink()  # an interrupted or damaged folder is rebuilt
    with pytest.raises(DataError, match=r"missing meta\.json"):
        load_corpus(corpus.path)
    rebuilt = build_corpus(CorpusConfig(**SMALL), cache_dir)
    assert rebuilt.path == corpus.path
    np.testing.assert_array_equal(np.array(rebuilt.train), train_before)  # deterministic BPE
    other = build_corpus(CorpusConfig(**{**SMALL, "vocab_size": 400}), cache_dir)
    assert other.path != corpus.path and other.vocab_size == 400
    assert not [p for p in cache_dir.iterdir() if p.name.endswith((".tmp", ".stale"))]


def test_local_files_and_modes(tmp_path):
    data = tmp_path / "data"
    (data / "sub").mkdir(parents=True)
    (data / "a.txt").write_text("First paragraph here.\nSame paragraph.\n\n  \nSecond one.\n")
    (data / "sub" / "b.jsonl").write_text(
        json.dumps({"text": "json doc one", "name": "x"}) + "\n\n" + '{"text": "   "}\n'
        '{"body": "ignored field", "text": "json doc two"}\n'
    )
    (data / "notes.md").write_text("not read")
    cfg = {"source": "files", "paths": [str(data)], "vocab_size": 300, "val_fraction": 0.0}
    docs = read_documents(CorpusConfig(**cfg), tmp_path)
    assert [d.text for d in docs] == [
        "First paragraph here.\nSame paragraph.\n\n  \nSecond one.",
        "json doc one",
        "json doc two",
    ]
    assert docs[1].name == "x"
    paragraphs = read_documents(CorpusConfig(**cfg, txt_mode="paragraph"), tmp_path)
    assert [d.text for d in paragraphs][:2] == [
        "First paragraph here.\nSame paragraph.",
        "Second one.",
    ]
    lines = read_documents(CorpusConfig(**cfg, txt_mode="line"), tmp_path)
    assert len(lines) == 3 + 2
    corpus = build_corpus(CorpusConfig(**cfg), tmp_path / "cache")
    assert len(corpus.val) == 0 and corpus.meta["docs"] == {"train": 3, "val": 0}
    tok = corpus.tokenizer()
    assert [tok.decode(ids) for ids in _split_at(np.asarray(corpus.train), 0)] == [
        d.text for d in docs
    ]


def test_given_tokenizer_is_used_as_is(tmp_path, stdlib_corpus):
    text = tmp_path / "t.txt"
    text.write_text("Return the number of items in a container.\n\nSecond document.\n")
    cfg = CorpusConfig(
        source="files",
        paths=[str(text)],
        txt_mode="paragraph",
        tokenizer=str(stdlib_corpus.tokenizer_path),
        val_fraction=0.5,
    )
    corpus = build_corpus(cfg, tmp_path / "cache")
    tok = stdlib_corpus.tokenizer()
    assert corpus.vocab_size == stdlib_corpus.vocab_size
    assert corpus.tokenizer_path.read_text() == stdlib_corpus.tokenizer_path.read_text()
    both = np.r_[np.asarray(corpus.train), np.asarray(corpus.val)]
    texts = ["Return the number of items in a container.", "Second document."]
    assert sorted(_split_at(both, 0)) == sorted(tok.encode(t).ids for t in texts)


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ('{"text": "ok"}\n{"text": "ok"}\n{"text": 3}\n', r"bad\.jsonl:3: got 'text' of type int"),
        ('{"text": "ok"}\n{oops}\n', r"bad\.jsonl:2: invalid JSON"),
        ('["a list"]\n', r"bad\.jsonl:1: got a JSON list"),
        ('{"title": "no text"}\n', r"bad\.jsonl:1: got an object without 'text'"),
        (b'{"text": "caf\xe9"}\n', r"bad\.jsonl:1: not valid UTF-8"),
    ],
)
def test_bad_jsonl_names_file_and_line(tmp_path, content, message):
    path = tmp_path / "bad.jsonl"
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content)
    cfg = CorpusConfig(source="files", paths=[str(path)])
    with pytest.raises(DataError, match=message) as info:
        build_corpus(cfg, tmp_path / "cache")
    assert "\n" not in str(info.value)
    assert not (tmp_path / "cache").exists() or not any((tmp_path / "cache").iterdir())


def test_bad_files_raise_data_error(tmp_path):
    def build(**kw):
        cfg = CorpusConfig(source="files", txt_mode="paragraph", **kw)
        return build_corpus(cfg, tmp_path / "cache")

    with pytest.raises(DataError, match=r"missing\.txt: file not found"):
        build(paths=[str(tmp_path / "missing.txt")])
    (tmp_path / "x.csv").write_text("a,b")
    with pytest.raises(DataError, match=r"unsupported file type '\.csv'"):
        build(paths=[str(tmp_path / "x.csv")])
    (tmp_path / "empty").mkdir()
    with pytest.raises(DataError, match=r"no \.txt or \.jsonl"):
        build(paths=[str(tmp_path / "empty")])
    (tmp_path / "latin.txt").write_bytes(b"caf\xe9")
    with pytest.raises(DataError, match=r"latin\.txt: not valid UTF-8"):
        build(paths=[str(tmp_path / "latin.txt")])
    (tmp_path / "blank.txt").write_text("  \n\n")
    with pytest.raises(DataError, match="no non-empty documents"):
        build(paths=[str(tmp_path / "blank.txt")])
    (tmp_path / "ok.txt").write_text("one\n\ntwo\n")
    with pytest.raises(DataError, match=r"tokenizer file .*nope\.json does not exist"):
        build(paths=[str(tmp_path / "ok.txt")], tokenizer=str(tmp_path / "nope.json"))
    (tmp_path / "tok.json").write_text("{}")
    with pytest.raises(DataError, match=r"tok\.json is not a valid tokenizers JSON file"):
        build(paths=[str(tmp_path / "ok.txt")], tokenizer=str(tmp_path / "tok.json"))


def test_tokenizer_without_eos_token(tmp_path, stdlib_corpus):
    (tmp_path / "ok.txt").write_text("one\n\ntwo\n")
    cfg = CorpusConfig(
        source="files",
        paths=[str(tmp_path / "ok.txt")],
        tokenizer=str(stdlib_corpus.tokenizer_path),
        eos_token="</s>",
    )
    with pytest.raises(DataError, match="has no token '</s>'"):
        build_corpus(cfg, tmp_path / "cache")


@pytest.mark.parametrize(
    ("values", "field"),
    [
        ({"source": "web"}, "source"),
        ({"source": "files"}, "paths"),
        ({"val_fraction": 0.9}, "val_fraction"),
        ({"vocab_size": 100}, "vocab_size"),
        ({"max_docs": 0}, "max_docs"),
        ({"source": "hf"}, "max_docs"),
        ({"txt_mode": "words"}, "txt_mode"),
        ({"min_frequency": 0}, "min_frequency"),
        ({"eos_token": ""}, "eos_token"),
    ],
)
def test_config_errors(tmp_path, values, field):
    """The field is named as in the section; the config loader adds the section's key."""
    with pytest.raises(ConfigError, match=f"^{field}: "):
        build_corpus(CorpusConfig(**values), tmp_path)


def test_config_loads_through_the_typed_loader():
    cfg = from_dict(CorpusConfig, {"source": "files", "paths": ["a.txt"], "max_docs": 5})
    assert cfg.paths == ["a.txt"] and cfg.max_docs == 5
    with pytest.raises(ConfigError, match="source"):
        from_dict(CorpusConfig, {"source": "web"})


# --- Hugging Face datasets (offline) --------------------------------------------------------


@pytest.fixture
def offline_datasets(tmp_path, monkeypatch):
    datasets = pytest.importorskip("datasets")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(datasets.config, "HF_DATASETS_OFFLINE", True, raising=False)
    monkeypatch.setattr(datasets.config, "HF_HUB_OFFLINE", True, raising=False)
    cache = tmp_path / "hf-cache"
    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", cache, raising=False)
    monkeypatch.setattr(datasets.config, "HF_MODULES_CACHE", cache / "modules", raising=False)
    return datasets


def test_hf_streaming_source_offline(tmp_path, offline_datasets, monkeypatch):
    rows = [{"text": f"Document {i}: the quick brown fox number {i}.", "id": i} for i in range(30)]
    data = tmp_path / "local.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    cfg = CorpusConfig(
        source="hf",
        hf_name="json",
        hf_config=None,
        hf_data_files=[str(data)],
        max_docs=20,
        vocab_size=300,
        val_fraction=0.2,
    )
    cache = tmp_path / "cache"
    docs = read_documents(cfg, cache)
    assert [d.text for d in docs] == [r["text"] for r in rows[:20]]
    corpus = build_corpus(cfg, cache)
    assert sum(corpus.meta["docs"].values()) == 20
    # fetched once: later builds read the cached text and never call the library again
    monkeypatch.setattr(offline_datasets, "load_dataset", _fail)
    assert build_corpus(cfg, cache).path == corpus.path


def test_hf_saved_dataset_folder(tmp_path, offline_datasets):
    texts = [f"saved row {i} with some words" for i in range(12)]
    folder = tmp_path / "saved"
    offline_datasets.Dataset.from_dict({"content": texts}).save_to_disk(str(folder))
    cfg = CorpusConfig(source="hf", hf_name=str(folder), text_field="content", max_docs=5)
    assert [d.text for d in read_documents(cfg, tmp_path / "cache")] == texts[:5]
    wrong = CorpusConfig(source="hf", hf_name=str(folder), max_docs=5)
    with pytest.raises(DataError, match="row 0: got an object without 'text'"):
        read_documents(wrong, tmp_path / "cache2")


def test_hf_unavailable_dataset_is_a_data_error(tmp_path, offline_datasets):
    cfg = CorpusConfig(
        source="hf",
        hf_name="json",
        hf_config=None,
        max_docs=3,
        hf_data_files=[str(tmp_path / "absent.jsonl")],
    )
    with pytest.raises(DataError, match="cannot read Hugging Face data set 'json'"):
        read_documents(cfg, tmp_path / "cache")


def test_hf_without_datasets_says_how_to_install(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "datasets", None)
    cfg = CorpusConfig(source="hf", max_docs=3)
    with pytest.raises(ConfigError, match=r"install tailmem\[hf\]"):
        read_documents(cfg, tmp_path)


def _fail(*args, **kwargs):
    raise AssertionError("the Hugging Face library must not be called for cached text")


# --- frequency buckets ---------------------------------------------------------------------


def test_frequency_buckets_by_hand():
    # shares of tokens more frequent than each: 0, .5, .8, .9, .9 (tie), 1.0 (unseen)
    counts = np.array([30, 50, 10, 5, 5, 0])
    np.testing.assert_array_equal(frequency_buckets(counts), [1, 0, 1, 2, 2, 2])
    np.testing.assert_array_equal(frequency_buckets(counts, edges=(0.6,)), [0, 0, 1, 1, 1, 1])
    # ties never straddle an edge: four equal tokens, edge at 0.5 -> all in the head
    np.testing.assert_array_equal(frequency_buckets(np.array([1, 1, 1, 1]), (0.5,)), [0] * 4)
    with pytest.raises(ConfigError, match="edges"):
        frequency_buckets(counts, edges=(0.9, 0.5))
    with pytest.raises(DataError, match="sum to zero"):
        frequency_buckets(np.zeros(3, dtype=np.int64))


def test_frequency_buckets_on_the_corpus(stdlib_corpus):
    counts = stdlib_corpus.unigram_counts
    buckets = frequency_buckets(counts, edges=(0.5, 0.9))
    total = counts.sum()
    head, body, tail = (counts[buckets == b].sum() / total for b in range(3))
    assert head >= 0.5 and head + body >= 0.9 and tail > 0
    assert (buckets[counts == 0] == 2).all()
    assert counts[buckets == 0].min() >= counts[buckets == 1].max()


# --- batches -------------------------------------------------------------------------------


def test_token_stream_is_a_pure_function_of_the_step():
    shard = np.arange(1001, dtype=np.int64)  # 100 chunks of 10 (+1 target)
    stream = TokenStream(shard, batch_size=8, seq_len=10, seed=3)
    x, y = stream.batch(7)
    assert x.shape == y.shape == (8, 10) and x.dtype == torch.int64
    assert torch.equal(y, x + 1)  # consecutive tokens: y is x shifted by one
    assert (x[:, 0] % 10 == 0).all()  # windows start on the chunk grid
    for _ in range(5):
        stream.batch(123)  # history does not matter
    fresh = TokenStream(shard, batch_size=8, seq_len=10, seed=3)
    assert torch.equal(fresh.batch(7)[0], stream.batch(7)[0])
    assert not torch.equal(TokenStream(shard, 8, 10, seed=4).batch(7)[0], x)


def test_token_stream_epochs_cover_every_chunk_once():
    shard = np.arange(1001, dtype=np.int64)
    stream = TokenStream(shard, batch_size=20, seq_len=10, seed=0)
    assert stream.n_chunks == 100 and stream.steps_per_epoch == 5
    epoch0 = torch.cat([stream.batch(s)[0][:, 0] // 10 for s in range(5)])
    epoch1 = torch.cat([stream.batch(s)[0][:, 0] // 10 for s in range(5, 10)])
    assert sorted(epoch0.tolist()) == sorted(epoch1.tolist()) == list(range(100))
    assert epoch0.tolist() != epoch1.tolist()
    straddling = TokenStream(shard, batch_size=30, seq_len=10, seed=0)  # 100/30: crosses epochs
    seen = torch.cat([straddling.batch(s)[0][:, 0] // 10 for s in range(10)])
    assert sorted(seen[:100].tolist()) == list(range(100))


def test_token_stream_ranks_split_the_global_batch(stdlib_corpus):
    stream = TokenStream(stdlib_corpus.path / "train.npy", batch_size=6, seq_len=32, seed=1)
    x, y = stream.batch(11)
    parts = [stream.batch(11, rank=r, world_size=3) for r in range(3)]
    assert torch.equal(torch.cat([p[0] for p in parts]), x)
    assert torch.equal(torch.cat([p[1] for p in parts]), y)
    train = torch.from_numpy(np.asarray(stdlib_corpus.train, dtype=np.int64))
    start = int(stream.chunks(11)[0]) * 32
    assert torch.equal(x[0], train[start : start + 32])
    with pytest.raises(ConfigError, match="divisible"):
        stream.batch(0, rank=0, world_size=4)


def test_token_stream_errors(tmp_path):
    with pytest.raises(DataError, match="need at least seq_len"):
        TokenStream(np.arange(10), batch_size=2, seq_len=10, seed=0)
    with pytest.raises(ConfigError, match="batch_size"):
        TokenStream(np.arange(100), batch_size=0, seq_len=10, seed=0)
    with pytest.raises(ConfigError, match="seed"):
        TokenStream(np.arange(100), batch_size=1, seq_len=10, seed=-1)
    with pytest.raises(DataError, match="not found"):
        TokenStream(tmp_path / "missing.npy", batch_size=1, seq_len=10, seed=0)
    with pytest.raises(DataError, match="1-D integers"):
        TokenStream(np.zeros((10, 10)), batch_size=1, seq_len=2, seed=0)


def test_eval_batches_are_fixed_and_spread_over_the_shard():
    shard = np.arange(1001, dtype=np.int64)
    full = eval_batches(shard, batch_size=16, seq_len=10)
    assert [b[0].shape[0] for b in full] == [16] * 6 + [4]
    assert torch.cat([b[0][:, 0] for b in full]).tolist() == list(range(0, 1000, 10))
    some = eval_batches(shard, batch_size=4, seq_len=10, max_batches=3)
    starts = torch.cat([b[0][:, 0] // 10 for b in some]).tolist()
    assert len(starts) == 12 and starts[0] == 0 and starts[-1] == 99
    assert starts == sorted(starts)
    again = eval_batches(shard, batch_size=4, seq_len=10, max_batches=3)
    assert all(
        torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])
        for a, b in zip(some, again, strict=True)
    )
    with pytest.raises(DataError, match="validation shard"):
        eval_batches(np.arange(5), batch_size=1, seq_len=10)
