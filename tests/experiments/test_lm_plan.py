"""The LM library's plan and pool: progress declared up front and counted across worker
processes (growing when a sweep widens), labelled per-run lines, and the same results from
one worker as from two; tuning trials on their own seeds, never evaluation runs."""

from __future__ import annotations

import dataclasses
import os

import pytest

from tailmem import progress
from tailmem.lm.arms import Arm
from tailmem.lm.config import OptimSection, TrainSection
from tailmem.lm.entries import Entry, Rates
from tailmem.lm.plan import Plan, run_plan, tidy
from tailmem.lm.spec import RunResult
from tailmem.lm.subrun import RunContext, RunTemplate
from tailmem.lm.tuning import Sweep
from tailmem.models.gpt import GPTConfig

ARMS = [Arm("adam", "Adam", "adam:*"), Arm("muon", "Muon", "muon:q,k adam:*")]
MODEL = GPTConfig(vocab_size=64, n_layer=1, n_head=2, d_model=16, d_ff=32, max_seq_len=32)
TEMPLATE = RunTemplate({"plain": MODEL}, TrainSection(), OptimSection.defaults("muon", "adam"), {})


def fake_train(spec, context, on_steps):
    """A run that reports one step short of its length (as a diverged run would) and scores
    by its learning rate; it records which process trained it (in its message)."""
    for _ in range(spec.steps - 1):
        on_steps(1)
    evals = [{"step": spec.steps, "fta_all": 0.1 * spec.lrs[spec.arm.name]}]
    return RunResult(
        digest=spec.digest, key=spec.key, arm=spec.arm.name, recipe=spec.arm.recipe,
        ffn=spec.ffn, lrs=spec.lrs, seed=spec.seed, steps=spec.steps, status="complete",
        message=f"pid {os.getpid()}", steps_done=spec.steps, final_loss=0.0, tokens=0,
        evals=evals, final=evals[-1], diverged=None, wall_seconds=0.0,
    )  # fmt: skip


TUNING_SEEDS = (1000, 1001)


def score(result: RunResult) -> float | None:
    return float(result.evals[-1]["fta_all"])


def make_plan(sweep_steps: int, max_extend: int = 1) -> Plan:
    """Adam sweeps (1, 2, 3); Muon sweeps (1, 2) with Adam's chosen rate borrowed. The score
    grows with the rate, so each winner sits at the top and the sweep widens ``max_extend``
    points beyond it (Adam to 4.5, Muon to 4)."""

    def sweep(grid: tuple[float, ...]) -> Sweep:
        return Sweep(grid, TUNING_SEEDS, sweep_steps, "fta_all", max_extend)

    adam = Entry("plain", ARMS[0], Rates(swept=("adam",)), sweep((1.0, 2.0, 3.0)))
    muon = Entry("plain", ARMS[1], Rates(borrowed={"adam": ("adam", "adam")}, swept=("muon",)),
                 sweep((1.0, 2.0)))  # fmt: skip
    return Plan((adam, muon), (0, 1), 10, TEMPLATE, score)


@pytest.mark.parametrize(("sweep_steps", "workers"), [(6, 1), (10, 1), (10, 2)])
def test_progress_counts_every_step_of_every_run_declared_up_front(
    tmp_path, capsys, sweep_steps, workers
):
    plan = make_plan(sweep_steps)
    context = RunContext(str(tmp_path), data=None)
    # Up front: each sweep's declared grid on both tuning seeds, and every seed run.
    assert plan.declared_steps({}) == (3 + 2) * 2 * sweep_steps + 2 * 2 * 10
    with progress.tracking(tmp_path) as tracker:
        summary = lambda r: f"score {r.metric('fta_all'):.2f}"  # noqa: E731
        trained_plan = run_plan(plan, context, workers, summary, train=fake_train)
        results = trained_plan.results
        trained = sum(job.steps for job in results)
        # Both sweeps widened one point (4 trials more); a trial is never a seed run, even at
        # the seed runs' length.
        assert trained == (4 + 3) * 2 * sweep_steps + 2 * 2 * 10
        assert plan.declared_steps(results) == trained
        # Every run's steps count once; the step each fake run left out counts as skipped.
        assert tracker.total == trained and tracker.done == trained
        assert tracker.skipped == len(results)
    pids = {int(r.message.removeprefix("pid ")) for r in results.values()}
    assert (os.getpid() in pids) == (workers == 1) and len(pids) <= workers
    assert trained_plan.best[("plain", "adam")] == {"adam": 4.5}
    assert trained_plan.best[("plain", "muon")] == {"adam": 4.5, "muon": 4.0}
    choice = trained_plan.choices["plain", "muon"]
    assert (choice.points, choice.edge, choice.cost) == ((1.0, 2.0, 4.0), "highest", 6)
    assert trained_plan.tuning_cost(("plain", "adam")) == (8, (3 + 1) * 2)
    assert trained_plan.edge(("plain", "adam")) == "highest"
    assert trained_plan.kinds == ["muon", "adam"] and trained_plan.arm("muon") is ARMS[1]
    for entry, runs in trained_plan.seed_runs.items():
        assert [(r.seed, r.steps) for r in runs] == [(0, 10), (1, 10)]
        assert not {s for _, s, _ in trained_plan.states[entry].trials} & {0, 1}
    for spec, result in results.items():  # each run trained as its spec says
        assert (result.key, result.lrs, result.seed) == (spec.key, spec.lrs, spec.seed)
        assert [s.kind.name for s in spec.optimizers] == list(spec.arm.kinds)
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == len(results) == 4 * 2 + 3 * 2 + 2 * 2
    assert f"[{len(results)}/{len(results)}] plain/" in lines[-1]
    muon = "plain/muon muon=4 adam=4.5 seed=1 steps=10: complete, score 0.40 (0s)"
    assert any(line.endswith(muon) for line in lines)
    assert any(f"plain/adam adam=4.5 seed=1001 steps={sweep_steps}: complete" in line
               for line in lines)  # fmt: skip


@pytest.mark.parametrize(
    ("policy", "kept"),
    [("all", 18), ("first_seed", 2), ("none", 0)],
)
def test_keep_checkpoints_policy(tmp_path, policy, kept):
    """``tidy`` keeps the final checkpoints ``train.keep_checkpoints`` says."""
    trained = run_plan(make_plan(sweep_steps=10), RunContext(str(tmp_path), data=None), 1,
                       lambda r: "", train=fake_train)  # fmt: skip
    for result in trained.results.values():
        (tmp_path / result.key / "ckpt").mkdir(parents=True)
    tidy(trained, str(tmp_path), policy)
    ckpts = tmp_path.glob("runs/*/*/*/ckpt")
    left = sorted(p.parent.relative_to(tmp_path).as_posix() for p in ckpts)
    assert len(left) == kept
    if policy == "first_seed":  # each arm's seed-0 run at its chosen learning rates
        assert left == [
            "runs/plain/adam/adam4.5-seed0-steps10",
            "runs/plain/muon/muon4-adam4.5-seed0-steps10",
        ]


def test_tidy_deletes_the_sub_runs_no_run_of_the_plan_owns(tmp_path):
    """An update keeps an earlier config's sub-runs so that the shared ones are reused; those
    the new plan does not own (another FFN type, a dropped learning rate) go when it ends."""
    trained = run_plan(make_plan(sweep_steps=10), RunContext(str(tmp_path), data=None), 1,
                       lambda r: "", train=fake_train)  # fmt: skip
    owned = {spec.key for spec in trained.results}
    for key in owned:
        (tmp_path / key).mkdir(parents=True)
    stale = ["runs/gated/adam/adam3-seed0-steps10", "runs/plain/adam/adam9-seed0-steps10"]
    for key in stale:
        (tmp_path / key / "ckpt").mkdir(parents=True)
    tidy(trained, str(tmp_path), "all")
    left = {p.relative_to(tmp_path).as_posix() for p in tmp_path.glob("runs/*/*/*")}
    assert left == owned
    assert not (tmp_path / "runs" / "gated").exists()


def test_a_fixed_rate_trains_only_its_seed_runs(tmp_path):
    """One learning rate (nothing to choose): no trial, only the seed runs (found by the paper
    preset's 2-step test: a fixed rate trained a 2000-step "sweep")."""
    adam = Entry("plain", ARMS[0], Rates(fixed={"adam": 2.0}))
    muon = Entry("plain", ARMS[1], Rates(fixed={"adam": 1.0}, swept=("muon",)),
                 Sweep((1.0, 3.0), TUNING_SEEDS, 6, "fta_all", 0))  # fmt: skip
    plan = Plan((adam, muon), (0, 1), 10, TEMPLATE, score)
    assert plan.declared_steps({}) == 2 * 10 + (2 * 2 * 6 + 2 * 10)
    trained = run_plan(plan, RunContext(str(tmp_path), data=None), 1, lambda r: "",
                       train=fake_train)  # fmt: skip
    runs = sorted((job.arm.name, job.seed, job.steps) for job in trained.results)
    seed_runs = [(arm, seed, 10) for arm in ("adam", "muon") for seed in (0, 1)]
    trials = [("muon", seed, 6) for seed in TUNING_SEEDS for _ in (1.0, 3.0)]
    assert runs == sorted([*seed_runs, *trials])
    assert ("plain", "adam") not in trained.choices
    assert trained.tuning_cost(("plain", "adam")) == (0, 0)
    assert trained.best["plain", "adam"] == {"adam": 2.0}
    assert trained.best["plain", "muon"] == {"adam": 1.0, "muon": 3.0}
    assert trained.edge(("plain", "muon")) == "highest"  # no widening allowed: flagged


def test_a_failed_trial_ranks_its_point_last(tmp_path):
    """A diverged trial's point loses whatever its score would have been."""

    def train(spec, context, on_steps):
        result = fake_train(spec, context, on_steps)
        if spec.seed == 1001 and spec.lrs.get("muon") == 3.0:
            return dataclasses.replace(result, status="diverged", message="nan")
        return result

    muon = Entry("plain", ARMS[1], Rates(fixed={"adam": 1.0}, swept=("muon",)),
                 Sweep((1.0, 2.0, 3.0), TUNING_SEEDS, 6, "fta_all", 0))  # fmt: skip
    plan = Plan((muon,), (0,), 10, TEMPLATE, score)
    trained = run_plan(plan, RunContext(str(tmp_path), data=None), 1, lambda r: "", train=train)
    choice = trained.choices["plain", "muon"]
    assert choice.point == 2.0 and choice.means == pytest.approx((0.1, 0.2, None))
    assert choice.edge is None
