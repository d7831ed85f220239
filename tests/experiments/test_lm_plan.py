"""The LM library's plan and pool: progress declared up front and counted across worker
processes, labelled per-run lines, and the same results from one worker as from two."""

from __future__ import annotations

import os

import pytest

from tailmem import progress
from tailmem.lm.arms import Arm
from tailmem.lm.config import OptimSection, TrainSection
from tailmem.lm.plan import Entry, Plan, run_plan, tidy
from tailmem.lm.spec import RunResult
from tailmem.lm.subrun import RunContext, RunTemplate
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


def make_plan(sweep_steps: int) -> Plan:
    grids = {"adam": (1.0, 2.0, 3.0), "muon": (1.0, 2.0)}

    def entry(arm: Arm) -> Entry:
        def lrs(point, best):
            return {**best.get(("plain", "adam"), {"adam": 1.0}), arm.name: point}

        return Entry("plain", arm, grids[arm.name], lrs, ("adam",) if arm.name == "muon" else ())

    def score(entry, point, result):
        return result.evals[-1]["fta_all"]

    return Plan([entry(a) for a in ARMS], score, [0, 1], 10, 0, sweep_steps, TEMPLATE)


@pytest.mark.parametrize(("sweep_steps", "workers"), [(6, 1), (10, 1), (10, 2)])
def test_progress_counts_every_step_of_every_run_declared_up_front(
    tmp_path, capsys, sweep_steps, workers
):
    plan = make_plan(sweep_steps)
    context = RunContext(str(tmp_path), data=None)
    declared = plan.total_steps()
    with progress.tracking(tmp_path) as tracker:
        run_plan(plan, context, workers, lambda r: f"score {r.metric('fta_all'):.2f}",
                 train=fake_train)  # fmt: skip
        trained = sum(job.steps for job in plan.results)
        # Every run's steps count once; the step each fake run left out counts as skipped.
        assert declared == trained == (3 + 2) * sweep_steps + 2 * 2 * 10 - 20 * (sweep_steps == 10)
        assert tracker.total == trained and tracker.done == trained
        assert tracker.skipped == len(plan.results)
    pids = {int(r.message.removeprefix("pid ")) for r in plan.results.values()}
    assert (os.getpid() in pids) == (workers == 1) and len(pids) <= workers
    assert plan.best[("plain", "adam")] == {"adam": 3.0}
    assert plan.best[("plain", "muon")] == {"adam": 3.0, "muon": 2.0}
    assert plan.kinds == ["muon", "adam"] and plan.arm("muon") is ARMS[1]
    for spec, result in plan.results.items():  # each run trained as its spec says
        assert (result.key, result.lrs, result.seed) == (spec.key, spec.lrs, spec.seed)
        assert [s.kind.name for s in spec.optimizers] == list(spec.arm.kinds)
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == plan.total_runs()
    assert f"[{plan.total_runs()}/{plan.total_runs()}] plain/" in lines[-1]
    assert any(line.endswith("plain/muon muon=2 adam=3 seed=1 steps=10: complete, score 0.20 (0s)")
               for line in lines)  # fmt: skip


@pytest.mark.parametrize(
    ("policy", "kept"),
    [("all", 7), ("first_seed", 2), ("none", 0)],
)
def test_keep_checkpoints_policy(tmp_path, policy, kept):
    """``tidy`` keeps the final checkpoints ``train.keep_checkpoints`` says."""
    plan = make_plan(sweep_steps=10)
    run_plan(plan, RunContext(str(tmp_path), data=None), 1, lambda r: "", train=fake_train)
    for result in plan.results.values():
        (tmp_path / result.key / "ckpt").mkdir(parents=True)
    tidy(plan, str(tmp_path), policy)
    ckpts = tmp_path.glob("runs/*/*/*/ckpt")
    left = sorted(p.parent.relative_to(tmp_path).as_posix() for p in ckpts)
    assert len(left) == kept
    if policy == "first_seed":  # each arm's seed-0 run at its chosen learning rates
        assert left == [
            "runs/plain/adam/adam3-seed0-steps10",
            "runs/plain/muon/muon2-adam3-seed0-steps10",
        ]


def test_tidy_deletes_the_sub_runs_no_run_of_the_plan_owns(tmp_path):
    """An update keeps an earlier config's sub-runs so that the shared ones are reused; those
    the new plan does not own (another FFN type, a dropped learning rate) go when it ends."""
    plan = make_plan(sweep_steps=10)
    run_plan(plan, RunContext(str(tmp_path), data=None), 1, lambda r: "", train=fake_train)
    owned = {spec.key for spec in plan.results}
    for key in owned:
        (tmp_path / key).mkdir(parents=True)
    stale = ["runs/gated/adam/adam3-seed0-steps10", "runs/plain/adam/adam9-seed0-steps10"]
    for key in stale:
        (tmp_path / key / "ckpt").mkdir(parents=True)
    tidy(plan, str(tmp_path), "all")
    left = {p.relative_to(tmp_path).as_posix() for p in tmp_path.glob("runs/*/*/*")}
    assert left == owned
    assert not (tmp_path / "runs" / "gated").exists()


def test_a_fixed_rate_trains_only_its_seed_runs_whatever_the_sweep_length(tmp_path):
    """One learning rate (nothing to choose): no run at the sweep's seed and length, only the
    seed runs (found by the paper preset's 2-step test: a fixed rate trained a 2000-step
    "sweep")."""

    def entry(arm: Arm, points: tuple[float, ...]) -> Entry:
        return Entry("plain", arm, points, lambda point, best: {"adam": 1.0, arm.name: point})

    plan = Plan([entry(ARMS[0], (2.0,)), entry(ARMS[1], (1.0, 3.0))],
                lambda e, p, r: r.evals[-1]["fta_all"], [0, 1], 10, 7, 6, TEMPLATE)  # fmt: skip
    assert plan.total_runs() == (2) + (2 + 2) and plan.total_steps() == 20 + (2 * 6 + 20)
    run_plan(plan, RunContext(str(tmp_path), data=None), 1, lambda r: "", train=fake_train)
    trained = sorted((job.arm.name, job.seed, job.steps) for job in plan.results)
    seed_runs = [(arm, seed, 10) for arm in ("adam", "muon") for seed in (0, 1)]
    assert trained == sorted([*seed_runs, ("muon", 7, 6), ("muon", 7, 6)])
    assert [job.seed for _, job in plan.sweeps["plain", "adam"]] == [0]
    assert plan.best["plain", "adam"] == {"adam": 2.0}
