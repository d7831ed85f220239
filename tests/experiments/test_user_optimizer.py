"""A user's optimiser enters the LM studies from the command line alone: registered by import
path (``optim.<name>.factory``), routed by an arm's recipe, its hyper-parameters checked against
its signature before anything is written and recorded in every sub-run's ``spec.json``."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
SRC = HERE.parents[1] / "src"
TOY = ["optim.toy.factory=toy_optimizer:DampedSign", "optim.toy.lr=0.01", "optim.toy.damping=0.5"]


def tailmem(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(SRC), str(HERE)]), "CI": "true"}
    return subprocess.run(
        [sys.executable, "-m", "tailmem", *args], cwd=cwd, env=env, capture_output=True,
        text=True, timeout=600, check=False,
    )  # fmt: skip


@pytest.mark.parametrize(
    ("study", "arms"),
    [
        ("knowledge-qa", "arms=[muon, adam, 'toy:q,k,v,o,w_in,w_gate,w_out adam:*']"),
        ("ablation", "arms=[full, adam, 'toy:q,k,v,o,w_in,w_out adam:*']"),
    ],
)
def test_a_user_optimiser_given_on_the_command_line_trains_as_an_arm(study, arms, tmp_path):
    out = tmp_path / study
    done = tailmem("run", study, "--preset", "smoke", "--out", str(out), arms, "workers=1",
                   *TOY, cwd=tmp_path)  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    specs = [json.loads(p.read_text()) for p in out.glob("runs/*/*/*/spec.json")]
    toy = [s for s in specs if "toy" in s["hparams"]]
    assert toy and len(toy) < len(specs)
    for spec in toy:
        hparams = dict(spec["hparams"]["toy"])
        assert re.fullmatch(r"[0-9a-f]{16}", hparams.pop("code"))  # the digest of its code
        assert hparams == {"factory": "toy_optimizer:DampedSign", "lr": 0.01, "damping": 0.5}
        assert spec["lrs"]["toy"] == 0.01 and spec["arm"]["recipe"].startswith("toy:")
    results = [json.loads(p.read_text()) for p in out.glob("runs/*/*/*/result.json")]
    assert all(r["status"] == "complete" for r in results)


def test_an_unknown_hyperparameter_of_a_user_optimiser_is_refused_before_anything_is_written(
    tmp_path,
):
    out = tmp_path / "run"
    args = ["arms=[muon, 'toy:q,k,v,o,w_in,w_gate,w_out adam:*']", *TOY, "optim.toy.dampin=1"]
    done = tailmem("run", "knowledge-qa", "--preset", "smoke", "--out", str(out), *args,
                   cwd=tmp_path)  # fmt: skip
    assert done.returncode == 2
    assert done.stderr.strip() == (
        "tailmem: error: unknown hyperparameter 'optim.toy.dampin' of toy_optimizer:DampedSign; "
        "expected one of: damping, lr"
    )
    assert not out.exists()
