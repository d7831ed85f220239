"""Figures of the Muon-vs-Adam map: the heat maps draw each cell's number, mark bounds, and the
trend figure draws the fit through (adjusted) points and the extrapolated point's intervals."""

import numpy as np
import pytest

from tailmem.metrics.lag_trend import fit_trend
from tailmem.plotting import pyplot
from tailmem.report.qa_map_figures import Cell, heat_map_figure, trend_figure
from tailmem.rundir import RunDir


def _texts(ax):
    return {(round(t.get_position()[0]), round(t.get_position()[1])): t.get_text()
            for t in ax.texts}  # fmt: skip


def test_heat_map_annotates_value_and_interval_hatches_bounds_and_greys_missing_cells(tmp_path):
    cells = {
        (64, 3): Cell(1.5, 1.3, 1.7),
        (128, 3): Cell(2.25, 1.8, 2.8),
        (64, 6): Cell(1.8, kind="lower"),
        (128, 6): None,
    }
    fig = heat_map_figure(cells, ("width", [64, 128]), ("exposures", [3, 6]),
                          title="lag ratio", colorbar="ratio", center=1.0, log=True)  # fmt: skip
    ax = fig.axes[0]
    texts = _texts(ax)
    assert texts[0, 0] == "1.50\n[1.30, 1.70]" and texts[1, 0] == "2.25\n[1.80, 2.80]"
    assert texts[0, 1] == "≥ 1.80" and texts[1, 1] == "—"
    hatched = [p for p in ax.patches if p.get_hatch() == "//"]
    assert len(hatched) == 1 and hatched[0].get_xy() == (-0.5, 0.5)  # the bound cell
    (image,) = ax.images
    data = image.get_array()
    np.testing.assert_allclose(data[0], [1.5, 2.25])
    assert data.mask[1, 1] and data[1, 0] == pytest.approx(1.8)
    # colours symmetric about 1 on the log scale, reaching the largest distance from it
    assert image.norm.vmin * image.norm.vmax == pytest.approx(1.0)
    assert image.norm.vmax == pytest.approx(2.25)
    png, svg = RunDir(tmp_path).save_figure(fig, "heat")
    assert png.read_bytes()[:4] == b"\x89PNG" and svg.exists()


@pytest.fixture
def closing():
    """Figures a test draws but does not save are closed after it (pyplot keeps them open)."""
    yield
    pyplot().close("all")


def test_heat_map_of_gaps_is_linear_about_zero(closing):
    cells = {("a", 1): Cell(0.3, 0.2, 0.4), ("b", 1): Cell(-0.1, -0.14, -0.06), ("c", 1): Cell(0.2)}
    fig = heat_map_figure(cells, ("x", ["a", "b", "c"]), ("y", [1]), title="gap",
                          colorbar="gap", center=0.0, digits=3)  # fmt: skip
    (image,) = fig.axes[0].images
    assert (image.norm.vmin, image.norm.vmax) == pytest.approx((-0.3, 0.3))
    texts = _texts(fig.axes[0])
    assert texts[1, 0] == "-0.100\n[-0.140, -0.060]" and texts[2, 0] == "0.200"  # no interval


def test_trend_figure_draws_the_fit_through_points_moved_to_the_target(closing):
    rng = np.random.default_rng(0)
    width = np.array([64.0, 128, 256, 64, 128, 256])
    fpp = np.array([1e-3, 3e-4, 1e-4, 4e-3, 1e-3, 3e-4])
    ratio = np.exp(0.2 + 0.2 * np.log(width) - 0.1 * np.log(fpp) + rng.normal(0, 0.05, 6))
    se = 0.05 * ratio
    features = {"width": width, "facts_per_param": fpp}
    fit = fit_trend(features, ratio, se)
    at = {"width": 768.0, "facts_per_param": 2.3e-3}
    fig = trend_figure(fit, features, ratio, se, along="width", at=at, at_label="paper",
                       published={"paper arXiv v2": 4.0}, title="trend")  # fmt: skip
    ax = fig.axes[0]
    bars = ax.containers[0]
    slope, _ = fit.slope("facts_per_param")
    np.testing.assert_allclose(bars.lines[0].get_ydata(), ratio * (2.3e-3 / fpp) ** slope)
    fitted = next(line for line in ax.get_lines() if line.get_label() == "fitted trend")
    x_line = fitted.get_xdata()
    assert x_line[0] == pytest.approx(64) and x_line[-1] == pytest.approx(768)
    expected = [fit.predict({**at, "width": v}).ratio for v in x_line]
    np.testing.assert_allclose(fitted.get_ydata(), expected)
    point = fit.predict(at)
    diamond = next(line for line in ax.get_lines() if line.get_marker() == "D")
    assert diamond.get_ydata()[0] == pytest.approx(point.ratio)
    assert diamond.get_label().startswith(f"paper: {point.ratio:.2f}")
    intervals = [line.get_ydata() for line in ax.get_lines() if len(line.get_xdata()) == 2
                 and line.get_xdata()[0] == 768.0]  # fmt: skip
    lows = sorted(float(y[0]) for y in intervals)
    assert lows == pytest.approx(sorted([point.prediction.low, point.confidence.low]))
    star = next(line for line in ax.get_lines() if line.get_label().startswith("paper arXiv"))
    assert star.get_ydata()[0] == 4.0
    assert ax.get_yscale() == "log"
