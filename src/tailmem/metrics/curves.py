"""Reading training curves: when does a curve first reach a target value?"""

from __future__ import annotations

import math
from collections.abc import Sequence


def first_crossing(steps: Sequence[float], values: Sequence[float], target: float) -> float | None:
    """The first step at which a decreasing-ish curve reaches ``target`` (``value <= target``).

    Between two evaluations the curve is taken to be linear, so the answer is interpolated:
    with ``values[i-1] > target >= values[i]`` it is
    ``steps[i-1] + (values[i-1] - target) / (values[i-1] - values[i]) · (steps[i] - steps[i-1])``.
    Non-finite values (a diverged run) never count as reaching the target. Returns None if the
    curve never gets there, ``steps[0]`` if it starts there.
    """
    if len(steps) != len(values):
        raise ValueError(f"steps ({len(steps)}) and values ({len(values)}) differ in length")
    previous: tuple[float, float] | None = None
    for step, value in zip(steps, values, strict=True):
        if not math.isfinite(value):
            previous = None
            continue
        if value <= target:
            if previous is None:
                return float(step)
            s0, v0 = previous
            return s0 + (v0 - target) / (v0 - value) * (step - s0)
        previous = (float(step), float(value))
    return None
