"""The knowledge-QA point of ``scripts/gpu_check.sh``: its length, and its result in a few lines.

``steps``: the training steps that give every fact of the rarest group ``--exposures`` exposures
(one per epoch: the rarest group is selected once per epoch), for a knowledge-qa preset plus
overrides, computed from the data set itself (built into ``--cache``)::

    PYTHONPATH=src python scripts/gpu_check_qa.py steps --preset paper --exposures 30 \\
        --cache DIR data.m=10 train.batch_size=64

``summary RUN_DIR``: the run's setting, steps, exposures per rarest fact, each arm's final FTA of
the rarest and second-rarest group and its wall seconds, and the pooled exposure-lag ratio of
Adam behind Muon per FTA level (``lag_ratio_summary_<ffn>.csv``).
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
    if not (run / "results.json").is_file():
        raise DataError(f"{run} holds no results.json; expected a finished knowledge-qa run")
    config = yaml.safe_load((run / "config.yaml").read_text())["config"]
    results = json.loads((run / "results.json").read_text())
    train, data = config["train"], results["data"]
    model = json.loads(next(run.glob("runs/*/*/*/gpt_config.json")).read_text())
    lines = [
        f"knowledge-qa point: {config['model']['size']} (n_layer {model['n_layer']}, d_model "
        f"{model['d_model']}, n_head {model['n_head']}), m = {config['data']['m']} "
        f"({data['n_people']} people), {train['steps']} steps of {train['batch_size']} x "
        f"{train['seq_len']} tokens, {train['precision']} on {train['device']}, "
        f"{config['seeds']} seed(s)"
    ]
    for done in results["runs"]:
        fta = done["final"]["fta"]
        lines.append(
            f"  {done['ffn']}/{done['arm']} at {done['lrs']}: final FTA rarest group "
            f"{fta[-1]:.3f}, second rarest {fta[-2]:.3f}, all questions "
            f"{done['final']['fta_all']:.3f} ({done['wall_seconds']:.0f} s)"
        )
    for table in sorted(run.glob("lag_ratio_summary_*.csv")):
        with open(table) as handle:
            rows = [row for row in csv.DictReader(handle) if row["group"] == "pooled"]
        lines.append(f"  exposure-lag ratio ({table.name}), every group's points pooled:")
        lines += [f"    {', '.join(f'{k} {v}' for k, v in row.items() if v)}" for row in rows]
    if not list(run.glob("lag_ratio_summary_*.csv")):
        lines.append("  no exposure-lag ratio: no pair of arms completed")
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
