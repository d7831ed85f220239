"""Learning-rate schedules as pure functions of the step.

A schedule returns a multiplier in [0, 1] applied to each parameter group's base learning rate,
so optimisers with several groups (Muon and Adam side by side) share one shape. Step ``s`` is
0-based: the multiplier returned for ``s`` is used by the ``s``-th optimiser update.

- ``constant``: linear warmup to 1, then 1.
- ``cosine``: linear warmup to 1, then half a cosine from 1 down to ``min_frac`` at the last step.
- ``wsd`` (warmup-stable-decay): linear warmup to 1, stay at 1, and over the last
  ``round(decay_frac · steps)`` steps decay linearly to ``min_frac`` at the last step.

Warmup is ``(s + 1) / warmup_steps`` for ``s < warmup_steps`` so that the first update is not 0.
"""

from __future__ import annotations

import math

from tailmem.errors import ConfigError

SCHEDULES = ("constant", "cosine", "wsd")


def check_schedule(
    name: str, steps: int, warmup_steps: int, decay_frac: float, min_frac: float
) -> None:
    """Raise :class:`ConfigError` if the schedule parameters are inconsistent."""
    if name not in SCHEDULES:
        raise ConfigError(f"schedule must be one of {', '.join(SCHEDULES)}, got {name!r}")
    if not 0 <= warmup_steps <= steps:
        raise ConfigError(f"warmup_steps must be in [0, steps={steps}], got {warmup_steps}")
    if not 0.0 <= min_frac <= 1.0:
        raise ConfigError(f"min_lr_frac must be in [0, 1], got {min_frac}")
    if name == "wsd":
        if not 0.0 < decay_frac <= 1.0:
            raise ConfigError(f"decay_frac must be in (0, 1], got {decay_frac}")
        if warmup_steps + round(decay_frac * steps) > steps:
            raise ConfigError(
                f"warmup_steps ({warmup_steps}) + decay steps ({round(decay_frac * steps)}) "
                f"exceed steps ({steps})"
            )


def lr_multiplier(
    step: int,
    *,
    name: str,
    steps: int,
    warmup_steps: int = 0,
    decay_frac: float = 0.2,
    min_frac: float = 0.0,
) -> float:
    """Multiplier of the base learning rate for the 0-based update ``step`` of ``steps``."""
    if step < warmup_steps:
        return (step + 1) / warmup_steps
    if name == "constant":
        return 1.0
    last = steps - 1
    if name == "cosine":
        span = last - warmup_steps
        progress = 1.0 if span <= 0 else (step - warmup_steps) / span
        return min_frac + (1.0 - min_frac) * 0.5 * (1.0 + math.cos(math.pi * min(progress, 1.0)))
    if name == "wsd":
        decay_steps = round(decay_frac * steps)
        decay_start = steps - decay_steps
        if step < decay_start:
            return 1.0
        progress = 1.0 if decay_steps <= 1 else (step - decay_start) / (decay_steps - 1)
        return 1.0 - (1.0 - min_frac) * min(progress, 1.0)
    raise ConfigError(f"schedule must be one of {', '.join(SCHEDULES)}, got {name!r}")
