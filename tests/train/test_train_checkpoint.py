"""Checkpoint files: atomic save, weights_only load, one-line errors for damaged files."""

from __future__ import annotations

import fractions

import pytest
import torch

from tailmem.errors import CheckpointError
from tailmem.train.checkpoint import (
    checkpoint_path,
    latest_checkpoint,
    list_checkpoints,
    load_checkpoint,
    prune_checkpoints,
    save_checkpoint,
)


def state(step: int) -> dict:
    opt = torch.optim.AdamW([torch.nn.Parameter(torch.ones(3))], betas=(0.8, 0.95))
    opt.param_groups[0]["params"][0].grad = torch.ones(3)
    opt.step()
    return {
        "step": step,
        "model": {"w": torch.arange(6.0).view(2, 3)},
        "optimizer": opt.state_dict(),
        "rng": [{"python": (3, (1, 2, 3), None), "torch": torch.get_rng_state()}],
        "data": None,
    }


def test_round_trip_keeps_tensors_and_containers(tmp_path):
    path = save_checkpoint(checkpoint_path(tmp_path / "ckpt", 200), state(200))
    assert path.name == "step_000200.pt"
    loaded = load_checkpoint(path)
    assert loaded["step"] == 200
    torch.testing.assert_close(loaded["model"]["w"], torch.arange(6.0).view(2, 3))
    assert loaded["optimizer"]["param_groups"][0]["betas"] == (0.8, 0.95)
    assert loaded["rng"][0]["python"] == (3, (1, 2, 3), None)
    assert [p.name for p in tmp_path.joinpath("ckpt").iterdir()] == ["step_000200.pt"]


def test_latest_is_the_highest_step_and_ignores_other_files(tmp_path):
    for step in (200, 1000, 1_000_000, 50):
        save_checkpoint(checkpoint_path(tmp_path, step), {"step": step})
    (tmp_path / ".step_002000.pt.abc.tmp").write_bytes(b"partial")
    (tmp_path / "notes.txt").write_text("x")
    assert latest_checkpoint(tmp_path).name == "step_1000000.pt"
    assert [s for s, _ in list_checkpoints(tmp_path)] == [50, 200, 1000, 1_000_000]
    assert latest_checkpoint(tmp_path / "missing") is None


def test_prune_keeps_the_newest(tmp_path):
    for step in (10, 20, 30, 40):
        save_checkpoint(checkpoint_path(tmp_path, step), {"step": step})
    deleted = prune_checkpoints(tmp_path, keep=2)
    assert sorted(p.name for p in deleted) == ["step_000010.pt", "step_000020.pt"]
    assert [s for s, _ in list_checkpoints(tmp_path)] == [30, 40]


@pytest.mark.parametrize("keep_fraction", [0.5, 0.05, 0.0])
def test_truncated_checkpoint_is_a_one_line_checkpoint_error(tmp_path, keep_fraction):
    path = save_checkpoint(checkpoint_path(tmp_path, 200), state(200))
    data = path.read_bytes()
    path.write_bytes(data[: int(len(data) * keep_fraction)])
    with pytest.raises(CheckpointError) as info:
        load_checkpoint(path)
    message = str(info.value)
    assert "\n" not in message
    assert str(path) in message
    assert "truncated or corrupt" in message
    assert "delete it or resume from an earlier one" in message


def test_objects_refused_by_weights_only_give_checkpoint_error(tmp_path):
    path = tmp_path / "step_000001.pt"
    torch.save(
        {"format": "tailmem-train-checkpoint", "step": 1, "x": fractions.Fraction(1, 3)}, path
    )
    with pytest.raises(CheckpointError, match="weights_only"):
        load_checkpoint(path)


def test_foreign_file_is_not_a_tailmem_checkpoint(tmp_path):
    path = tmp_path / "step_000001.pt"
    torch.save({"step": 1}, path)
    with pytest.raises(CheckpointError, match="not a tailmem training checkpoint"):
        load_checkpoint(path)
    with pytest.raises(CheckpointError, match="does not exist"):
        load_checkpoint(tmp_path / "step_000002.pt")


def test_failed_save_leaves_no_file_behind(tmp_path):
    with pytest.raises(Exception):  # noqa: B017 - any pickling error; the point is the cleanup
        save_checkpoint(checkpoint_path(tmp_path, 5), {"step": 5, "bad": lambda: 0})
    assert list(tmp_path.iterdir()) == []
