"""knowledge-qa's second metric and its gap measures: whole-answer exact match (EM) against
greedy decoding by hand on models whose answers are known, and the lag ratios and peak gaps of
a trained plan whose histories are built so that the answer is known (Adam = Muon slowed down
twice, Adam on the hidden matrices at its own rate 1.5 times)."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch

from tailmem.claims import core
from tailmem.columns import records
from tailmem.data.bios import BiosConfig, build_dataset
from tailmem.experiments.knowledge_qa import Config
from tailmem.experiments.knowledge_qa.arms import ARMS
from tailmem.experiments.knowledge_qa.curves import PlanCurves
from tailmem.experiments.knowledge_qa.fta import FTAEvaluator, answer_batch, logits_of
from tailmem.experiments.knowledge_qa.gaps import (
    CELLS_SOURCE,
    FAIR,
    PAPER,
    Exposures,
    gap_rows,
    lag_ratio_rows,
    lag_ratio_table,
    measure,
    pairs,
    readings,
    summary_sentences,
)
from tailmem.lm.config import OptimSection, TrainSection
from tailmem.lm.plan import Plan, TrainedPlan
from tailmem.lm.spec import Divergence, RunResult
from tailmem.lm.subrun import RunTemplate
from tailmem.metrics.qa_gaps import POOLED, UnmeasuredPair
from tailmem.models.gpt import GPT, GPTConfig
from tailmem.train import token_loss_sum

SMALL = dict(m=4, n_first_names=40, n_surnames=60, n_cities=30, n_universities=40)
SMALL |= dict(n_majors=20, n_employers=30, vocab_size=512)


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    return build_dataset(BiosConfig(**SMALL), tmp_path_factory.mktemp("kqa-em"))


class _PrefixOracle(torch.nn.Module):
    """Knows the first ``known[i]`` answer tokens of question ``i``: after the prompt and the
    true answer's first ``j`` tokens it predicts token ``j`` of the answer if ``j < known[i]``,
    else a wrong token; anywhere else token 0."""

    def __init__(self, dataset, known):
        super().__init__()
        self.vocab = dataset.vocab_size
        self.next = {}
        for i, k in enumerate(known):
            prompt, answer = dataset.eval_prompt(i).tolist(), dataset.eval_answer(i).tolist()
            for j, token in enumerate(answer):
                wrong = (token + 1) % self.vocab
                self.next[tuple(prompt + answer[:j])] = token if j < k else wrong

    def forward(self, idx):
        logits = torch.zeros(*idx.shape, self.vocab)
        for b, row in enumerate(idx.tolist()):
            for t in range(len(row)):
                logits[b, t, self.next.get(tuple(row[: t + 1]), 0)] = 1.0
        return logits, None


@torch.no_grad()
def _greedy_exact_match(model, dataset):
    """Per question: does greedy decoding (feeding back its own tokens) give the answer?"""
    out = []
    for i in range(len(dataset.eval_items)):
        context, answer = dataset.eval_prompt(i).tolist(), dataset.eval_answer(i).tolist()
        decoded = []
        for _ in answer:
            logits = model(torch.tensor([context + decoded]))[0]
            decoded.append(int(logits[0, -1].argmax()))
        out.append(decoded == answer)
    return np.array(out)


def test_first_token_right_second_wrong_gives_fta_one_and_exact_match_zero(dataset):
    lengths = np.array([len(dataset.eval_answer(i)) for i in range(len(dataset.eval_items))])
    assert lengths.min() >= 2  # every answer of this data set has a second token to get wrong
    oracle = _PrefixOracle(dataset, known=np.ones(len(lengths), dtype=int))
    out = FTAEvaluator(dataset, batch_size=7)(0, oracle)
    assert out["fta"] == [1.0] * dataset.n_groups and out["fta_all"] == 1.0
    assert out["em"] == [0.0] * dataset.n_groups and out["em_all"] == 0.0


def test_exact_match_equals_greedy_decoding_by_hand_and_never_exceeds_fta(dataset):
    rng = np.random.default_rng(0)
    lengths = np.array([len(dataset.eval_answer(i)) for i in range(len(dataset.eval_items))])
    # Known prefix lengths 0..len: some questions fully known, some only partly, some not at all.
    known = rng.integers(0, lengths + 1)
    full = rng.random(len(known)) < 0.4
    known[full] = lengths[full]
    oracle = _PrefixOracle(dataset, known)
    out = FTAEvaluator(dataset, batch_size=7)(0, oracle)
    by_hand = _greedy_exact_match(oracle, dataset)
    np.testing.assert_array_equal(by_hand, known >= lengths)
    assert 0 < by_hand.mean() < (known >= 1).mean() < 1  # the three kinds all occur
    np.testing.assert_allclose(out["em"], dataset.fta_by_group(by_hand), atol=1e-5)
    np.testing.assert_allclose(out["fta"], dataset.fta_by_group(known >= 1), atol=1e-5)
    assert out["em_all"] == pytest.approx(by_hand.mean(), abs=1e-5)
    assert all(em <= fta for em, fta in zip(out["em"], out["fta"], strict=True))


def test_exact_match_of_a_real_gpt_matches_its_greedy_decoding(dataset):
    """A GPT trained briefly on the answers gets some right, some only by their first token: the
    one teacher-forced pass must give what token-by-token greedy decoding gives."""
    torch.manual_seed(0)
    model = GPT(GPTConfig(vocab_size=dataset.vocab_size, n_layer=1, n_head=2, d_model=32,
                          d_ff=64, max_seq_len=64))  # fmt: skip
    batch = answer_batch(dataset, np.arange(len(dataset.eval_items)))
    x, y = batch.tokens, torch.full_like(batch.tokens, -100)
    y[batch.row, batch.position] = batch.target  # the loss on every answer token
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    for _ in range(24):
        loss = token_loss_sum(model, x, y) / len(batch.target)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    model.eval()
    by_hand = _greedy_exact_match(lambda idx: (model(idx)[0], None), dataset)
    out = FTAEvaluator(dataset, batch_size=5)(0, model)
    assert 0 < by_hand.mean() < out["fta_all"] < 1  # partly learnt: EM strictly below FTA
    np.testing.assert_allclose(out["em"], dataset.fta_by_group(by_hand), atol=1e-5)


def test_logits_of_any_rows_and_positions_match_the_full_forward():
    torch.manual_seed(1)
    model = GPT(GPTConfig(vocab_size=50, n_layer=1, n_head=2, d_model=16, d_ff=32, max_seq_len=12))
    x = torch.randint(0, 50, (3, 12))
    rows, positions = torch.tensor([0, 0, 2, 1, 2]), torch.tensor([0, 11, 3, 3, 7])
    expected = model(x)[0][rows, positions]
    torch.testing.assert_close(logits_of(model, x, rows, positions), expected)


# --------------------------------------------------------------------------- gap measures

LABELS = {name: arm.label for name, arm in ARMS.items()}
EXPOSURES = Exposures(selections=(16, 8, 4, 2, 1), qa_per_selection=1, steps_per_epoch=10.0)
STEPS = 100
SLOW = {"muon": 1.0, "adam_split": 1.5, "adam": 2.0}
"""How many times more steps than Muon each arm needs to reach any FTA."""


def _curve(step, group, slow):
    """FTA of group ``group`` at ``step``: linear to 1 at step 10 (g + 1), ``slow`` times later."""
    return min(1.0, step / (10.0 * (group + 1) * slow))


def _result(job, slow, cap=1.0, status="complete"):
    evals = [
        {
            "step": s,
            "fta": [min(cap, _curve(s, g, slow)) for g in range(5)],
            "em": [0.5 * min(cap, _curve(s, g, slow)) for g in range(5)],
        }
        for s in range(0, STEPS + 1, 2)
    ]
    ok = status == "complete"
    return RunResult(
        digest=job.digest, key=job.key, arm=job.arm.name, recipe=job.arm.recipe, ffn=job.ffn,
        lrs=job.lrs, seed=job.seed, steps=job.steps, status=status, message="",
        steps_done=job.steps if ok else 9, final_loss=0.0 if ok else None, tokens=0,
        evals=evals if ok else evals[:5], final=evals[-1] if ok else {},
        diverged=None if ok else Divergence(10, None, "loss is nan"), wall_seconds=0.0,
    )  # fmt: skip


def _plan(adam_cap=1.0, adam_status=("complete", "complete"), ffn="plain",
          arms=("adam", "muon"), muon_status=("complete", "complete")) -> TrainedPlan:  # fmt: skip
    """A plan at set rates (nothing to tune) whose two evaluation seeds per arm have the
    histories of :func:`_curve`."""
    cfg = Config(arms=list(arms), seeds=2, ffn=ffn, train=TrainSection(steps=STEPS),
                 optim=OptimSection.defaults("muon", "adam", "adam_split"))  # fmt: skip
    model = GPTConfig(vocab_size=64, n_layer=1, n_head=2, d_model=16, d_ff=32, max_seq_len=64)
    runs = RunTemplate({ffn: model}, cfg.train, cfg.optim, {})
    plan = Plan(tuple(cfg.entries()), (0, 1), STEPS, runs, lambda r: 0.0)
    results = {}
    for (_, arm), state in plan.status({}).items():
        assert state.entry.sweep is None and not state.trials  # set rates: seed runs at once
        statuses = {"adam": adam_status, "muon": muon_status}.get(arm, ("complete",) * 2)
        cap = adam_cap if arm == "adam" else 1.0
        for job, status in zip(state.seed_runs, statuses, strict=True):
            results[job] = _result(job, SLOW[arm], cap, status)
    return TrainedPlan(plan, results).completed()


def _measure(plan: TrainedPlan, ffn: str = "plain"):
    """The gap measures of ``plan``'s ``ffn`` runs and the curves of each pair."""
    return measure(plan, PlanCurves.read(plan), ffn, EXPOSURES)


def _interval(ratio: float, se_log: float, seeds: int) -> tuple[float, float]:
    half = core.t_quantile(seeds - 1) * se_log
    return ratio * math.exp(-half), ratio * math.exp(half)


def test_muon_leads_every_pair_it_is_in():
    assert pairs(["adam", "sgd", "muon", "muon_qk"]) == [
        ("muon", "adam"), ("muon", "sgd"), ("muon", "muon_qk"),
        ("adam", "sgd"), ("adam", "muon_qk"), ("sgd", "muon_qk"),
    ]  # fmt: skip


def test_adam_twice_slower_gives_lag_ratio_two_floored_at_the_resolution():
    measures, curves = _measure(_plan())
    json.dumps(measures.to_json(), allow_nan=False)
    assert [(p.lead, p.lag) for p in measures.ours.pairs] == [("muon", "adam")]
    pair = measures.pair("muon", "adam")
    assert pair is not None and pair.status == "measured" and pair.seeds == (0, 1)
    assert pair.steps[0] == 0  # the step-0 evaluation anchors every crossing
    # Exposures of group g by step s: S_g * s / 10 (one QA sample per selection).
    np.testing.assert_allclose(curves["muon", "adam"].exposures[4, -1], 1 * STEPS / 10)
    for row in pair.lag_ratios:
        assert row.ratio == pytest.approx(2.0, rel=1e-9) and row.n_measured == 2 and row.complete
    # Both seeds agree exactly, but only to the resolution of evaluations every 2 steps: group
    # 0 at τ 0.3 — Muon crosses at step 3 inside (2, 4), Adam at step 6 inside (4, 6) — has a
    # per-seed SD of hypot(2/(√12·3), 2/(√12·6)) in log units, so an SE of that over √2.
    row = pair.ratio(0.3, 0)
    assert row is not None
    resolution = math.hypot(2 / (math.sqrt(12) * 3), 2 / (math.sqrt(12) * 6))
    assert row.resolution == pytest.approx(resolution)
    assert row.se_log == pytest.approx(resolution / math.sqrt(2))
    assert row.interval() == pytest.approx(_interval(2.0, resolution / math.sqrt(2), 2))
    pooled = pair.ratio(0.3)
    assert pooled is not None and pooled.group == POOLED and pooled.groups == (0, 1, 2, 3, 4)
    assert pooled.ratio == pytest.approx(2.0)
    # f(s) - f(s/2) peaks at s = 10 (g + 1), where it is 1/2 (descriptive); the tail gap is the
    # rarest group at the end, where both reached 1.
    assert [p.step for p in pair.peak_per_group] == [10, 20, 30, 40, 50]
    assert [p.gap for p in pair.peak_per_group] == pytest.approx([0.5] * 5)
    tail = pair.tail_gap
    assert (tail.group, tail.step, tail.gap, tail.se) == (4, STEPS, 0.0, 0.0)
    assert set(measures.paper) == {"arxiv-v2", "iclr"}
    assert [(p.lead, p.lag) for p in measures.paper["iclr"].measured] == [("muon", "adam")]

    rows = lag_ratio_rows("plain", measures)
    assert {r.source for r in rows} == {"tailmem", CELLS_SOURCE, "paper arXiv v2", "paper ICLR"}
    ours = [r for r in rows if r.source == "tailmem"]
    assert len(ours) == 6 * 3 and all(r.status == "measured" for r in ours)
    first = ours[0]
    assert (first.group, first.tau, first.n_measured, first.n_seeds) == (0, 0.3, 2, 2)
    assert (first.ci_low, first.ci_high) == pytest.approx(row.interval())
    low, high = row.interval()
    table = lag_ratio_table(measures, "muon", "adam", LABELS)
    assert table[0].source == "tailmem" and table[0].group == 0
    assert records(table)[0]["τ = 0.3"] == f"2.00 [{low:.2f}, {high:.2f}]"  # the CSV's header
    (ours_gap, *paper) = gap_rows("plain", measures, STEPS)
    assert (ours_gap.peak_gap, ours_gap.group, ours_gap.step) == (0.5, 0, 10)
    assert (ours_gap.fraction, ours_gap.peak_se) == (0.1, 0.0)
    assert (ours_gap.tail_gap, ours_gap.tail_group, ours_gap.tail_se) == (0.0, 4, 0.0)
    # The paper's v2 table: Muon .976 vs Adam .264 in group 15 at 10k steps is both its tail
    # gap and its peak gap.
    assert (paper[0].source, paper[0].tail_gap, paper[0].tail_group) == (
        "paper arXiv v2", 0.712, 15,
    )  # fmt: skip
    assert (paper[0].peak_gap, paper[0].group, paper[0].step) == (0.712, 15, 10000)
    (lead, _) = summary_sentences(measures, "plain", LABELS)
    assert lead.startswith("Adam behind Muon (paper A's comparison, plain FFN): exposure-lag")
    assert f"τ 0.3: {ratio_text_of(pair.ratio(0.3))}" in lead
    assert "rarest-group FTA gap at the end +0.000 ± 0.000" in lead


def ratio_text_of(row) -> str:
    low, high = row.interval()
    return f"{row.ratio:.2f} [{low:.2f}, {high:.2f}]"


def test_the_fair_pair_leads_and_the_papers_pair_follows():
    """With ``adam_split`` run, Muon against it (equal tuning freedom) is the headline, paper
    A's pair (all-Adam) the second; the paper ran only the second."""
    measures, _ = _measure(_plan(arms=("muon", "adam_split", "adam")))
    assert measures.headlines() == [FAIR, PAPER] and measures.headline() == FAIR
    assert [(p.lead, p.lag) for p in measures.ours.measured] == [
        ("muon", "adam_split"), ("muon", "adam"), ("adam_split", "adam"),
    ]  # fmt: skip
    fair = measures.pair(*FAIR)
    assert fair is not None
    assert all(r.ratio == pytest.approx(1.5) for r in fair.lag_ratios)
    split_vs_adam = measures.pair("adam_split", "adam")
    assert split_vs_adam is not None
    assert all(r.ratio == pytest.approx(2.0 / 1.5) for r in split_vs_adam.lag_ratios)
    assert measures.paper["arxiv-v2"].pair(*FAIR) is None  # not a pair the paper ran
    fair_text, paper_text, like = summary_sentences(measures, "plain", LABELS)
    assert fair_text.startswith("Adam (own rate) behind Muon (fair comparison, plain FFN)")
    assert paper_text.startswith("Adam behind Muon (paper A's comparison, plain FFN)")
    assert like.startswith("Like for like with the paper")  # for paper A's pair alone


def test_ratios_on_the_papers_cells_are_computed_as_the_papers_and_shown_beside_ours():
    """Like for like: our curves cut to the paper's cells (groups m−4, m−2, m at 20/50/100%
    of training, no step 0) give the ratios the paper's tables would give for the same
    curves. With Adam exactly twice as slow everywhere, the rarest group's crossing is still
    bracketed at 2.0, but the linear interpolation between cells 2.5× apart reads group m−2
    at FTA 0.8 as 1.5: why only ratios from the same cells may be compared."""
    measures, _ = _measure(_plan())
    pair = measures.pair("muon", "adam")
    assert pair is not None
    cells = {(r.group, r.tau): r for r in pair.cells}
    assert {g for g, _ in cells} == {0, 2, 4, POOLED} and pair.cell_groups == [0, 2, 4]
    assert cells[4, 0.5].ratio == pytest.approx(2.0) and cells[2, 0.8].ratio == 1.5
    assert readings(pair)["paper_cells_group"][0.8] is cells[2, 0.8]
    assert readings(pair)["paper_cells_pooled"][0.8] is cells[POOLED, 0.8]
    # the paper's tables are their own cells: the same ratios as computed from the tables
    paper = measures.paper["arxiv-v2"].pair("muon", "adam")
    assert paper is not None and paper.cells == paper.lag_ratios
    table = lag_ratio_table(measures, "muon", "adam", LABELS)
    assert [r.group for r in table if r.source == CELLS_SOURCE] == [0, 2, 4, POOLED]
    (_, like) = summary_sentences(measures, "plain", LABELS)
    assert like.startswith("Like for like with the paper") and "2.59" in like


def test_an_arm_that_never_reaches_tau_gives_a_lower_bound_and_a_failed_seed_is_left_out():
    measures, _ = _measure(_plan(adam_cap=0.7, adam_status=("complete", "diverged")))
    pair = measures.pair("muon", "adam")
    assert pair is not None and pair.seeds == (0,)  # seed 1 of Adam diverged: seed 0 alone
    row = pair.ratio(0.8, 4)
    # Muon crosses 0.8 at step 40; Adam never does: at least its last exposures / Muon's.
    assert row is not None and row.ratio is None and row.n_measured == 0
    assert row.of_mean.status == "not reached"
    assert row.of_mean.lower == pytest.approx(STEPS / 40)
    table = lag_ratio_table(measures, "muon", "adam", LABELS)
    cell = next(r for r in table if r.source == "tailmem" and r.group == 4).high  # τ = 0.8
    assert cell == "≥ 2.50 (Adam never reaches τ)"
    # One seed: a ratio but no interval (nothing to estimate its spread from).
    one = pair.ratio(0.3, 0)
    assert one is not None and one.ratio == pytest.approx(2.0) and one.interval() is None
    json.dumps(measures.to_json(), allow_nan=False)


def test_no_seed_finished_by_both_arms_is_not_measured():
    """Adam finished seed 1 alone, Muon seed 0 alone: no paired seed, so the pair is named as
    not measured, with the reason."""
    plan = _plan(adam_status=("diverged", "complete"), muon_status=("complete", "diverged"))
    measures, curves = _measure(plan)
    (unmeasured,) = measures.ours.pairs
    assert isinstance(unmeasured, UnmeasuredPair) and unmeasured.status == "not measured"
    assert unmeasured.reason == "no seed completed in both arms"
    assert not curves and measures.headlines() == []
    assert lag_ratio_table(measures, "muon", "adam", LABELS)[0].source == "paper arXiv v2"
    assert "not measured" in summary_sentences(measures, "plain", LABELS)[0]
    assert measures.to_json()["pairs"][0]["status"] == "not measured"


def test_an_arm_whose_every_seed_diverged_is_listed_as_not_measured_never_left_out():
    plan = _plan(adam_status=("diverged", "diverged"))
    assert plan.arms == ["muon"]  # the completed plan's tables read the runs that finished
    measures, curves = _measure(plan)
    assert not measures.ours.measured and not curves
    (pair,) = measures.ours.pairs  # the pair is there, with the reason it has no numbers
    assert (pair.lead, pair.lag, pair.status) == ("muon", "adam", "not measured")
    assert pair.to_json()["reason"] == "no seed completed in both arms"
    assert summary_sentences(measures, "plain", LABELS) == [
        "Gap measures, plain FFN: not measured (no seed completed in any pair of arms)."
    ]


def test_gated_ffn_is_measured_beside_the_papers_single_gated_cell():
    measures, _ = _measure(_plan(ffn="gated"), "gated")
    assert measures.pair("muon", "adam") is not None
    # The paper publishes gated FFN only for group 15 at 10k steps: Muon .994 vs Adam .244, one
    # evaluation, so every crossing is a bound (Adam never reaches 0.3; Muon is past it).
    paper = measures.paper["arxiv-v2"].pair("muon", "adam")
    assert paper is not None
    assert paper.peak_gap.gap == pytest.approx(0.994 - 0.244)
    assert paper.tail_gap.gap == pytest.approx(0.994 - 0.244)
    assert all(r.ratio is None for r in paper.lag_ratios)
    cells = lag_ratio_table(measures, "muon", "adam", LABELS)
    assert [c.group for c in cells if c.source == "paper ICLR"] == [15, POOLED]
    json.dumps(measures.to_json(), allow_nan=False)
