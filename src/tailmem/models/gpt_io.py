"""The model config of a training run, stored beside its checkpoints.

A ``train()`` checkpoint holds the weights and the training config but not the shape of the
model, so the language-model experiments write ``gpt_config.json`` (the fields of
:class:`~tailmem.models.gpt.GPTConfig`) into every training run directory. ``tailmem diagnose``
reads it to rebuild the parameter roles of a checkpoint.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from tailmem.atomic import atomic_write_text, strict_json
from tailmem.errors import CheckpointError, ConfigError
from tailmem.models.gpt import GPTConfig

GPT_CONFIG_FILE = "gpt_config.json"


def write_gpt_config(folder: str | Path, cfg: GPTConfig) -> Path:
    """Write ``cfg`` as ``folder/gpt_config.json`` (atomically)."""
    path = Path(folder) / GPT_CONFIG_FILE
    atomic_write_text(path, strict_json(dataclasses.asdict(cfg), indent=1))
    return path


def read_gpt_config(path: str | Path) -> GPTConfig:
    """Read a ``gpt_config.json`` file (or the one inside folder ``path``) into a GPTConfig.

    A missing, unreadable or invalid file raises :class:`CheckpointError` naming it.
    """
    path = Path(path)
    if path.is_dir():
        path = path / GPT_CONFIG_FILE
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise CheckpointError(
            f"{path} not found; expected the model config that tailmem experiments write beside "
            "their checkpoints"
        ) from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise CheckpointError(f"{path} is not valid JSON ({exc}); expected a GPT config") from None
    names = {f.name for f in dataclasses.fields(GPTConfig)}
    if not isinstance(raw, dict) or not {"vocab_size", "n_layer", "n_head"} <= set(raw):
        raise CheckpointError(f"{path} does not hold a GPT config (vocab_size, n_layer, n_head)")
    unknown = sorted(set(raw) - names)
    if unknown:
        raise CheckpointError(f"{path} has unknown GPT config field {unknown[0]!r}")
    try:
        cfg = GPTConfig(**raw)
        cfg.validate()
    except (TypeError, ConfigError) as exc:
        raise CheckpointError(f"{path} holds an invalid GPT config ({exc})") from None
    return cfg
