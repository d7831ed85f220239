"""Weights of a local Hugging Face model folder, read without the ``transformers`` package.

A folder holds ``config.json`` and its weights in one of these layouts (first match wins):
``model.safetensors``; ``model.safetensors.index.json`` with shards; ``pytorch_model.bin``;
``pytorch_model.bin.index.json`` with shards. Pickle files are read with
``torch.load(weights_only=True)``, which refuses anything but tensors and plain containers, so a
model folder cannot run code. Parameter names are returned exactly as stored (for example
``encoder.layer.0.attention.self.query.weight`` for BERT, ``h.0.attn.c_attn.weight`` for
GPT-2); mapping them to roles is :mod:`tailmem.models.roles`' job.
"""

from __future__ import annotations

import json
import pickle
import re
import zipfile
from pathlib import Path
from typing import Any

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file
from torch import Tensor

from tailmem.errors import DataError
from tailmem.train.checkpoint import load_weights

WEIGHT_FILES = (
    "model.safetensors",
    "model.safetensors.index.json",
    "pytorch_model.bin",
    "pytorch_model.bin.index.json",
)


def read_hf_config(path: str | Path) -> dict[str, Any]:
    """The parsed ``config.json`` of model folder ``path`` (:class:`DataError` if absent/bad)."""
    file = Path(path) / "config.json"
    if not file.is_file():
        raise DataError(f"{file}: not found; expected a Hugging Face model folder with config.json")
    try:
        config = json.loads(file.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise DataError(f"{file}: not valid JSON ({exc}); expected the model's config") from None
    if not isinstance(config, dict):
        raise DataError(f"{file}: expected a JSON object, got {type(config).__name__}")
    return config


def load_state_dict_from_dir(path: str | Path, floating_only: bool = True) -> dict[str, Tensor]:
    """Named weight tensors of the Hugging Face model folder ``path``, on the CPU.

    With ``floating_only`` (default) integer buffers such as BERT's ``position_ids`` are dropped:
    they are bookkeeping, not weights. ``tailmem diagnose`` reads everything instead, so that a
    matrix stored as integers (quantised) is named as skipped rather than lost. Tensors keep
    their stored dtype (often fp16/bf16). A missing folder, ``config.json`` or weight file, a
    corrupt or truncated file, or a shard index that names a missing tensor raises
    :class:`DataError` naming the file.
    """
    folder = Path(path)
    if not folder.is_dir():
        raise DataError(f"{folder}: not a directory; expected a Hugging Face model folder")
    read_hf_config(folder)
    present = [name for name in WEIGHT_FILES if (folder / name).is_file()]
    if not present:
        raise DataError(f"{folder}: no weights found; expected one of {', '.join(WEIGHT_FILES)}")
    chosen = folder / present[0]
    load = _load_sharded if chosen.name.endswith(".index.json") else _load_file
    tensors = load(chosen)
    if floating_only:
        tensors = {k: v for k, v in tensors.items() if torch.is_floating_point(v)}
    return tensors


def _load_file(file: Path) -> dict[str, Tensor]:
    if file.name.endswith(".safetensors"):
        try:
            return load_file(str(file), device="cpu")
        except (SafetensorError, OSError, ValueError) as exc:
            raise DataError(f"{file}: corrupt safetensors file ({_first_line(exc)})") from None
    try:
        state = load_weights(file)  # torch's warnings silenced: the refusal is one line
    except pickle.UnpicklingError as exc:
        found = re.search(r"WeightsUnpickler error:\s*([^\n]+)", str(exc))
        reason = found.group(1).split(". ")[0] if found else _first_line(exc)
        raise DataError(
            f"{file}: refused by weights-only loading ({reason}); expected a state dict of tensors"
        ) from None
    except (RuntimeError, EOFError, zipfile.BadZipFile, OSError) as exc:
        raise DataError(
            f"{file}: corrupt or truncated torch checkpoint ({_first_line(exc)})"
        ) from None
    if not isinstance(state, dict) or not all(
        isinstance(k, str) and isinstance(v, Tensor) for k, v in state.items()
    ):
        raise DataError(f"{file}: expected a flat mapping of parameter names to tensors")
    return state


def _load_sharded(index: Path) -> dict[str, Tensor]:
    try:
        weight_map = json.loads(index.read_text(encoding="utf-8"))["weight_map"]
    except (json.JSONDecodeError, UnicodeDecodeError, KeyError, TypeError) as exc:
        raise DataError(f"{index}: expected a JSON object with a 'weight_map' ({exc})") from None
    if not isinstance(weight_map, dict) or not weight_map:
        raise DataError(f"{index}: 'weight_map' must map parameter names to shard files")
    tensors: dict[str, Tensor] = {}
    for shard in sorted(set(weight_map.values())):
        file = index.parent / str(shard)
        # Checked by name, not by resolving: a Hugging Face cache links its files into blobs/.
        if Path(str(shard)).is_absolute() or ".." in Path(str(shard)).parts:
            raise DataError(
                f"{index}: shard {shard!r} lies outside the model folder; expected a file in it"
            )
        if not file.is_file():
            raise DataError(f"{file}: shard listed in {index.name} not found")
        tensors.update(_load_file(file))
    missing = sorted(set(weight_map) - set(tensors))
    if missing:
        raise DataError(f"{index}: tensor {missing[0]!r} not found in its shard")
    return tensors


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]
