"""The lag-ratio trend: weighted least squares on logs, its intervals and its refusals."""

import math

import numpy as np
import pytest
from scipy.optimize import curve_fit

from tailmem.metrics.lag_trend import (
    TrendError,
    collinear,
    fit_trend,
    independent_features,
)

TRUE = np.array([0.3, 0.25, -0.15])  # log ratio = 0.3 + 0.25 log width - 0.15 log facts/param
PAPER = {"width": 768.0, "facts_per_param": 2.3e-3}


def _points(rng, n):
    width = np.exp(rng.uniform(math.log(64), math.log(512), n))
    fpp = np.exp(rng.uniform(math.log(1e-4), math.log(1e-2), n))
    log_se = rng.uniform(0.05, 0.2, n)  # relative standard errors of the ratios
    return {"width": width, "facts_per_param": fpp}, log_se


def _truth(features):
    return (
        TRUE[0]
        + TRUE[1] * np.log(features["width"])
        + TRUE[2] * np.log(features["facts_per_param"])
    )


def _draw(rng, features, log_se, sigma):
    """Ratios whose log has error sigma × the stated standard error; se on the ratio scale."""
    log_ratio = _truth(features) + sigma * log_se * rng.standard_normal(len(log_se))
    ratio = np.exp(log_ratio)
    return ratio, log_se * ratio


def test_recovers_known_coefficients_within_their_se_and_matches_curve_fit():
    rng = np.random.default_rng(0)
    features, log_se = _points(rng, 30)
    ratio, se = _draw(rng, features, log_se, sigma=1.0)
    fit = fit_trend(features, ratio, se)
    assert np.all(np.abs(fit.coef - TRUE) < 3 * fit.se), (fit.coef, fit.se)
    assert fit.slope("width")[0] == pytest.approx(fit.coef[1])
    # the same fit by scipy's nonlinear least squares (relative sigma: scaled covariance)
    x = np.log(np.column_stack([features["width"], features["facts_per_param"]])).T

    def model(x, b0, b1, b2):
        return b0 + b1 * x[0] + b2 * x[1]

    popt, pcov = curve_fit(model, x, np.log(ratio), sigma=se / ratio, absolute_sigma=False)
    np.testing.assert_allclose(fit.coef, popt, rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(fit.cov, pcov, rtol=1e-5, atol=1e-12)
    assert fit.dof == 27 and fit.scale == pytest.approx(fit.chi2 / 27)


def test_standardised_errors_of_the_slopes_have_unit_spread_over_draws():
    rng = np.random.default_rng(1)
    features, log_se = _points(rng, 12)
    z = []
    for _ in range(300):
        fit = fit_trend(features, *_draw(rng, features, log_se, sigma=2.5))
        z.append((fit.coef - TRUE) / fit.se)
    z = np.array(z)
    # t with 9 dof has sd sqrt(9/7) = 1.13; with errors 2.5x the stated SE an unscaled
    # covariance would give 2.5
    assert np.all(np.abs(z.mean(axis=0)) < 0.2)
    assert np.all(np.abs(z.std(axis=0) - math.sqrt(9 / 7)) < 0.15), z.std(axis=0)


@pytest.mark.parametrize("level", [0.68, 0.95])
def test_intervals_cover_the_truth_at_their_level_over_repeated_draws(level):
    """Confidence interval vs the true trend at the (extrapolated) paper point; prediction
    interval vs a new measurement there. Errors are 1.8x the stated standard errors, which the
    scaled covariance must absorb (an unscaled interval covers far less: checked too)."""
    rng = np.random.default_rng(2)
    features, log_se = _points(rng, 10)
    sigma, draws, new_se = 1.8, 600, 0.1
    truth = (
        TRUE[0] + TRUE[1] * math.log(PAPER["width"]) + TRUE[2] * math.log(PAPER["facts_per_param"])
    )
    conf = pred = naive = 0
    for _ in range(draws):
        fit = fit_trend(features, *_draw(rng, features, log_se, sigma))
        p = fit.predict(PAPER, level=level, new_se=new_se)
        conf += p.confidence.low <= math.exp(truth) <= p.confidence.high
        measured = math.exp(truth + sigma * new_se * rng.standard_normal())
        pred += p.prediction.low <= measured <= p.prediction.high
        half = 1.959964 * p.log_se / math.sqrt(fit.scale)  # z interval, unscaled covariance
        naive += abs(p.log_ratio - truth) <= half
    band = 3 * math.sqrt(level * (1 - level) / draws)
    assert abs(conf / draws - level) < band, conf / draws
    assert abs(pred / draws - level) < band, pred / draws
    assert naive / draws < 0.85


def test_prediction_is_the_fitted_line_and_its_intervals_nest():
    rng = np.random.default_rng(3)
    features, log_se = _points(rng, 8)
    fit = fit_trend(features, *_draw(rng, features, log_se, sigma=1.0))
    p = fit.predict(PAPER)
    expected = fit.coef @ [1.0, math.log(768.0), math.log(2.3e-3)]
    assert p.log_ratio == pytest.approx(expected)
    assert p.ratio == pytest.approx(math.exp(expected))
    assert p.prediction.low < p.confidence.low < p.ratio < p.confidence.high < p.prediction.high
    assert p.new_se == pytest.approx(math.sqrt(8 / np.sum(1 / log_se**2)))
    assert p.to_json()["confidence"] == [p.confidence.low, p.confidence.high]
    assert fit.to_json()["dof"] == 5


def test_refuses_fewer_points_than_it_needs():
    with pytest.raises(TrendError, match=r"needs at least 4 points.*got 3"):
        fit_trend({"width": [64, 128, 256], "facts_per_param": [1e-3, 3e-3, 2e-3]},
                  [1.2, 1.5, 1.9], [0.1, 0.1, 0.1])  # fmt: skip
    with pytest.raises(TrendError, match="needs at least 3 points"):
        fit_trend({"width": [64, 128]}, [1.2, 1.5], [0.1, 0.1])


def test_refuses_bad_values_and_unknown_prediction_points():
    with pytest.raises(TrendError, match="ratio: expected finite positive"):
        fit_trend({"width": [64, 128, 256]}, [1.2, -1.0, 2.0], [0.1, 0.1, 0.1])
    with pytest.raises(TrendError, match="se: expected finite positive"):
        fit_trend({"width": [64, 128, 256]}, [1.2, 1.0, 2.0], [0.1, 0.0, 0.1])
    fit = fit_trend({"width": [64, 128, 256, 512]}, [1.2, 1.4, 1.9, 2.5], [0.1] * 4)
    with pytest.raises(TrendError, match="no value for \\['width'\\]"):
        fit.predict({"depth": 12})


def test_collinear_features_are_refused_and_the_resolvable_ones_picked():
    width = np.array([64.0, 128.0, 256.0, 512.0, 128.0, 256.0])
    params = 24 * width**2 + 10 * width  # blocks of a 2-layer model: ~ width squared
    features = {"width": width, "facts_per_param": 768 / params, "m": np.full(6, 7.0)}
    assert collinear({k: features[k] for k in ("width", "facts_per_param")})
    assert collinear({"m": features["m"]})
    assert independent_features(features) == ["width"]
    with pytest.raises(TrendError, match="collinear"):
        fit_trend({k: features[k] for k in ("width", "facts_per_param")}, np.ones(6) * 1.5,
                  np.ones(6) * 0.1)  # fmt: skip
    # facts vary independently of width when m varies too: both slopes can be fitted
    facts = 6 * 2.0 ** np.array([6, 6, 7, 7, 8, 8])
    both = {"width": width, "facts_per_param": facts / params}
    assert not collinear(both)
    assert independent_features(both) == ["width", "facts_per_param"]
