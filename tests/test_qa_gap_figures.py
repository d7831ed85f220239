"""Figures of the knowledge-QA gap measures: they draw the measured numbers and save as PNG."""

from __future__ import annotations

import numpy as np
import pytest

from tailmem.metrics.qa_gaps import (
    FTACurves,
    band,
    exposures_per_group,
    gap_measures,
    paper_curves,
)
from tailmem.plotting import pyplot
from tailmem.report.qa_gap_figures import fta_vs_exposures_figure, lag_ratio_figure
from tailmem.rundir import RunDir


@pytest.fixture
def curves():
    """Three seeds; Adam's curve is Muon's stretched 2x in exposures, plus seed noise."""
    steps = np.arange(0, 101, 10)
    exposures = exposures_per_group([4, 2, 1], steps, steps_per_epoch=10.0)
    rng = np.random.default_rng(0)
    muon = 1 - np.exp(-exposures / 8) + rng.normal(0, 0.02, (3, 3, len(steps)))
    adam = 1 - np.exp(-exposures / 16) + rng.normal(0, 0.02, (3, 3, len(steps)))
    return FTACurves({"muon": np.clip(muon, 0, 1), "adam": np.clip(adam, 0, 1)}, steps, exposures)


def _png_size(path):
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    return int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")


def test_fta_figure_draws_each_arms_seed_mean_per_group_and_saves_a_png(curves, tmp_path):
    fig = fta_vs_exposures_figure(curves, "muon", "adam", groups=[0, 2], taus=(0.3, 0.5))
    (ax,) = fig.axes
    data_lines = [line for line in ax.get_lines() if line.get_label().startswith(("muon", "adam"))]
    assert len(data_lines) == 4
    adam_rarest = next(line for line in data_lines if line.get_label() == "adam, group 2")
    mean, _ = band(curves.fta["adam"][:, 2, :])
    np.testing.assert_allclose(adam_rarest.get_ydata(), mean[1:])  # zero exposures left out
    assert adam_rarest.get_linestyle() == "--" and len(ax.collections) == 4  # seed bands
    (png, _) = RunDir(tmp_path).save_figure(fig, "fta_vs_exposures")
    width, height = _png_size(png)
    assert width > 300 and height > 200


def test_lag_ratio_figure_marks_measured_means_and_the_papers_bounds(curves, tmp_path):
    pair = gap_measures(curves).pair("muon", "adam")
    paper = gap_measures(paper_curves("arxiv-v2"), pairs=[("muon", "adam")]).pair("muon", "adam")
    assert pair is not None and paper is not None
    fig = lag_ratio_figure(pair, reference=paper)
    (ax,) = fig.axes
    ours = [r for r in pair.lag_ratios if r.group == 0]
    assert all(r.n_measured == 3 for r in ours)
    bars = {bar.get_label(): bar for bar in ax.containers}  # errorbar containers
    drawn = bars["group 0"].lines[0]
    # The geometric mean over seeds, with its 95 % t interval as the error bar.
    np.testing.assert_allclose(drawn.get_ydata(), [r.ratio for r in ours])
    assert np.all(np.abs(drawn.get_ydata() - 2.0) < 0.4)  # the 2x stretch, through the noise
    (caps,) = bars["group 0"].lines[2]  # the vertical bars: one segment per tau
    spans = [segment[:, 1] for segment in caps.get_segments()]
    intervals = [r.interval() for r in ours]
    np.testing.assert_allclose(spans, intervals)
    # paper, group 15: only lower bounds (Adam never reaches tau), drawn as up-triangles
    rarest = bars["paper group 15"].lines[0]
    assert rarest.get_marker() == "^" and rarest.get_color() == "grey"
    np.testing.assert_allclose(rarest.get_ydata()[0], 10000 / (2000 + 0.16 / 0.18 * 3000))
    (png, _) = RunDir(tmp_path).save_figure(fig, "lag_ratio")
    assert _png_size(png)[0] > 300
    pyplot().close("all")


def test_arms_are_named_by_their_labels_never_their_ids(curves):
    labels = {"muon": "Muon", "adam": "Adam (own rate)"}
    fig = fta_vs_exposures_figure(curves, "muon", "adam", groups=[2], labels=labels)
    (ax,) = fig.axes
    assert [line.get_label() for line in ax.get_lines()] == [
        "Muon, group 2", "Adam (own rate), group 2"
    ]  # fmt: skip
    assert ax.get_title() == "Muon (solid) vs Adam (own rate) (dashed)"
    pair = gap_measures(curves).pair("muon", "adam")
    assert pair is not None
    (ax,) = lag_ratio_figure(pair, labels=labels).axes
    assert ax.get_ylabel() == "exposures Adam (own rate) needs / Muon needs"
    assert "adam" not in ax.get_title() and not ax.texts  # measured: no "no data" note
    pyplot().close("all")


def test_a_pair_that_reached_no_level_says_so_instead_of_an_empty_axes(curves):
    """A smoke run's few steps: neither arm brings any group to a level, so no ratio is drawn;
    the axes say why, and no empty legend box is drawn (the paper's reference still shows)."""
    flat = FTACurves({arm: np.zeros_like(fta) for arm, fta in curves.fta.items()},
                     curves.steps, curves.exposures)  # fmt: skip
    pair = gap_measures(flat).pair("muon", "adam")
    assert pair is not None
    (ax,) = lag_ratio_figure(pair, labels={"muon": "Muon", "adam": "Adam"}).axes
    assert [t.get_text() for t in ax.texts] == [
        "no data: neither Muon nor Adam brought any group to a level τ"
    ]
    assert ax.get_legend() is None and not ax.containers
    paper = gap_measures(paper_curves("arxiv-v2"), pairs=[("muon", "adam")]).pair("muon", "adam")
    (ax,) = lag_ratio_figure(pair, reference=paper).axes
    assert ax.texts and ax.get_legend() is not None  # the paper's points, and still the note
    pyplot().close("all")
