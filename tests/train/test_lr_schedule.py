"""Learning-rate multipliers at the steps where each schedule changes shape."""

from __future__ import annotations

import itertools
import math

import pytest

from tailmem.errors import ConfigError
from tailmem.train.loop import TrainConfig
from tailmem.train.schedule import check_schedule, lr_multiplier


def mult(step: int, name: str, steps: int, **kw) -> float:
    return lr_multiplier(step, name=name, steps=steps, **kw)


def test_constant_with_linear_warmup():
    values = [mult(s, "constant", 100, warmup_steps=10) for s in range(100)]
    assert values[0] == pytest.approx(0.1)
    assert values[4] == pytest.approx(0.5)
    assert values[9] == 1.0
    assert set(values[9:]) == {1.0}


def test_constant_without_warmup_is_one_from_the_first_step():
    assert [mult(s, "constant", 5) for s in range(5)] == [1.0] * 5


def test_cosine_endpoints_midpoint_and_monotone():
    kw = {"warmup_steps": 10, "min_frac": 0.1}
    assert mult(9, "cosine", 111, **kw) == 1.0
    assert mult(10, "cosine", 111, **kw) == 1.0
    assert mult(60, "cosine", 111, **kw) == pytest.approx(0.55)  # halfway: (1 + 0.1) / 2
    assert mult(35, "cosine", 111, **kw) == pytest.approx(
        0.1 + 0.9 * (1 + math.cos(math.pi / 4)) / 2
    )
    assert mult(110, "cosine", 111, **kw) == pytest.approx(0.1)
    after = [mult(s, "cosine", 111, **kw) for s in range(10, 111)]
    assert all(a >= b for a, b in itertools.pairwise(after))


def test_wsd_stable_then_linear_decay_over_the_last_fraction():
    kw = {"warmup_steps": 10, "decay_frac": 0.2, "min_frac": 0.0}
    assert mult(0, "wsd", 100, **kw) == pytest.approx(0.1)
    assert [mult(s, "wsd", 100, **kw) for s in range(9, 81)] == [1.0] * 72
    assert mult(90, "wsd", 100, **kw) == pytest.approx(1 - 10 / 19)
    assert mult(99, "wsd", 100, **kw) == pytest.approx(0.0)
    decay = [mult(s, "wsd", 100, **kw) for s in range(80, 100)]
    steps_down = [a - b for a, b in itertools.pairwise(decay)]
    assert steps_down == pytest.approx([1 / 19] * 19)  # linear


def test_train_config_lr_at_uses_its_schedule():
    cfg = TrainConfig(steps=100, schedule="wsd", warmup_steps=0, decay_frac=0.5, min_lr_frac=0.2)
    assert cfg.lr_at(49) == 1.0
    assert cfg.lr_at(99) == pytest.approx(0.2)


@pytest.mark.parametrize(
    ("args", "match"),
    [
        (("linear", 100, 0, 0.2, 0.0), "schedule"),
        (("cosine", 100, 101, 0.2, 0.0), "warmup_steps"),
        (("cosine", 100, 0, 0.2, 1.5), "min_lr_frac"),
        (("wsd", 100, 0, 0.0, 0.0), "decay_frac"),
        (("wsd", 100, 90, 0.2, 0.0), "exceed"),
    ],
)
def test_inconsistent_schedules_raise_config_error(args, match):
    with pytest.raises(ConfigError, match=match):
        check_schedule(*args)
