"""Answer coverage of the knowledge-QA training stream: what share of the answer tokens the
batches actually train.

Builds the data set of the ``knowledge-qa`` preset (default ``cpu``: m = 7, seq_len 128, batch
8, 440 steps), reads the preset's batches and counts the loss-mask targets. Expected counts
are the epoch's answer tokens (and answers) times the number of epochs the steps cover
(``steps * batch_size * seq_len / tokens_per_epoch``), so the script measures any version of
:class:`~tailmem.data.stream.QATrainStream` that has ``batch`` and ``tokens_per_epoch``:

    PYTHONPATH=src python scripts/qa_answer_coverage.py [--preset cpu] [--cache DIR]

A first answer token is a target whose predecessor in the row is not one (the prompt before
an answer never is).
"""

from __future__ import annotations

import sys
import tempfile

from tailmem.cli import ScriptParser, script_main
from tailmem.config import load_config
from tailmem.data.bios import build_dataset
from tailmem.data.stream import QATrainStream
from tailmem.experiments.knowledge_qa import Config


def main() -> None:
    parser = ScriptParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--preset", default="cpu")
    parser.add_argument("--cache", default=None, help="data set cache (default: a temp dir)")
    args = parser.parse_args()
    cfg = load_config(Config, "knowledge-qa", args.preset)
    train = cfg.train
    with tempfile.TemporaryDirectory() as scratch:
        dataset = build_dataset(cfg.data, args.cache or scratch)
        stream = QATrainStream(dataset, train.batch_size, train.seq_len, cfg.seed, cfg.loss_on)
        items = dataset.train_items
        answers = dataset.items.lengths[items] - 1 - dataset.item_loss_start[items]
        trained = firsts = 0
        for step in range(train.steps):
            mask = stream.batch(step)[2]
            trained += int(mask.sum())
            firsts += int(mask[:, 0].sum() + (mask[:, 1:] & ~mask[:, :-1]).sum())
    epochs = train.steps * train.batch_size * train.seq_len / stream.tokens_per_epoch
    expected_tokens = float(answers.sum()) * epochs
    expected_firsts = len(items) * epochs
    print(
        f"preset {args.preset}: m={cfg.data.m} seq_len={train.seq_len} "
        f"batch={train.batch_size} steps={train.steps} ({epochs:.2f} epochs)\n"
        f"answer tokens trained {trained} of {expected_tokens:.0f} expected: "
        f"{trained / expected_tokens:.2%} ({1 - trained / expected_tokens:.2%} dropped)\n"
        f"first answer tokens trained {firsts} of {expected_firsts:.0f}: "
        f"{firsts / expected_firsts:.2%}"
    )


if __name__ == "__main__":
    sys.exit(script_main(main, "qa_answer_coverage.py"))
