"""The map of Muon vs Adam over scale (qa-map): points, sizes, rows, Muon's edge (shown by a t
interval, absent only by equivalence, Holm across the grid), outputs and the smoke run."""

import csv
import dataclasses
import json
import math

import numpy as np
import pytest
import torch

from tailmem.cli import main
from tailmem.config import load_config
from tailmem.errors import ConfigError
from tailmem.experiments import qa_map
from tailmem.experiments.knowledge_qa import grid
from tailmem.experiments.qa_map import measures, outputs, points
from tailmem.experiments.qa_map.measures import FinalGap
from tailmem.metrics.lag_trend import independent_features
from tailmem.metrics.qa_gaps import Gap, LagRatio, Ratio
from tailmem.models.gpt import gpt_config
from tailmem.outputs import write
from tailmem.rundir import RunDir


def test_the_grid_is_the_cartesian_product_of_the_axes_with_labelled_points():
    axes = qa_map.AxesSection(width=[64, 128], exposures=[3.0, 6.0], frequency_exponent=[0.0, 1.0])
    grid = points.grid_points(axes)
    assert len(grid) == 8 and len(set(grid)) == 8
    assert grid[0].label == "d64 L2 x3 m7 rho0" and grid[-1].label == "d128 L2 x6 m7 rho1"


def test_width_keeps_heads_of_64_where_it_can():
    def heads(width):
        point = points.GridPoint(width, 3, 6.0, 7, 1.0)
        return points.model_shape(point, head_dim=64, ffn_mult=4)

    assert heads(256) == points.Shape(d_model=256, n_head=4, n_layer=3, d_ff=1024)
    assert heads(32).n_head == 1  # below one head: one head of the whole width
    with pytest.raises(ConfigError, match=r"axes\.width: got 96; expected a multiple of head_dim"):
        heads(96)


def test_a_point_the_model_cannot_take_is_refused_by_name():
    cfg = load_config(qa_map.Config, "qa-map", "cpu")
    small = points.GridPoint(128, 2, 3.0, 2, 1.0)  # m = 2 has fewer groups than the head's 3
    with pytest.raises(ConfigError, match=r"^point 'd128 L2 x3 m2 rho1': head_groups: got 3"):
        qa_map.point_config(cfg, qa_map.base_config(cfg), small, 214)


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
        shape = points.model_shape(point, cfg.head_dim, cfg.ffn_mult)
        model = gpt_config("gpt-160m", vocab_size=1, **dataclasses.asdict(shape))
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
    assert points.schedule(440, evals=10, warmup_frac=0.02) == points.Schedule(
        steps=440, eval_every=44, log_every=44, warmup_steps=9
    )


def _lag(values, resolution=0.01, tau=0.5, of_mean=None):
    """A pooled lag ratio over seeds: a number is a measured seed, a Ratio is itself; the
    seed-mean curves' ratio is the geometric mean unless given."""
    seeds = tuple(v if isinstance(v, Ratio) else Ratio("measured", v, v, v, resolution)
                  for v in values)  # fmt: skip
    if of_mean is None:
        logs = [r.log for r in seeds if r.log is not None]
        mean = math.exp(sum(logs) / len(logs))
        of_mean = Ratio("measured", mean, mean, mean, resolution)
    return LagRatio("pooled", tau, seeds, of_mean, (0, 1, 2))


NEVER = Ratio("not reached", None, 2.5, None)
"""A seed in which Adam never reaches τ: the ratio is at least 2.5."""


def test_a_lag_ratio_is_a_value_only_when_every_seed_measured_it():
    full = outputs.MapCells.of(_lag([1.8, 2.0, 2.2]))
    low, high = _lag([1.8, 2.0, 2.2]).interval()
    assert full.value == pytest.approx((1.8 * 2.0 * 2.2) ** (1 / 3))  # geometric mean
    assert (full.low, full.high) == (low, high) and low < 1.8 < 2.2 < high
    assert (full.kind, full.status) == ("measured", "measured")
    bound = Ratio("not reached", None, 2.5, None)
    partial = outputs.MapCells.of(_lag([3.0, NEVER, NEVER], of_mean=bound))
    assert (partial.value, partial.kind) == (2.5, "lower")
    assert partial.status == "measured in 1 of 3 seeds" and partial.low is None
    # two seeds crossed, the seed-mean curves too: still no ratio (the censored seed's lag is
    # the largest, and a geometric mean of the two others would leave it out)
    mixed = outputs.MapCells.of(_lag([1.5, 1.6, NEVER]))
    assert mixed.value is None and mixed.status == "measured in 2 of 3 seeds"
    none = outputs.MapCells.of(_lag([NEVER] * 3, of_mean=Ratio("undetermined")))
    assert none.value is None and none.status == "undetermined"
    assert outputs.MapCells.of(None).status == "not measured"


# --------------------------------------------------------------------------- the edge


def _gap(values, resolution=0.001):
    return FinalGap(7, tuple(values), resolution)


def _spread(centre, sd):
    """Three seeds about ``centre`` with sample SD ``sd`` (on the log scale for a ratio)."""
    return [centre - sd, centre, centre + sd]


def _ratio_seeds(ratio, log_sd):
    return [ratio * math.exp(x) for x in _spread(0.0, log_sd)]


@pytest.mark.parametrize(
    ("ratio", "gap", "finding"),
    [
        (_ratio_seeds(2.0, 0.05), _spread(0.0, 0.005), "Muon ahead"),  # the ratio alone
        (_ratio_seeds(1.0, 0.02), _spread(0.2, 0.02), "Muon ahead"),  # the tail gap alone
        (_ratio_seeds(0.5, 0.05), _spread(0.0, 0.005), "Adam ahead"),
        (_ratio_seeds(1.5, 0.05), _spread(-0.2, 0.02), "mixed"),
        (_ratio_seeds(1.0, 0.02), _spread(0.0, 0.005), "no edge"),  # both equivalent to none
        # within 2 SE of 1 and of 0 — "vanishes" by the old rule — but too noisy to say "the
        # same": 3 seeds spread ±30 % do not bound the ratio inside ×/÷ 1.25
        ([0.75, 1.0, 1.3], _spread(0.0, 0.005), "not distinguished"),
        ([1.1, 1.3, NEVER], _spread(0.0, 0.005), "not distinguished"),  # a censored lag
    ],
)
def test_the_edge_is_shown_by_a_t_interval_and_absent_only_by_equivalence(ratio, gap, finding):
    found = measures.edge(_lag(ratio), _gap(gap))
    assert found.finding == finding, found
    if finding == "no edge":  # both equivalence tests pass at 95 %
        assert found.ratio_equivalence.finding == found.gap_equivalence.finding == "equivalent"
        assert math.log(measures.RATIO_MARGIN) > 0 and measures.GAP_MARGIN > 0


def test_a_censored_seed_confirms_the_edge_at_its_bound():
    found = measures.edge(_lag([2.4, 2.6, NEVER]), _gap(_spread(0.0, 0.005)))
    assert found.finding == "Muon ahead" and found.ratio.censored == 1


def test_seeds_that_tie_exactly_are_equivalent_only_to_the_resolution_of_what_is_measured():
    """Both arms at the same FTA in every seed (a gap of exactly 0, SE 0) is no noise estimate
    without a floor; with the FTA's resolution (one question in n) it is equivalent."""
    tied = _lag(_ratio_seeds(1.0, 0.01))
    assert measures.edge(tied, _gap([0.0] * 3, resolution=0.0)).finding == "not distinguished"
    assert measures.edge(tied, _gap([0.0] * 3, resolution=0.001)).finding == "no edge"


def test_holm_across_the_grid_keeps_only_what_survives_the_family():
    """Two points each "no edge" at 95 % alone (p just under 0.05) are not both listed once
    the family of two is corrected; a decisive one survives."""
    weak = measures.edge(_lag(_ratio_seeds(1.0, 0.1)), _gap(_spread(0.0, 0.005)))
    strong = measures.edge(_lag(_ratio_seeds(1.0, 0.01)), _gap(_spread(0.0, 0.005)))
    assert 0.025 < weak.none_p < 0.05 and weak.finding == "no edge"
    assert strong.none_p < 0.025 and strong.finding == "no edge"
    judged = measures.holm_edges([weak, weak])
    assert [e.finding for e in judged] == ["not distinguished"] * 2
    judged = measures.holm_edges([weak, strong])
    assert [e.finding for e in judged] == ["no edge", "no edge"]  # step-down: 0.025, then 0.05


# --------------------------------------------------------------------------- outputs


def _planned(point):
    params = 24 * point.width**2
    return qa_map.Planned(point, grid.Point(point.label), params, 768, 440, 73.3)


def _rows(noise_rng):
    """A 3 x 3 grid (width x exposures) whose lag ratio follows 0.6 · width^0.3 (three seeds
    0.05 apart in log); no edge at width 64 (ratio 1, tail gap 0, both tight)."""
    rows = []
    for width in (64, 128, 256):
        for exposures in (3.0, 6.0, 12.0):
            point = points.GridPoint(width, 2, exposures, 7, 1.0)
            ratio = 0.6 * width**0.3 * math.exp(0.03 * noise_rng.standard_normal())
            spread, gap = 0.05, _spread(0.1 * width / 64, 0.02)
            if width == 64:
                ratio, spread, gap = 1.0, 0.01, _spread(0.0, 0.002)
            readings = {}
            for reading in ("pooled", "paper_cells_group"):
                readings[reading] = {
                    tau: _lag([NEVER] * 3, tau=tau, of_mean=Ratio("not reached", None, 2.5))
                    if (tau == 0.8 and exposures == 3.0)
                    else _lag(_ratio_seeds(ratio, spread), tau=tau)
                    for tau in (0.3, 0.5, 0.8)
                }
            arms = {"muon": measures.ArmChoice(0.06, "interior", 6, 10),
                    "adam": measures.ArmChoice(2e-3, "highest edge" if width == 256
                                               else "interior", 10, 10)}  # fmt: skip
            tail = _gap(gap)
            rows.append(outputs.MapRow(
                _planned(point), max(1, width // 64), 3, readings, tail,
                Gap(7, 200.0, 0.4 if width == 256 else 0.05, 0.02), Gap(5, 100.0, 0.5, 0.03),
                arms, measures.edge(readings["pooled"][0.5], tail),
            ))  # fmt: skip
    return rows


def test_outputs_fit_the_trend_extrapolate_and_say_where_the_edge_is(tmp_path):
    cfg = qa_map.Config(
        axes=qa_map.AxesSection(width=[64, 128, 256], exposures=[3.0, 6.0, 12.0]),
        trend=qa_map.TrendSection(tau=0.3),
    )
    rows = _rows(np.random.default_rng(0))
    run = RunDir(tmp_path)
    write(run, outputs.outputs(cfg, rows))
    with open(tmp_path / "map.csv") as fh:
        written = list(csv.DictReader(fh))
    assert len(written) == 9 and written[0]["edge"] == "no edge"
    assert {r["edge"] for r in written[3:]} == {"Muon ahead"}
    with open(tmp_path / "map_summary.csv") as fh:
        table = {r["point"]: r for r in csv.DictReader(fh)}
    cell = table["d256 L2 x3 m7 rho1"]
    assert cell["lag τ 0.8"] == "≥ 2.50" and cell["LR adam"] == "0.002*"
    assert cell["LR muon"] == "0.06" and cell["peak rarest gap (descriptive)"] == "+0.400 ± 0.020"
    test = rows[6].tail.test()
    assert cell["tail gap"] == "+0.400 [{:+.3f}, {:+.3f}]".format(*test.interval)
    # every column of the report's table documented, in the CSV's order, the edge's header
    # naming the τ it is judged at
    shown = json.loads((tmp_path / "report.json").read_text())["tables"]
    (summary,) = [t for t in shown if t["file"] == "map_summary.csv"]
    assert list(summary["columns"]) == list(cell) and f"edge (τ {cfg.tau:g})" in cell
    results = json.loads((tmp_path / "results.json").read_text())
    trend = results["trend"]
    # width and facts/param are collinear at one m and depth: the trend is in width alone
    assert trend["status"] == "fitted" and trend["features"] == ["width"]
    assert trend["dropped"] == ["facts_per_param"] and trend["n_points"] == 9
    assert trend["reading"] == "pooled"
    fit = trend["fit"]
    slope, se = fit["coefficients"]["log width"], fit["se"]["log width"]
    assert slope > 0.0 and se < 0.2  # width 64 sits at 1, below the power law: a steeper fit
    e = trend["extrapolation"]
    assert e["at"] == {"width": 768.0}
    assert e["prediction"][0] < e["confidence"][0] and e["confidence"][1] < e["prediction"][1]
    assert results["edge_margins"] == {"ratio": measures.RATIO_MARGIN,
                                       "tail_gap": measures.GAP_MARGIN}  # fmt: skip
    report = json.loads((tmp_path / "report.json").read_text())
    files = [f["file"] for f in report["figures"]]
    assert files == ["lag_ratio_width_exposures.png", "tail_gap_width_exposures.png",
                     "lag_ratio_trend.png"]  # fmt: skip
    assert all((tmp_path / f).is_file() for f in files)
    text = report["summary"]
    assert "Largest tail gap (rarest group at the end): +0.400 [" in text
    assert "Largest lag ratio at FTA 0.5" in text
    assert "Holm across the 9 points: no edge at 3 points (width 64, 2 layers, 3 exposures" in text
    assert "Muon ahead at 6 points" in text
    assert "peak" not in text  # descriptive only: in the tables, never in a finding
    assert (
        "extrapolated to the paper's width 768 (160M model; depth and m as in the grid, not the "
        f"paper's): {e['ratio']:.2f}" in text
    )
    # like for like, which the extrapolation is set beside: group 13 alone, where Muon is
    # already past 0.3 at 2k steps (.386) and Adam crosses between 5k and 10k: a lower bound
    # of Adam's crossing at 5k + 5k·(0.3 − .298)/(.890 − .298) over Muon's at 2k
    bound = (5 + 5 * (0.3 - 0.298) / (0.890 - 0.298)) / 2
    assert f"paper arXiv v2 ≥ {bound:.2f}" in text and "like for like" in text
    # pooled over the cells, the ICLR table brackets group 15 alone at 0.3: Muon from .140 (2k)
    # to .320 (5k), Adam from .110 (5k) to .558 (10k), each interpolated linearly
    muon = 2 + 3 * (0.3 - 0.140) / (0.320 - 0.140)
    adam = 5 + 5 * (0.3 - 0.110) / (0.558 - 0.110)
    assert f"paper ICLR {adam / muon:.2f} pooled over its cells" in text
    assert "d256 L2 x3 m7 rho1 (adam)" in text  # chosen LR at an end of its candidates
    (claim,) = json.loads((tmp_path / "claims.json").read_text())
    assert claim["id"] == "A3.map.uniform" and claim["verdict"] == "not measured"
    assert f"Claim A3.map.uniform: not measured ({claim['reason']})." in text


def test_too_few_measured_points_leave_the_trend_unfitted_with_the_reason(tmp_path):
    cfg = qa_map.Config(axes=qa_map.AxesSection(width=[64, 128, 256], exposures=[3.0, 6.0, 12.0]))
    rows = _rows(np.random.default_rng(1))
    censored = _lag([2.0, 2.1, NEVER])

    def censor(row):
        readings = {**row.readings, "pooled": {**row.readings["pooled"], 0.5: censored}}
        return dataclasses.replace(row, readings=readings)

    kept = [0, 3]  # measured in every seed: width 64 and 128, 3 exposures
    rows = [row if i in kept else censor(row) for i, row in enumerate(rows)]
    write(RunDir(tmp_path), outputs.outputs(cfg, rows))
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
    rows[3] = censor(rows[3])
    rows[1] = _rows(np.random.default_rng(1))[1]
    write(RunDir(tmp_path), outputs.outputs(cfg, rows))
    trend = json.loads((tmp_path / "results.json").read_text())["trend"]
    assert trend["reason"].startswith("no feature varies over the 2 point(s) whose ratio")


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("axes.width=[64,96]", "axes.width: got 96; expected a multiple of head_dim 64"),
        ("heat_maps=[[width,batch]]", "heat_maps: got ['width', 'batch']; expected two"),
        ("common={data.m: 5}", "common.data.m: qa-map sets data.m itself"),
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
        assert (row["lr_muon"], row["muon_lr_where"]) == ("0.1", "set")
        assert (row["lr_adam"], row["adam_lr_where"]) == ("0.01", "set")
        assert float(row["facts_per_param"]) == pytest.approx(96 / int(row["hidden_params"]))
        assert np.isfinite(float(row["tail_gap"])) and row["edge"]
        lo, hi = float(row["tail_gap_lo"]), float(row["tail_gap_hi"])
        assert lo <= float(row["tail_gap"]) <= hi
    results = json.loads((out / "results.json").read_text())
    assert results["trend"]["paper_point"]["width"] == 768.0
    report = json.loads((out / "report.json").read_text())
    assert report["summary"].startswith("2 points (width d_model [16, 64]")
    assert (out / "lag_ratio_width_exposures.png").is_file()
    assert (out / "tail_gap_width_exposures.png").is_file()
    assert [len(v["0.5"]) for v in results["seed_ratios"].values()] == [3, 3]
    (claim,) = json.loads((out / "claims.json").read_text())
    assert claim["verdict"] == "not measured"  # the smoke grid has one frequency exponent
    assert sorted(p.name for p in (out / "points").iterdir()) == [
        "d16_L2_x2_m4_rho1", "d64_L2_x2_m4_rho1"
    ]  # fmt: skip
