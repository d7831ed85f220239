"""Training loop, checkpoints and torchrun support shared by the transformer experiments."""

from tailmem.train.checkpoint import latest_checkpoint, load_checkpoint, save_checkpoint
from tailmem.train.data import BatchSource, RandomWindows, shard_rows
from tailmem.train.loop import (
    TIMING_KEYS,
    TrainConfig,
    TrainResult,
    read_metrics,
    seed_everything,
    token_loss_sum,
    train,
)

__all__ = [
    "TIMING_KEYS",
    "BatchSource",
    "RandomWindows",
    "TrainConfig",
    "TrainResult",
    "latest_checkpoint",
    "load_checkpoint",
    "read_metrics",
    "save_checkpoint",
    "seed_everything",
    "shard_rows",
    "token_loss_sum",
    "train",
]
