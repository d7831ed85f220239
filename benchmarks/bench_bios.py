"""Build speed of the synthetic-biography QA data, and training-batch throughput.

Baseline (measured in the same run): tokenizing the text of every distinct QA sample with
``Tokenizer.encode_batch``, which is what the builder avoids by tokenizing each name word, date
part, value and template literal once and composing rows with vectorised gathers. Prints, per m,
the full build time (generation + tokenizer training + writing the cache), the baseline's time
for the tokenization step alone, their ratio, the batch time of the packed training stream, and
peak RSS.

    PYTHONPATH=src python benchmarks/bench_bios.py [m ...]      (default: 10 15)
"""

from __future__ import annotations

import resource
import tempfile
import time

from tailmem.cli import ScriptParser, script_main
from tailmem.data.bios import BiosConfig, build_dataset
from tailmem.data.stream import QATrainStream


def bench(m: int) -> None:
    cfg = BiosConfig(m=m)
    with tempfile.TemporaryDirectory() as cache:
        start = time.perf_counter()
        ds = build_dataset(cfg, cache)
        build = time.perf_counter() - start
        start = time.perf_counter()
        build_dataset(cfg, cache)
        load = time.perf_counter() - start

    n_rows = len(ds.items)
    texts = [ds.item_text(i) for i in range(n_rows)]
    start = time.perf_counter()
    encoded = ds.tokenizer.encode_batch(texts, add_special_tokens=False)
    baseline = time.perf_counter() - start
    assert all(e.ids == ds.item(i)[:-1].tolist() for i, e in enumerate(encoded[:1000]))

    stream = QATrainStream(ds, batch_size=256, seq_len=512, seed=0)
    stream.batch(0)
    start = time.perf_counter()
    for step in range(1, 11):
        stream.batch(step)
    per_batch = (time.perf_counter() - start) / 10
    print(
        f"m={m:2d} people={ds.n_people:6d} train_qa={len(ds.train_items):9,d} "
        f"rows={n_rows:7,d} tokens={len(ds.items.flat):10,d} vocab={ds.vocab_size}\n"
        f"      build (all, incl. cache write) {build:6.2f} s   reload {load:5.2f} s\n"
        f"      baseline encode_batch of every row's text {baseline:6.2f} s "
        f"(ratio build/baseline {build / baseline:5.2f})\n"
        f"      stream batch 256x512: {1e3 * per_batch:6.1f} ms "
        f"({256 * 512 / per_batch / 1e6:5.1f} M tokens/s)"
    )


def main() -> None:
    parser = ScriptParser(description=__doc__.splitlines()[0])
    parser.add_argument("m", type=int, nargs="*", default=[10, 15], help="m of each data set")
    for m in parser.parse_args().m:
        bench(m)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"peak RSS {peak:.0f} MiB")


if __name__ == "__main__":
    raise SystemExit(script_main(main, "benchmarks/bench_bios.py"))
