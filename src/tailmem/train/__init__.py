"""Training loop, checkpoints and torchrun support shared by the transformer experiments."""

from tailmem.train.checkpoint import latest_checkpoint, load_checkpoint, save_checkpoint
from tailmem.train.data import BatchSource, RandomWindows, shard_rows
from tailmem.train.loop import (
    IGNORE_INDEX,
    TIMING_KEYS,
    EvalHook,
    LossFn,
    TrainConfig,
    TrainResult,
    describe_scalars,
    token_loss_sum,
    train,
    train_step,
)
from tailmem.train.state import read_metrics, seed_everything

__all__ = [
    "IGNORE_INDEX",
    "TIMING_KEYS",
    "BatchSource",
    "EvalHook",
    "LossFn",
    "RandomWindows",
    "TrainConfig",
    "TrainResult",
    "describe_scalars",
    "latest_checkpoint",
    "load_checkpoint",
    "read_metrics",
    "save_checkpoint",
    "seed_everything",
    "shard_rows",
    "token_loss_sum",
    "train",
    "train_step",
]
