"""Strict JSON where the LM studies write it: a diverged run's NaN is null plus a status."""

import json
import math

import pytest

from tailmem.lm.subrun import _json_text


def _reject(constant):
    raise ValueError(constant)


def test_a_diverged_result_is_written_as_strict_json():
    result = {"status": "diverged", "final": {"val_loss": math.nan, "step": 12},
              "evals": [{"step": 0, "val_loss": math.inf}]}  # fmt: skip
    text = _json_text(result)
    parsed = json.loads(text, parse_constant=_reject)
    assert parsed["final"] == {"val_loss": None, "val_loss_status": "nan", "step": 12}
    assert parsed["evals"][0]["val_loss"] is None
    with pytest.raises(ValueError):
        json.loads(json.dumps(result), parse_constant=_reject)  # what the old writer produced
