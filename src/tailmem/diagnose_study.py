"""The models ``tailmem diagnose PATH`` measures: one model, or every run of a study folder,
each labelled by what tells it apart, beside a random-initialisation baseline.

PATH is (:func:`collect`)

- a checkpoint file, a training run directory or a Hugging Face model folder: that model
  (:func:`tailmem.diagnose.load_weights`);
- any other folder — a study's run folder, a results folder: every training run below it that
  keeps a checkpoint (its newest), in path order. Runs whose checkpoints were not kept
  (``train.keep_checkpoints``) are counted in a note, not measured.

A run of an LM study has a ``spec.json``; its label is what differs between the runs measured,
from ``ffn/arm``, learning rates, seed and length (the folder path where that is not enough;
a run without ``spec.json`` is labelled by its path). Each such run also gets a baseline
(:func:`initial_model`): the same GPT (its ``gpt_config.json``) at initialisation, built after
seeding with the run's seed exactly as :func:`tailmem.lm.subrun.run_job` builds it, so its
column holds the weights the run started from. Runs that share a model and a seed (the arms of
one seed) share one baseline. A Hugging Face folder, or a run that records no seed, has none,
and a note says so.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from tailmem.diagnose import LoadedWeights, check_top_k, load_weights, measure
from tailmem.errors import DataError
from tailmem.models.gpt import GPT
from tailmem.models.gpt_io import GPT_CONFIG_FILE, read_gpt_config
from tailmem.models.hf_loading import WEIGHT_FILES
from tailmem.models.roles import resolve_roles
from tailmem.train.checkpoint import latest_checkpoint
from tailmem.train.state import seed_everything

SPEC_FILE = "spec.json"
INIT = "init"
"""The label of a random-initialisation baseline (one per model and seed)."""


@dataclass(frozen=True)
class Model:
    """One measured model: its column label, where it came from, its isotropy rows
    (:func:`tailmem.diagnose.measure`) and whether it is an initialisation baseline."""

    label: str
    source: str
    rows: list[dict[str, Any]]
    baseline: bool = False


@dataclass(frozen=True)
class Diagnosis:
    """The models of one PATH (baselines first) and notes on what was not measured."""

    path: Path
    models: list[Model]
    notes: list[str] = field(default_factory=list)


def collect(path: str | Path, top_k: int = 10) -> Diagnosis:
    """Measure the model(s) of ``path`` (see the module docstring)."""
    check_top_k(top_k)
    path = Path(path)
    if not path.is_dir() or _one_model(path):
        return _single(path, top_k)
    found = sorted({p.parent for p in path.rglob(GPT_CONFIG_FILE)})
    kept = [r for r in found if (r / "ckpt").is_dir() and latest_checkpoint(r / "ckpt") is not None]
    if not found:
        return _single(path, top_k)  # no model at all: load_weights says so in one line
    if not kept:
        raise DataError(
            f"{path} holds {len(found)} training runs, none with a checkpoint; expected runs "
            "that keep one (train.keep_checkpoints: all or first_seed)"
        )
    notes = []
    if len(found) > len(kept):
        notes.append(
            f"{len(found) - len(kept)} of the {len(found)} runs below {path} kept no checkpoint "
            "(train.keep_checkpoints): not measured"
        )
    specs = {run: _spec(run) for run in kept}
    labels = _labels(specs, path)
    models = [Model(labels[run], *_measured(run, top_k)) for run in kept]
    baselines, more = _baselines(specs, labels, top_k)
    return Diagnosis(path, baselines + models, notes + more)


def _one_model(folder: Path) -> bool:
    """Whether a folder is one model: a run directory or a Hugging Face folder."""
    if (folder / "ckpt").is_dir():
        return True
    return (folder / "config.json").is_file() and any((folder / f).is_file() for f in WEIGHT_FILES)


def _measured(path: Path, top_k: int) -> tuple[str, list[dict[str, Any]]]:
    loaded = load_weights(path)
    return loaded.source, measure(loaded, top_k)


def _single(path: Path, top_k: int) -> Diagnosis:
    """One model: a checkpoint, a run directory or a Hugging Face folder."""
    source, rows = _measured(path, top_k)
    if path.is_file():
        run = path.parent.parent if path.parent.name == "ckpt" else path.parent
    else:
        run = path
    if not (run / GPT_CONFIG_FILE).is_file():
        note = "no initialisation baseline: a Hugging Face model's initialisation is not rebuilt"
        return Diagnosis(path, [Model(run.name, source, rows)], [note])
    specs = {run: _spec(run)}
    labels = _labels(specs, run.parent)
    baselines, notes = _baselines(specs, labels, top_k)
    return Diagnosis(path, [*baselines, Model(labels[run], source, rows)], notes)


def _spec(run: Path) -> dict[str, Any] | None:
    """A run's ``spec.json`` (None: it has none); a damaged one is a :class:`DataError`."""
    file = run / SPEC_FILE
    if not file.is_file():
        return None
    try:
        spec = json.loads(file.read_text())
        numbers = [spec["seed"], spec["steps"], *spec["lrs"].values()]
        if not isinstance(spec["arm"]["name"], str) or not isinstance(spec["ffn"], str):
            raise TypeError
        if any(isinstance(n, bool) or not isinstance(n, int | float) for n in numbers):
            raise TypeError
        if not isinstance(spec["seed"], int):
            raise TypeError
    except (json.JSONDecodeError, KeyError, TypeError, AttributeError):
        raise DataError(f"{file} is damaged; expected the spec.json a tailmem run wrote") from None
    return dict(spec)


def _parts(spec: Mapping[str, Any]) -> dict[str, str]:
    """What may tell one run of a study from another, as label parts."""
    return {
        "ffn": spec["ffn"],
        "arm": spec["arm"]["name"],
        "lrs": " ".join(f"{kind}={lr:.3g}" for kind, lr in spec["lrs"].items()),
        "seed": f"seed {spec['seed']}",
        "steps": f"{spec['steps']} steps",
    }


def _labels(specs: Mapping[Path, dict[str, Any] | None], root: Path) -> dict[Path, str]:
    """Each run's label: its arm (with the FFN type when the runs have several) and whichever
    of learning rates, seed and length differ between runs of one arm; the path where that is
    not unique."""
    parts = {run: _parts(spec) for run, spec in specs.items() if spec is not None}
    arms: dict[tuple[str, str], list[dict[str, str]]] = {}
    for p in parts.values():
        arms.setdefault((p["ffn"], p["arm"]), []).append(p)
    varying = [
        k
        for k in ("lrs", "seed", "steps")
        if any(len({p[k] for p in a}) > 1 for a in arms.values())
    ]
    several_ffns = len({p["ffn"] for p in parts.values()}) > 1
    labels = {}
    for run, p in parts.items():
        arm = f"{p['ffn']}/{p['arm']}" if several_ffns else p["arm"]
        labels[run] = " ".join([arm, *(p[k] for k in varying)])
    if len(set(labels.values())) < len(labels) or len(labels) < len(specs):
        return {run: run.relative_to(root).as_posix() or run.name for run in specs}
    return labels


def _baselines(
    specs: Mapping[Path, dict[str, Any] | None], labels: Mapping[Path, str], top_k: int
) -> tuple[list[Model], list[str]]:
    """One initialisation baseline per (model config, seed) of the runs with a spec; a note
    for the runs without one."""
    groups: dict[tuple[str, int], list[Path]] = {}
    for run, spec in specs.items():
        if spec is not None:
            config = (run / GPT_CONFIG_FILE).read_text()
            groups.setdefault((config, spec["seed"]), []).append(run)
    notes = [
        f"no initialisation baseline for {labels[run]}: it has no {SPEC_FILE} recording its seed"
        for run, spec in specs.items()
        if spec is None
    ]
    seeds = {seed for _, seed in groups}
    configs = {config for config, _ in groups}
    models = []
    for (_, seed), runs in groups.items():
        label = INIT
        if len(configs) > 1:
            label += f" of {labels[runs[0]]}"
        elif len(seeds) > 1:
            label += f" seed {seed}"
        loaded = initial_model(runs[0], seed)
        models.append(Model(label, loaded.source, measure(loaded, top_k), baseline=True))
    return models, notes


@contextmanager
def _seeded(seed: int) -> Iterator[None]:
    """Seed as a run does (:func:`tailmem.train.seed_everything`), restoring every generator
    after."""
    python, numpy = random.getstate(), np.random.get_state()
    with torch.random.fork_rng(devices=[]):
        seed_everything(seed)
        try:
            yield
        finally:
            random.setstate(python)
            np.random.set_state(numpy)


def initial_model(run: Path, seed: int) -> LoadedWeights:
    """The GPT of ``run``'s ``gpt_config.json`` as initialised with ``seed`` (what
    :func:`tailmem.lm.subrun.run_job` trains from)."""
    cfg = read_gpt_config(run / GPT_CONFIG_FILE)
    with _seeded(seed):
        model = GPT(cfg)
    weights = {name: p.detach() for name, p in model.named_parameters()}
    source = f"the model of {run / GPT_CONFIG_FILE} at initialisation, seed {seed}"
    return LoadedWeights(source, weights, resolve_roles(model), cfg.n_head)
