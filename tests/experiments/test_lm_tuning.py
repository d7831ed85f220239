"""Tuning as its own phase: the pure choice, the widening rule and budget, tuning seeds apart
from evaluation seeds, the plan's derived status, and the rate store's keys."""

from __future__ import annotations

import math

import pytest

from tailmem.errors import ConfigError
from tailmem.lm.arms import Arm
from tailmem.lm.config import OptimSection, TrainSection
from tailmem.lm.entries import Entry, Rates
from tailmem.lm.plan import Plan
from tailmem.lm.spec import RunResult
from tailmem.lm.store import (
    StoredRate,
    StoredTrial,
    load_store,
    stored_choices,
    tuning_key,
    write_store,
)
from tailmem.lm.subrun import RunTemplate
from tailmem.lm.tuning import (
    TUNING_SEED_OFFSET,
    Choice,
    Sweep,
    Trial,
    TuningSection,
    Widen,
    beyond,
    choose,
    tuning_seeds,
)
from tailmem.models.gpt import GPTConfig

SEEDS = (1000, 1001)


def _trials(scores: dict[float, tuple[float | None, float | None]]) -> list[Trial]:
    return [Trial(p, s, v) for p, pair in scores.items() for s, v in zip(SEEDS, pair, strict=True)]


def test_the_best_mean_over_tuning_seeds_wins_and_a_failed_trial_ranks_its_point_last():
    sweep = Sweep((1.0, 2.0, 4.0), SEEDS, 10, "score", max_extend=0)
    # point 2 is best on seed 1000 alone, but 4 has the best mean; point 1 failed on one seed
    trials = _trials({1.0: (9.0, None), 2.0: (5.0, 1.0), 4.0: (3.5, 3.0)})
    found = choose(sweep, (1.0, 2.0, 4.0), trials)
    assert isinstance(found, Choice)
    assert found.point == 4.0 and found.means == (None, 3.0, 3.25) and found.cost == 6
    assert found.edge == "highest"  # no widening left: chosen at the end, and flagged


def test_a_winner_at_an_end_widens_by_one_grid_step_until_the_budget_is_used():
    sweep = Sweep((1.0, 2.0, 4.0), SEEDS, 10, "score", max_extend=2)
    scores = {1.0: (1.0, 1.0), 2.0: (2.0, 2.0), 4.0: (3.0, 3.0)}
    step = choose(sweep, (1.0, 2.0, 4.0), _trials(scores))
    assert step == Widen(8.0)
    scores[8.0] = (2.5, 2.5)  # the widened point is worse: 4 is now interior
    found = choose(sweep, (1.0, 2.0, 4.0, 8.0), _trials(scores))
    assert isinstance(found, Choice) and found.point == 4.0 and found.edge is None
    low = choose(sweep, (1.0, 2.0, 4.0), _trials({1.0: (5, 5), 2.0: (1, 1), 4.0: (0, 0)}))
    assert low == Widen(0.5)
    assert beyond((0.06, 0.12, 0.24), "lowest") == 0.03
    assert beyond((1e-4, 3e-4, 1e-3), "highest") == pytest.approx(3.333e-3)
    assert sweep.budget == (3 + 2) * 2


def test_ties_go_to_the_point_tried_first_and_trials_must_cover_every_tuning_seed():
    sweep = Sweep((1.0, 2.0), SEEDS, 10, "score")
    found = choose(sweep, (2.0, 1.0), _trials({1.0: (1.0, 1.0), 2.0: (1.0, 1.0)}))
    assert isinstance(found, Choice) and found.point == 2.0
    with pytest.raises(ValueError, match="every tuning seed"):
        choose(sweep, (1.0, 2.0), [Trial(1.0, 1000, 1.0), Trial(2.0, 1000, 1.0)])


def test_tuning_seeds_are_apart_from_the_evaluation_seeds_and_need_two():
    assert tuning_seeds(0, 2) == (TUNING_SEED_OFFSET, TUNING_SEED_OFFSET + 1)
    assert not set(tuning_seeds(5, 3)) & set(range(5, 5 + 20))
    with pytest.raises(ConfigError, match=r"tuning\.seeds: got 1; expected >= 2"):
        TuningSection(seeds=1).validate()
    with pytest.raises(ConfigError, match=r"tuning\.score: got 'fta'"):
        TuningSection(score="fta").check({"answer_loss": "…"}, eval_seeds=3)
    with pytest.raises(ConfigError, match="trains nothing"):
        TuningSection(only=True, rates="stored").validate()


# --------------------------------------------------------------------------- the plan

MODEL = GPTConfig(vocab_size=64, n_layer=1, n_head=2, d_model=16, d_ff=32, max_seq_len=32)
TEMPLATE = RunTemplate({"plain": MODEL}, TrainSection(), OptimSection.defaults("muon", "adam"), {})
ADAM = Arm("adam", "Adam", "adam:*")
MUON = Arm("muon", "Muon", "muon:q,k,v,o,w_in,w_gate,w_out adam:*")


def _result(spec, score: float) -> RunResult:
    evals = [{"step": spec.steps, "score": score}]
    return RunResult(
        digest=spec.digest, key=spec.key, arm=spec.arm.name, recipe=spec.arm.recipe,
        ffn=spec.ffn, lrs=spec.lrs, seed=spec.seed, steps=spec.steps, status="complete",
        message="", steps_done=spec.steps, final_loss=0.0, tokens=0, evals=evals,
        final=evals[-1], diverged=None, wall_seconds=0.0,
    )  # fmt: skip


def _score(result: RunResult) -> float | None:
    return float(result.evals[-1]["score"])


def _plan(stored=None) -> Plan:
    adam = Entry("plain", ADAM, Rates(swept=("adam",)),
                 Sweep((1e-3, 2e-3, 4e-3), SEEDS, 10, "score", 0))  # fmt: skip
    muon = Entry("plain", MUON, Rates(borrowed={"adam": ("adam", "adam")}, swept=("muon",)),
                 Sweep((0.01, 0.02), SEEDS, 10, "score", 0))  # fmt: skip
    return Plan((adam, muon), (0, 1, 2), 20, TEMPLATE, _score, stored or {})


def _finish(plan: Plan, peak: dict[str, float]) -> dict:
    """Train every run the plan asks for until none is left; a run scores best at its arm's
    ``peak`` rate (on every tuning seed)."""
    results: dict = {}
    while ready := plan.ready(results):
        for spec in ready:
            kind = spec.arm.tuned
            results[spec] = _result(spec, -abs(math.log(spec.lrs[kind] / peak[kind])))
    return results


def test_the_plan_tunes_on_tuning_seeds_then_evaluates_fresh_seeds_at_the_choice():
    plan = _plan()
    first = plan.ready({})
    assert {s.arm.name for s in first} == {"adam"}  # Muon waits for Adam's rate
    assert {s.seed for s in first} == set(SEEDS) and len(first) == 6
    results = _finish(plan, {"adam": 2e-3, "muon": 0.02})
    status = plan.status(results)
    adam, muon = status["plain", "adam"], status["plain", "muon"]
    assert adam.choice is not None and adam.choice.point == 2e-3 and adam.choice.edge is None
    assert muon.lrs == {"adam": 2e-3, "muon": 0.02}  # the borrowed rate is Adam's choice
    for state in (adam, muon):
        assert {s.seed for s in state.seed_runs} == {0, 1, 2}
        assert not {seed for _, seed, _ in state.trials} & {0, 1, 2}
        assert all(s.steps == 20 for s in state.seed_runs)
    assert len(results) == 6 + 4 + 3 + 3  # trials, then evaluation runs: no run shared
    assert plan.status(results) == status  # pure: the same results, the same status


def test_a_stored_rate_decides_an_entry_without_any_trial():
    trial = StoredTrial(4e-3, 1000, 1.0)
    stored = StoredRate("k", "study", "cpu", "plain", "adam", 4e-3, {"adam": 4e-3}, "highest",
                        "score", (trial,), 6, None, "0", "d", "c")  # fmt: skip
    plan = _plan({("plain", "adam"): stored})
    first = plan.ready({})
    assert {(s.arm.name, s.seed) for s in first if s.arm.name == "adam"} == {
        ("adam", 0),
        ("adam", 1),
        ("adam", 2),
    }  # evaluation at once: no trial of Adam
    muon_trials = [s for s in first if s.arm.name == "muon"]
    assert muon_trials and all(s.lrs["adam"] == 4e-3 for s in muon_trials)


def test_the_store_key_follows_every_number_of_the_tuning_problem(tmp_path):
    record = {"model": {"d": 256}, "seed": 0}
    entry = _plan().entries[1]
    key = tuning_key(record, entry, {"adam": 2e-3})
    assert tuning_key(dict(record), entry, {"adam": 2e-3}) == key  # deterministic
    assert tuning_key({**record, "model": {"d": 128}}, entry, {"adam": 2e-3}) != key
    assert tuning_key(record, entry, {"adam": 4e-3}) != key  # the lender chose otherwise
    other = Entry("plain", MUON, entry.rates, Sweep((0.01, 0.04), SEEDS, 10, "score", 0))
    assert tuning_key(record, other, {"adam": 2e-3}) != key  # another grid
    adam = _plan().entries[0]
    key0 = tuning_key(record, adam, {})
    stored = StoredRate(key0, "s", "cpu", "plain", "adam", 2e-3, {"adam": 2e-3}, None, "score",
                        (), 6, "abc", "0.1", "day", "cmd")  # fmt: skip
    path = tmp_path / "rates.json"
    assert write_store(path, [stored]) == 1
    store = load_store(path)
    found, missing = stored_choices(_plan().entries, record, store)
    assert found == {("plain", "adam"): stored}
    assert missing == {("plain", "muon"): tuning_key(record, entry, {"adam": 2e-3})}
    path.write_text("{not json")
    with pytest.raises(Exception, match="not a store of tuned rates"):
        load_store(path)


def test_the_store_key_holds_the_optimisers_the_entry_trains_and_no_other():
    """Another arm's optimiser changes none of an entry's trials, so it leaves the entry's key
    alone (changing Muon's scale re-tunes the Muon arms, not Adam's); its own optimiser's
    settings, and a twin's (adam_split shares Adam's), change it."""
    adam, muon = _plan().entries[:2]
    record = {
        "model": {"d": 256},
        "optim": {"adam": {"lr": 1e-3, "eps": 1e-8}, "muon": {"lr": 0.1, "scale": "default"}},
    }
    rescaled = {**record, "optim": {**record["optim"], "muon": {"lr": 0.1, "scale": "none"}}}
    assert tuning_key(rescaled, adam, {}) == tuning_key(record, adam, {})
    assert tuning_key(rescaled, muon, {"adam": 2e-3}) != tuning_key(record, muon, {"adam": 2e-3})
    hidden = "adam_split:q,k,v,o,w_in,w_gate,w_out adam:*"
    split = Entry("plain", Arm("split", "Split", hidden), adam.rates, adam.sweep)
    eps = {**record, "optim": {**record["optim"], "adam": {"lr": 1e-3, "eps": 1e-6}}}
    assert tuning_key(eps, split, {}) != tuning_key(record, split, {})


def test_a_seed_whose_tuning_seeds_pass_the_seed_range_is_refused_before_anything_is_written(
    tmp_path,
):
    from tailmem.cli import main

    out = tmp_path / "x"
    code = main(["run", "knowledge-qa", "--preset", "smoke", "--out", str(out),
                 "optim.muon.lr=[0.01,0.02]", "seed=4294967290"])  # fmt: skip
    assert code == 2 and not out.exists()


def test_gathering_a_runs_choices_reads_and_never_writes_into_the_folder(tmp_path):
    """The choices of a run and of its grid points merge in memory (the run's own last); a
    finished folder's files stay byte for byte (an after-the-fact rewrite broke COMPLETE's
    hashes), and a grid run writes the merged store through its outputs instead."""
    from tailmem.lm.store import STORE_NAME, gather, write_store
    from tailmem.lm.sweeps import gathered_outputs

    def rate(key: str, point: float) -> StoredRate:
        return StoredRate(key, "s", "cpu", "plain", "adam", point, {"adam": point}, None,
                          "score", (), 6, "abc", "0.1", "day", "cmd")  # fmt: skip

    (tmp_path / "points" / "a").mkdir(parents=True)
    write_store(tmp_path / "points" / "a" / STORE_NAME, [rate("k1", 1e-3)])
    write_store(tmp_path / STORE_NAME, [rate("k2", 2e-3), rate("k1", 4e-3)])
    before = {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}
    found = {r.key: r.point for r in gather(tmp_path)}
    assert found == {"k1": 4e-3, "k2": 2e-3}  # the run's own choice wins
    assert {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()} == before
    records = gathered_outputs(tmp_path).records[STORE_NAME]
    assert set(records["rates"]) == {"k1", "k2"}
    assert gathered_outputs(tmp_path / "points" / "none").records == {}
