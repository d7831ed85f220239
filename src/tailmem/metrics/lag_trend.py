"""A fitted trend of the exposure-lag ratio across model and data scale, and its extrapolation.

The map of Muon vs Adam (:mod:`tailmem.experiments.qa_map`) measures the exposure-lag ratio
(:mod:`tailmem.metrics.qa_gaps`) at many grid points, each as a seed mean ± standard error. This
module fits a power law through them,

    log(ratio) = b0 + sum_k b_k log(x_k),

with features ``x_k`` such as the model width and the facts per parameter, and predicts the
ratio with an interval at a point outside the grid (the paper's 160M model at m = 15).

Weights
    Weighted least squares on the log scale: a point's log-ratio has standard error
    ``se / ratio`` (delta method), and its weight is the inverse square of that. A point
    measured precisely pulls the fit harder than a noisy one.

Uncertainty
    Three seeds give rough standard errors, and a power law need not hold exactly, so the
    points may scatter about the fit more (or less) than their standard errors say. The
    coefficients' covariance is therefore scaled by ``s² = chi² / (n - p)`` (the residual
    variance in units of the standard errors; ``n`` points, ``p`` coefficients), and intervals
    use Student's t with ``n - p`` degrees of freedom. Under the model "every point's error is
    its standard error times one unknown common factor" these intervals are exact (the
    convention of weighted least squares in statsmodels and of ``scipy.optimize.curve_fit``
    without ``absolute_sigma``).

    - ``confidence``: where the trend itself lies at the point (the fitted line's band);
    - ``prediction``: where a new measurement there would fall, adding ``s² · se_new²`` for a
      measurement of log-scale standard error ``se_new`` (default: the typical standard error
      of the fitted points, ``sqrt(n / sum(w))``).

Both intervals are given on the ratio scale (``exp`` of the log-scale interval): asymmetric
about the predicted ratio, which is the fitted geometric mean.

Collinear features cannot be told apart: at one data-set size and depth, the facts per
parameter fall with the width squared, so a grid over width alone cannot fit both slopes.
:func:`fit_trend` refuses a design whose features are (nearly) collinear, naming them, and
:func:`independent_features` picks, in order of preference, the features a grid can resolve.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import stats

LEVEL = 0.95
"""Default coverage of the intervals."""
COLLINEAR_TOL = 1e-2
"""A design whose standardised features have a singular value below this fraction of the
largest is (nearly) collinear: the slopes would be set by rounding, not by data."""
INTERCEPT = "intercept"
Values = Sequence[float] | np.ndarray
"""One positive value per point: a list or a 1-D array."""


class TrendError(ValueError):
    """The points cannot determine the trend (too few, non-positive, collinear)."""


@dataclass(frozen=True)
class Interval:
    """``low`` and ``high`` of the ratio at coverage ``level``."""

    low: float
    high: float
    level: float


@dataclass(frozen=True)
class Prediction:
    """The trend at one point: the fitted ratio (geometric mean), its log and that log's
    standard error, the interval of the trend (``confidence``) and of a new measurement
    (``prediction``, with ``new_se`` the log-scale standard error assumed for it)."""

    at: Mapping[str, float]
    ratio: float
    log_ratio: float
    log_se: float
    confidence: Interval
    prediction: Interval
    new_se: float

    def to_json(self) -> dict[str, Any]:
        return {
            "at": dict(self.at),
            "ratio": self.ratio,
            "log_ratio": self.log_ratio,
            "log_se": self.log_se,
            "level": self.confidence.level,
            "confidence": [self.confidence.low, self.confidence.high],
            "prediction": [self.prediction.low, self.prediction.high],
            "new_se": self.new_se,
        }


@dataclass(frozen=True)
class TrendFit:
    """``log(ratio) = coef[0] + sum_k coef[k] log(at[features[k-1]])`` with the coefficients'
    (scaled) covariance, the fit's chi², degrees of freedom and scale ``s² = chi² / dof``."""

    features: tuple[str, ...]
    coef: np.ndarray
    cov: np.ndarray
    n_points: int
    chi2: float
    typical_se: float

    @property
    def dof(self) -> int:
        return self.n_points - len(self.coef)

    @property
    def scale(self) -> float:
        return self.chi2 / self.dof

    @property
    def se(self) -> np.ndarray:
        """Standard errors of the coefficients."""
        return np.sqrt(np.diag(self.cov))

    def slope(self, feature: str) -> tuple[float, float]:
        """The exponent of ``feature`` and its standard error."""
        k = 1 + self.features.index(feature)
        return float(self.coef[k]), float(self.se[k])

    def predict(
        self, at: Mapping[str, float], level: float = LEVEL, new_se: float | None = None
    ) -> Prediction:
        """The trend at ``at`` (a value for every feature) with its intervals."""
        missing = [f for f in self.features if f not in at]
        if missing:
            raise TrendError(f"predict: no value for {missing}; the trend's features are "
                             f"{list(self.features)}")  # fmt: skip
        x0 = _design([[float(at[f])] for f in self.features], 1)[0]
        log_ratio = float(x0 @ self.coef)
        var = float(x0 @ self.cov @ x0)
        new = self.typical_se if new_se is None else float(new_se)
        t = float(stats.t.ppf(0.5 + level / 2, self.dof))

        def interval(v: float) -> Interval:
            half = t * math.sqrt(v)
            return Interval(math.exp(log_ratio - half), math.exp(log_ratio + half), level)

        return Prediction(
            at={f: float(at[f]) for f in self.features},
            ratio=math.exp(log_ratio),
            log_ratio=log_ratio,
            log_se=math.sqrt(var),
            confidence=interval(var),
            prediction=interval(var + self.scale * new**2),
            new_se=new,
        )

    def to_json(self) -> dict[str, Any]:
        names = [INTERCEPT, *(f"log {f}" for f in self.features)]
        return {
            "model": "log(ratio) = "
            + " + ".join(["b0", *(f"b_{f}·log({f})" for f in self.features)]),
            "coefficients": dict(zip(names, self.coef.tolist(), strict=True)),
            "se": dict(zip(names, self.se.tolist(), strict=True)),
            "cov": self.cov.tolist(),
            "n_points": self.n_points,
            "dof": self.dof,
            "chi2": self.chi2,
            "scale": self.scale,
        }


def _design(columns: Sequence[Values], n: int) -> np.ndarray:
    """``[1, log x_1, ..., log x_K]`` for each of ``n`` points from K columns of positive
    values."""
    logs = [np.log(np.asarray(c, dtype=np.float64)) for c in columns]
    return np.column_stack([np.ones(n), *logs])


def _positive(name: str, values: np.ndarray) -> None:
    if values.ndim != 1 or not np.all(np.isfinite(values)) or np.any(values <= 0):
        raise TrendError(f"{name}: expected finite positive values, got {values.tolist()}")


def collinear(features: Mapping[str, Values], tol: float = COLLINEAR_TOL) -> bool:
    """Whether the logs of ``features`` (centred, scaled to unit length) are (nearly) linearly
    dependent, or one of them is (nearly) constant: their slopes cannot all be fitted."""
    if not features:
        return False
    columns = []
    for values in features.values():
        column = np.log(np.asarray(values, dtype=np.float64))
        column = column - column.mean()
        norm = np.linalg.norm(column)
        if norm < tol:  # constant: indistinguishable from the intercept
            return True
        columns.append(column / norm)
    singular = np.linalg.svd(np.column_stack(columns), compute_uv=False)
    return bool(singular[-1] < tol * singular[0]) or len(columns) > len(columns[0]) - 1


def independent_features(features: Mapping[str, Values], tol: float = COLLINEAR_TOL) -> list[str]:
    """The features, in the given order of preference, that a fit can resolve: each is kept
    unless it is (nearly) constant or collinear with those kept before it."""
    kept: list[str] = []
    for name in features:
        trial = {f: features[f] for f in [*kept, name]}
        if not collinear(trial, tol):
            kept.append(name)
    return kept


def fit_trend(
    features: Mapping[str, Sequence[float]],
    ratio: Sequence[float],
    se: Sequence[float],
) -> TrendFit:
    """Weighted least squares of ``log(ratio)`` on the logs of ``features`` (see the module doc).

    ``ratio`` and ``se`` are each point's lag ratio and its standard error (both positive);
    ``features`` maps names to one positive value per point. Needs at least two points more
    than features (an intercept, a slope each, and one degree of freedom for the scatter).
    """
    y = np.asarray(ratio, dtype=np.float64)
    s = np.asarray(se, dtype=np.float64)
    _positive("ratio", y)
    _positive("se", s)
    if s.shape != y.shape:
        raise TrendError(f"se has {len(s)} values for {len(y)} ratios")
    columns = {name: np.asarray(v, dtype=np.float64) for name, v in features.items()}
    for name, column in columns.items():
        _positive(name, column)
        if column.shape != y.shape:
            raise TrendError(f"{name} has {len(column)} values for {len(y)} ratios")
    p = 1 + len(columns)
    if len(y) < p + 1:
        raise TrendError(
            f"a trend in {len(columns)} feature(s) ({', '.join(columns) or 'none'}) has {p} "
            f"coefficients and needs at least {p + 1} points (one to estimate the scatter); "
            f"got {len(y)}"
        )
    if collinear(columns):
        raise TrendError(
            f"features {list(columns)} are (nearly) collinear or constant over these points; "
            "fit fewer (see independent_features)"
        )
    x = _design(list(columns.values()), len(y))
    log_y = np.log(y)
    weights = (y / s) ** 2  # 1 / (se of log ratio)^2
    root = np.sqrt(weights)
    coef, *_ = np.linalg.lstsq(x * root[:, None], log_y * root, rcond=None)
    residuals = (log_y - x @ coef) * root
    chi2 = float(residuals @ residuals)
    unscaled = np.linalg.inv((x * weights[:, None]).T @ x)
    dof = len(y) - p
    return TrendFit(
        features=tuple(columns),
        coef=coef,
        cov=unscaled * chi2 / dof,
        n_points=len(y),
        chi2=chi2,
        typical_se=math.sqrt(len(y) / float(weights.sum())),
    )
