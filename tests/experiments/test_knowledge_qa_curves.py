"""knowledge-QA's per-arm curves (:mod:`tailmem.experiments.knowledge_qa.curves`): the numbers
of each evaluation read once, at the steps every seed run evaluated, with the errors a step or
metric that is not there gives."""

from __future__ import annotations

import numpy as np
import pytest

from tailmem.experiments.knowledge_qa.curves import NO_RUNS, ArmCurve, RunCurve
from tailmem.experiments.knowledge_qa.tables import final_mean_se
from tailmem.lm.spec import RunResult


def _run(seed: int, evals: list[dict], status: str = "complete") -> RunResult:
    return RunResult(
        digest=f"d{seed}", key=f"k{seed}", arm="muon", recipe="muon", ffn="plain", lrs={},
        seed=seed, steps=6, status=status, message="", steps_done=6, final_loss=None, tokens=0,
        evals=evals, final={}, diverged=None, wall_seconds=0.0,
    )  # fmt: skip


def _eval(step: int, fta: list[float]) -> dict:
    return {"step": step, "fta": fta, "em": [v / 2 for v in fta], "fta_all": 0.0}


SEED0 = [_eval(0, [0.1, 0.0]), _eval(2, [0.5, 0.2]), _eval(4, [0.9, 0.4]),
         _eval(4, [0.0, 0.0]), _eval(6, [1.0, 0.6])]  # fmt: skip
"""Seed 0 evaluates step 4 twice (the first counts) and goes on to step 6."""
SEED1 = [_eval(4, [0.7, 0.3]), _eval(0, [0.2, 0.1]), _eval(2, [0.4, 0.1])]
"""Seed 1 stops at step 4 (listed out of order)."""


def test_an_arm_reads_the_steps_every_seed_evaluated_each_at_its_first_evaluation():
    curve = ArmCurve.of([_run(0, SEED0), _run(1, SEED1)])
    steps, fta = curve.history()
    assert steps.tolist() == [0, 2, 4] and curve.seeds == (0, 1)
    np.testing.assert_array_equal(
        fta, [[[0.1, 0.0], [0.5, 0.2], [0.9, 0.4]], [[0.2, 0.1], [0.4, 0.1], [0.7, 0.3]]]
    )
    _, em = curve.history("em")
    np.testing.assert_array_equal(em, fta / 2)
    np.testing.assert_array_equal(curve.at(4), [[0.9, 0.4], [0.7, 0.3]])
    np.testing.assert_array_equal(curve.at(2, "em"), [[0.25, 0.1], [0.2, 0.05]])
    # seed 0 alone reaches step 6
    assert curve.only([0]).history()[0].tolist() == [0, 2, 4, 6]
    np.testing.assert_array_equal(curve.only([0]).at(6), [[1.0, 0.6]])


def test_a_step_not_evaluated_by_every_seed_is_refused_with_the_steps_that_were():
    curve = ArmCurve.of([_run(0, SEED0), _run(1, SEED1)])
    with pytest.raises(
        ValueError, match=r"^step 6 was not evaluated; evaluated steps: \[0, 2, 4\]$"
    ):
        curve.at(6)
    silent = ArmCurve.of([_run(0, SEED0), _run(1, [])])  # a run with no evaluation
    with pytest.raises(ValueError, match=r"evaluated steps: \[\]$"):
        silent.at(0)


def test_seeds_are_selected_paired_and_diverged_runs_left_out():
    curve = ArmCurve.of([_run(0, SEED0), _run(1, SEED1, status="diverged")])
    assert curve.complete().seeds == (0,)
    np.testing.assert_array_equal(curve.only([1, 0]).at(0), [[0.2, 0.1], [0.1, 0.0]])
    # the arm's numbers are read-only: a reader cannot change what another one reads
    with pytest.raises(ValueError, match="read-only"):
        curve.runs[0].values["fta"][0, 0] = 1.0


def test_a_metric_not_evaluated_is_a_key_error_and_an_arm_not_run_has_no_steps():
    with pytest.raises(KeyError, match="em"):
        RunCurve.of(_run(0, [{"step": 0, "fta": [0.5]}]))
    assert final_mean_se(NO_RUNS, 4, "fta", -1) == (None, None)
    with pytest.raises(ValueError, match="without seed runs"):
        NO_RUNS.at(4)


def test_the_mean_and_se_over_seeds_of_one_group():
    curve = ArmCurve.of([_run(0, SEED0), _run(1, SEED1)])
    # group 1 at step 4: 0.4 and 0.3 -> mean 0.35, SE = std(ddof=1) / sqrt(2) = 0.05
    assert final_mean_se(curve, 4, "fta", -1) == (0.35, 0.05)
