"""The tail-learning benchmark at smoke size, with a user's optimiser given by import path only:
it trains as an arm of both QA levels, runs on the associative memory, and sits on the
leaderboard with its family and source."""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tailmem.config import load_config
from tailmem.errors import ConfigError
from tailmem.experiments import optim_bench

HERE = Path(__file__).resolve().parent
SRC = HERE.parents[1] / "src"


def test_the_smoke_benchmark_places_a_users_optimiser_on_the_leaderboard(tmp_path):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(SRC), str(HERE)]), "CI": "true"}
    out = tmp_path / "bench"
    args = ["optimizers=[muon, adam, toy]", "optim.toy.factory=toy_optimizer:DampedSign",
            "optim.toy.lr=[0.01]", "optim.toy.damping=0.5"]  # fmt: skip
    done = subprocess.run(
        [sys.executable, "-m", "tailmem", "run", "optim-bench", "--preset", "smoke", "--out",
         str(out), *args], env=env, capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    with open(out / "leaderboard.csv") as fh:
        board = list(csv.DictReader(fh))
    levels = {row["level"] for row in board}
    assert len(levels) == 2
    toy = [row for row in board if row["optimizer"] == "toy"]
    assert len(toy) == 2 and all(row["family"] == "yours" for row in toy)
    assert toy[0]["source"] == "toy_optimizer:DampedSign (yours)"
    assert all(float(row["step_time_vs_adam"]) > 0 for row in board)
    specs = [json.loads(p.read_text()) for p in out.glob("points/*/runs/*/toy/*/spec.json")]
    assert specs and all(s["hparams"]["toy"]["damping"] == 0.5 for s in specs)
    with open(out / "memory.csv") as fh:
        memory = [row for row in csv.DictReader(fh) if row["optimizer"] == "toy"]
    assert len(memory) == 3
    claims = {c["id"]: c for c in json.loads((out / "claims.json").read_text())}
    assert set(claims) == {"kunstner.heavy_tail_adam", "vasudeva.spectral_gd"}
    assert claims["kunstner.heavy_tail_adam"]["verdict"] == "not measured"  # no sgd here


@pytest.mark.parametrize(
    ("override", "needle"),
    [
        ("optimizers=[adam, sgd]", "optimizers: got ['adam', 'sgd']; expected muon and adam"),
        ("optimizers=[muon, adam, nosuch]", "unknown optimiser kind 'nosuch'"),
        ("optim.lion.lr=[1e-4]", "optim.lion.lr: lion is not in optimizers"),
        ("memory.dim=24", "memory.dim: got 24; expected 1..facts-1"),
    ],
)
def test_bad_benchmark_configs_are_refused_in_one_line(override, needle):
    with pytest.raises(ConfigError) as err:
        load_config(optim_bench.Config, "optim-bench", "smoke", [override])
    assert needle in str(err.value) and "\n" not in str(err.value)


def test_the_leaderboard_figure_names_every_point_of_a_cluster_without_overlap():
    from matplotlib.text import Text

    from tailmem.experiments.optim_bench.board import figure

    adam = {"optimizer": "adam", "label": "Adam", "family": "elementwise", "step_time_vs_adam": 1}
    rows = [
        {"optimizer": f"opt{i}", "label": f"Optimiser {i}", "family": "sign",
         "step_time_vs_adam": 1.0 + 0.002 * i, "lag_vs_adam_0.5": 1.9 + 0.01 * i,
         "lag_vs_adam_0.5_se": 0.02}
        for i in range(8)
    ] + [adam]  # fmt: skip
    fig = figure(rows, "test")
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    (ax,) = [a for a in fig.axes if a.texts]
    boxes = [Text.get_window_extent(t, renderer) for t in ax.texts]  # the words, not the leaders
    assert sorted(t.get_text() for t in ax.texts) == sorted(r["label"] for r in rows)
    for i, a in enumerate(boxes):
        for b in boxes[i + 1 :]:
            assert not a.overlaps(b), (a, b)
