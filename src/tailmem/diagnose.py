"""Spectral isotropy of one model's matrices, by role and layer (what ``tailmem diagnose``
measures; :mod:`tailmem.diagnose_study` finds the models of a run or study folder and
:mod:`tailmem.diagnose_view` shows and writes them).

PATH may be

- a training checkpoint ``.../ckpt/step_*.pt`` written by ``tailmem.train.train`` (our GPT); the
  model config is read from ``gpt_config.json`` in the run directory (the folder holding
  ``ckpt/``), which the language-model experiments write;
- a training run directory (holding ``ckpt/`` and ``gpt_config.json``): its newest checkpoint;
- a folder containing exactly one such run directory somewhere below it (the command measures
  every run of a folder that holds several: :func:`tailmem.diagnose_study.collect`);
- a local Hugging Face model folder (``config.json`` plus safetensors / ``pytorch_model.bin``
  weights) with GPT-2, LLaMA or BERT parameter names; read without ``transformers`` and without
  network access, roles from the parameter names
  (:func:`tailmem.models.roles.resolve_roles_from_names`), the head count from ``config.json``.

For every layer it reports H_norm, eRank, TopE_k and Q75/25 (paper A, Sec. 4.2) of Q, K, V, O,
the per-head and stacked VO products, W_in, W_gate and W_out (see
:mod:`tailmem.metrics.role_spectra`). Bad paths and corrupt files raise
:class:`~tailmem.errors.TailmemError` subclasses with one line (exit code 2 from the CLI).

Nothing is dropped without a word. Weights in float16, bfloat16, float32 or float64 are measured
(sparse and torch-quantised tensors are made dense floats first, exactly: they carry their own
scales). A weight with a matrix role that cannot be measured as stored gets a row per role with
no numbers and the note ``skipped: NAME (reason)``: integer, 8-bit-float, boolean or complex
storage (quantised weights whose scales live in other tensors must be dequantised first), or a
shape that is not a 2-D matrix — also where a family's name rule calls a tensor a matrix that
the tensor cannot be (a 1-D ``q_proj.weight``, a GPT-2 ``c_attn`` whose width does not split in
three). A model with a NaN or infinite weight anywhere is refused. A matrix of rank 0 (all
zero, or empty such as a ``(32, 0)`` FFN) has no isotropy: its row keeps ``rank`` 0 and leaves
the metrics empty, with the note saying so. Every number written is finite; an empty cell always
has its note.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from tailmem.errors import CheckpointError, ConfigError, DataError
from tailmem.metrics.role_spectra import (
    ISO_METRICS,
    MATRICES,
    layer_index,
    model_isotropy,
)
from tailmem.models.gpt import GPT
from tailmem.models.gpt_io import GPT_CONFIG_FILE, read_gpt_config
from tailmem.models.hf_loading import WEIGHT_FILES, load_state_dict_from_dir, read_hf_config
from tailmem.models.roles import (
    MATRIX_ROLES,
    ParamRole,
    matrix_roles_by_name,
    resolve_roles,
    resolve_roles_from_names,
)
from tailmem.train.checkpoint import latest_checkpoint, load_checkpoint

_HEAD_KEYS = ("num_attention_heads", "n_head")
EXPECTED = (
    "a training checkpoint (step_*.pt), a training run directory or a Hugging Face model folder"
)
_CHECKPOINT_MAGIC = (b"PK\x03\x04", b"\x80")  # torch.save's zip format, or a bare pickle
MEASURED_DTYPES = (torch.float16, torch.bfloat16, torch.float32, torch.float64)
"""The dtypes whose matrices are measured (as stored; half precision in float32)."""


@dataclass
class LoadedWeights:
    """Weights of one model with their roles, the head count and where they came from."""

    source: str
    weights: dict[str, Tensor]
    roles: dict[str, ParamRole]
    n_head: int | None


def load_weights(path: str | Path) -> LoadedWeights:
    """Resolve PATH (see the module docstring) and load its weights and roles."""
    path = Path(path)
    if not path.exists():
        raise DataError(f"{path} does not exist; expected {EXPECTED}")
    if path.is_file():
        _require_checkpoint_file(path)
        return _from_checkpoint(path)
    if (path / "config.json").is_file() and any((path / f).is_file() for f in WEIGHT_FILES):
        return _from_hf_folder(path)
    if (path / "ckpt").is_dir():
        return _from_run_dir(path)
    runs = sorted(p.parent for p in path.rglob(GPT_CONFIG_FILE) if (p.parent / "ckpt").is_dir())
    if len(runs) == 1:
        return _from_run_dir(runs[0])
    if runs:
        shown = ", ".join(str(r) for r in runs[:2])
        raise DataError(f"{path} holds {len(runs)} training runs ({shown}, ...); pass one of them")
    raise DataError(
        f"{path} is neither a training run (no ckpt/), nor a Hugging Face model folder "
        f"(config.json plus one of {', '.join(WEIGHT_FILES)}); expected {EXPECTED}"
    )


def _require_checkpoint_file(path: Path) -> None:
    """Refuse a file that is no checkpoint at all (a README, a JSON or CSV file) by its first
    bytes, before loading it would call it a corrupt checkpoint."""
    with open(path, "rb") as handle:
        head = handle.read(4)
    if not head.startswith(_CHECKPOINT_MAGIC):
        kind = f"a {path.suffix.lstrip('.').upper()} file" if path.suffix else "not a torch file"
        raise DataError(f"{path} is not a checkpoint ({kind}); expected {EXPECTED}")


def _from_run_dir(run_dir: Path) -> LoadedWeights:
    ckpt = latest_checkpoint(run_dir / "ckpt")
    if ckpt is None:
        raise CheckpointError(f"{run_dir / 'ckpt'} holds no step_*.pt checkpoint")
    return _from_checkpoint(ckpt)


def _from_checkpoint(path: Path) -> LoadedWeights:
    state = load_checkpoint(path, advice=f"expected {EXPECTED}")
    if not isinstance(state.get("step"), int) or state["step"] < 0:
        raise CheckpointError(
            f"checkpoint {path} has step {state.get('step')!r}; expected a step count ≥ 0"
        )
    weights = state.get("model")
    if not isinstance(weights, dict) or not all(isinstance(v, Tensor) for v in weights.values()):
        raise CheckpointError(f"checkpoint {path} has no model state dict")
    run_dir = path.parent.parent if path.parent.name == "ckpt" else path.parent
    cfg = read_gpt_config(run_dir / GPT_CONFIG_FILE)
    with torch.device("meta"):
        model = GPT(cfg)
    roles = resolve_roles(model)
    expected = {name: tuple(p.shape) for name, p in model.named_parameters()}
    for name, shape in expected.items():
        if name not in weights:
            raise CheckpointError(
                f"checkpoint {path} lacks parameter {name!r} of the model in {GPT_CONFIG_FILE}"
            )
        if tuple(weights[name].shape) != shape:
            raise CheckpointError(
                f"checkpoint {path}: {name} has shape {tuple(weights[name].shape)}, but "
                f"{GPT_CONFIG_FILE} implies {shape}"
            )
    source = f"tailmem checkpoint {path} (step {state['step']}, {cfg.n_layer} layers)"
    kept = {name: weights[name] for name in expected}
    return LoadedWeights(source, kept, roles, cfg.n_head)


def _from_hf_folder(path: Path) -> LoadedWeights:
    config = read_hf_config(path)
    weights = load_state_dict_from_dir(path, floating_only=False)
    roles = resolve_roles_from_names({name: tuple(w.shape) for name, w in weights.items()})
    n_head = next((config[k] for k in _HEAD_KEYS if k in config), None)
    if n_head is not None and (
        isinstance(n_head, bool) or not isinstance(n_head, int) or n_head < 1
    ):
        raise DataError(
            f"{path / 'config.json'}: head count {n_head!r}; expected a positive integer"
        )
    kind = config.get("model_type", "unknown type")
    return LoadedWeights(f"Hugging Face folder {path} ({kind})", weights, roles, n_head)


@dataclass(frozen=True)
class Skipped:
    """A weight named as a matrix that could not be measured, the roles it holds and why."""

    name: str
    roles: tuple[str, ...]
    reason: str


def measurable(loaded: LoadedWeights) -> tuple[dict[str, Tensor], list[Skipped]]:
    """The matrix-role weights that can be measured (dense, in a :data:`MEASURED_DTYPES`
    dtype) and those that cannot, each with its reason (see the module docstring)."""
    named = matrix_roles_by_name(list(loaded.weights))
    kept: dict[str, Tensor] = {}
    skipped = []
    for name, weight in loaded.weights.items():
        role = loaded.roles.get(name)
        roles = role.roles if role is not None else ()
        if not roles or not set(roles) <= set(MATRIX_ROLES):
            if name in named:
                skipped.append(Skipped(name, named[name], _misfit(weight, named[name])))
            continue
        weight = weight.dequantize() if weight.is_quantized else weight
        weight = weight.to_dense() if weight.layout != torch.strided else weight
        reason = _unmeasurable(weight)
        if reason is None:
            kept[name] = weight
        else:
            skipped.append(Skipped(name, roles, reason))
    return kept, skipped


def _misfit(weight: Tensor, roles: tuple[str, ...]) -> str:
    """Why a tensor a name rule calls a matrix did not get that role (its shape)."""
    shape = tuple(weight.shape)
    if len(shape) != 2:
        return f"shape {shape}; a {'+'.join(roles)} weight must be a 2-D matrix"
    return (
        f"shape {shape} does not split into {len(roles)} equal non-empty blocks {'/'.join(roles)}"
    )


def _unmeasurable(weight: Tensor) -> str | None:
    """Why a matrix-role weight cannot be measured as stored (None: it can)."""
    dtype = str(weight.dtype).removeprefix("torch.")
    if weight.dtype == torch.bool:
        return "dtype bool holds flags, not weights"
    if weight.is_complex():
        return f"dtype {dtype}: complex weights; isotropy is measured on real ones"
    if weight.dtype not in MEASURED_DTYPES:
        return (
            f"dtype {dtype} is integer or quantised storage whose scales are other tensors; "
            "dequantise it to float16, bfloat16, float32 or float64 first"
        )
    if weight.ndim != 2:
        return f"shape {tuple(weight.shape)}; expected a 2-D matrix"
    return None


def _finite(weight: Tensor) -> bool:
    """Whether every entry is finite, for any layout and dtype (8-bit floats are widened: torch
    has no ``isfinite`` for some of them)."""
    if weight.is_quantized or not (weight.is_floating_point() or weight.is_complex()):
        return True
    weight = weight.to_dense() if weight.layout != torch.strided else weight
    if not weight.is_complex() and weight.dtype not in MEASURED_DTYPES:
        weight = weight.float()
    return bool(torch.isfinite(weight).all())


def diagnose(path: str | Path, top_k: int = 10) -> tuple[LoadedWeights, list[dict[str, Any]]]:
    """The loaded model and its isotropy table: the rows of :func:`model_isotropy` (a rank-0
    matrix with empty metrics) and a row per role of each skipped weight, by layer then
    :data:`~tailmem.metrics.role_spectra.MATRICES`; every row has a ``note``."""
    check_top_k(top_k)
    loaded = load_weights(path)
    return loaded, measure(loaded, top_k)


def check_top_k(top_k: int) -> None:
    if isinstance(top_k, bool) or not isinstance(top_k, int) or top_k < 1:
        raise ConfigError(f"--top-k: got {top_k!r}; expected a positive integer")


def measure(loaded: LoadedWeights, top_k: int = 10) -> list[dict[str, Any]]:
    """The isotropy table of loaded weights (see :func:`diagnose`); a NaN or infinite weight
    and a model with nothing measurable are refused."""
    for name, weight in loaded.weights.items():
        if not _finite(weight):
            raise DataError(
                f"{loaded.source}: parameter {name} holds NaN or infinite values; expected a "
                "model with finite weights"
            )
    kept, skipped = measurable(loaded)
    rows = model_isotropy(kept, loaded.roles, loaded.n_head, k=top_k) if kept else []
    if not rows:
        if skipped:
            more = f" (and {len(skipped) - 1} more)" if len(skipped) > 1 else ""
            raise DataError(
                f"{loaded.source}: no attention or FFN matrix could be measured; skipped "
                f"{skipped[0].name} ({skipped[0].reason}){more}"
            )
        raise DataError(
            f"{loaded.source}: no attention or FFN matrices were found (roles q k v o w_in "
            "w_gate w_out)"
        )
    for row in rows:
        if row["rank"] == 0:
            row.update(dict.fromkeys(ISO_METRICS))
    for skip in skipped:
        layer = layer_index(skip.name) or 0
        for role in skip.roles:
            empty = dict.fromkeys((*ISO_METRICS, "rank"))
            rows.append({"layer": layer, "matrix": role, **empty, "note": _skip_note(skip)})
    rows.sort(key=lambda r: (r["layer"], MATRICES.index(r["matrix"])))
    return rows


def _skip_note(skip: Skipped) -> str:
    return f"skipped: {skip.name} ({skip.reason})"
