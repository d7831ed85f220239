"""``assoc-embeddings``: the geometries, the equivariances the claims rest on, the protocol and a
smoke run end to end."""

import csv
import json
import math

import pytest
import torch

from tailmem.assoc import build_memory, lr_schedule, train
from tailmem.columns import column_docs
from tailmem.errors import ConfigError
from tailmem.experiments.assoc_embeddings import (
    GEOMETRIES,
    REGIMES,
    Config,
    RatioRow,
    embeddings,
    measure,
    orthonormal,
    ratio_row,
    spectrum_of,
)
from tailmem.runner import run_experiment

CFG = Config(facts=12, dim_ge_k=12, dim_lt_k=6, groups=3)


def _trajectory(emb, family, lr=0.1, steps=30):
    memory = build_memory(spectrum_of(CFG), emb, family, backend="dense")
    return train(memory, family, lr_schedule("constant", steps, CFG.facts, lr=lr))


def _gram(emb):
    E, _ = emb.dense()
    return E.T @ E


def test_the_geometries_keep_the_gram_matrix_until_correlated():
    K, rho = CFG.facts, CFG.correlation
    full = embeddings(CFG, "d_ge_k", draw=4)
    assert torch.equal(full["aligned"].dense()[0], torch.eye(K, dtype=torch.float64))
    assert orthonormal(full["aligned"]) and orthonormal(full["rotated"])
    assert not torch.allclose(full["rotated"].dense()[0], full["aligned"].dense()[0], atol=0.1)
    expected = (1 - rho) * torch.eye(K, dtype=torch.float64) + rho
    torch.testing.assert_close(_gram(full["correlated"]), expected, rtol=0, atol=1e-12)
    assert not orthonormal(full["correlated"])

    small = embeddings(CFG, "d_lt_k", draw=4)
    codes, objects = small["aligned"].dense()
    assert torch.equal(codes, objects)  # E = Ẽ
    assert codes.shape == (CFG.dim_lt_k, K)
    assert ((codes != 0).sum(dim=0) == 2).all()
    assert torch.allclose(codes[codes != 0].abs(), torch.tensor(1 / math.sqrt(2)).double())
    assert len({tuple(c.tolist()) for c in codes.T}) == K  # distinct facts
    torch.testing.assert_close(_gram(small["rotated"]), _gram(small["aligned"]), rtol=0,
                               atol=1e-12)  # fmt: skip
    assert not any(orthonormal(e) for e in small.values())
    # A draw is reproducible; another draw is another rotation and another code.
    again, other = embeddings(CFG, "d_lt_k", draw=4), embeddings(CFG, "d_lt_k", draw=5)
    assert torch.equal(again["rotated"].dense()[0], small["rotated"].dense()[0])
    assert not torch.equal(other["aligned"].dense()[0], codes)


@pytest.mark.parametrize("regime", REGIMES)
def test_muon_and_gd_are_rotation_equivariant_and_signgd_and_adam_are_not(regime):
    """E → QE, Ẽ → QẼ maps W_t → Q W_t Qᵀ for Muon (msgn(Q G Qᵀ) = Q msgn(G) Qᵀ) and GD, so
    every fact's loss is unchanged up to float error; the sign and Adam's element-wise
    normalisation do not commute with Q."""
    embs = embeddings(CFG, regime, draw=2)
    aligned_E, rotated_E = embs["aligned"].dense()[0], embs["rotated"].dense()[0]
    Q = rotated_E @ torch.linalg.pinv(aligned_E)  # exact: the codes span R^d
    for family in ("muon", "gd"):
        a, b = _trajectory(embs["aligned"], family), _trajectory(embs["rotated"], family)
        torch.testing.assert_close(b.group_loss, a.group_loss, rtol=0, atol=1e-10)
        torch.testing.assert_close(b.final, Q @ a.final @ Q.T, rtol=0, atol=1e-9)
    for family in ("signgd", "adam"):
        a, b = _trajectory(embs["aligned"], family), _trajectory(embs["rotated"], family)
        assert (b.group_loss - a.group_loss).abs().max() > 0.05


def test_the_oracle_under_rotation_is_signgd_on_the_identity():
    """TRA-SignGD takes the sign in the task basis: with orthonormal embeddings its run does
    not depend on the rotation and equals SignGD's with E = Ẽ = I."""
    embs = embeddings(CFG, "d_ge_k", draw=1)
    sign = _trajectory(embs["aligned"], "signgd")
    oracle = _trajectory(embs["rotated"], "tra_signgd")
    torch.testing.assert_close(oracle.group_loss, sign.group_loss, rtol=0, atol=1e-10)


def test_steps_are_matched_on_a_tuning_draw_apart_from_the_evaluation_draws():
    cfg = Config(facts=8, dim_ge_k=8, dim_lt_k=4, groups=2, families=["muon", "tra_signgd"],
                 steps=16, head_steps=4, paces=[4], lrs=[0.03, 0.1, 0.3, 1.0], seeds=3,
                 seed=7)  # fmt: skip
    cfg.validate()
    found = measure(cfg)
    assert found.draws == (7, 8, 9) and found.tuning_draw == 10
    (pace,) = found.regimes["d_ge_k"].paces
    assert pace.steps == 16 and set(pace.chosen.values()) <= set(cfg.lrs)
    aligned = [r for r in pace.runs if r.arm == "muon/aligned"]
    assert [r.draw for r in aligned] == [7, 8, 9]
    assert len({(r.times, r.final_loss) for r in aligned}) == 1  # the identity: run once
    # The oracle runs only where the embeddings are orthonormal.
    ran = {r.arm for p in found.regimes["d_lt_k"].paces for r in p.runs}
    assert ran == {f"muon/{g}" for g in GEOMETRIES}
    left_out = {(n.regime, n.arm) for n in found.not_run}
    assert left_out == {("d_ge_k", "tra_signgd/correlated")} | {
        ("d_lt_k", f"tra_signgd/{g}") for g in GEOMETRIES
    }


def test_a_censored_draw_makes_the_mean_ratio_a_bound():
    row = ratio_row([(5, 10), (5, None), (4, 8)], steps=100)
    assert (row.draws, row.censored, row.no_head) == (3, 1, 0)
    assert row.ratio == pytest.approx(math.exp((math.log(2) + math.log(20) + math.log(2)) / 3))
    assert row.ratio_low is not None and row.ratio_high is not None
    assert row.ratio_low < row.ratio < row.ratio_high
    assert ratio_row([(None, None)] * 3, steps=100).ratio is None


@pytest.mark.parametrize(
    ("override", "match"),
    [
        ({"dim_ge_k": 11}, "dim_ge_k"),
        ({"dim_lt_k": 12}, "dim_lt_k"),
        ({"dim_lt_k": 3, "facts": 64, "dim_ge_k": 64}, "2-sparse codes"),
        ({"families": ["muon", "lion"]}, "families"),
        ({"correlation": 1.0}, "correlation"),
        ({"spectrum": "uniform"}, "spectrum"),
    ],
)
def test_invalid_configs_are_refused(override, match):
    with pytest.raises(ConfigError, match=match):
        Config(**{**CFG.__dict__, **override}).validate()


def test_smoke_run_writes_the_table_claims_and_answers(tmp_path, strict_json):
    run, status = run_experiment("assoc-embeddings", "smoke", out=tmp_path / "run")
    assert status == "ran" and run.is_complete
    root = tmp_path / "run"
    assert strict_json(root) == []
    rows = list(csv.DictReader((root / "ratios.csv").open()))
    assert list(rows[0]) == list(column_docs(RatioRow))
    arms = {(r["regime"], r["family"], r["geometry"]) for r in rows}
    assert arms == {(reg, f, g) for reg in REGIMES for f in ("muon", "signgd") for g in GEOMETRIES}
    claims = {c["id"]: c for c in json.loads((root / "claims.json").read_text())}
    spectral = claims.pop("vasudeva.spectral_gd")  # measured here, in its setting (d ≥ K)
    assert spectral["verdict"] == "not measured" and "gd/aligned" in spectral["reason"]
    assert {cid.rsplit(".", 1)[1] for cid in claims} == set(REGIMES)
    report = json.loads((root / "report.json").read_text())
    ratios = next(t for t in report["tables"] if t["file"] == "ratios.csv")
    assert ratios["columns"] == column_docs(RatioRow)  # every column explained
    assert [set(a) for a in report["answers"]] == [
        {"question", "answer", "evidence", "verdict"}
    ] * 4
    assert (root / "ratios.png").is_file()
