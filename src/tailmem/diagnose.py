"""``tailmem diagnose PATH``: spectral isotropy of one model's matrices, by role and layer.

PATH may be

- a training checkpoint ``.../ckpt/step_*.pt`` written by ``tailmem.train.train`` (our GPT); the
  model config is read from ``gpt_config.json`` in the run directory (the folder holding
  ``ckpt/``), which the language-model experiments write;
- a training run directory (holding ``ckpt/`` and ``gpt_config.json``): its newest checkpoint;
- a folder containing exactly one such run directory somewhere below it (e.g. a spectra run with
  one seed would hold two, so pass one of them);
- a local Hugging Face model folder (``config.json`` plus safetensors / ``pytorch_model.bin``
  weights) with GPT-2, LLaMA or BERT parameter names; read without ``transformers`` and without
  network access, roles from the parameter names
  (:func:`tailmem.models.roles.resolve_roles_from_names`), the head count from ``config.json``.

For every layer it reports H_norm, eRank, TopE_k and Q75/25 (paper A, Sec. 4.2) of Q, K, V, O,
the per-head and stacked VO products, W_in, W_gate and W_out (see
:mod:`tailmem.metrics.role_spectra`), printed as a table and, with ``out``, written to
``isotropy.csv`` plus the figure ``isotropy.png`` / ``.svg`` (each metric against the layer, one
line per matrix). Bad paths and corrupt files raise :class:`~tailmem.errors.TailmemError`
subclasses with one line (exit code 2 from the CLI).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from tailmem.errors import CheckpointError, ConfigError, DataError
from tailmem.metrics.role_spectra import ISO_METRICS, MATRICES, metric_label, model_isotropy
from tailmem.models.gpt import GPT
from tailmem.models.gpt_io import GPT_CONFIG_FILE, read_gpt_config
from tailmem.models.hf_loading import WEIGHT_FILES, load_state_dict_from_dir, read_hf_config
from tailmem.models.roles import ParamRole, resolve_roles, resolve_roles_from_names
from tailmem.plotting import integer_ticks, legend_outside, pyplot
from tailmem.rundir import RunDir
from tailmem.train.checkpoint import latest_checkpoint, load_checkpoint

_HEAD_KEYS = ("num_attention_heads", "n_head")
EXPECTED = (
    "a training checkpoint (step_*.pt), a training run directory or a Hugging Face model folder"
)
_CHECKPOINT_MAGIC = (b"PK\x03\x04", b"\x80")  # torch.save's zip format, or a bare pickle


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
    state = load_checkpoint(path)
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
    weights = load_state_dict_from_dir(path)
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


def diagnose(path: str | Path, top_k: int = 10) -> tuple[LoadedWeights, list[dict[str, Any]]]:
    """The loaded model and its isotropy table (rows of :func:`model_isotropy`)."""
    if isinstance(top_k, bool) or not isinstance(top_k, int) or top_k < 1:
        raise ConfigError(f"--top-k: got {top_k!r}; expected a positive integer")
    loaded = load_weights(path)
    for name, weight in loaded.weights.items():
        if weight.is_floating_point() and not bool(torch.isfinite(weight).all()):
            raise DataError(
                f"{loaded.source}: parameter {name} holds NaN or infinite values; expected a "
                "model with finite weights"
            )
    rows = model_isotropy(loaded.weights, loaded.roles, loaded.n_head, k=top_k)
    if not rows:
        raise DataError(
            f"{path}: no attention or FFN matrices with a layer index were found "
            "(roles q k v o w_in w_gate w_out)"
        )
    return loaded, rows


def format_table(rows: list[dict[str, Any]], top_k: int = 10) -> str:
    """Fixed-width text table: layer, matrix, the four metrics and the numerical rank."""
    headers = ["layer", "matrix", *(metric_label(m, top_k) for m in ISO_METRICS), "rank"]
    lines = [headers]
    for row in rows:
        values = [
            f"{row['svd_entropy']:.4f}",
            f"{row['erank']:.2f}",
            f"{row['topk_energy']:.4f}",
            f"{row['q75_25']:.3f}",
        ]
        lines.append([str(row["layer"]), row["matrix"], *values, f"{row['rank']:g}"])
    widths = [max(len(line[i]) for line in lines) for i in range(len(headers))]
    out = ["  ".join(c.rjust(w) for c, w in zip(line, widths, strict=True)) for line in lines]
    out.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(out)


def write_outputs(out: str | Path, rows: list[dict[str, Any]], title: str, top_k: int) -> RunDir:
    """``isotropy.csv`` and ``isotropy.png`` / ``.svg`` in folder ``out``."""
    plt = pyplot()

    folder = RunDir(out)
    folder.write_csv(
        "isotropy.csv",
        [{k: row[k] for k in ("layer", "matrix", *ISO_METRICS, "rank")} for row in rows],
    )
    fig, axes = plt.subplots(1, 4, figsize=(16, 3.8))
    for ax, metric in zip(axes, ISO_METRICS, strict=True):
        for matrix in MATRICES:
            points = [(r["layer"], r[metric]) for r in rows if r["matrix"] == matrix]
            if points:
                ax.plot(*zip(*points, strict=True), marker="o", ms=3, label=matrix)
        ax.set_title(metric_label(metric, top_k))
        ax.set_xlabel("layer")
        integer_ticks(ax)
        ax.grid(alpha=0.3)
    legend_outside(axes[-1])
    fig.suptitle(title)
    fig.tight_layout()
    folder.save_figure(fig, "isotropy")
    return folder
