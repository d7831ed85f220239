"""The scale question of knowledge-QA: where does Muon's tail advantage over Adam appear?

Each *point* is the ``knowledge-qa`` experiment (``cpu`` preset plus overrides) with only the
Muon and Adam arms and one seed: each arm's LR sweep (scored on the mean FTA over all people)
picks its learning rate, and the row reports the winners' FTA on the rarest group at the end,
on group m−2 halfway, and over all people. Points vary one knob at a time around a base point:
the number of epochs (exposures of each tail fact), m, width, depth and batch size.

    PYTHONPATH=src python scripts/qa_scale_sweep.py [--points base,ep12] [--out runs/qa-scale]

Training runs are cached in ``--out`` (each point's outputs are made again, reusing every
training run whose recorded spec is unchanged; an unfinished one resumes), so the table can be
rebuilt at little cost. It is written to ``--table`` (markdown) and
``.csv`` beside it.
Two worker processes with one thread each (``workers=2 threads=1``).
"""

from __future__ import annotations

import csv
import io
import json
import sys
import time
from pathlib import Path
from typing import Any

from tailmem.atomic import atomic_write_text
from tailmem.cli import ScriptParser, script_main
from tailmem.config import load_config
from tailmem.data.bios import build_dataset
from tailmem.data.stream import QATrainStream
from tailmem.errors import ConfigError
from tailmem.experiments.knowledge_qa import Config
from tailmem.runner import run_experiment

ROOT = Path(__file__).resolve().parents[1]

BASE: dict[str, Any] = {
    "data.m": 8,
    "model.size": "cpu-small",
    "train.batch_size": 16,
    "train.seq_len": 128,
    "epochs": 6,
    "optim.muon.lr": "[0.02,0.05,0.1]",
    "optim.adam.lr": "[1.0e-3,3.0e-3,5.0e-3]",
}
"""The base point: m = 8 (256 people, 7,680 QA samples per epoch), 2 layers × d=128,
16 × 128-token batches, 6 epochs (each rarest-group fact seen 6 times); LR grids around the
optima of a first base sweep (Muon {0.01, 0.02, 0.05}: 0.05 best; Adam {1e-3, 3e-3, 1e-2}:
3e-3 best, 1e-2 far worse)."""

GRIDS = {"optim.muon.lr": "[0.05,0.1,0.2]", "optim.adam.lr": "[2.0e-3,3.0e-3,5.0e-3]"}
"""Grids of every point but ``base`` and ``ep9``, around the base point's optima."""

POINTS: dict[str, dict[str, Any]] = {
    "base": {},
    "ep9": {"epochs": 9},
    "m6": {"data.m": 6, **GRIDS},
    "m7": {"data.m": 7, **GRIDS},
    "m7_b8": {"data.m": 7, "train.batch_size": 8, **GRIDS},
    "m9": {"data.m": 9, **GRIDS},
    "b8": {"train.batch_size": 8, **GRIDS},
    "d64": {"model.d_model": 64, "model.d_ff": 256, "model.n_head": 2, **GRIDS},
    "d192": {"model.d_model": 192, "model.d_ff": 768, "model.n_head": 4, **GRIDS},
    "L1": {"model.n_layer": 1, **GRIDS},
}
"""Each point changes one or two knobs of :data:`BASE` (exposures, m, batch, width, depth)."""

ARMS = ["muon", "adam"]


def point_overrides(name: str, out: Path) -> tuple[list[str], dict[str, Any]]:
    """The experiment overrides of point ``name`` and its settings (epochs turned into steps)."""
    settings = {**BASE, **POINTS[name]}
    epochs = settings.pop("epochs")
    overrides = [f"{k}={v}" for k, v in settings.items()]
    cfg = load_config(Config, "knowledge-qa", "cpu", overrides)
    dataset = build_dataset(cfg.data, out / "data")
    stream = QATrainStream(dataset, cfg.train.batch_size, cfg.train.seq_len, 0)
    steps = max(10, round(epochs * stream.steps_per_epoch / 10) * 10)
    overrides += [
        f"train.steps={steps}",
        f"train.warmup_steps={round(0.02 * steps)}",
        f"train.log_every={min(steps // 10, 50)}",
        f"train.eval_every={steps // 10}",
        f"arms=[{','.join(ARMS)}]",
        "seeds=1",
        "workers=2",
        "train.threads=1",
    ]
    return overrides, {**settings, "epochs": epochs, "steps": steps}


def run_point(name: str, out: Path) -> dict[str, Any]:
    """Run (or read back) one point; returns its table row."""
    overrides, settings = point_overrides(name, out)
    start = time.perf_counter()
    # update: each point's outputs are made again, reusing every training run whose recorded
    # spec (model, data, LRs, seed, steps) still matches, edited settings or not; an unfinished
    # run resumes (force would train every one again).
    run, status = run_experiment("knowledge-qa", "cpu", overrides, out=out / name, update=True)
    trained = [json.loads(p.read_text()) for p in run.path.glob("runs/*/*/*/result.json")]
    results = json.loads((run.path / "results.json").read_text())
    cfg = load_config(Config, "knowledge-qa", "cpu", overrides)
    m = cfg.data.m
    model = cfg.model.build(1, "plain", cfg.train.seq_len)
    varied = {k: v for k, v in POINTS[name].items() if not k.endswith(".lr")}
    row: dict[str, Any] = {
        "point": name,
        "varied": ", ".join(f"{k}={v}" for k, v in varied.items()) or "—",
        "m": m,
        "layers": model.n_layer,
        "d": model.d_model,
        "batch": f"{cfg.train.batch_size}x{cfg.train.seq_len}",
        "steps": settings["steps"],
        "epochs": settings["epochs"],
    }
    half = round(0.5 * cfg.train.steps)
    for arm in ARMS:
        (result,) = [r for r in results["runs"] if r["arm"] == arm]
        last = result["evals"][-1]
        mid = next(e for e in result["evals"] if e["step"] == half)
        row[f"lr_{arm}"] = results["best_lr"][f"plain/{arm}"][arm]
        row[f"rare_{arm}"] = round(last["fta"][m], 3)
        row[f"mid_{arm}"] = round(mid["fta"][m - 2], 3)
        row[f"all_{arm}"] = round(last["fta_all"], 3)
    row["rare_gap"] = round(row["rare_muon"] - row["rare_adam"], 3)
    row["mid_gap"] = round(row["mid_muon"] - row["mid_adam"], 3)
    row["train_s"] = round(sum(r["wall_seconds"] for r in trained))
    print(f"{name}: {status} in {time.perf_counter() - start:.0f}s -> {row}", flush=True)
    return row


COLUMNS = [
    ("point", "point"),
    ("varied", "varied"),
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
    ("train_s", "train s (all runs)"),
]


HEADER = """# knowledge-qa scale sweep (generated by scripts/qa_scale_sweep.py)

Muon vs Adam, one seed per point, each arm at the best LR of its 3-point sweep (criterion: mean
FTA over all people). "rarest": FTA of the rarest group at the end; "m−2 @50%": FTA of group
m−2 halfway through training; "all": mean FTA over all people at the end. 2-layer GPT with
d_ff = 4d unless stated, WSD schedule, 6 epochs unless stated. Single-seed spread between seeds
is about ±0.05 on the rarest group (see the cpu preset's 3-seed table). Training seconds are the
sum over the point's 6 runs on a shared 2-core machine (two at a time, one thread each; load
varied between 1 and 8), so they compare only roughly.

"""


def write_table(rows: list[dict[str, Any]], path: Path) -> None:
    """Markdown table at ``path`` and the same rows as CSV beside it, each replaced whole."""
    lines = [
        HEADER + "| " + " | ".join(title for _, title in COLUMNS) + " |",
        "|" + "---|" * len(COLUMNS),
    ]
    lines += ["| " + " | ".join(str(r[key]) for key, _ in COLUMNS) + " |" for r in rows]
    atomic_write_text(path, "\n".join(lines) + "\n")
    text = io.StringIO(newline="")
    writer = csv.DictWriter(text, fieldnames=[key for key, _ in COLUMNS])
    writer.writeheader()
    writer.writerows({key: r[key] for key, _ in COLUMNS} for r in rows)
    atomic_write_text(path.with_suffix(".csv"), text.getvalue())


TABLE = "scripts/qa_scale_sweep.md"
"""The committed table: only a sweep of every point rewrites it."""


def selected(points: str, table: str) -> list[str]:
    """The point names of ``--points``: known, at least one, and all of them when the table is
    the committed one (a subset would silently drop the other rows)."""
    names = [p.strip() for p in points.split(",") if p.strip()]
    unknown = [n for n in names if n not in POINTS]
    if unknown or not names:
        raise ConfigError(
            f"--points: got {points!r}; expected some of {', '.join(POINTS)} (comma-separated)"
        )
    if Path(table).resolve() == (ROOT / TABLE).resolve() and set(names) != set(POINTS):
        raise ConfigError(
            f"--points {points}: only these rows would replace the committed table {TABLE}; "
            "expected every point, or --table elsewhere"
        )
    return names


def main() -> None:
    parser = ScriptParser(description=__doc__.splitlines()[0])
    parser.add_argument("--points", default=",".join(POINTS), help="comma-separated point names")
    parser.add_argument("--out", default="runs/qa-scale", help="folder of the cached runs")
    parser.add_argument("--table", default=str(ROOT / TABLE), help="markdown output")
    args = parser.parse_args()
    names = selected(args.points, args.table)
    rows = [run_point(name, Path(args.out)) for name in names]
    write_table(rows, Path(args.table))
    print(Path(args.table).read_text())


if __name__ == "__main__":
    sys.exit(script_main(main, "qa_scale_sweep.py"))
