"""The scale question of knowledge-QA: where does Muon's tail advantage over Adam appear?

Each *point* is the ``knowledge-qa`` experiment (``cpu`` preset plus overrides) with only the
Muon and Adam arms and one seed: each arm's LR sweep (scored on the mean FTA over all people)
picks its learning rate, and the row reports the winners' FTA on the rarest group at the end,
on group m−2 halfway, and over all people. Points vary one knob at a time around a base point:
the number of epochs (exposures of each tail fact), m, width, depth and batch size.

    PYTHONPATH=src python scripts/qa_scale_sweep.py [--points base,ep12] [--out runs/qa-scale]

Training runs are cached in ``--out`` (a finished run is read back, an unfinished one resumes),
so the table can be rebuilt at little cost. It is written to ``--table`` (markdown) and
``.csv`` beside it.
Two worker processes with one thread each (``workers=2 threads=1``).
"""

from __future__ import annotations

import argparse
import csv
import json
import time
from pathlib import Path
from typing import Any

from tailmem.config import load_config
from tailmem.data.bios import build_dataset
from tailmem.data.stream import QATrainStream
from tailmem.experiments.knowledge_qa import Config
from tailmem.runner import run_experiment

BASE: dict[str, Any] = {
    "data.m": 8,
    "model.size": "cpu-small",
    "batch_size": 16,
    "seq_len": 128,
    "epochs": 6,
    "sweep.muon": "[0.02,0.05,0.1]",
    "sweep.adam": "[1.0e-3,3.0e-3,5.0e-3]",
}
"""The base point: m = 8 (256 people, 7,680 QA samples per epoch), 2 layers × d=128,
16 × 128-token batches, 6 epochs (each rarest-group fact seen 6 times); LR grids around the
optima of a first base sweep (Muon {0.01, 0.02, 0.05}: 0.05 best; Adam {1e-3, 3e-3, 1e-2}:
3e-3 best, 1e-2 far worse)."""

GRIDS = {"sweep.muon": "[0.05,0.1,0.2]", "sweep.adam": "[2.0e-3,3.0e-3,5.0e-3]"}
"""Grids of every point but ``base`` and ``ep9``, around the base point's optima."""

POINTS: dict[str, dict[str, Any]] = {
    "base": {},
    "ep9": {"epochs": 9},
    "ep4": {"epochs": 4, **GRIDS},
    "m6": {"data.m": 6, **GRIDS},
    "m7": {"data.m": 7, **GRIDS},
    "m9": {"data.m": 9, **GRIDS},
    "d64": {"model.d_model": 64, "model.d_ff": 256, "model.n_head": 2, **GRIDS},
    "d256": {"model.d_model": 256, "model.d_ff": 1024, **GRIDS},
    "L1": {"model.n_layer": 1, **GRIDS},
    "L4": {"model.n_layer": 4, **GRIDS},
    "b8": {"batch_size": 8, **GRIDS},
    "b32": {"batch_size": 32, **GRIDS},
}

ARMS = ["muon", "adam"]


def point_overrides(name: str, out: Path) -> tuple[list[str], dict[str, Any]]:
    """The experiment overrides of point ``name`` and its settings (epochs turned into steps)."""
    settings = {**BASE, **POINTS[name]}
    epochs = settings.pop("epochs")
    overrides = [f"{k}={v}" for k, v in settings.items()]
    cfg = load_config(Config, "knowledge-qa", "cpu", overrides)
    dataset = build_dataset(cfg.data, out / "data")
    stream = QATrainStream(dataset, cfg.batch_size, cfg.seq_len, 0)
    steps = max(10, round(epochs * stream.steps_per_epoch / 10) * 10)
    overrides += [
        f"steps={steps}",
        f"eval_every={steps // 10}",
        f"arms=[{','.join(ARMS)}]",
        "n_seeds=1",
        "workers=2",
        "threads=1",
    ]
    return overrides, {**settings, "epochs": epochs, "steps": steps}


def run_point(name: str, out: Path) -> dict[str, Any]:
    """Run (or read back) one point; returns its table row."""
    overrides, settings = point_overrides(name, out)
    start = time.perf_counter()
    # force: redo the experiment-level summary whatever is there; each training run inside is
    # still reused only if its recorded spec (model, data, LRs, seed, steps) matches.
    run, status = run_experiment("knowledge-qa", "cpu", overrides, out=out / name, force=True)
    wall = json.loads((run.path / "COMPLETE").read_text())["wall_seconds"]
    results = json.loads((run.path / "results.json").read_text())
    cfg = load_config(Config, "knowledge-qa", "cpu", overrides)
    m = cfg.data.m
    model = cfg.model.fields(cfg.seq_len)
    row: dict[str, Any] = {
        "point": name,
        "m": m,
        "layers": model["n_layer"],
        "d": model["d_model"],
        "batch": f"{cfg.batch_size}x{cfg.seq_len}",
        "steps": settings["steps"],
        "epochs": settings["epochs"],
    }
    half = round(0.5 * cfg.steps)
    for arm in ARMS:
        (result,) = [r for r in results["runs"] if r["spec"]["arm"] == arm]
        last = result["evals"][-1]
        mid = next(e for e in result["evals"] if e["step"] == half)
        row[f"lr_{arm}"] = results["best_lr"][f"plain/{arm}"][arm]
        row[f"rare_{arm}"] = round(last["fta"][m], 3)
        row[f"mid_{arm}"] = round(mid["fta"][m - 2], 3)
        row[f"all_{arm}"] = round(last["fta_mean"], 3)
    row["rare_gap"] = round(row["rare_muon"] - row["rare_adam"], 3)
    row["mid_gap"] = round(row["mid_muon"] - row["mid_adam"], 3)
    row["wall_s"] = round(wall)
    print(f"{name}: {status} in {time.perf_counter() - start:.0f}s -> {row}", flush=True)
    return row


COLUMNS = [
    ("point", "point"),
    ("m", "m"),
    ("layers", "L"),
    ("d", "d"),
    ("batch", "batch"),
    ("steps", "steps"),
    ("epochs", "epochs"),
    ("lr_muon", "Muon LR"),
    ("lr_adam", "Adam LR"),
    ("rare_muon", "rarest: Muon"),
    ("rare_adam", "rarest: Adam"),
    ("rare_gap", "rarest gap"),
    ("mid_muon", "m−2 @50%: Muon"),
    ("mid_adam", "m−2 @50%: Adam"),
    ("mid_gap", "m−2 @50% gap"),
    ("all_muon", "all: Muon"),
    ("all_adam", "all: Adam"),
    ("wall_s", "wall s"),
]


def write_table(rows: list[dict[str, Any]], path: Path) -> None:
    """Markdown table at ``path`` and the same rows as CSV beside it."""
    lines = [
        "| " + " | ".join(title for _, title in COLUMNS) + " |",
        "|" + "---|" * len(COLUMNS),
    ]
    lines += ["| " + " | ".join(str(r[key]) for key, _ in COLUMNS) + " |" for r in rows]
    path.write_text("\n".join(lines) + "\n")
    with open(path.with_suffix(".csv"), "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=[key for key, _ in COLUMNS])
        writer.writeheader()
        writer.writerows({key: r[key] for key, _ in COLUMNS} for r in rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--points", default=",".join(POINTS), help="comma-separated point names")
    parser.add_argument("--out", default="runs/qa-scale", help="folder of the cached runs")
    parser.add_argument("--table", default="scripts/qa_scale_sweep.md", help="markdown output")
    args = parser.parse_args()
    names = [p.strip() for p in args.points.split(",") if p.strip()]
    unknown = [n for n in names if n not in POINTS]
    if unknown:
        parser.error(f"unknown point(s) {', '.join(unknown)}; expected some of {', '.join(POINTS)}")
    rows = [run_point(name, Path(args.out)) for name in names]
    write_table(rows, Path(args.table))
    print(Path(args.table).read_text())


if __name__ == "__main__":
    main()
