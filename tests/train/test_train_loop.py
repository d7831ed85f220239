"""The training loop in one process: metrics, schedules, resume, divergence guard, errors."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch

from tailmem.errors import CheckpointError, ConfigError, DataError
from tailmem.models.gpt import GPT, gpt_config
from tailmem.train import (
    TIMING_KEYS,
    RandomWindows,
    TrainConfig,
    read_metrics,
    seed_everything,
    token_loss_sum,
    train,
)
from tailmem.train.checkpoint import (
    latest_checkpoint,
    list_checkpoints,
    load_checkpoint,
    save_checkpoint,
)

VOCAB, SEQ, BATCH = 32, 16, 8


def stream() -> torch.Tensor:
    gen = torch.Generator().manual_seed(11)
    return torch.randint(0, VOCAB, (61,), generator=gen).repeat(40)


class MaskedWindows(RandomWindows):
    """Windows where row i ignores its first (i mod 5) targets: rows count unequally."""

    def batch(self, step, rank=0, world_size=1):
        x, y = super().batch(step, rank, world_size)
        y = y.clone()
        for i in range(y.shape[0]):
            y[i, : (i + rank * y.shape[0]) % 5] = -100
        return x, y


class CrashingSource(RandomWindows):
    """Raises once at ``crash_at``; records the state it is restored with."""

    def __init__(self, *args, crash_at=-1, **kwargs):
        super().__init__(*args, **kwargs)
        self.crash_at, self.restored = crash_at, None

    def batch(self, step, rank=0, world_size=1):
        if step == self.crash_at:
            raise RuntimeError("simulated crash")
        return super().batch(step, rank, world_size)

    def state_dict(self):
        return {"seed": self.seed, "note": "position is the step"}

    def load_state_dict(self, state):
        self.restored = state


def make(dropout=0.0, ffn="plain"):
    seed_everything(0)
    return GPT(gpt_config("tiny", vocab_size=VOCAB, max_seq_len=SEQ, dropout=dropout, ffn=ffn))


def adamw(model, lr=3e-3):
    return torch.optim.AdamW(model.parameters(), lr=lr, betas=(0.8, 0.95), weight_decay=0.0)


def quiet(**kw) -> TrainConfig:
    kw.setdefault("progress", False)
    return TrainConfig(**kw)


def strip_timing(rows):
    return [{k: v for k, v in row.items() if k not in TIMING_KEYS} for row in rows]


def test_metrics_lines_schedule_tokens_and_checkpoints(tmp_path):
    model = make()
    opt = adamw(model)
    cfg = quiet(
        steps=30, schedule="cosine", warmup_steps=4, log_every=10, eval_every=15, ckpt_every=10,
        keep_ckpts=2,
    )  # fmt: skip
    seen = []

    def hook(step, m):
        seen.append((step, m.training, torch.is_grad_enabled()))
        return {"step_echo": torch.tensor(float(step))}

    result = train(
        model, opt, RandomWindows(stream(), BATCH, SEQ, 0), cfg, tmp_path, eval_hooks=[hook]
    )
    assert result.ok and result.step == 30 and result.resumed_from is None
    rows = read_metrics(tmp_path / "metrics.jsonl")
    assert [r["step"] for r in rows] == [10, 15, 20, 30]
    assert seen == [(15, False, False), (30, False, False)]
    by_step = {r["step"]: r for r in rows}
    assert "loss" not in by_step[15] and by_step[15]["eval"] == {"step_echo": 15.0}
    assert by_step[30]["eval"] == {"step_echo": 30.0}
    for r in rows:
        assert r["tokens"] == r["step"] * BATCH * SEQ
        assert r["lr"] == pytest.approx(3e-3 * cfg.lr_at(r["step"] - 1))
    assert by_step[30]["loss"] < by_step[10]["loss"]
    assert result.loss == pytest.approx(by_step[30]["loss"], rel=0.2)
    assert [s for s, _ in list_checkpoints(tmp_path / "ckpt")] == [20, 30]
    assert model.training


def test_the_console_names_the_logged_mean_loss_apart_from_the_batch_loss(tmp_path, capsys):
    """An evaluation's line shows metrics.jsonl's ``loss`` (the logging window's mean) under that
    name and this update's own loss as ``batch loss``; a step that closes no window shows the
    batch loss alone, and the run's last line names its final batch loss."""
    model = make()
    cfg = quiet(steps=30, log_every=10, eval_every=15)
    result = train(
        model, adamw(model), RandomWindows(stream(), BATCH, SEQ, 0), cfg, tmp_path,
        eval_hooks=[lambda step, m: {"echo": float(step)}],
    )  # fmt: skip
    logged = {r["step"]: r for r in read_metrics(tmp_path / "metrics.jsonl")}
    lines = capsys.readouterr().err.splitlines()
    (at_15,) = [line for line in lines if line.startswith("step 15/30 ")]
    assert at_15.startswith("step 15/30 batch loss ") and "mean of" not in at_15
    (at_30,) = [line for line in lines if line.startswith("step 30/30 ")]
    mean, batch = logged[30]["loss"], result.loss
    assert mean != pytest.approx(batch, abs=1e-4)  # two quantities: they differ
    assert at_30.startswith(f"step 30/30 loss {mean:.4f} (mean of 10 updates), batch loss "
                            f"{batch:.4f} | echo=30")  # fmt: skip
    assert lines[-1] == f"trained 30 steps, final batch loss {batch}"


def test_each_group_follows_the_schedule_from_its_own_base_lr(tmp_path):
    model = make()
    matrices = [p for p in model.parameters() if p.ndim == 2]
    vectors = [p for p in model.parameters() if p.ndim < 2]
    opt = torch.optim.AdamW(
        [{"params": matrices, "lr": 1e-2, "name": "mat"}, {"params": vectors, "lr": 1e-3}],
        weight_decay=0.0,
    )
    cfg = quiet(steps=20, schedule="wsd", decay_frac=0.5, log_every=5, save_final=False)
    train(model, opt, RandomWindows(stream(), BATCH, SEQ, 0), cfg, tmp_path)
    for row in read_metrics(tmp_path / "metrics.jsonl"):
        m = cfg.lr_at(row["step"] - 1)
        assert row["lrs"] == pytest.approx({"mat": 1e-2 * m, "1": 1e-3 * m})
    assert not (tmp_path / "ckpt").exists()


def test_grad_accum_gives_the_global_mean_over_unequal_masks(tmp_path):
    losses = {}
    for accum in (1, 2, 4):
        model = make()
        cfg = quiet(steps=12, log_every=1, grad_accum=accum, save_final=False)
        data = MaskedWindows(stream(), BATCH, SEQ, 0)
        train(model, adamw(model), data, cfg, tmp_path / str(accum))
        losses[accum] = [r["loss"] for r in read_metrics(tmp_path / str(accum) / "metrics.jsonl")]
    # Micro-batches hold different numbers of counted targets; normalising by the global count
    # makes the trajectories agree up to float reassociation.
    assert losses[2] == pytest.approx(losses[1], rel=1e-5)
    assert losses[4] == pytest.approx(losses[1], rel=1e-5)
    assert losses[1][-1] < losses[1][0]


def test_crash_and_resume_continue_the_identical_trajectory(tmp_path):
    # Dropout makes the torch RNG matter; ckpt_every=14 puts the checkpoint mid log-window; the
    # crash at step 35 happens after the line of step 30, which resume must cut away.
    def run(out, crash_at=-1, resume=True):
        model = make(dropout=0.1, ffn="gated")
        data = CrashingSource(stream(), BATCH, SEQ, 0, crash_at=crash_at)
        cfg = quiet(
            steps=50, schedule="cosine", warmup_steps=3, log_every=10, eval_every=20,
            ckpt_every=14, keep_ckpts=None,
        )  # fmt: skip

        def hook(step, m):
            return {"noise": torch.randn(()).item(), "w": m.head.weight.sum().item()}

        return (
            model,
            data,
            train(model, adamw(model), data, cfg, out, eval_hooks=[hook], resume=resume),
        )

    ref_model, _, _ = run(tmp_path / "ref")
    with pytest.raises(RuntimeError, match="simulated crash"):
        run(tmp_path / "cut", crash_at=35)
    assert [r["step"] for r in read_metrics(tmp_path / "cut" / "metrics.jsonl")] == [10, 20, 30]
    assert latest_checkpoint(tmp_path / "cut" / "ckpt").name == "step_000028.pt"
    model, data, result = run(tmp_path / "cut")
    assert result.resumed_from == 28 and result.ok
    assert data.restored == {"seed": 0, "note": "position is the step"}
    ref_rows = read_metrics(tmp_path / "ref" / "metrics.jsonl")
    assert strip_timing(read_metrics(tmp_path / "cut" / "metrics.jsonl")) == strip_timing(ref_rows)
    for a, b in zip(ref_model.state_dict().values(), model.state_dict().values(), strict=True):
        assert torch.equal(a, b)
    # A finished run resumed again does nothing and keeps its metrics.
    _, _, again = run(tmp_path / "cut")
    assert again.resumed_from == 50
    assert strip_timing(read_metrics(tmp_path / "cut" / "metrics.jsonl")) == strip_timing(ref_rows)


def test_exploding_learning_rate_stops_with_a_diverged_status(tmp_path):
    model = make()
    opt = torch.optim.SGD(model.parameters(), lr=1e6)
    cfg = quiet(steps=50, grad_clip=None, log_every=1, ckpt_every=5)
    result = train(model, opt, RandomWindows(stream(), BATCH, SEQ, 0), cfg, tmp_path)
    assert result.status == "diverged" and not result.ok
    assert result.step < 50
    diverged = json.loads((tmp_path / "diverged.json").read_text())
    assert diverged["status"] == "diverged" and diverged["step"] == result.step + 1
    assert "diverged" in diverged["message"]
    diag = json.loads((tmp_path / "nan_diagnostics.json").read_text())
    assert set(diag["grad_norms"]) == {n for n, _ in model.named_parameters()}
    batch = torch.load(tmp_path / "nan_batch.pt", weights_only=True)
    assert batch["x"].shape == (BATCH, SEQ) and batch["step"] == result.step
    assert max(r["step"] for r in read_metrics(tmp_path / "metrics.jsonl")) == result.step


def test_divergence_skips_the_bad_update(tmp_path):
    calls = {"n": 0}

    def nan_at_update_8(model, x, y):
        calls["n"] += 1
        loss = token_loss_sum(model, x, y)
        return loss * float("nan") if calls["n"] == 8 else loss

    model = make()
    result = train(
        model, adamw(model), RandomWindows(stream(), BATCH, SEQ, 0),
        quiet(steps=20, log_every=1, save_final=False), tmp_path / "nan", loss_fn=nan_at_update_8,
    )  # fmt: skip
    assert result.status == "diverged" and result.step == 7
    diag = json.loads((tmp_path / "nan" / "nan_diagnostics.json").read_text())
    assert diag["loss"] == "nan" and diag["nonfinite_params"] == []
    reference = make()
    train(
        reference, adamw(reference), RandomWindows(stream(), BATCH, SEQ, 0),
        quiet(steps=7, log_every=1, save_final=False), tmp_path / "ref",
    )  # fmt: skip
    # steps=7 vs 20 changes nothing here: the schedule is constant.
    for a, b in zip(reference.parameters(), model.parameters(), strict=True):
        assert torch.equal(a, b)


def test_run_dir_may_be_an_object_with_a_path(tmp_path):
    @dataclass
    class Run:
        path: Path

    model = make()
    train(
        model, adamw(model), RandomWindows(stream(), BATCH, SEQ, 0), quiet(steps=3), Run(tmp_path)
    )
    assert (tmp_path / "metrics.jsonl").exists() and (tmp_path / "ckpt" / "step_000003.pt").exists()


def test_bad_loop_fields_are_config_errors():
    with pytest.raises(ConfigError, match=r"precision must be one of"):
        TrainConfig(steps=10, precision="bfloat16", device="cpu").validate()
    with pytest.raises(ConfigError, match="grad_clip"):
        TrainConfig(steps=10, grad_clip=0.0).validate()
    with pytest.raises(ConfigError, match="steps"):
        TrainConfig(steps=0).validate()


def test_existing_checkpoint_without_resume_is_a_config_error(tmp_path):
    model = make()
    data = RandomWindows(stream(), BATCH, SEQ, 0)
    train(model, adamw(model), data, quiet(steps=2), tmp_path)
    with pytest.raises(ConfigError, match="already holds checkpoint"):
        train(model, adamw(model), data, quiet(steps=2), tmp_path, resume=False)


def test_corrupt_latest_checkpoint_stops_resume_with_its_name(tmp_path):
    model = make()
    data = RandomWindows(stream(), BATCH, SEQ, 0)
    train(model, adamw(model), data, quiet(steps=4, ckpt_every=2), tmp_path)
    latest = latest_checkpoint(tmp_path / "ckpt")
    latest.write_bytes(latest.read_bytes()[:100])
    with pytest.raises(CheckpointError, match=r"step_000004\.pt is truncated or corrupt"):
        train(model, adamw(model), data, quiet(steps=6, ckpt_every=2), tmp_path)


def test_checkpoint_of_another_model_is_a_checkpoint_error(tmp_path):
    model = make()
    data = RandomWindows(stream(), BATCH, SEQ, 0)
    train(model, adamw(model), data, quiet(steps=2), tmp_path)
    other = make(ffn="gated")
    with pytest.raises(CheckpointError, match="does not match the model"):
        train(other, adamw(other), data, quiet(steps=4), tmp_path)


def test_a_checkpoint_resumes_only_under_the_identity_that_wrote_it(tmp_path):
    data = RandomWindows(stream(), BATCH, SEQ, 0)

    def run(identity, steps=4):
        model = make()
        cfg = quiet(steps=steps, ckpt_every=2)
        return train(model, adamw(model), data, cfg, tmp_path, identity=identity)

    run("lr 3e-3")
    path = latest_checkpoint(tmp_path / "ckpt")
    assert load_checkpoint(path)["identity"] == "lr 3e-3"
    with pytest.raises(CheckpointError) as info:
        run("lr 1e-3", steps=6)
    assert str(info.value) == (
        f"checkpoint {path} was written by run 'lr 3e-3'; expected run 'lr 1e-3': it is another "
        f"run's, not resumed; delete {path.parent} to train this run from scratch"
    )
    assert run("lr 3e-3", steps=6).resumed_from == 4
    # A checkpoint from before identities were recorded is refused too (and, without an
    # identity, a caller that claims none resumes whatever is there).
    latest = latest_checkpoint(tmp_path / "ckpt")
    old = {k: v for k, v in load_checkpoint(latest).items() if k not in ("format", "version")}
    save_checkpoint(latest, {k: v for k, v in old.items() if k != "identity"})
    with pytest.raises(CheckpointError, match="records no run identity"):
        run("lr 3e-3", steps=8)
    assert run(None, steps=8).resumed_from == 6


def test_batches_without_targets_are_a_data_error(tmp_path):
    class Empty(RandomWindows):
        def batch(self, step, rank=0, world_size=1):
            x, y = super().batch(step, rank, world_size)
            return x, torch.full_like(y, -100)

    model = make()
    with pytest.raises(DataError, match="no targets"):
        train(model, adamw(model), Empty(stream(), BATCH, SEQ, 0), quiet(steps=2), tmp_path)
