"""The lag-ratio trend's intervals use Student's t with n − p degrees of freedom, not the normal.

With few points the two differ several-fold (95 %: t has 12.71 at 1 degree of freedom and 4.30
at 2, the normal 1.96), so these checks are decisive where the coverage test of
``test_lag_trend.py`` (10 points, 7 degrees of freedom) separates t from z by a hair. The t
quantiles are written from their closed forms, independent of scipy.
"""

import math

import numpy as np
import pytest

from tailmem.metrics.lag_trend import LEVEL, fit_trend

WIDTHS = [64.0, 128.0, 256.0, 512.0]


def t_quantile(q: float, dof: int) -> float:
    """Student's t quantile in closed form: 1 degree of freedom is the Cauchy distribution,
    2 has the CDF ``1/2 + x / (2·sqrt(2 + x²))``."""
    if dof == 1:
        return math.tan(math.pi * (q - 0.5))
    if dof == 2:
        return (2 * q - 1) / math.sqrt(2 * q * (1 - q))
    raise ValueError(f"dof: got {dof}; expected 1 or 2")


@pytest.mark.parametrize("n_points", [3, 4])
def test_interval_half_widths_are_the_t_quantile_times_the_standard_errors(n_points):
    widths = WIDTHS[:n_points]
    ratio = [1.3, 1.55, 1.7, 2.3][:n_points]
    fit = fit_trend({"width": widths}, ratio, [0.1, 0.2, 0.15, 0.3][:n_points])
    dof = n_points - 2
    assert fit.dof == dof
    p = fit.predict({"width": 768.0}, new_se=0.05)
    t = t_quantile(0.5 + LEVEL / 2, dof)
    assert t > 2 * 1.96  # the normal quantile would be less than half of it
    half = math.log(p.confidence.high) - p.log_ratio
    assert half == pytest.approx(t * p.log_se, rel=1e-9)
    assert p.log_ratio - math.log(p.confidence.low) == pytest.approx(half, rel=1e-9)
    predicted = math.log(p.prediction.high) - p.log_ratio
    assert predicted == pytest.approx(t * math.sqrt(p.log_se**2 + fit.scale * 0.05**2), rel=1e-9)


def test_the_confidence_interval_covers_the_truth_at_its_level_with_two_degrees_of_freedom():
    """Four points, one feature: 2 degrees of freedom. The t interval covers the true trend in
    95 % of draws; one with the normal quantile would cover only P(|t₂| < 1.96) = 81 %."""
    rng = np.random.default_rng(5)
    log_se = np.array([0.1, 0.2, 0.15, 0.3])
    draws, at = 1000, 768.0
    truth = 0.2 + 0.3 * math.log(at)
    covered = 0
    for _ in range(draws):
        log_ratio = 0.2 + 0.3 * np.log(WIDTHS) + 1.7 * log_se * rng.standard_normal(4)
        ratio = np.exp(log_ratio)
        p = fit_trend({"width": WIDTHS}, ratio, log_se * ratio).predict({"width": at})
        covered += p.confidence.low <= math.exp(truth) <= p.confidence.high
    z_coverage = 2 * (0.5 + 1.96 / (2 * math.sqrt(2 + 1.96**2))) - 1
    assert z_coverage < 0.82
    band = 3 * math.sqrt(LEVEL * (1 - LEVEL) / draws)
    assert abs(covered / draws - LEVEL) < band, covered / draws
