"""The map of Muon vs Adam over scale (qa-map): points, sizes, rows, outputs and the smoke run."""

import csv
import json
import math

import numpy as np
import pytest
import torch

from tailmem.cli import main
from tailmem.config import load_config
from tailmem.errors import ConfigError
from tailmem.experiments import qa_map
from tailmem.experiments.qa_map import outputs, points
from tailmem.metrics.lag_trend import independent_features
from tailmem.models.gpt import gpt_config
from tailmem.rundir import RunDir


def test_the_grid_is_the_cartesian_product_of_the_axes_with_labelled_points():
    axes = qa_map.AxesSection(width=[64, 128], exposures=[3.0, 6.0], frequency_exponent=[0.0, 1.0])
    grid = points.grid_points(axes)
    assert len(grid) == 8 and len(set(grid)) == 8
    assert grid[0].label == "d64 L2 x3 m7 rho0" and grid[-1].label == "d128 L2 x6 m7 rho1"


def test_width_keeps_heads_of_64_where_it_can():
    def heads(width):
        point = points.GridPoint(width, 3, 6.0, 7, 1.0)
        return points.model_overrides(point, head_dim=64, ffn_mult=4)

    assert heads(256) == {"model.d_model": 256, "model.n_head": 4, "model.n_layer": 3,
                          "model.d_ff": 1024}  # fmt: skip
    assert heads(32)["model.n_head"] == 1  # below one head: one head of the whole width
    with pytest.raises(ConfigError, match=r"axes\.width: got 96; expected a multiple of head_dim"):
        heads(96)


def test_facts_and_block_parameters_of_the_papers_point():
    assert points.facts(15) == 6 * 32768 == 196608  # PAPERS.md: m = 15 -> 32,768 people
    model = gpt_config("gpt-160m", vocab_size=50304)
    d, f, layers, head = 768, 3072, 12, 64
    # per block: Q K V O, two FFN matrices, two RMSNorms, QK-norm weights; then the final norm
    by_hand = layers * (4 * d * d + 2 * d * f + 2 * d + 2 * head) + d
    assert points.hidden_params(model) == by_hand == 84_955_392
    point = points.paper_point()
    assert point == {"width": 768.0, "depth": 12.0, "facts_per_param": 196608 / by_hand}


def _trend_features(preset):
    """Width and facts per block parameter of every point of a preset's grid."""
    cfg = load_config(qa_map.Config, "qa-map", preset)
    features = {"width": [], "facts_per_param": []}
    for point in points.grid_points(cfg.axes):
        shape = points.model_overrides(point, cfg.head_dim, cfg.ffn_mult)
        fields = {key.split(".")[1]: value for key, value in shape.items()}
        model = gpt_config("gpt-160m", vocab_size=1, **fields)
        features["width"].append(point.width)
        features["facts_per_param"].append(points.facts(point.m) / points.hidden_params(model))
    return features


def test_the_paper_preset_resolves_both_slopes_of_the_trend_and_the_cpu_one_only_width():
    """At one m and depth, facts per parameter fall as width squared (one slope only); the
    paper preset's width x m plane lets the fit tell the two apart."""
    assert independent_features(_trend_features("paper")) == ["width", "facts_per_param"]
    assert independent_features(_trend_features("cpu")) == ["width"]


def test_steps_give_each_rarest_fact_its_exposures():
    assert points.steps_for(6.0, steps_per_epoch=73.4, qa_per_selection=1) == 440
    assert points.steps_for(6.0, steps_per_epoch=73.4, qa_per_selection=2) == 220
    assert points.schedule_overrides(440, evals=10, warmup_frac=0.02) == {
        "train.steps": 440, "train.eval_every": 44, "train.log_every": 44,
        "train.warmup_steps": 9,
    }  # fmt: skip


def _ratio(mean, se, n_measured, n_seeds=3, lower=None, upper=None, status="measured"):
    ratio = mean if n_measured == n_seeds else None
    of_mean = {"ratio": ratio, "status": status, "lower": lower, "upper": upper}
    return {"mean": mean, "se": se, "n_measured": n_measured, "n_seeds": n_seeds,
            "of_mean": of_mean}  # fmt: skip


def test_a_lag_ratio_is_a_value_only_when_every_seed_measured_it():
    full = outputs.lag_columns("lag_0.5", _ratio(2.0, 0.2, 3))
    assert full == {"lag_0.5": 2.0, "lag_0.5_se": 0.2, "lag_0.5_kind": "measured",
                    "lag_0.5_status": "measured"}  # fmt: skip
    partial = outputs.lag_columns("lag_0.5", _ratio(3.0, None, 1, lower=2.5, status="not reached"))
    assert (partial["lag_0.5"], partial["lag_0.5_kind"]) == (2.5, "lower")
    assert partial["lag_0.5_status"] == "measured in 1 of 3 seeds"
    none = outputs.lag_columns("lag_0.5", _ratio(None, None, 0, status="undetermined"))
    assert none["lag_0.5"] is None and none["lag_0.5_status"] == "undetermined"
    assert outputs.lag_columns("lag_0.5", None)["lag_0.5_status"] == "not measured"


def _rows(noise_rng):
    """A 3 x 3 grid (width x exposures) whose lag ratio follows 0.6 · width^0.3, with SE 5%."""
    rows = []
    for width in (64, 128, 256):
        for exposures in (3.0, 6.0, 12.0):
            ratio = 0.6 * width**0.3 * math.exp(0.03 * noise_rng.standard_normal())
            gap = 0.02 if width == 64 else 0.1 * width / 64
            point = points.GridPoint(width, 2, exposures, 7, 1.0)
            params = 24 * width**2
            row = {"point": point.label, **point.axes(), "facts_per_param": 768 / params,
                   "hidden_params": params,
                   "peak_rarest_gap": gap, "peak_rarest_gap_se": 0.02,
                   "lr_muon": 0.06, "muon_interior": True, "lr_adam": 2e-3,
                   "adam_interior": width != 256}  # fmt: skip
            for tau in (0.3, 0.5, 0.8):
                kind = "lower" if (tau == 0.8 and exposures == 3.0) else "measured"
                se = None if kind == "lower" else 0.05 * ratio
                for key in (f"lag_{tau:g}", f"m2_lag_{tau:g}"):  # pooled; like for like
                    row.update({key: ratio, f"{key}_se": se, f"{key}_kind": kind,
                                f"{key}_status": kind})  # fmt: skip
            rows.append(row)
    # no edge at width 64 (ratio forced to 1, gap 0): the edge "vanishes" there
    for row in rows[:3]:
        row.update({"lag_0.5": 1.0, "lag_0.5_se": 0.05})
    return rows


def _seeds(rows):
    def entry(value):
        return {"ratio": value, "lower": value, "upper": value}

    return {r["point"]: {f"{t:g}": [entry(r[f"lag_{t:g}"])] * 3 for t in (0.3, 0.5, 0.8)}
            for r in rows}  # fmt: skip


def test_outputs_fit_the_trend_extrapolate_and_say_where_the_gap_is(tmp_path):
    cfg = qa_map.Config(axes=qa_map.AxesSection(width=[64, 128, 256], exposures=[3.0, 6.0, 12.0]))
    cfg.trend.tau = 0.3
    rows = _rows(np.random.default_rng(0))
    run = RunDir(tmp_path)
    outputs.write_outputs(cfg, run, rows, _seeds(rows))
    with open(tmp_path / "map.csv") as fh:
        assert len(list(csv.DictReader(fh))) == 9
    with open(tmp_path / "map_summary.csv") as fh:
        table = {r["point"]: r for r in csv.DictReader(fh)}
    cell = table["d256 L2 x3 m7 rho1"]
    assert cell["lag τ 0.8"].startswith("≥ ") and cell["LR adam"] == "0.002*"
    assert cell["peak rarest gap"] == "+0.400 ± 0.020" and cell["LR muon"] == "0.06"
    results = json.loads((tmp_path / "results.json").read_text())
    trend = results["trend"]
    # width and facts/param are collinear at one m and depth: the trend is in width alone
    assert trend["status"] == "fitted" and trend["features"] == ["width"]
    assert trend["dropped"] == ["facts_per_param"] and trend["n_points"] == 9
    fit = trend["fit"]
    slope, se = fit["coefficients"]["log width"], fit["se"]["log width"]
    assert abs(slope - 0.3) < 3 * se and se < 0.05
    e = trend["extrapolation"]
    assert e["at"] == {"width": 768.0}
    assert e["confidence"][0] < 0.6 * 768**0.3 < e["confidence"][1]
    assert e["prediction"][0] < e["confidence"][0] and e["confidence"][1] < e["prediction"][1]
    report = json.loads((tmp_path / "report.json").read_text())
    files = [f["file"] for f in report["figures"]]
    assert files == ["lag_ratio_width_exposures.png", "peak_gap_width_exposures.png",
                     "lag_ratio_trend.png"]  # fmt: skip
    assert all((tmp_path / f).is_file() for f in files)
    text = report["summary"]
    assert "Largest peak rarest-group gap: +0.400 ± 0.020 (width 256," in text
    assert "Largest lag ratio at FTA 0.5" in text
    assert "vanishes (lag ratio within 2 SE of 1 and peak rarest gap within 2 SE of 0) at: " \
           "width 64, 2 layers, 3 exposures" in text  # fmt: skip
    assert (
        "extrapolated to the paper's width 768 (160M model; depth and m as in the grid, not the "
        f"paper's): {e['ratio']:.2f}" in text
    )
    # the published tables (arXiv v2) pooled: every (group, step) cell at exposures
    # 2**(15 - g) * step; FTA 0.3 is first reached by Muon between group 15 at 2k and 5k steps
    # (.140 -> .320) and by Adam between group 13 at 5k (20k exposures, .298) and group 11 at
    # 2k (32k exposures, .312), each interpolated linearly in exposures
    muon = 2 + 3 * (0.3 - 0.140) / (0.320 - 0.140)
    adam = 20 + 12 * (0.3 - 0.298) / (0.312 - 0.298)
    assert f"paper arXiv v2 {adam / muon:.2f}" in text and "not judged" in text
    # like for like, which the extrapolation is set beside: group 13 alone, where Muon is
    # already past 0.3 at 2k steps (.386) and Adam crosses between 5k and 10k: a lower bound
    # of Adam's crossing at 5k + 5k·(0.3 − .298)/(.890 − .298) over Muon's at 2k
    bound = (5 + 5 * (0.3 - 0.298) / (0.890 - 0.298)) / 2
    assert f"paper arXiv v2 ≥ {bound:.2f}" in text and "like for like" in text
    assert "d256 L2 x3 m7 rho1 (adam)" in text  # chosen LR at a grid edge
    (claim,) = json.loads((tmp_path / "claims.json").read_text())
    assert claim["id"] == "A3.map.uniform" and claim["verdict"] == "not measured"
    assert f"Claim A3.map.uniform: not measured ({claim['reason']})." in text


def test_too_few_measured_points_leave_the_trend_unfitted_with_the_reason(tmp_path):
    cfg = qa_map.Config(axes=qa_map.AxesSection(width=[64, 128, 256], exposures=[3.0, 6.0, 12.0]))
    rows = _rows(np.random.default_rng(1))
    for i, row in enumerate(rows):
        if i not in (0, 3):  # measured: width 64 and 128, 3 exposures
            row["m2_lag_0.5_kind"] = "lower"
    outputs.write_outputs(cfg, RunDir(tmp_path), rows, _seeds(rows))
    trend = json.loads((tmp_path / "results.json").read_text())["trend"]
    assert trend["status"] == "not fitted" and trend["n_points"] == 2
    assert "needs at least 3 points" in trend["reason"]
    # the censored points are named, not silently dropped
    assert len(trend["excluded"]) == len(rows) - 2
    assert all("a bound, not a ratio" in e["why"] for e in trend["excluded"])
    report = json.loads((tmp_path / "report.json").read_text())
    assert "No trend fitted: a trend in 1 feature(s)" in report["summary"]
    assert not (tmp_path / "lag_ratio_trend.png").exists()
    # one width only: no feature varies
    for row in rows[3:4]:
        row["m2_lag_0.5_kind"] = "lower"
    rows[1]["m2_lag_0.5_kind"] = "measured"
    outputs.write_outputs(cfg, RunDir(tmp_path), rows, _seeds(rows))
    trend = json.loads((tmp_path / "results.json").read_text())["trend"]
    assert trend["reason"].startswith("no feature varies over the 2 point(s) with a measured")


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("axes.width=[64,96]", "axes.width: got 96; expected a multiple of head_dim 64"),
        ("heat_maps=[[width,batch]]", "heat_maps: got ['width', 'batch']; expected two"),
        ("common={data.m: 5}", "common: ['data.m'] are set by the map"),
        ("trend.features=[exposures]", "trend.features: got ['exposures']; expected some of"),
        ("axes.exposures=[0]", "axes.exposures: got 0"),
        ("common={ffn: both}", "common.ffn: got 'both'; expected plain or gated"),
        pytest.param(
            "base=paper",
            "point 'd16 L2 x2 m4 rho1': train.device: got 'cuda' but this machine",
            marks=pytest.mark.skipif(torch.cuda.is_available(), reason="needs no CUDA device"),
        ),  # with one, the paper base would train (scripts/gpu_check.sh runs this selection)
    ],
)
def test_bad_grids_are_refused_in_one_line_before_anything_is_written(
    tmp_path, capsys, override, message
):
    out = tmp_path / "run"
    assert main(["run", "qa-map", "--preset", "smoke", "--out", str(out), override]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1, err
    assert not out.exists()


def test_presets_grids():
    sizes = {p: len(points.grid_points(load_config(qa_map.Config, "qa-map", p).axes))
             for p in ("smoke", "cpu", "paper")}  # fmt: skip
    assert sizes == {"smoke": 2, "cpu": 6, "paper": 27}


def test_smoke_map_runs_every_point_and_writes_the_map(tmp_path, capsys):
    out = tmp_path / "map"
    assert main(["run", "qa-map", "--preset", "smoke", "--out", str(out)]) == 0
    with open(out / "map.csv") as fh:
        rows = list(csv.DictReader(fh))
    assert [r["point"] for r in rows] == ["d16 L2 x2 m4 rho1", "d64 L2 x2 m4 rho1"]
    for row in rows:
        assert int(row["seeds"]) == 3 and row["n_head"] == "1"
        # steps train each rarest fact twice: two epochs (one QA sample per selection)
        assert int(row["steps"]) == round(2 * float(row["steps_per_epoch"]))
        assert row["lr_muon"] in ("0.05", "0.1") and row["lr_adam"] in ("0.01", "0.03")
        assert float(row["facts_per_param"]) == pytest.approx(96 / int(row["hidden_params"]))
    results = json.loads((out / "results.json").read_text())
    assert results["trend"]["paper_point"]["width"] == 768.0
    report = json.loads((out / "report.json").read_text())
    assert report["summary"].startswith("2 points (width d_model [16, 64]")
    assert (out / "lag_ratio_width_exposures.png").is_file()
    assert [len(v["0.5"]) for v in results["seed_ratios"].values()] == [3, 3]
    (claim,) = json.loads((out / "claims.json").read_text())
    assert claim["verdict"] == "not measured"  # the smoke grid has one frequency exponent
    assert sorted(p.name for p in (out / "points").iterdir()) == [
        "d16_L2_x2_m4_rho1", "d64_L2_x2_m4_rho1"
    ]  # fmt: skip
