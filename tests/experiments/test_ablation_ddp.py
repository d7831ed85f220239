"""The ablation smoke preset under ``torchrun --nproc_per_node=2`` (gloo) equals one process.

Two of its arms are run (full Muon, where Muon shards its orthogonalisations over the ranks, and
all-Adam), and compared arm by arm with the single-process smoke run.

Each rank gets half of every global batch and half of the validation batches; gradients and
validation sums are added over ranks, so the two-rank run follows the one-process run up to
floating-point reassociation (of order 1e-6 relative after 24 steps; the test allows 1e-4).
Only rank 0 writes: every metrics file has each step once. ``workers=2`` is ignored under
torchrun (every rank trains each run together, one at a time).
"""

from __future__ import annotations

import csv
import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from tailmem.train import read_metrics

SRC = Path(__file__).resolve().parents[2] / "src"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_two_gloo_ranks_reproduce_the_single_process_table(ablation_smoke, lm_cache, tmp_path):
    out = tmp_path / "ddp"
    env = {
        **os.environ,
        "PYTHONPATH": f"{SRC}{os.pathsep}{os.environ.get('PYTHONPATH', '')}",
        "OMP_NUM_THREADS": "1",
    }
    cmd = [
        sys.executable, "-m", "torch.distributed.run", "--nproc_per_node=2",
        "--master_addr=127.0.0.1", f"--master_port={free_port()}",
        "-m", "tailmem", "run", "ablation", "--preset", "smoke", "--out", str(out),
        f"data.cache_dir={lm_cache}", "arms=[full,adam]", "workers=2",
    ]  # fmt: skip
    done = subprocess.run(cmd, env=env, timeout=240, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]
    assert (out / "COMPLETE").is_file() and (out / "claims.json").is_file()

    def table(folder: Path) -> dict[str, dict[str, str]]:
        return {r["arm"]: r for r in csv.DictReader((folder / "table1.csv").open())}

    one, two = table(ablation_smoke), table(out)
    assert two.keys() == {"full", "adam"}
    for arm in two:
        for key in ("ours_val_loss", "ours_loss_head", "ours_loss_body", "ours_loss_tail"):
            assert float(two[arm][key]) == pytest.approx(float(one[arm][key]), rel=1e-4)
        lrs = "muon0.02-adam0.005" if arm == "full" else "adam0.005"
        sub = Path("runs") / "plain" / arm / f"{lrs}-seed0-steps24"
        rows = read_metrics(out / sub / "metrics.jsonl")
        assert [r["step"] for r in rows] == sorted({r["step"] for r in rows})  # written once
        assert rows[-1]["tokens"] == 24 * 8 * 32  # global batch of 8 rows x 32 tokens per step
        ddp, single = (
            json.loads((d / sub / "result.json").read_text()) for d in (out, ablation_smoke)
        )
        for a, b in zip(ddp["evals"], single["evals"], strict=True):
            assert a["val_loss"] == pytest.approx(b["val_loss"], rel=1e-4)
