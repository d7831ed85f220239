"""icl-regression (the QK control task): the task generator's statistics, the regressor's roles
and causality, the normalised-MSE metric against constructed predictions, the claim rule on
constructed curves, bad configs, and the smoke preset end to end."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch
from torch import nn

from tailmem.claims.a3_qk import A3QKInputs
from tailmem.claims.core import MIN_SEEDS
from tailmem.claims.registry import CLAIMS
from tailmem.columns import column_docs
from tailmem.config import load_config
from tailmem.data.icl_tasks import ICLBatches, ICLTaskConfig, ICLTasks, group_probs
from tailmem.errors import ConfigError
from tailmem.experiments.icl_regression import (
    ARMS,
    Config,
    GapRow,
    LagRatioRow,
    NMSEEvaluator,
    bayes_floor,
    curves,
    gap_rows,
    lag_ratio_rows,
    mse_loss_sum,
    qk_lags,
)
from tailmem.lm.config import ModelSection
from tailmem.lm.spec import Divergence, RunResult
from tailmem.metrics.qa_gaps import TAUS, FTACurves, GapMeasures, gap_measures
from tailmem.models.icl import ICLRegressor
from tailmem.optim.routing import build_optimizer
from tailmem.runner import run_experiment
from tailmem.train import IGNORE_INDEX

CLAIM = CLAIMS["A3.beyond.qk_task"]
CFG = ICLTaskConfig(n_dims=9, n_points=20, n_groups=3, ratio=8.0, eval_per_group=64)


def _strict(text: str):
    def refuse(name):
        raise ValueError(f"non-strict JSON constant {name}")

    return json.loads(text, parse_constant=refuse)


# --------------------------------------------------------------------------- the tasks


def test_group_frequencies_follow_ratio_to_the_minus_g_within_sampling_error():
    probs = group_probs(3, 8.0)
    assert probs.tolist() == pytest.approx([64 / 73, 8 / 73, 1 / 73])
    batches = ICLBatches(ICLTasks(CFG), batch_size=150, seed=3)
    groups = torch.cat([batches.sequences(step).groups for step in range(200)])
    n = len(groups)
    freq = torch.bincount(groups, minlength=3).double() / n
    sd = (probs * (1 - probs) / n).sqrt()
    assert torch.all((freq - probs).abs() < 4 * sd), (freq, probs)


def test_targets_are_w_dot_x_in_the_groups_own_orthogonal_subspace():
    tasks = ICLTasks(CFG)
    d, k = CFG.n_dims, CFG.k
    bases = tasks.bases  # (G, d, k)
    gram = torch.einsum("gdk,hdl->ghkl", bases, bases)
    for g in range(3):
        for h in range(3):
            expected = torch.eye(k) if g == h else torch.zeros(k, k)
            assert torch.allclose(gram[g, h], expected, atol=1e-5)
    seqs = tasks.sample(torch.Generator().manual_seed(0), torch.tensor([0, 1, 2] * 200))
    xs, ys = seqs.tokens[:, 0::2, :d], seqs.targets[:, 0::2]
    assert torch.allclose(ys, torch.einsum("bnd,bd->bn", xs, seqs.weights), atol=1e-5)
    assert torch.equal(seqs.tokens[:, 1::2, d], ys)  # the y token carries the target
    assert torch.all(seqs.tokens[:, 0::2, d] == 0) and torch.all(seqs.tokens[:, 1::2, :d] == 0)
    assert torch.all(seqs.targets[:, 1::2] == IGNORE_INDEX)
    for g in range(3):
        rows = seqs.groups == g
        others = [h for h in range(3) if h != g]
        leak = torch.einsum("bnd,hdk->bnhk", xs[rows], bases[others])
        assert leak.abs().max() < 1e-5  # inputs of group g have no component elsewhere
        assert ys[rows].pow(2).mean().item() == pytest.approx(1.0, abs=0.12)  # E[y²] = 1


def test_batches_depend_only_on_step_and_ranks_shard_the_global_batch():
    tasks = ICLTasks(CFG)
    a, b = ICLBatches(tasks, 8, seed=1), ICLBatches(tasks, 8, seed=1)
    x5, y5 = a.batch(5)
    a.batch(6)
    assert torch.equal(b.batch(5)[0], x5)
    halves = [a.batch(5, rank, 2) for rank in range(2)]
    assert torch.equal(torch.cat([h[0] for h in halves]), x5)
    assert torch.equal(torch.cat([h[1] for h in halves]), y5)
    assert not torch.equal(ICLBatches(tasks, 8, seed=2).batch(5)[0], x5)


# --------------------------------------------------------------------------- the model


def _model(features: int = CFG.features) -> ICLRegressor:
    section = ModelSection(size="tiny", n_layer=2, n_head=2, d_model=32, d_ff=64)
    torch.manual_seed(0)
    return ICLRegressor(section.build(1, "plain", CFG.seq_len), features)


def test_regressor_keeps_the_gpt_roles_and_muon_routes_its_hidden_matrices():
    model = _model()
    roles = model.param_roles()
    assert roles["embed.weight"] == "embed" and roles["head.weight"] == "head"
    assert model.embed.weight.shape == (32, CFG.features) and model.head.weight.shape == (1, 32)
    hidden = {r for r in roles.values()} - {"embed", "head", "norm"}
    assert hidden == {"q", "k", "v", "o", "w_in", "w_out"}
    optimizer = build_optimizer(model, ARMS["muon"].recipe, muon={"lr": 0.02}, adam={"lr": 1e-3})
    kinds = {(g["kind"], g["role"]) for g in optimizer.param_groups}
    assert {("muon", r) for r in hidden} | {("adam", "embed"), ("adam", "head")} <= kinds


def test_a_query_never_sees_its_own_answer():
    """The prediction at the token of x_i depends on the examples before it, not on y_i (the
    next token) or anything later."""
    model = _model().eval()
    seqs = ICLTasks(CFG).sample(torch.Generator().manual_seed(1), torch.tensor([0, 2]))
    changed = seqs.tokens.clone()
    i = 7
    changed[:, 2 * i + 1 :, :] = torch.randn_like(changed[:, 2 * i + 1 :, :])
    with torch.no_grad():
        before, after = model(seqs.tokens), model(changed)
    assert torch.allclose(before[:, : 2 * i + 1], after[:, : 2 * i + 1], atol=1e-6)
    assert not torch.allclose(before[:, 2 * i + 2 :], after[:, 2 * i + 2 :])


def test_mse_loss_sums_squared_errors_at_query_positions_and_matches_autograd_shapes():
    model = _model()
    seqs = ICLTasks(CFG).sample(torch.Generator().manual_seed(2), torch.tensor([0, 1]))
    loss = mse_loss_sum(model, seqs.tokens, seqs.targets)
    pred = model(seqs.tokens)[:, 0::2]
    assert loss.item() == pytest.approx(((pred - seqs.targets[:, 0::2]) ** 2).sum().item())
    loss.backward()
    assert all(p.grad is not None for p in model.parameters())


# --------------------------------------------------------------------------- the metric


class _HalfAnswer(nn.Module):
    """Predicts ``scale`` times the next token's y coordinate: ``scale · y_i`` at every query."""

    def __init__(self, scale: float) -> None:
        super().__init__()
        self.scale = nn.Parameter(torch.tensor(scale))

    def forward(self, tokens):
        return self.scale * torch.roll(tokens[..., -1], -1, dims=1)


@pytest.mark.parametrize(("scale", "expected"), [(0.0, 1.0), (0.5, 0.25), (1.0, 0.0)])
def test_normalised_mse_is_one_for_zero_predictions_and_scales_as_squared_error(scale, expected):
    tasks = ICLTasks(CFG)
    out = NMSEEvaluator(tasks, batch_size=50)(0, _HalfAnswer(scale))
    assert out["nmse"] == pytest.approx([expected] * 3, abs=1e-5)
    mix = sum(p * v for p, v in zip(tasks.probs.tolist(), out["nmse"], strict=True))
    assert out["nmse_mix"] == pytest.approx(mix, abs=1e-5)


def test_bayes_floor_counts_the_undetermined_share_of_the_first_k_queries():
    assert bayes_floor(3, 20) == pytest.approx((1 + 2 / 3 + 1 / 3) / 20)
    assert bayes_floor(1, 10) == pytest.approx(0.1) and bayes_floor(4, 4) == pytest.approx(0.625)


# --------------------------------------------------------------------------- the claim


def _measures(ratios: list[float]) -> GapMeasures:
    """Gap measures of curves whose scores rise linearly in exposures, Adam's slower than
    Muon's by ``ratios[seed]`` in every group (so that is each seed's lag ratio)."""
    steps = np.arange(0, 101, 5, dtype=float)
    exposures = np.outer([50.0, 8.0, 1.0], steps)
    muon = np.stack([np.clip(exposures / exposures[:, -1:] * 1.6, 0, 1)] * len(ratios))
    adam = np.stack([np.clip(exposures / exposures[:, -1:] * 1.6 / r, 0, 1) for r in ratios])
    curves = FTACurves({"muon": muon, "adam": adam}, steps, exposures)
    return gap_measures(curves, TAUS, [("muon", "adam")])


def _verdict(ratios: list[float]) -> str:
    # The claim reads the measures as the study gives them (qk_lags).
    lags = qk_lags(_measures(ratios))
    inputs = A3QKInputs(seeds=list(range(len(ratios))), rarest=2, lags=lags)
    (found,) = CLAIM.evaluate(inputs)
    return found.verdict


def test_claim_is_decided_by_the_tail_lag_ratio_against_its_bound_beyond_two_se():
    limit = CLAIM["max_ratio"]
    assert _verdict([1.0, 1.02, 0.98]) == "reproduced"  # no edge: ratio 1 ± 0.01
    assert _verdict([2 * limit, 2.1 * limit, 1.9 * limit]) == "not reproduced"
    assert _verdict([0.9 * limit, 1.3 * limit, limit]) == "inconclusive"  # straddles the bound
    assert _verdict([1.0] * (MIN_SEEDS - 1)) == "inconclusive"  # too few seeds
    (found,) = CLAIM.evaluate(A3QKInputs(seeds=[0], rarest=2, lags=()))
    assert found.verdict == "not measured"


def test_measured_tail_ratio_of_constructed_curves_is_the_constructed_ratio():
    measures = _measures([1.5, 2.0, 3.0])
    pair = measures.pair("muon", "adam")
    assert pair is not None
    row = pair.ratio(CLAIM["tau"], 2)
    assert row is not None and row.complete
    assert [s.ratio for s in row.seeds] == pytest.approx([1.5, 2.0, 3.0])
    assert row.ratio == pytest.approx((1.5 * 2.0 * 3.0) ** (1 / 3))  # the geometric mean
    # The table rows carry it: lag_ratio.csv's row of the tail, and the tail gap first in gap.csv.
    (tail,) = [r for r in lag_ratio_rows(measures) if (r.group, r.tau) == (2, CLAIM["tau"])]
    assert (tail.lead, tail.lag, tail.n_measured, tail.n_seeds) == ("muon", "adam", 3, 3)
    assert tail.ratio == row.ratio and tail.se_log == row.se_log
    assert tail.ci_low is not None and tail.ci_high is not None
    assert tail.ci_low < tail.ratio < tail.ci_high
    gaps = gap_rows(measures)
    assert gaps[0].kind == "tail (pre-specified)" and gaps[0].gap == pair.tail_gap.gap
    assert [g.kind for g in gaps[1:]] == ["peak (descriptive)"] * len(pair.peak_per_group)


# --------------------------------------------------------------------------- configs


@pytest.mark.parametrize(
    ("override", "message"),
    [
        (["train.seq_len=30"], r"train\.seq_len: got 30; expected 2 × data\.n_points = 40"),
        (["data.subspace_dim=4"], r"data\.subspace_dim: 3 groups × 4 dimensions do not fit"),
        (["arms=[sgd]"], r"arms: unknown arm 'sgd'"),
        (["data.ratio=0.5"], r"data\.ratio: got 0\.5; expected >= 1"),
        (["sweep.muon=[0.01]"], r"unknown config field 'sweep"),  # the grid is optim.muon.lr
        # Muon's Adam part borrows the Adam arm's chosen rate: a grid with no Adam arm is refused.
        (["arms=[muon]"], r"arm muon borrows optim\.adam\.lr .* and none is run"),
    ],
)
def test_bad_configs_name_the_field(override, message):
    with pytest.raises(ConfigError, match=message):
        load_config(Config, "icl-regression", "cpu", override)


@pytest.mark.parametrize("preset", ["smoke", "cpu", "paper"])
def test_presets_build(preset):
    cfg = load_config(Config, "icl-regression", preset)
    assert cfg.train.seq_len == 2 * cfg.data.n_points


def test_paper_preset_is_the_authors_setting():
    cfg = load_config(Config, "icl-regression", "paper")
    data = cfg.data
    assert (data.n_dims, data.n_points, data.n_groups, data.ratio) == (9, 20, 3, 8.0)
    assert cfg.train.batch_size == 150 and cfg.train.steps == 10_000
    assert cfg.optim["muon"].lr == (1e-4,) and cfg.optim["adam"].lr == (1e-4,)
    assert cfg.optim["muon"].hparams.scale == "match_rms_adamw"


# --------------------------------------------------------------------------- end to end


@pytest.fixture(scope="module")
def smoke(tmp_path_factory):
    out = tmp_path_factory.mktemp("icl") / "smoke"
    run, status = run_experiment("icl-regression", "smoke", out=out)
    return run, status


def test_smoke_learns_the_head_group_and_writes_every_output(smoke):
    run, status = smoke
    cfg = load_config(Config, "icl-regression", "smoke")
    assert status == "ran" and run.is_complete
    results = _strict(run.file("results.json").read_text())
    claims = _strict(run.file("claims.json").read_text())
    assert [c["id"] for c in claims] == ["A3.beyond.qk_task"]
    assert claims[0]["verdict"] in ("inconclusive", "reproduced", "not reproduced")
    steps = list(range(0, cfg.train.steps + 1, cfg.train.eval_every))
    assert results["steps"] == steps
    for arm in cfg.arms:
        nmse = np.array(results["nmse"][arm])  # (seeds, groups, steps)
        assert nmse.shape == (cfg.seeds, cfg.data.n_groups, len(steps))
        assert np.all(nmse[:, :, 0] > 0.9)  # nothing learned at initialisation
        assert nmse[:, 0, -1].max() < 0.6, arm  # the head group is learned
    exposures = np.array(results["exposures"])
    probs = np.array(results["group_probs"])
    assert exposures[:, -1] == pytest.approx(probs * cfg.train.batch_size * cfg.train.steps)
    (pair,) = results["gap_measures"]["pairs"]
    assert (pair["lead"], pair["lag"]) == ("muon", "adam")
    layout = _strict(run.file("report.json").read_text())
    assert [f["file"] for f in layout["figures"]] == ["nmse_by_group.png", "lag_ratio.png"]
    for item in layout["figures"] + layout["tables"]:
        assert run.file(item["file"]).stat().st_size > 100
    # The smoke preset's rates are one-point lists: nothing tuned, no tuning table listed.
    assert results["tuning"] == {"score": "nmse_mix", "choices": [], "trials": []}
    assert [t["file"] for t in layout["tables"]] == ["lag_ratio.csv", "gap.csv"]
    for table, row in zip(layout["tables"], (LagRatioRow, GapRow), strict=True):
        header = run.file(table["file"]).read_text().splitlines()[0].split(",")
        assert header == list(column_docs(row)) and table["columns"] == column_docs(row)
    assert math.isclose(results["bayes_floor_nmse"], bayes_floor(cfg.data.k, cfg.data.n_points))


class _Finished:
    """A finished plan's seed runs (what :func:`curves` reads): ``runs[arm]`` in seed order."""

    def __init__(self, runs):
        self.runs = runs

    @property
    def arms(self):
        return list(self.runs)

    def seed_results(self, entry_id):
        return self.runs[entry_id[1]]


def _run(status, nmse_by_step):
    evals = [{"step": 10 * i, "nmse": v} for i, v in enumerate(nmse_by_step)]
    ok = status == "complete"
    return RunResult(
        digest="", key="", arm="", recipe="", ffn="plain", lrs={}, seed=0, steps=20,
        status=status, message="", steps_done=20 if ok else 1, final_loss=0.0 if ok else None,
        tokens=0, evals=evals, final=evals[-1] if ok else {},
        diverged=None if ok else Divergence(2, None, "loss is nan"), wall_seconds=0.0,
    )  # fmt: skip


def test_curves_keep_seeds_paired_and_leave_out_a_seed_that_diverged_in_one_arm():
    cfg = load_config(Config, "icl-regression", "smoke", ["seeds=3"])
    good = [[1.0, 1.0, 1.0], [0.5, 0.6, 0.9], [0.2, 0.3, 0.7]]
    runs = {
        "muon": [_run("complete", good)] * 3,
        "adam": [_run("complete", good), _run("diverged", good[:1]), _run("complete", good)],
    }
    found, nmse, seeds = curves(cfg, _Finished(runs))
    assert seeds == [0, 2] and nmse["adam"].shape == (2, 3, 3)
    assert nmse["muon"][1, :, 2].tolist() == [0.2, 0.3, 0.7]  # (seed, group, step)
    assert found.fta["adam"][0, 2].tolist() == pytest.approx([0.0, 0.1, 0.3])  # 1 − nMSE
    probs = group_probs(3, cfg.data.ratio).numpy()
    assert found.exposures[:, 2] == pytest.approx(probs * cfg.train.batch_size * 20)
    runs["muon"] = [_run("diverged", good[:1])] * 3
    assert curves(cfg, _Finished(runs)) == (None, {}, [])
