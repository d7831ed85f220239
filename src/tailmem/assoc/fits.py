"""Least-squares fits used for verdicts: power laws (log-log slopes) and exponential rates."""

from __future__ import annotations

from collections.abc import Sequence

import torch


def _as_tensor(values: Sequence[float] | torch.Tensor) -> torch.Tensor:
    return torch.as_tensor(values, dtype=torch.float64).reshape(-1)


def linear_fit(
    x: Sequence[float] | torch.Tensor, y: Sequence[float] | torch.Tensor
) -> tuple[float, float]:
    """Ordinary least squares ``y ≈ slope · x + intercept``; returns ``(slope, intercept)``."""
    xs, ys = _as_tensor(x), _as_tensor(y)
    if xs.numel() != ys.numel() or xs.numel() < 2:
        raise ValueError(f"linear_fit needs ≥ 2 paired points, got {xs.numel()} and {ys.numel()}")
    xc = xs - xs.mean()
    slope = float((xc * (ys - ys.mean())).sum() / xc.square().sum())
    return slope, float(ys.mean() - slope * xs.mean())


def loglog_slope(x: Sequence[float] | torch.Tensor, y: Sequence[float] | torch.Tensor) -> float:
    """The exponent ``b`` of ``y ≈ a · x^b`` (least squares on logs; needs positive values)."""
    xs, ys = _as_tensor(x), _as_tensor(y)
    if (xs <= 0).any() or (ys <= 0).any():
        raise ValueError("loglog_slope needs positive x and y")
    return linear_fit(xs.log(), ys.log())[0]


def exponential_rate(
    t: Sequence[float] | torch.Tensor, y: Sequence[float] | torch.Tensor
) -> tuple[float, float]:
    """``(rate, prefactor)`` of ``y ≈ prefactor · e^{−rate · t}`` (least squares on ``log y``)."""
    slope, intercept = linear_fit(t, _as_tensor(y).log())
    return -slope, float(torch.tensor(intercept).exp())
