"""The tail-learning benchmark at smoke size, with a user's optimiser given by import path only:
it trains as an arm of both QA levels, runs on the associative memory, and sits on the
leaderboard with its family, source and place between the two references (Muon; Adam on the
hidden matrices at its own rate), all-Adam an extra row; the leaderboard figures on typed rows."""

from __future__ import annotations

import csv
import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tailmem.claims.bench import FTA_MARGIN
from tailmem.config import load_config
from tailmem.errors import ConfigError
from tailmem.experiments import optim_bench
from tailmem.experiments.optim_bench.board import LeaderboardRow
from tailmem.experiments.optim_bench.places import PLACES, UNDERPOWERED

HERE = Path(__file__).resolve().parent
SRC = HERE.parents[1] / "src"


def test_the_smoke_benchmark_places_a_users_optimiser_on_the_leaderboard(tmp_path):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(SRC), str(HERE)]), "CI": "true"}
    out = tmp_path / "bench"
    args = ["optimizers=[muon, adam_split, adam, toy]",
            "optim.toy.factory=toy_optimizer:DampedSign", "optim.toy.lr=[0.01]",
            "optim.toy.damping=0.5"]  # fmt: skip
    done = subprocess.run(
        [sys.executable, "-m", "tailmem", "run", "optim-bench", "--preset", "smoke", "--out",
         str(out), *args], env=env, capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    with open(out / "leaderboard.csv") as fh:
        board = list(csv.DictReader(fh))
    levels = {row["level"] for row in board}
    assert len(levels) == 2
    assert sorted(row["optimizer"] for row in board) == sorted(["muon", "adam_split", "adam",
                                                               "toy"] * 2)  # fmt: skip
    toy = [row for row in board if row["optimizer"] == "toy"]
    assert len(toy) == 2 and all(row["family"] == "yours" for row in toy)
    assert toy[0]["source"] == "toy_optimizer:DampedSign (yours)"
    decided = (*PLACES, UNDERPOWERED)  # 24 steps may not separate Muon from all-Adam
    assert all(row["role"] == "challenger" and row["placement"] in decided for row in toy)
    roles = {row["optimizer"]: (row["role"], row["placement"]) for row in board}
    assert roles["muon"] == ("reference", "reference (Muon)")
    assert roles["adam_split"][0] == "reference"
    assert roles["adam_split"][1].startswith("reference (Adam, own rate): ")
    assert roles["adam"][0] == "extra: Adam everywhere (paper A)" and roles["adam"][1] in decided
    # Equal tuning freedom, evaluation seeds apart from tuning seeds: the smoke preset's rates
    # are one-point lists, so no row tuned (0 rates, 0 trials) and all are scored on seeds 0-2.
    assert {(r["tuned_rates"], r["tuning_trials"], r["tuning_seeds"]) for r in board} == {
        ("0", "0", "")
    }
    assert {r["eval_seeds"] for r in board} == {"0 1 2"}
    assert {float(r["margin"]) for r in board} == {FTA_MARGIN}
    results = json.loads((out / "results.json").read_text())
    for level in levels:  # the positive control decides whether anything is placed
        control = results["positive_controls"][level]
        places = {r["placement"] for r in board if r["level"] == level and r["role"] != "reference"}
        assert (places == {UNDERPOWERED}) == (not control["separated"]), (control, places)
        assert results["power"][level]["seeds_run"] == 3
    for r in board:  # the primary statistic: rarest-group final FTA minus Muon's, paired
        if r["optimizer"] != "muon" and r["rarest_gap_vs_muon"]:
            muon_fta = next(float(m["rarest_fta"]) for m in board
                            if m["optimizer"] == "muon" and m["level"] == r["level"])  # fmt: skip
            gap = float(r["rarest_fta"]) - muon_fta
            assert float(r["rarest_gap_vs_muon"]) == pytest.approx(gap, abs=2e-4)
    assert all(r["lag_vs_muon"] == "" for r in board if r["optimizer"] == "muon")
    assert all(r["lag_vs_adam"] == "" for r in board if r["optimizer"] == "adam_split")
    assert all(float(row["step_time_vs_adam"]) > 0 for row in board)
    specs = [json.loads(p.read_text()) for p in out.glob("points/*/runs/*/toy/*/spec.json")]
    assert specs and all(s["hparams"]["toy"]["damping"] == 0.5 for s in specs)
    assert {s["seed"] for s in specs} == {0, 1, 2}  # evaluation runs only
    with open(out / "leaderboard_view.csv") as fh:
        view = list(csv.DictReader(fh))
    assert len(view) == len(board) and {r["tuning"] for r in view} == {"0/0"}
    for stem in ("leaderboard", "cost"):
        assert len(list(out.glob(f"{stem}_*.png"))) == 2  # one per level
    with open(out / "memory.csv") as fh:
        memory = [row for row in csv.DictReader(fh) if row["optimizer"] == "toy"]
    assert len(memory) == 3
    claims = {c["id"]: c for c in json.loads((out / "claims.json").read_text())}
    assert set(claims) == {"kunstner.heavy_tail_adam"}  # spectral GD: assoc-embeddings
    assert claims["kunstner.heavy_tail_adam"]["verdict"] == "not measured"  # no sgd here


@pytest.mark.parametrize(
    ("override", "needle"),
    [
        (
            "optimizers=[adam, sgd]",
            "optimizers: got ['adam', 'sgd']; expected muon, adam_split, adam among them",
        ),
        ("optimizers=[muon, adam, sgd]", "expected muon, adam_split, adam among them"),
        ("optimizers=[muon, adam_split, adam, nosuch]", "unknown optimiser kind 'nosuch'"),
        ("optim.lion.lr=[1e-4]", "optim.lion.lr: lion is not in optimizers"),
        ("memory.dim=24", "memory.dim: got 24; expected 1..facts-1"),
    ],
)
def test_bad_benchmark_configs_are_refused_in_one_line(override, needle):
    with pytest.raises(ConfigError) as err:
        load_config(optim_bench.Config, "optim-bench", "smoke", [override])
    assert needle in str(err.value) and "\n" not in str(err.value)


def row(**given) -> LeaderboardRow:
    """A leaderboard row with every column empty but those ``given``."""
    return LeaderboardRow(**({f.name: None for f in dataclasses.fields(LeaderboardRow)} | given))


def test_the_leaderboard_figure_names_every_point_of_a_cluster_without_overlap():
    from matplotlib.text import Text

    from tailmem.experiments.optim_bench.board import figure

    adam = row(optimizer="adam_split", label="Adam (own rate)", family="elementwise",
               step_time_vs_adam=1.0, rarest_fta=0.7, rarest_fta_se=0.01, n_seeds=5)  # fmt: skip
    rows = [
        row(optimizer=f"opt{i}", label=f"Optimiser {i}", family="sign",
            step_time_vs_adam=1.0 + 0.002 * i, rarest_fta=0.8 + 0.002 * i, rarest_fta_se=0.01,
            n_seeds=5)
        for i in range(8)
    ]  # fmt: skip
    rows += [adam, row(optimizer="untimed", label="Untimed", family="sign", rarest_fta=0.9)]
    fig = figure(rows, "test")
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    (ax,) = [a for a in fig.axes if a.texts]
    boxes = [Text.get_window_extent(t, renderer) for t in ax.texts]  # the words, not the leaders
    # Every timed optimiser is named; the reference sits at its own pace (1).
    assert sorted(t.get_text() for t in ax.texts) == sorted(r.label for r in rows[:-1])
    for i, a in enumerate(boxes):
        for b in boxes[i + 1 :]:
            assert not a.overlaps(b), (a, b)


def test_the_ranked_figure_orders_optimisers_by_the_primary_with_their_place():
    """The statistic that places the rows draws them: the rarest group's final FTA, its bar the
    95 % t interval over seeds (t at n − 1 df times the SE)."""
    from scipy import stats

    from tailmem.experiments.optim_bench.board import ranked_figure

    rows = [
        row(optimizer="muon", label="Muon", family="orthogonalised", role="reference",
            placement="reference (Muon)", rarest_fta=0.75, rarest_fta_se=0.01, n_seeds=19),
        row(optimizer="adam_split", label="Adam (own rate)", family="elementwise",
            role="reference", placement="reference (Adam, own rate): a long finding",
            rarest_fta=0.71, rarest_fta_se=0.01, n_seeds=19),
        row(optimizer="adam", label="Adam", family="elementwise", role="extra",
            placement="behind Adam", rarest_fta=0.45, rarest_fta_se=0.02, n_seeds=3),
        row(optimizer="lion", label="Lion", family="sign", role="challenger",
            placement="not distinguished"),
    ]  # fmt: skip
    fig = ranked_figure(rows, "bpe")
    (ax,) = fig.axes
    names = [t.get_text() for t in ax.get_yticklabels()]
    # Lion has no measured rarest group: left out; the others from the lowest to the highest.
    assert names == ["Adam — behind Adam", "Adam (own rate) — reference", "Muon — reference"]
    spans = [(list(line.get_xdata()), list(line.get_ydata())) for line in ax.lines]
    bars = [(x, y) for x, y in spans if len(x) == 2 and y[0] == y[1]]
    half = [stats.t.ppf(0.975, n - 1) * se for n, se in ((3, 0.02), (19, 0.01), (19, 0.01))]
    for (x, y), centre, h, at in zip(bars, (0.45, 0.71, 0.75), half, range(3), strict=True):
        assert x == pytest.approx([centre - h, centre + h]) and y == [at, at]
    # the references' own values as dotted lines
    lines = [list(line.get_xdata()) for line in ax.lines if line.get_linestyle() == ":"]
    assert [v[0] for v in lines] == pytest.approx([0.75, 0.71])


def test_the_figures_name_the_primary_and_say_when_nothing_was_measured():
    """Both figures draw the rarest group's final FTA (no pooled "speed-up"), with readable
    names, and a level where fewer than two optimisers were measured (a smoke run) says so."""
    from tailmem.experiments.optim_bench.board import figure, ranked_figure
    from tailmem.plotting import MIN_FONT

    adam = row(optimizer="adam_split", label="Adam (own rate)", family="elementwise",
               role="reference", placement="reference", step_time_vs_adam=1.0)  # fmt: skip
    muon = row(optimizer="muon", label="Muon", family="orthogonalised", role="reference",
               placement="reference", rarest_fta=0.75, rarest_fta_se=0.01, n_seeds=3,
               step_time_vs_adam=1.7)  # fmt: skip
    measured_adam = dataclasses.replace(adam, rarest_fta=0.7, rarest_fta_se=0.01, n_seeds=3)
    for draw in (ranked_figure, figure):
        (ax,) = draw([measured_adam, muon], "bpe").axes
        label = ax.get_xlabel() if draw is ranked_figure else ax.get_ylabel()
        assert label.startswith("rarest group's final FTA") and "speed-up" not in label
        assert all(t.get_fontsize() >= MIN_FONT for t in ax.get_yticklabels())
        assert not [t for t in ax.texts if t.get_text().startswith("no data")]
    for draw, alone in ((ranked_figure, [adam]), (figure, [measured_adam])):
        (ax,) = draw(alone, "bpe").axes
        (note,) = [t.get_text() for t in ax.texts if t.get_text().startswith("no data")]
        assert "measured in every seed" in note


def test_a_command_line_common_key_joins_the_presets_dotted_keys():
    """``common.tuning.rates=sweep`` (how a run tunes optimisers the store has no rate for)
    replaces the preset's ``tuning.rates`` and keeps its other ``tuning.*`` keys."""
    stored = load_config(optim_bench.Config, "optim-bench", "cpu")
    swept = load_config(optim_bench.Config, "optim-bench", "cpu", ["common.tuning.rates=sweep"])
    for config, rates in ((stored, "stored"), (swept, "sweep")):
        for _, qa in config.qa_configs().values():
            assert (qa.tuning.rates, qa.tuning.max_extend) == (rates, 3)


def test_dotted_spells_nested_overrides_as_dotted_keys_later_ones_winning():
    from tailmem.experiments.knowledge_qa.grid import dotted

    given = {"tuning.rates": "stored", "tuning.max_extend": 3, "tuning": {"rates": "sweep"},
             "model": {"d_model": 64, "n_head": 2}, "data.m": 7, "role_overrides": {}}  # fmt: skip
    assert dotted(given) == {
        "tuning.max_extend": 3, "tuning.rates": "sweep", "model.d_model": 64,
        "model.n_head": 2, "data.m": 7, "role_overrides": {},
    }  # fmt: skip
