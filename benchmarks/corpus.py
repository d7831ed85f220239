"""Building the default (standard-library) corpus from scratch, then reusing it from the cache.

Stages: extracting the standard-library text in a child interpreter, training the byte-level BPE,
tokenising both splits into memory-mapped shards. The baseline measured in the same run is the
cache hit (a second ``build_corpus`` call with the same config), whose cost is reading and
hashing the cached text. Target: the cold build well under a minute on 2 CPU cores.

    PYTHONPATH=src python benchmarks/corpus.py [--vocab-size 4096]
"""

from __future__ import annotations

import resource
import tempfile
import time
from pathlib import Path

from tailmem.cli import ScriptParser, script_main
from tailmem.data.corpus import CorpusConfig, build_corpus
from tailmem.data.text_sources import stdlib_text_file


def main() -> None:
    parser = ScriptParser(description=__doc__.splitlines()[0])
    parser.add_argument("--vocab-size", type=int, default=4096)
    args = parser.parse_args()
    cfg = CorpusConfig(vocab_size=args.vocab_size)
    with tempfile.TemporaryDirectory() as tmp:
        cache = Path(tmp)
        start = time.perf_counter()
        stdlib_text_file(cache)
        extract = time.perf_counter() - start
        corpus = build_corpus(cfg, cache)
        cold = time.perf_counter() - start
        start = time.perf_counter()
        again = build_corpus(cfg, cache)
        warm = time.perf_counter() - start
        assert again.path == corpus.path
    meta = corpus.meta
    chars = sum(meta["chars"].values())
    tokens = sum(meta["tokens"].values())
    seconds = meta["seconds"]
    print(
        f"corpus: {sum(meta['docs'].values())} documents, {chars / 1e6:.2f} M characters, "
        f"{tokens / 1e3:.0f} k tokens (vocab {corpus.vocab_size}, "
        f"{chars / tokens:.2f} characters per token)"
    )
    print(f"extract stdlib text (child interpreter): {extract:6.2f} s")
    print(f"read + hash cached text                : {seconds['read']:6.2f} s")
    print(f"train BPE on the train split           : {seconds['tokenizer']:6.2f} s")
    print(
        f"tokenise into shards + unigram counts  : {seconds['encode']:6.2f} s "
        f"({chars / 1e6 / max(seconds['encode'], 1e-9):.2f} M chars/s)"
    )
    print(f"cold build total                       : {cold:6.2f} s")
    print(
        f"cache hit (baseline)                   : {warm:6.2f} s (cold / hit = {cold / warm:.0f} x)"
    )
    print(f"peak RSS: {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MiB")


if __name__ == "__main__":
    raise SystemExit(script_main(main, "benchmarks/corpus.py"))
