"""The knowledge-QA point of ``scripts/gpu_check.sh``: its length, and its result in a few lines.

``steps``: the training steps that give every fact of the rarest group ``--exposures`` exposures
(one per epoch: the rarest group is selected once per epoch), for a knowledge-qa preset plus
overrides, computed from the data set itself (built into ``--cache``)::

    PYTHONPATH=src python scripts/gpu_check_qa.py steps --preset paper --exposures 30 \\
        --cache DIR data.m=10 train.batch_size=64

``summary RUN_DIR``: a rule-or-rate run (the GPU check's point): its setting and steps, each
arm's final FTA of the rarest and second-rarest group and its wall seconds, the factorial
(``factorial.csv``: each arm's lag ratios against Adam-shared and Adam-own) and the share of
Muon's edge the rate split recovers (``regime.csv``).
"""

from __future__ import annotations

import csv
import json
import math
import sys
from pathlib import Path

import yaml

from tailmem.cli import ScriptParser, script_main
from tailmem.config import load_config
from tailmem.data.bios import build_dataset
from tailmem.data.stream import QATrainStream
from tailmem.errors import DataError
from tailmem.experiments.knowledge_qa import Config


def steps_for(preset: str, overrides: list[str], exposures: float, cache: str) -> int:
    """Steps that train each rarest-group fact ``exposures`` times."""
    cfg = load_config(Config, "knowledge-qa", preset, overrides)
    dataset = build_dataset(cfg.data, Path(cache))
    stream = QATrainStream(dataset, cfg.train.batch_size, cfg.train.seq_len, cfg.seed, cfg.loss_on)
    return math.ceil(exposures * stream.steps_per_epoch)


def summary(run: Path) -> list[str]:
    """The lines that say what the run measured."""
    if not (run / "factorial.csv").is_file():
        raise DataError(f"{run} holds no factorial.csv; expected a finished rule-or-rate run")
    config = yaml.safe_load((run / "config.yaml").read_text())["config"]
    model = json.loads(next(run.glob("points/*/runs/*/*/*/gpt_config.json")).read_text())
    train = config["common"]
    lines = [
        f"rule-or-rate point: n_layer {model['n_layer']}, d_model {model['d_model']}, n_head "
        f"{model['n_head']}, {train.get('train.steps')} steps, {train.get('train.precision')} on "
        f"{train.get('train.device')}, seeds {train.get('seeds')}"
    ]
    for path in sorted(run.glob("points/base/runs/*/*/*/result.json")):
        done = json.loads(path.read_text())
        if not done.get("final"):
            lines.append(f"  {done['arm']}: {done['status']} ({done['message']})")
            continue
        fta = done["final"]["fta"]
        lines.append(
            f"  {done['ffn']}/{done['arm']} at {done['lrs']}: final FTA rarest group "
            f"{fta[-1]:.3f}, second rarest {fta[-2]:.3f}, all questions "
            f"{done['final']['fta_all']:.3f} ({done['wall_seconds']:.0f} s)"
        )
    for name in ("factorial.csv", "regime.csv"):
        with open(run / name) as handle:
            rows = list(csv.DictReader(handle))
        lines.append(f"  {name}:")
        lines += [f"    {', '.join(f'{k} {v}' for k, v in row.items() if v)}" for row in rows]
    return lines


def main() -> None:
    parser = ScriptParser(description=__doc__.split("\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    steps = commands.add_parser("steps")
    steps.add_argument("--preset", required=True)
    steps.add_argument("--exposures", type=float, required=True)
    steps.add_argument("--cache", required=True)
    steps.add_argument("overrides", nargs="*")
    report = commands.add_parser("summary")
    report.add_argument("run", type=Path)
    args = parser.parse_args()
    if args.command == "steps":
        print(steps_for(args.preset, args.overrides, args.exposures, args.cache))
    else:
        print("\n".join(summary(args.run)))


if __name__ == "__main__":
    sys.exit(script_main(main, "gpu_check_qa.py"))
