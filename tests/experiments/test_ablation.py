"""The A1 ablation: rows as role recipes, claim rules, a smoke run checked against recomputation,
exact resume of an interrupted arm with reuse of finished ones, presets, the shared config keys."""

from __future__ import annotations

import csv
import json
import math
import shutil
import statistics

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from tailmem.claims.a1 import CHANCE_MARGIN
from tailmem.claims.core import MIN_SEEDS
from tailmem.claims.registry import claims_of, read_claims
from tailmem.cli import main
from tailmem.config import load_config
from tailmem.data.corpus import frequency_buckets
from tailmem.errors import ConfigError
from tailmem.experiments import ablation
from tailmem.lm import corpus
from tailmem.lm.spec import RunResult
from tailmem.models.gpt import GPT, count_params
from tailmem.models.gpt_io import read_gpt_config
from tailmem.optim.routing import parse_recipe
from tailmem.plotting import pyplot
from tailmem.rundir import RunDir
from tailmem.runner import run_experiment
from tailmem.train import read_metrics
from tailmem.train.distributed import DistContext

QK = "runs/plain/qk/muon0.02-adam0.005-seed0-steps24"
PLAIN = ["full", "adam", "qk", "vo", "v", "o", "w_in", "w_out", "vo_ffn", "vo_w_in", "vo_w_out",
         "v_ffn", "o_ffn"]  # fmt: skip
GATED = ["full", "adam", "qk", "vo", "v", "o", "w_in", "w_out", "w_gate", "vo_ffn",
         "vo_w_in_w_gate", "vo_w_out_w_gate", "vo_w_in_w_out", "v_ffn", "o_ffn"]  # fmt: skip


def test_table1_arms_exist_per_ffn_and_route_the_right_roles():
    assert [r.id for r in ablation.rows_for("plain")] == PLAIN
    assert [r.id for r in ablation.rows_for("gated")] == GATED
    vo_ffn = ablation.ROWS_BY_ID["vo_ffn"]
    assert vo_ffn.arm("gated").recipe == "muon:v,o,w_in,w_gate,w_out adam:*"
    assert vo_ffn.arm("plain").recipe == "muon:v,o,w_in,w_out adam:*"
    assert ablation.ROWS_BY_ID["adam"].arm("plain").recipe == "adam:*"
    for ffn in ("plain", "gated"):
        for row in ablation.rows_for(ffn):
            routes = parse_recipe(row.arm(ffn).recipe)
            assert routes.get("muon", []) == list(row.roles(ffn))
            assert {"embed", "head", "norm"} <= set(routes["adam"])  # always on Adam
    # Paper gain fractions, by hand from Table 1 (plain): (3.9242 - L) / (3.9242 - 3.5654).
    paper = {r.id: r.paper["plain"] for r in ablation.rows_for("plain")}
    assert ablation.gain_fraction(paper, "vo_ffn") == pytest.approx(0.3384 / 0.3588)
    assert ablation.gain_fraction(paper, "qk") == pytest.approx(0.0317 / 0.3588)


JITTER = (-0.01, 0.0, 0.01)
"""Per-seed offsets: an SE of 0.0058 per arm, so differences above ~0.02 nats are resolved."""


ORDER = {"adam": (1, 2, 0), "qk": (2, 0, 1), "vo_ffn": (0, 2, 1), "o": (1, 0, 2),
         "v": (2, 1, 0), "w_out": (1, 2, 0)}  # fmt: skip
"""Per arm, the seeds' order of :data:`JITTER` (the rest: as listed): the claims pair arms by
seed, so two compared arms' offsets differ per seed, and each arm's mean stays its loss."""


def _jitter(arm_id: str) -> list[float]:
    return [JITTER[i] for i in ORDER.get(arm_id, (0, 1, 2))]


def _fake(losses: dict[str, float], buckets: dict[str, tuple[float, float, float]] | None = None):
    """Arm results over three seeds: final losses (and per-bucket losses) ``loss + jitter``."""
    out = {}
    for arm_id, loss in losses.items():
        head, body, tail = (buckets or {}).get(arm_id, (loss, loss, loss))
        out[arm_id] = []
        jitter = _jitter(arm_id)
        for seed, (j, k) in enumerate(zip(jitter, reversed(jitter), strict=True)):
            final = {
                "val_loss": loss + j,
                "val_loss_head": head + j,
                "val_loss_body": body + j,
                "val_loss_tail": tail + k,
            }  # the tail bucket's seeds in another order
            evals = [{"step": 0, "val_loss": 6.0}, {"step": 50, "val_loss": (6.0 + loss) / 2},
                     {"step": 100, **final}]  # fmt: skip
            out[arm_id].append(
                RunResult(
                    digest="", key=arm_id, arm=arm_id, recipe="", ffn="plain", lrs={}, seed=seed,
                    steps=100, status="complete", message="", steps_done=100, final_loss=loss,
                    tokens=0, evals=evals, final=final, diverged=None, wall_seconds=0.0,
                )
            )  # fmt: skip
    return out


def test_claims_follow_the_seed_statistics():
    cfg = ablation.Config(seeds=3, arms=["full", "adam", "qk", "vo_ffn", "o", "v", "w_in", "w_out"])
    losses = {"full": 3.0, "adam": 4.0, "qk": 3.8, "vo_ffn": 3.25, "o": 3.5, "v": 3.6,
              "w_in": 3.4, "w_out": 3.45}  # fmt: skip
    # Relative gains: head (2.5 - 2.0) / 2.5 = 0.2, tail (6.5 - 5.0) / 6.5 = 0.23.
    buckets = {"full": (2.0, 3.0, 5.0), "adam": (2.5, 4.0, 6.5)}
    results = ablation.claims(cfg, _fake(losses, buckets), 3, chance=6.0)
    verdicts = {c.id: c.verdict for c in results}
    assert verdicts == {
        "A1.full_beats_adam": "reproduced",
        "A1.vo_ffn_recovers_full": "reproduced",  # g/g(full) = 0.75
        "A1.vo_ffn_gain_magnitude": "not measured",  # Table 1's 0.943 is the 160M model's
        "A1.qk_gain_small": "reproduced",  # 0.2
        "A1.o_beats_v": "reproduced",
        "A1.w_out_beats_w_in": "not reproduced",
        "A1.beyond.tail_gain": "reproduced",
    }
    assert all(
        c.seeds == [0, 1, 2] and "±" in c.ours
        for c in results
        if c.id not in ("A1.qk_gain_small", "A1.vo_ffn_gain_magnitude")
    )
    losses |= {"vo_ffn": 3.6, "qk": 3.55}  # 0.4 and 0.45 of full Muon's gain
    verdicts = {c.id: c.verdict for c in ablation.claims(cfg, _fake(losses), 3)}
    assert verdicts["A1.vo_ffn_recovers_full"] == verdicts["A1.qk_gain_small"] == "not reproduced"
    # The same relative gain on head and tail: no tail advantage resolved.
    same = {"full": (1.9, 3.0, 5.7), "adam": (2.0, 4.0, 6.0)}
    verdicts = {c.id: c.verdict for c in ablation.claims(cfg, _fake(losses, same), 3)}
    assert verdicts["A1.beyond.tail_gain"] == "inconclusive"
    gated = ablation.Config(ffn="gated", seeds=3, arms=cfg.arms)
    verdicts = {c.id: c.verdict for c in ablation.claims(gated, _fake(losses), 3)}
    assert verdicts["A1.o_beats_v"] == "not measured"  # the paper states it for plain FFN only
    partial = ablation.Config(seeds=3, arms=["full", "adam"])
    found = ablation.claims(partial, _fake({"full": 3.0, "adam": 4.0}), 3)
    assert {c.id: c.verdict for c in found}["A1.qk_gain_small"] == "not measured"
    alone = ablation.claims(ablation.Config(seeds=3, arms=["full"]), _fake({"full": 3.0}), 3)
    assert {c.verdict for c in alone} == {"not measured"} and len(alone) == len(found)
    # Sample efficiency: full reaches all-Adam's final 4.0 between step 50 (4.5) and 100 (3.0).
    eff = ablation.sample_efficiency(_fake({"full": 3.0, "adam": 4.0}))
    assert eff.full_muon_reaches_at_step == pytest.approx(50 + (4.5 - 4.0) / 1.5 * 50)


def test_one_seed_or_a_model_at_chance_is_inconclusive():
    cfg = ablation.Config(seeds=3, arms=["full", "adam", "o", "v"])
    fake = _fake({"full": 3.0, "adam": 4.0, "o": 3.5, "v": 3.6})
    one = {arm: rs[:1] for arm, rs in fake.items()}
    single = ablation.claims(ablation.Config(seeds=1, arms=cfg.arms), one, 3)
    assert {c.id: c.verdict for c in single}["A1.o_beats_v"] == "inconclusive"
    # Every arm's loss within the chance margin of the unigram loss: nothing was learned.
    at_chance = ablation.claims(cfg, fake, 3, chance=3.02)
    decided = {c.id: c for c in at_chance if c.verdict != "not measured"}
    assert decided and all(c.verdict == "inconclusive" for c in decided.values())
    assert all("chance" in c.reason for c in decided.values())
    # A diverged seed drops out of every arm: two seeds left, so nothing is decided.
    fake["o"][2].final["val_loss"] = math.nan
    inputs = ablation.claim_inputs(cfg, fake, 3, None)
    assert inputs.seeds == [0, 1] and len(inputs.losses["full"]) == 2


def test_smoke_run_matches_recomputation_from_its_checkpoints(
    ablation_smoke, lm_cache, strict_json
):
    rows = list(csv.DictReader((ablation_smoke / "table1.csv").open()))
    assert [r["arm"] for r in rows] == ["full", "adam", "qk"]
    cfg = load_config(ablation.Config, "ablation", "smoke", [f"data.cache_dir={lm_cache}"])
    data = corpus.CorpusData(cfg.data, cfg.train.seq_len, cfg.train.eval_batch_size).load(
        DistContext()
    )
    counts = data.corpus.unigram_counts
    runs = json.loads((ablation_smoke / "results.json").read_text())["runs"]
    for row in rows:
        sub = ablation_smoke / runs[row["arm"]][0]
        result = json.loads((sub / "result.json").read_text())
        assert result["status"] == "complete" and result["recipe"] == row["recipe"]
        assert (
            result["lrs"] == {"muon": 0.02, "adam": 0.005}
            if row["arm"] != "adam"
            else {"adam": 0.005}
        )
        assert float(row["paper_val_loss"]) == ablation.ROWS_BY_ID[row["arm"]].paper["plain"]
        state = torch.load(sub / "ckpt" / "step_000024.pt", weights_only=True)
        groups = {(g["kind"], g["role"]) for g in state["optimizer"]["param_groups"]}
        muon = {role for kind, role in groups if kind == "muon"}
        assert muon == set(ablation.ROWS_BY_ID[row["arm"]].roles("plain"))
        assert {("adam", "embed"), ("adam", "head"), ("adam", "norm")} <= groups
        model = GPT(read_gpt_config(sub))
        model.load_state_dict(state["model"])
        model.eval()
        total, n, per_bucket = 0.0, 0, torch.zeros(3, 2, dtype=torch.float64)
        bucket = torch.from_numpy(frequency_buckets(counts, (0.5, 0.9)))
        with torch.no_grad():
            for x, y in data.val:
                losses = F.cross_entropy(model(x)[0].flatten(0, 1), y.flatten(), reduction="none")
                total, n = total + losses.double().sum().item(), n + y.numel()
                b = bucket[y.flatten()]
                for k in range(3):
                    per_bucket[k] += torch.stack([losses[b == k].double().sum(), (b == k).sum()])
        final = result["final"]
        assert final["val_loss"] == pytest.approx(total / n, rel=1e-5)
        assert float(row["ours_val_loss"]) == pytest.approx(total / n, abs=1e-4)
        for k, name in enumerate(("head", "body", "tail")):
            expect = (per_bucket[k, 0] / per_bucket[k, 1]).item()
            assert final[f"val_loss_{name}"] == pytest.approx(expect, rel=1e-5)
        evals = [r["eval"]["val_loss"] for r in read_metrics(sub / "metrics.jsonl") if "eval" in r]
        assert [e["val_loss"] for e in result["evals"]][1:] == evals and len(evals) == 3
    claims = {c["id"]: c for c in json.loads((ablation_smoke / "claims.json").read_text())}
    # Every registry claim of the experiment is emitted (read_claims checks each id is known).
    assert {c.id for c in read_claims(RunDir(ablation_smoke))} == {
        c.id for c in claims_of("ablation")
    }
    results = json.loads((ablation_smoke / "results.json").read_text())
    # The smoke model sits at chance (above the unigram loss): whatever the arms measured is
    # inconclusive and says so, never "not reproduced".
    assert min(float(r["ours_val_loss"]) for r in rows) >= results["chance_loss"] - CHANCE_MARGIN
    measured = [c for c in claims.values() if c["verdict"] != "not measured"]
    assert measured and all(c["verdict"] == "inconclusive" for c in measured)
    assert all("chance" in c["reason"] for c in measured)
    assert results["data"]["source"] == "stdlib" and results["data"]["train_tokens"] > 0
    targets = torch.cat([y.flatten() for _, y in data.val])
    p = torch.from_numpy(counts).double() + 1
    unigram = -(p / p.sum()).log()[targets].mean().item()
    assert results["chance_loss"] == pytest.approx(unigram)
    report = json.loads((ablation_smoke / "report.json").read_text())
    assert all((ablation_smoke / f["file"]).is_file() for f in report["figures"])
    assert strict_json(ablation_smoke) == []  # every JSON (progress, metrics, results) is strict
    caption = report["tables"][0]["caption"]
    assert "FineWeb" in caption and "standard-library" in caption and "tokens" in caption


def test_interrupted_arm_resumes_exactly_and_finished_arms_are_reused(
    ablation_smoke, lm_cache, tmp_path, monkeypatch
):
    out = tmp_path / "again"
    shutil.copytree(ablation_smoke, out, ignore=shutil.ignore_patterns("qk", "COMPLETE"))
    reused = out / "runs" / "plain" / "adam" / "adam0.005-seed0-steps24" / "result.json"
    stamp = reused.stat().st_mtime_ns
    batches = corpus.LMData.batches

    class Crashing:
        def __init__(self, inner):
            self.inner = inner

        def batch(self, step, rank=0, world_size=1):
            if step == 13:
                raise RuntimeError("simulated crash")
            return self.inner.batch(step, rank, world_size)

    monkeypatch.setattr(
        corpus.LMData, "batches", lambda self, seed, train: Crashing(batches(self, seed, train))
    )
    overrides = [f"data.cache_dir={lm_cache}", "workers=1"]
    with pytest.raises(RuntimeError, match="simulated crash"):
        run_experiment("ablation", "smoke", overrides, out=out)
    qk = out / QK
    assert sorted(p.name for p in (qk / "ckpt").iterdir()) == ["step_000008.pt"]
    assert not (qk / "result.json").exists()
    monkeypatch.setattr(corpus.LMData, "batches", batches)
    run, status = run_experiment("ablation", "smoke", overrides, out=out)
    assert status == "resumed" and run.is_complete
    assert reused.stat().st_mtime_ns == stamp
    original = ablation_smoke / QK
    before, after = (json.loads((d / "result.json").read_text()) for d in (original, qk))
    assert after["evals"] == before["evals"]  # bitwise the same curve after the resume

    def losses(d):
        return [(r["step"], r["loss"]) for r in read_metrics(d / "metrics.jsonl") if "loss" in r]

    assert losses(qk) == losses(original)


def test_resume_from_a_truncated_checkpoint_is_one_line_exit_2(
    ablation_smoke, lm_cache, tmp_path, capsys
):
    """An interrupted arm whose newest checkpoint was cut short (disk full, copied half-way):
    `tailmem run` on the run directory resumes that arm, fails to read the checkpoint and says
    so in one line, exit 2, leaving the checkpoint in place for the user to delete."""
    out = tmp_path / "truncated"
    shutil.copytree(ablation_smoke, out, ignore=shutil.ignore_patterns("COMPLETE"))
    qk = out / QK
    (qk / "result.json").unlink()
    ckpt = qk / "ckpt" / "step_000024.pt"
    data = ckpt.read_bytes()
    ckpt.write_bytes(data[: len(data) // 2])
    args = ["run", "ablation", "--preset", "smoke", "--out", str(out), f"data.cache_dir={lm_cache}",
            "workers=1"]  # fmt: skip
    assert main(args) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    err = [line for line in lines if "error" in line]  # before it: the reused runs' lines
    assert len(err) == 1 and err[0] == lines[-1], lines
    assert err[0].startswith("tailmem: error: checkpoint ")
    assert str(ckpt) in err[0] and "truncated or corrupt" in err[0]
    assert ckpt.stat().st_size == len(data) // 2 and not (qk / "result.json").exists()


def test_bad_config_is_one_line_exit_2(capsys):
    with pytest.raises(ConfigError, match="arms: unknown arm 'w_gate'"):
        load_config(ablation.Config, "ablation", "smoke", ["arms=[full,w_gate]"])
    assert main(["run", "ablation", "--preset", "smoke", "tune_lr=sometimes"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "tune_lr" in err[0]


def test_cpu_and_paper_presets_validate_and_the_paper_model_builds_on_meta():
    cpu = load_config(ablation.Config, "ablation", "cpu")
    assert cpu.tune_lr == "off" and cpu.seeds >= MIN_SEEDS
    # The cpu arms are exactly those the claims compare: each one is needed by some claim.
    arms = [r.id for r in cpu.selected()]
    losses = {arm: 3.0 + 0.1 * i for i, arm in enumerate(arms)}
    found = ablation.claims(cpu, _fake(losses), 3)
    # the magnitude against Table 1 is judged on paper A's 160M model only
    (elsewhere,) = [c for c in found if c.verdict == "not measured"]
    assert "not measured in its setting" in elsewhere.reason
    for arm in arms:
        fewer = ablation.Config(seeds=3, arms=[a for a in arms if a != arm])
        missing = ablation.claims(fewer, _fake({a: v for a, v in losses.items() if a != arm}), 3)
        assert "not measured" in {c.verdict for c in missing}, arm
    assert cpu.workers == 2 and cpu.train.threads == 1  # both cores of the 2-core machine
    paper = load_config(ablation.Config, "ablation", "paper")
    assert paper.data.corpus.source == "hf" and paper.train.steps == 10_000
    adam, muon = paper.optim["adam"], paper.optim["muon"]
    assert adam.hparams.betas == (0.8, 0.95)
    assert adam.hparams.weight_decay == muon.hparams.weight_decay == 0.0
    assert not muon.hparams.nesterov and muon.hparams.momentum == 0.95
    for ffn in ("plain", "gated"):
        gpt_cfg = paper.model.build(paper.data.corpus.vocab_size, ffn, paper.train.seq_len)
        with torch.device("meta"):
            model = GPT(gpt_cfg)
        assert model.head.weight.is_meta and len(model.blocks) == 12
        # 12 x 768 blocks hold 84.9M (both FFN types); embedding + untied head 2 x 50304 x 768.
        assert count_params(gpt_cfg) / 1e6 == pytest.approx(162.2, abs=0.1)
    assert math.isclose(muon.lr, 0.02) and not muon.swept  # one Muon rate for every arm


def test_an_arm_given_as_a_recipe_is_a_row_beyond_table_1():
    cfg = load_config(ablation.Config, "ablation", "smoke", ["arms=[full, adam, 'sgd:v,o adam:*']"])
    rows = cfg.selected()
    assert [r.id for r in rows] == ["full", "adam", "sgd-v_o+adam-all"]
    beyond = rows[-1]
    assert (beyond.group, beyond.paper, beyond.label) == ("beyond", {}, "sgd:v,o adam:*")
    arm = beyond.arm("plain")
    assert arm.recipe == "sgd:v,o adam:*" and arm.kinds == ("adam", "sgd")
    assert cfg.optim["sgd"].lr == 0.1  # the kind it uses gets the registry's default section
    fake = _fake({"full": 3.0, "adam": 4.0, "sgd-v_o+adam-all": 3.75})
    row = {r.arm: r for r in ablation.summarise(cfg, fake, 3)}["sgd-v_o+adam-all"]
    assert row.paper_val_loss is None and row.paper_gain_frac is None  # no published number
    assert row.ours_gain_frac == pytest.approx(0.25) and row.recipe == "sgd:v,o adam:*"


def test_the_bucket_gain_bars_carry_the_seeds_standard_error_and_the_curves_a_band():
    from matplotlib.container import BarContainer

    """With three seeds, each bar is the mean gain over all-Adam with its SE (the two arms' SEs
    in quadrature: sqrt(2) x 0.01 / sqrt(3) with the jitter of _fake); with one seed, none. The
    validation curves carry a ± SE band where seeds give a spread."""
    cfg = ablation.Config(seeds=3, arms=["full", "adam"])
    results = _fake({"full": 3.0, "adam": 4.0}, {"full": (2.0, 3.0, 5.0), "adam": (2.5, 4.0, 6.5)})
    fig = ablation._bucket_gain(cfg, results, 3)
    (ax,) = fig.axes
    bars = [c for c in ax.containers if isinstance(c, BarContainer)]
    heights = [bar.patches[0].get_height() for bar in bars]
    assert heights == pytest.approx([0.5, 1.0, 1.5])  # head, body, tail: Adam's minus full's
    spans = [bar.errorbar.lines[2][0].get_segments()[0][:, 1] for bar in bars]
    se = (2 * statistics.variance(JITTER) / 3) ** 0.5
    for span, height in zip(spans, heights, strict=True):
        assert span == pytest.approx([height - se, height + se])
    assert "mean ± SE over 3 seeds" in ax.get_title()
    one = {arm: runs[:1] for arm, runs in results.items()}
    (ax,) = ablation._bucket_gain(ablation.Config(seeds=1, arms=cfg.arms), one, 3).axes
    drawn = [segment for bar in ax.containers if isinstance(bar, BarContainer)
             for segment in bar.errorbar.lines[2][0].get_segments()
             if len(segment) and np.isfinite(np.asarray(segment)).all()]  # fmt: skip
    assert drawn == []  # one seed: no spread, no bar
    curves = ablation._val_curves(cfg, results)
    assert [len(a.collections) for a in curves.axes] == [2, 2]  # a band per arm and panel
    pyplot().close("all")
