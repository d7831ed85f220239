"""A training run as typed values: the :class:`~tailmem.lm.spec.RunSpec` a study builds (its
identity, folder and label) and the :class:`~tailmem.lm.spec.RunResult` it returns, stored as
strict JSON and read back the same."""

from __future__ import annotations

import dataclasses
import json
import math

import pytest

from tailmem.lm.arms import Arm, matrix_recipe
from tailmem.lm.config import OptimSection, TrainSection
from tailmem.lm.spec import Divergence, RunResult, diverged_runs
from tailmem.lm.subrun import RunTemplate, _json_text
from tailmem.models.gpt import GPTConfig

MUON = Arm.of_recipe(matrix_recipe("muon"))
MODEL = GPTConfig(vocab_size=64, n_layer=1, n_head=2, d_model=16, d_ff=32, max_seq_len=32)
DATA = {"corpus": "abc123"}


def template(optim: OptimSection | None = None, **train) -> RunTemplate:
    section = optim or OptimSection.defaults("muon", "adam")
    return RunTemplate({"plain": MODEL}, TrainSection(**train), section, DATA)


def result(spec, status="complete", loss=2.5) -> RunResult:
    ok = status == "complete"
    evals = [{"step": 0, "val_loss": 4.0}, {"step": spec.steps, "val_loss": loss}]
    return RunResult(
        digest=spec.digest, key=spec.key, arm=spec.arm.name, recipe=spec.arm.recipe,
        ffn=spec.ffn, lrs=spec.lrs, seed=spec.seed, steps=spec.steps, status=status,
        message="" if ok else "loss is nan at update 7", steps_done=spec.steps if ok else 6,
        final_loss=loss, tokens=1024, evals=evals if ok else evals[:1],
        final=evals[-1] if ok else {},
        diverged=None if ok else Divergence(7, loss, "loss is nan at update 7"),
        wall_seconds=1.5,
    )  # fmt: skip


def test_a_spec_records_every_setting_and_its_digest_is_its_identity():
    runs = template()
    spec = runs.spec(MUON, "plain", {"adam": 3e-3, "muon": 0.02}, 1, 50)
    assert spec.lrs == {"muon": 0.02, "adam": 3e-3}  # registry order
    assert spec.key == "runs/plain/muon/muon0.02-adam0.003-seed1-steps50"
    assert spec.label == "plain/muon muon=0.02 adam=0.003 seed=1"
    record = spec.record()
    assert record["hparams"]["muon"]["momentum"] == 0.95 and record["hparams"]["adam"]["lr"] == 3e-3
    assert record["batch"] == [16, 128, 16] and record["data"] == DATA
    assert record["train"]["steps"] == 50 and "progress" not in record["train"]
    assert record["model"]["d_model"] == 16 and record["arm"]["recipe"] == MUON.recipe
    json.dumps(record, allow_nan=False)  # spec.json
    again = runs.spec(MUON, "plain", {"muon": 0.02, "adam": 3e-3}, 1, 50)
    assert again == spec and hash(again) == hash(spec) and again.digest == spec.digest
    # How a run is shown is not what it computes.
    quiet = dataclasses.replace(spec, loop=dataclasses.replace(spec.loop, progress=False))
    assert quiet.digest == spec.digest
    tracked = template(log_to=["tensorboard", "wandb"]).spec(MUON, "plain", spec.lrs, 1, 50)
    assert tracked.loop.log_to == ("tensorboard", "wandb") and tracked.digest == spec.digest
    # Any hyper-parameter is part of the identity, though the folder (rates, seed) is the same:
    # a sub-run trained with other settings is not reused.
    momentum = OptimSection.from_config({"muon": {"momentum": 0.9}, "adam": {}}, "optim")
    other = template(momentum).spec(MUON, "plain", {"muon": 0.02, "adam": 3e-3}, 1, 50)
    assert other.key == spec.key and other.digest != spec.digest and other != spec
    shorter = template(batch_size=8).spec(MUON, "plain", spec.lrs, 1, 50)
    assert shorter.digest != spec.digest
    assert [s.kind.name for s in spec.optimizers] == ["muon", "adam"]


def test_a_result_survives_strict_json_and_reads_back_the_same():
    spec = template().spec(MUON, "plain", {"muon": 0.02, "adam": 3e-3}, 0, 20)
    done = result(spec)
    stored = json.loads(_json_text(done.to_json()))
    assert "reused" not in stored and stored["lrs"] == {"muon": 0.02, "adam": 3e-3}
    back = RunResult.from_json(stored)
    assert back == done and back.ok and not back.is_diverged and back.metric("val_loss") == 2.5
    assert back.metric("fta") is None
    reused = RunResult.from_json(stored, reused=True)
    assert reused.reused and reused == done  # "reused" is how it was found, not what it is


def test_a_diverged_result_stores_its_nan_as_null_and_reads_back():
    spec = template().spec(MUON, "plain", {"muon": 0.02, "adam": 3e-3}, 0, 20)
    diverged = result(spec, "diverged", loss=math.nan)
    text = _json_text(diverged.to_json())
    stored = json.loads(text, parse_constant=lambda c: pytest.fail(f"non-strict {c}"))
    assert stored["final_loss"] is None and stored["final_loss_status"] == "nan"
    assert stored["diverged"]["loss"] is None and stored["diverged"]["loss_status"] == "nan"
    back = RunResult.from_json(stored)
    assert back.is_diverged and not back.ok and back.final == {} and back.final_loss is None
    assert back.diverged == Divergence(7, None, "loss is nan at update 7")
    assert back.evals == diverged.evals and back.steps_done == 6
    (entry,) = diverged_runs([result(spec), back])
    assert entry.to_json() == {"arm": "muon", "ffn": "plain", "seed": 0, "lrs": spec.lrs,
                               "key": spec.key, "step": 7,
                               "reason": "arm muon diverged at step 7"}  # fmt: skip


@pytest.mark.parametrize("missing", ["status", "evals", "lrs", "digest"])
def test_a_stored_result_missing_a_field_is_not_a_result(missing):
    spec = template().spec(MUON, "plain", {"muon": 0.02, "adam": 3e-3}, 0, 20)
    stored = result(spec).to_json()
    del stored[missing]
    with pytest.raises(KeyError):
        RunResult.from_json(stored)
