"""One training run of the knowledge-QA experiment: an arm, its learning rates and a seed.

Each run lives in its own directory ``runs/<ffn>/<arm>/<lrs>-seed<S>-steps<N>`` below the
experiment's run directory (the name is the run's identity, so an LR-sweep run that coincides
with a seed run is trained once). The directory is a :func:`tailmem.train.train` run directory
(``metrics.jsonl``, ``ckpt/``) plus

- ``spec.json``: the run and everything it shares with the other runs (model, data, batch,
  schedule); a directory whose ``spec.json`` differs is stale and is cleared before training;
- ``result.json``: status, final loss, the FTA history (every evaluation) and wall time;
- ``COMPLETE``: written last. A complete run is reused as is; an incomplete one resumes from
  its latest checkpoint (the loop replays the identical batches, see :mod:`tailmem.train.loop`).
"""

from __future__ import annotations

import dataclasses
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.distributed as dist
from torch import Tensor

from tailmem.data.bios import BiosDataset, load_dataset
from tailmem.data.stream import QATrainStream
from tailmem.experiments.qa.arms import ARMS, KINDS, OptimConfig, make_optimizer
from tailmem.experiments.qa.evaluate import FTAEvaluator
from tailmem.experiments.qa.model_io import answer_loss_sum
from tailmem.models.gpt import GPT, GPTConfig, gated_d_ff
from tailmem.rundir import RunDir
from tailmem.train import TrainConfig, read_metrics, seed_everything, shard_rows, train
from tailmem.train.loop import IGNORE_INDEX


class QABatches:
    """The training loop's batch source over a :class:`QATrainStream`: targets outside the loss
    mask become ``-100``, and each rank keeps its rows of the global batch."""

    def __init__(self, stream: QATrainStream) -> None:
        self.stream = stream

    def batch(self, step: int, rank: int = 0, world_size: int = 1) -> tuple[Tensor, Tensor]:
        x, y, mask = self.stream.batch(step)
        rows = shard_rows(self.stream.batch_size, rank, world_size)
        y = np.where(mask, y, IGNORE_INDEX)
        return torch.from_numpy(x[rows]), torch.from_numpy(y[rows])


@dataclass(frozen=True)
class RunSpec:
    """What distinguishes one run from the others of an experiment."""

    ffn: str
    arm: str
    lrs: tuple[tuple[str, float], ...]
    seed: int
    steps: int

    @property
    def lr(self) -> dict[str, float]:
        return dict(self.lrs)

    @property
    def name(self) -> str:
        lrs = "-".join(f"{kind}{lr:.4g}" for kind, lr in self.lrs)
        return f"{lrs}-seed{self.seed}-steps{self.steps}"

    @property
    def relpath(self) -> str:
        return f"runs/{self.ffn}/{self.arm}/{self.name}"

    @staticmethod
    def make(ffn: str, arm: str, lrs: dict[str, float], seed: int, steps: int) -> RunSpec:
        ordered = tuple((k, float(lrs[k])) for k in KINDS if k in ARMS[arm].kinds)
        return RunSpec(ffn, arm, ordered, seed, steps)


@dataclass(frozen=True)
class Setup:
    """Everything the runs of one experiment share (picklable, for worker processes).

    ``model`` holds :class:`GPTConfig` fields except ``vocab_size`` and ``ffn``; ``train`` holds
    :class:`TrainConfig` fields except ``steps``, ``seed``, ``warmup_steps`` and ``progress``.
    """

    dataset_path: str
    dataset_fingerprint: str
    model: dict[str, Any]
    batch_size: int
    seq_len: int
    loss_on: str
    warmup_frac: float
    train: dict[str, Any]
    optim: OptimConfig
    eval_batch_size: int
    keep_checkpoints: bool = False
    progress: bool = True

    def identity(self) -> dict[str, Any]:
        """The fields that determine the numbers (not where files go or what is printed)."""
        record = dataclasses.asdict(self)
        for name in ("dataset_path", "keep_checkpoints", "progress"):
            record.pop(name)
        return record


_DATASETS: dict[str, tuple[BiosDataset, dict[tuple[int, str], FTAEvaluator]]] = {}


def _dataset(setup: Setup) -> tuple[BiosDataset, dict[tuple[int, str], FTAEvaluator]]:
    """The data set (loaded once per process) and its evaluators by (batch size, device)."""
    if setup.dataset_path not in _DATASETS:
        _DATASETS.clear()
        dataset = load_dataset(setup.dataset_path, setup.dataset_fingerprint)
        _DATASETS[setup.dataset_path] = (dataset, {})
    return _DATASETS[setup.dataset_path]


def _is_main() -> bool:
    return not dist.is_initialized() or dist.get_rank() == 0


def build_model_from_fields(fields: dict[str, Any], ffn: str, vocab_size: int) -> GPT:
    """The GPT with :class:`GPTConfig` ``fields`` (``d_ff`` = the plain-FFN width) and FFN type
    ``ffn``; a gated FFN gets :func:`~tailmem.models.gpt.gated_d_ff` of it, so that both types
    have the same number of parameters."""
    fields = dict(fields)
    if ffn == "gated":
        fields["d_ff"] = gated_d_ff(fields["d_ff"])
    return GPT(GPTConfig(vocab_size=vocab_size, ffn=ffn, **fields))


def train_config(setup: Setup, spec: RunSpec) -> TrainConfig:
    """The loop's config of one run: its steps and seed, warmup as a fraction of its steps."""
    return TrainConfig(
        steps=spec.steps,
        warmup_steps=round(setup.warmup_frac * spec.steps),
        seed=spec.seed,
        progress=setup.progress,
        **setup.train,
    )


def execute(spec: RunSpec, setup: Setup, root: str | Path) -> dict[str, Any]:
    """Train ``spec`` below ``root`` (or reuse / resume what is there); returns its result."""
    path = Path(root) / spec.relpath
    identity = {"spec": dataclasses.asdict(spec), "setup": setup.identity()}
    if (path / "spec.json").is_file() and RunDir(path).read_json("spec.json") != _plain(identity):
        if _is_main():
            shutil.rmtree(path)
        _barrier()
    run = RunDir(path)
    if run.is_complete:
        return run.read_json("result.json")
    if _is_main():
        run.write_json("spec.json", identity)
    dataset, evaluators = _dataset(setup)
    key = (setup.eval_batch_size, setup.train.get("device", "cpu"))
    if key not in evaluators:
        evaluators[key] = FTAEvaluator(dataset, *key)
    seed_everything(spec.seed)
    model = build_model_from_fields(setup.model, spec.ffn, dataset.vocab_size)
    optimizer = make_optimizer(model, ARMS[spec.arm], spec.lr, setup.optim)
    stream = QATrainStream(dataset, setup.batch_size, setup.seq_len, spec.seed, setup.loss_on)
    start = time.perf_counter()
    outcome = train(
        model,
        optimizer,
        QABatches(stream),
        train_config(setup, spec),
        path,
        eval_hooks=[evaluators[key]],
        loss_fn=answer_loss_sum,
    )
    rows = read_metrics(path / "metrics.jsonl")
    evals = [{"step": r["step"], **r["eval"]} for r in rows if "eval" in r]
    result = {
        "spec": dataclasses.asdict(spec),
        "status": outcome.status,
        "message": outcome.message,
        "final_loss": outcome.loss,
        "evals": evals,
        "tokens": rows[-1]["tokens"] if rows else 0,
        "train_seconds": rows[-1]["elapsed"] if rows else 0.0,
        "session_seconds": time.perf_counter() - start,
        "epochs": (rows[-1]["tokens"] if rows else 0) / stream.tokens_per_epoch,
    }
    if _is_main():
        run.write_json("result.json", result)
        if not setup.keep_checkpoints:
            shutil.rmtree(path / "ckpt", ignore_errors=True)
        run.mark_complete(result["train_seconds"])
    _barrier()
    return _plain(result)


def _barrier() -> None:
    if dist.is_initialized():
        dist.barrier()


def _plain(value: Any) -> Any:
    """``value`` as it reads back from JSON (tuples become lists)."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value
