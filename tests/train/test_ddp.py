"""Two gloo ranks under torchrun follow the one-process trajectory with the same global batch.

Both runs see the same global batch each step and the loss is normalised by the global target
count, so the gradients agree up to floating-point reassociation (each rank sums half of the
per-token terms, then gloo adds the halves). Over 30 AdamW steps of a tiny fp32 model that leaves
differences of order 1e-7 relative; the tests allow 1e-5.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import torch.distributed as dist

from tailmem.errors import ConfigError
from tailmem.train import read_metrics
from tailmem.train.distributed import DistContext, all_reduce_sum, init_distributed

SCRIPT = Path(__file__).with_name("tiny_run.py")
SRC = Path(__file__).resolve().parents[2] / "src"
ARGS = ["--steps", "30", "--log-every", "3", "--batch", "8"]


def env() -> dict[str, str]:
    return {
        **os.environ,
        "PYTHONPATH": f"{SRC}{os.pathsep}{os.environ.get('PYTHONPATH', '')}",
        "OMP_NUM_THREADS": "1",
    }


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def torchrun(out: Path, *extra: str) -> subprocess.CompletedProcess:
    cmd = [
        sys.executable, "-m", "torch.distributed.run", "--nproc_per_node=2",
        "--master_addr=127.0.0.1", f"--master_port={free_port()}", str(SCRIPT), str(out),
        *ARGS, *extra,
    ]  # fmt: skip
    done = subprocess.run(cmd, env=env(), timeout=180, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]
    return done


def test_two_ranks_with_accumulation_and_resume_match_one_process(tmp_path):
    single = tmp_path / "single"
    subprocess.run([sys.executable, SCRIPT, single, *ARGS], env=env(), check=True, timeout=120)

    ddp = tmp_path / "ddp"
    # Both ranks crash at step 20 (after the checkpoint of step 15), rebuild and resume.
    torchrun(ddp, "--grad-accum", "2", "--ckpt-every", "15", "--crash-at", "20")
    summary = json.loads((ddp / "result.json").read_text())
    assert summary == {"status": "complete", "resumed_from": 15, "crashed_at": 20}

    one, two = read_metrics(single / "metrics.jsonl"), read_metrics(ddp / "metrics.jsonl")
    assert [r["step"] for r in two] == [r["step"] for r in one] == list(range(3, 31, 3))
    for a, b in zip(one, two, strict=True):
        assert b["tokens"] == a["tokens"] == a["step"] * 8 * 32
        assert b["loss"] == pytest.approx(a["loss"], rel=1e-5)
        assert b["grad_norm"] == pytest.approx(a["grad_norm"], rel=1e-5)
    assert one[-1]["loss"] < one[0]["loss"] - 0.3  # the curve moves, so agreement means something


def test_without_torchrun_there_is_one_process_and_no_group(monkeypatch):
    for name in ("RANK", "WORLD_SIZE", "LOCAL_RANK"):
        monkeypatch.delenv(name, raising=False)
    ctx, device = init_distributed("cpu")
    assert ctx == DistContext() and ctx.is_main and not ctx.distributed
    assert str(device) == "cpu" and not dist.is_initialized()
    t = torch.ones(3)
    assert all_reduce_sum(t, ctx) is t
    monkeypatch.setenv("WORLD_SIZE", "two")
    with pytest.raises(ConfigError, match="WORLD_SIZE"):
        init_distributed("cpu")
    if not torch.cuda.is_available():
        monkeypatch.delenv("WORLD_SIZE")
        with pytest.raises(ConfigError, match="CUDA is not available"):
            init_distributed("cuda")
