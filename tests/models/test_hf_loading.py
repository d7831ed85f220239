"""Loading Hugging Face model folders without transformers: a real MiniLM, other layouts, errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from safetensors.torch import save_file

from tailmem.errors import DataError
from tailmem.models.hf_loading import load_state_dict_from_dir, read_hf_config


@pytest.fixture(scope="module")
def minilm(minilm_dir) -> dict[str, torch.Tensor]:
    return load_state_dict_from_dir(minilm_dir)


def test_minilm_names_and_shapes_follow_its_config(minilm_dir, minilm):
    cfg = read_hf_config(minilm_dir)
    d, ff, layers = cfg["hidden_size"], cfg["intermediate_size"], cfg["num_hidden_layers"]
    assert (d, ff, layers, cfg["num_attention_heads"]) == (384, 1536, 6, 12)
    expected = {
        "embeddings.word_embeddings.weight": (cfg["vocab_size"], d),
        "embeddings.position_embeddings.weight": (cfg["max_position_embeddings"], d),
        "embeddings.token_type_embeddings.weight": (cfg["type_vocab_size"], d),
        "embeddings.LayerNorm.weight": (d,),
        "embeddings.LayerNorm.bias": (d,),
        "pooler.dense.weight": (d, d),
        "pooler.dense.bias": (d,),
    }
    for i in range(layers):
        p = f"encoder.layer.{i}."
        for name in ("query", "key", "value"):
            expected[f"{p}attention.self.{name}.weight"] = (d, d)
            expected[f"{p}attention.self.{name}.bias"] = (d,)
        expected[f"{p}attention.output.dense.weight"] = (d, d)
        expected[f"{p}intermediate.dense.weight"] = (ff, d)
        expected[f"{p}output.dense.weight"] = (d, ff)
        for name in ("attention.output.dense", "intermediate.dense", "output.dense"):
            expected.setdefault(f"{p}{name}.bias", (ff,) if name == "intermediate.dense" else (d,))
        for norm in ("attention.output.LayerNorm", "output.LayerNorm"):
            expected[f"{p}{norm}.weight"] = (d,)
            expected[f"{p}{norm}.bias"] = (d,)
    assert {k: tuple(v.shape) for k, v in minilm.items()} == expected
    assert all(v.dtype == torch.float32 for v in minilm.values())
    with_buffers = load_state_dict_from_dir(minilm_dir, floating_only=False)
    assert set(with_buffers) - set(minilm) == {"embeddings.position_ids"}
    assert torch.equal(with_buffers["embeddings.position_ids"][0], torch.arange(512))


def test_minilm_weights_are_trained(minilm_dir, minilm):
    """Pretrained word embeddings put related words closer than unrelated ones."""
    vocab = (minilm_dir / "vocab.txt").read_text(encoding="utf-8").splitlines()
    index = {word: i for i, word in enumerate(vocab)}
    emb = minilm["embeddings.word_embeddings.weight"]

    def cos(a: str, b: str) -> float:
        return torch.nn.functional.cosine_similarity(emb[index[a]], emb[index[b]], dim=0).item()

    assert cos("king", "queen") > cos("king", "banana") + 0.3
    assert cos("monday", "tuesday") > cos("monday", "river") + 0.3


def test_minilm_matches_transformers(minilm_dir, minilm):
    transformers = pytest.importorskip("transformers")
    reference = transformers.BertModel.from_pretrained(str(minilm_dir)).state_dict()
    assert set(reference) == set(minilm)
    for name, tensor in minilm.items():
        assert torch.equal(tensor, reference[name]), name


def _small_state(seed: int = 0) -> dict[str, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    return {
        "h.0.attn.c_attn.weight": torch.randn(8, 24, generator=gen),
        "h.0.attn.c_proj.weight": torch.randn(8, 8, generator=gen).to(torch.bfloat16),
        "h.0.ln_1.bias": torch.randn(8, generator=gen).half(),
        "h.0.attn.bias": torch.ones(1, 1, 4, 4, dtype=torch.bool),
    }


def _folder(tmp_path: Path, name: str = "m") -> Path:
    folder = tmp_path / name
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({"model_type": "gpt2", "n_embd": 8}))
    return folder


def _assert_same(got: dict, want: dict) -> None:
    assert set(got) == set(want)
    for k in want:
        assert got[k].dtype == want[k].dtype and torch.equal(got[k], want[k]), k


def test_pytorch_bin_and_dtypes(tmp_path):
    folder = _folder(tmp_path)
    state = _small_state()
    torch.save(state, folder / "pytorch_model.bin")
    _assert_same(load_state_dict_from_dir(folder, floating_only=False), state)
    floats = load_state_dict_from_dir(folder)
    assert "h.0.attn.bias" not in floats and floats["h.0.ln_1.bias"].dtype == torch.float16


def test_sharded_safetensors_and_bin(tmp_path):
    state = {k: v for k, v in _small_state(1).items() if v.is_floating_point()}
    names = sorted(state)
    split = {"part-1": names[:1], "part-2": names[1:]}
    for ext, save in (("safetensors", save_file), ("bin", torch.save)):
        folder = _folder(tmp_path, ext)
        stem = "model" if ext == "safetensors" else "pytorch_model"
        weight_map = {}
        for part, keys in split.items():
            save({k: state[k].contiguous() for k in keys}, str(folder / f"{part}.{ext}"))
            weight_map.update({k: f"{part}.{ext}" for k in keys})
        (folder / f"{stem}.{ext}.index.json").write_text(json.dumps({"weight_map": weight_map}))
        _assert_same(load_state_dict_from_dir(folder), state)


def test_safetensors_preferred_over_bin(tmp_path):
    folder = _folder(tmp_path)
    save_file({"w": torch.ones(2, 2)}, str(folder / "model.safetensors"))
    torch.save({"w": torch.zeros(2, 2)}, folder / "pytorch_model.bin")
    assert torch.equal(load_state_dict_from_dir(folder)["w"], torch.ones(2, 2))


class _NotATensor:
    pass


def test_bad_folders_raise_data_error_naming_the_file(tmp_path):
    with pytest.raises(DataError, match="not a directory"):
        load_state_dict_from_dir(tmp_path / "absent")
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(DataError, match=r"config\.json: not found"):
        load_state_dict_from_dir(empty)
    (empty / "config.json").write_text("{not json")
    with pytest.raises(DataError, match="not valid JSON"):
        load_state_dict_from_dir(empty)
    (empty / "config.json").write_text("[1, 2]")
    with pytest.raises(DataError, match="expected a JSON object"):
        load_state_dict_from_dir(empty)
    (empty / "config.json").write_text("{}")
    with pytest.raises(DataError, match="no weights found"):
        load_state_dict_from_dir(empty)


@pytest.mark.parametrize(
    ("name", "content", "message"),
    [
        ("model.safetensors", "truncated", "corrupt safetensors"),
        ("model.safetensors", b"\x00" * 64, "corrupt safetensors"),
        ("pytorch_model.bin", "truncated", "corrupt or truncated"),
        ("pytorch_model.bin", b"garbage" * 8, "refused by weights-only"),
        ("pytorch_model.bin", {"w": _NotATensor()}, "Unsupported global"),
        ("pytorch_model.bin", [torch.ones(2)], "flat mapping"),
    ],
)
def test_corrupt_weight_files(tmp_path, name, content, message):
    folder = _folder(tmp_path)
    path = folder / name
    if content == "truncated":
        if name.endswith(".safetensors"):
            save_file({"w": torch.randn(64, 64)}, str(path))
        else:
            torch.save({"w": torch.randn(64, 64)}, path)
        data = path.read_bytes()
        path.write_bytes(data[: len(data) // 2])
    elif isinstance(content, bytes):
        path.write_bytes(content)
    else:
        torch.save(content, path)
    with pytest.raises(DataError, match=message) as info:
        load_state_dict_from_dir(folder)
    assert str(path) in str(info.value) and "\n" not in str(info.value)


def test_shard_index_errors(tmp_path):
    folder = _folder(tmp_path)
    index = folder / "model.safetensors.index.json"
    index.write_text(json.dumps({"weight_map": {"w": "missing.safetensors"}}))
    with pytest.raises(DataError, match=r"missing\.safetensors: shard listed"):
        load_state_dict_from_dir(folder)
    save_file({"w": torch.ones(1)}, str(folder / "a.safetensors"))
    index.write_text(json.dumps({"weight_map": {"w": "a.safetensors", "v": "a.safetensors"}}))
    with pytest.raises(DataError, match="tensor 'v' not found"):
        load_state_dict_from_dir(folder)
    index.write_text(json.dumps({"shards": []}))
    with pytest.raises(DataError, match="weight_map"):
        load_state_dict_from_dir(folder)
