"""Batches addressed by step: deterministic, shift-by-one targets, shards that tile the batch."""

from __future__ import annotations

import pytest
import torch

from tailmem.errors import ConfigError, DataError
from tailmem.train import BatchSource, RandomWindows, shard_rows

TOKENS = torch.arange(1000) % 97


def test_targets_are_inputs_shifted_by_one_token():
    source = RandomWindows(TOKENS, batch_size=6, seq_len=20, seed=1)
    x, y = source.batch(3)
    assert x.shape == y.shape == (6, 20) and x.dtype == torch.long
    starts = source.starts(3)
    for row, start in enumerate(starts.tolist()):
        assert torch.equal(x[row], TOKENS[start : start + 20])
        assert torch.equal(y[row], TOKENS[start + 1 : start + 21])
    assert isinstance(source, BatchSource)


def test_a_step_gives_the_same_batch_whatever_was_asked_before():
    a = RandomWindows(TOKENS, 4, 16, seed=5)
    b = RandomWindows(TOKENS, 4, 16, seed=5)
    for step in range(10):
        a.batch(step)
    assert torch.equal(a.batch(7)[0], b.batch(7)[0])
    assert not torch.equal(a.batch(7)[0], a.batch(8)[0])
    assert not torch.equal(a.batch(7)[0], RandomWindows(TOKENS, 4, 16, seed=6).batch(7)[0])


@pytest.mark.parametrize("world", [1, 2, 4])
def test_rank_shards_tile_the_global_batch(world):
    source = RandomWindows(TOKENS, 8, 16, seed=2)
    full_x, full_y = source.batch(11)
    parts = [source.batch(11, rank, world) for rank in range(world)]
    assert torch.equal(torch.cat([p[0] for p in parts]), full_x)
    assert torch.equal(torch.cat([p[1] for p in parts]), full_y)


def test_shard_rows_and_bad_inputs():
    assert shard_rows(12, 2, 3) == slice(8, 12)
    with pytest.raises(ConfigError, match="not divisible by the world size 5"):
        shard_rows(12, 0, 5)
    with pytest.raises(DataError, match="seq_len"):
        RandomWindows(torch.arange(10), 2, 10, seed=0)
    with pytest.raises(DataError, match="1-D integer"):
        RandomWindows(torch.rand(100), 2, 10, seed=0)
