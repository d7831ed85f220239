"""Heavy-tailed knowledge QA: which optimiser learns the rare facts (paper A, Sec. 4.3; A3).

A GPT is trained on question–answer pairs about synthetic people whose frequencies follow the
paper's power law (:mod:`tailmem.data.bios`: group ``g`` has ``2**(g-1)`` people, each asked
``2**(m-g)`` times per epoch about each of six attributes). First-token accuracy (FTA) per
frequency group is measured during training for the five arms of :mod:`.qa.arms` — Muon, Adam,
SGD+momentum and the two hybrids — for a plain and/or gated FFN.

Protocol
    1. LR sweep per arm (:mod:`.qa.schedule`): one run per learning rate of the arm's grid,
       scored by the mean FTA over *all* people at its end (not the tail: tuning on the tail
       would choose for the claim being tested). Hybrids borrow the tuned LRs of the base arms
       for their other optimiser (:mod:`.qa.arms`).
    2. ``n_seeds`` runs per arm at its best learning rate; seeds change the initialisation and
       the data order, not the people.
    Every run has its own resumable directory (:mod:`.qa.single`): re-running after an
    interruption reuses finished runs and resumes unfinished ones from their checkpoints.

Outputs (in the run directory)
    ``fta_by_group_<ffn>.png/.svg`` (paper Fig. 3: FTA per group over steps, one panel per arm),
    ``fta_final_<ffn>``, ``lr_sweep_<ffn>`` figures; ``tail_table_<ffn>.csv`` (paper Tables 3–8:
    the tail groups at 20/50/100% of training, mean ± std over seeds, published values beside);
    ``tail_table_long.csv``, ``head_tail_gap.csv``, ``lr_sweep.csv``, ``results.json``,
    ``claims.json`` and ``report.json``.

``note`` (free text, e.g. what the preset's scale was chosen to show) ends the report summary.

Unpublished choices (documented here and in the presets): batch size, sequence length, schedule
(warmup, then constant, then a linear decay to 0 over the last ``decay_frac``), no gradient
clipping, SGD momentum 0.9, the learning-rate grids and the seed count.
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from tailmem.data.bios import BiosConfig, build_dataset
from tailmem.data.stream import QATrainStream
from tailmem.errors import ConfigError
from tailmem.experiments.qa import plots, summary
from tailmem.experiments.qa.arms import ARMS, KINDS, OptimConfig, check_arms
from tailmem.experiments.qa.evaluate import chance_fta
from tailmem.experiments.qa.schedule import Plan, drive
from tailmem.experiments.qa.single import Setup
from tailmem.models.gpt import SIZES, GPTConfig
from tailmem.report.claims import write_claims
from tailmem.rundir import RunDir
from tailmem.train import TrainConfig

NAME = "knowledge-qa"
FFNS = ("plain", "gated")


@dataclass
class ModelConfig:
    """The GPT: a named size of :data:`tailmem.models.gpt.SIZES`, with optional overrides.

    ``d_ff`` is the plain-FFN width; a gated FFN gets 2/3 of it (same parameter count).
    """

    size: str = "cpu-small"
    n_layer: int | None = None
    n_head: int | None = None
    d_model: int | None = None
    d_ff: int | None = None
    qk_norm: bool = True
    init_std: float = 0.02

    def fields(self, max_seq_len: int) -> dict[str, Any]:
        """:class:`GPTConfig` fields except ``vocab_size`` and ``ffn``."""
        if self.size not in SIZES:
            raise ConfigError(f"model.size: got {self.size!r}; expected one of {', '.join(SIZES)}")
        out = {k: v for k, v in SIZES[self.size].items() if k != "max_seq_len"}
        for name in ("n_layer", "n_head", "d_model", "d_ff"):
            if getattr(self, name) is not None:
                out[name] = getattr(self, name)
        out.update(qk_norm=self.qk_norm, init_std=self.init_std, max_seq_len=max_seq_len)
        return out

    def validate(self) -> None:
        GPTConfig(vocab_size=1024, **self.fields(1024)).validate()


@dataclass
class SweepConfig:
    """Learning-rate grids per optimiser kind; sweep runs' length and seed (None: the seed runs'
    ``steps`` and the first seed, in which case the winning sweep run is also that seed's run)."""

    muon: list[float] = field(default_factory=lambda: [0.01, 0.02, 0.05])
    adam: list[float] = field(default_factory=lambda: [1e-3, 3e-3, 1e-2])
    sgd: list[float] = field(default_factory=lambda: [0.1, 0.3, 1.0])
    steps: int | None = None
    seed: int | None = None

    def validate(self) -> None:
        for kind in KINDS:
            grid = getattr(self, kind)
            if not grid or any(not lr > 0 for lr in grid) or len(set(grid)) != len(grid):
                raise ConfigError(
                    f"sweep.{kind}: got {grid!r}; expected distinct positive learning rates"
                )
        if self.steps is not None and self.steps < 1:
            raise ConfigError(f"sweep.steps: got {self.steps!r}; expected a positive integer")


@dataclass
class Config:
    """The knowledge-QA experiment (see the module docstring).

    ``seed`` .. ``seed + n_seeds - 1`` are the seeds (init and data order; the people are fixed
    by ``data.seed``). ``arms``: names from :data:`~.qa.arms.ARMS`. ``ffn``: ``plain``,
    ``gated`` or ``both``. Training: ``steps`` updates of ``batch_size`` rows of ``seq_len``
    packed tokens (:class:`~tailmem.data.stream.QATrainStream`, loss on ``loss_on``), schedule
    ``schedule`` with ``warmup_frac`` of the steps warming up and ``decay_frac`` decaying (WSD).
    FTA is evaluated every ``eval_every`` steps; ``table_fracs`` of the steps (each must be
    evaluated) and the groups ``m - o`` for ``o`` in ``tail_offsets`` make the tail tables;
    ``head_groups`` most frequent groups are the "head". ``ckpt_every``: checkpoint cadence
    (0: only the end; checkpoints are deleted when a run completes unless ``keep_checkpoints``).
    ``workers`` processes with ``threads`` torch threads each train runs in parallel (1: in this
    process; must be 1 under torchrun). ``cache_dir``: where the data set is built (default: the
    run directory's ``data/``).
    """

    seed: int = 0
    n_seeds: int = 3
    arms: list[str] = field(default_factory=lambda: list(ARMS))
    ffn: Literal["plain", "gated", "both"] = "plain"
    data: BiosConfig = field(default_factory=lambda: BiosConfig(m=8))
    model: ModelConfig = field(default_factory=ModelConfig)
    batch_size: int = 16
    seq_len: int = 128
    loss_on: Literal["answer", "all"] = "answer"
    steps: int = 1000
    schedule: str = "wsd"
    warmup_frac: float = 0.02
    decay_frac: float = 0.2
    grad_clip: float | None = None
    eval_every: int = 100
    eval_batch_size: int = 256
    ckpt_every: int = 0
    table_fracs: list[float] = field(default_factory=lambda: [0.2, 0.5, 1.0])
    tail_offsets: list[int] = field(default_factory=lambda: [2, 1, 0])
    head_groups: int = 3
    optim: OptimConfig = field(default_factory=OptimConfig)
    sweep: SweepConfig = field(default_factory=SweepConfig)
    device: str = "cpu"
    precision: str = "fp32"
    workers: int = 1
    threads: int | None = None
    cache_dir: str | None = None
    keep_checkpoints: bool = False
    note: str = ""

    @property
    def ffns(self) -> list[str]:
        return list(FFNS) if self.ffn == "both" else [self.ffn]

    @property
    def seeds(self) -> list[int]:
        return [self.seed + i for i in range(self.n_seeds)]

    @property
    def sweep_steps(self) -> int:
        return self.steps if self.sweep.steps is None else self.sweep.steps

    def validate(self) -> None:
        """One-line :class:`ConfigError` for the first invalid field."""
        check_arms(self.arms)
        for name in ("n_seeds", "steps", "batch_size", "seq_len", "eval_every", "eval_batch_size"):
            if getattr(self, name) < 1:
                raise ConfigError(f"{name}: got {getattr(self, name)!r}; expected at least 1")
        if not 1 <= self.head_groups <= self.data.m:
            raise ConfigError(
                f"head_groups: got {self.head_groups}; expected 1..m = 1..{self.data.m}"
            )
        if any(not 0 <= o <= self.data.m for o in self.tail_offsets) or not self.tail_offsets:
            raise ConfigError(
                f"tail_offsets: got {self.tail_offsets}; expected distances 0..m from the rarest "
                "group"
            )
        for frac in self.table_fracs:
            step = round(frac * self.steps)
            if not 0 < frac <= 1 or (step % self.eval_every and step != self.steps) or step < 1:
                raise ConfigError(
                    f"table_fracs: {frac} of {self.steps} steps is step {step}, which is not "
                    f"evaluated; expected fractions in (0, 1] at multiples of eval_every "
                    f"({self.eval_every})"
                )
        if self.workers < 1:
            raise ConfigError(f"workers: got {self.workers}; expected at least 1")
        if self.workers > 1 and int(os.environ.get("WORLD_SIZE", "1")) > 1:
            raise ConfigError(f"workers: got {self.workers} under torchrun; expected 1")
        if self.threads is not None and self.threads < 1:
            raise ConfigError(f"threads: got {self.threads}; expected a positive integer or null")
        if self.seq_len > 4096:
            raise ConfigError(f"seq_len: got {self.seq_len}; expected at most 4096")
        self.train_config(self.steps).validate()
        self.train_config(self.sweep_steps).validate()

    def train_config(self, steps: int) -> TrainConfig:
        """The loop config of a run of ``steps`` steps (seed and progress set per run)."""
        return TrainConfig(
            steps=steps, warmup_steps=round(self.warmup_frac * steps), **self.loop_fields()
        )

    def loop_fields(self) -> dict[str, Any]:
        return {
            "schedule": self.schedule,
            "decay_frac": self.decay_frac,
            "grad_clip": self.grad_clip,
            "log_every": max(1, min(self.eval_every, 50)),
            "eval_every": self.eval_every,
            "ckpt_every": self.ckpt_every,
            "keep_ckpts": 1,
            "precision": self.precision,
            "device": self.device,
        }

    def fallback_lrs(self) -> dict[str, float]:
        """LR of each kind when its base arm is not run: the configured one, else the middle of
        the kind's grid."""
        out = {k: sorted(getattr(self.sweep, k))[len(getattr(self.sweep, k)) // 2] for k in KINDS}
        return {**out, **(self.optim.fallback_lr or {})}


def run(cfg: Config, run: RunDir) -> None:
    """Sweep, train every seed, then write tables, figures, claims and ``report.json``."""
    cache = Path(cfg.cache_dir) if cfg.cache_dir else run.path / "data"
    dataset = build_dataset(cfg.data, cache)
    QATrainStream(dataset, cfg.batch_size, cfg.seq_len, cfg.seed, cfg.loss_on)  # checks seq_len
    setup = Setup(
        dataset_path=str(dataset.path),
        dataset_fingerprint=dataset.fingerprint,
        model=cfg.model.fields(cfg.seq_len),
        batch_size=cfg.batch_size,
        seq_len=cfg.seq_len,
        loss_on=cfg.loss_on,
        warmup_frac=cfg.warmup_frac,
        train=cfg.loop_fields(),
        optim=cfg.optim,
        eval_batch_size=cfg.eval_batch_size,
        keep_checkpoints=cfg.keep_checkpoints,
        progress=cfg.workers == 1,
    )
    plan = Plan(
        ffns=cfg.ffns,
        arms=cfg.arms,
        grids={k: list(getattr(cfg.sweep, k)) for k in KINDS},
        fallback_lr=cfg.fallback_lrs(),
        seeds=cfg.seeds,
        steps=cfg.steps,
        sweep_seed=cfg.seed if cfg.sweep.seed is None else cfg.sweep.seed,
        sweep_steps=cfg.sweep_steps,
    )
    drive(plan, setup, run.path, workers=cfg.workers, threads=cfg.threads)
    if int(os.environ.get("RANK", "0")) == 0:
        write_outputs(cfg, run, plan, chance_fta(dataset), dataset.summary())


def write_outputs(
    cfg: Config, run: RunDir, plan: Plan, chance: float, data_summary: dict[str, Any]
) -> None:
    """Tables, figures, results, claims and the report layout of a finished plan."""
    m = cfg.data.m
    sweep_rows = plan.sweep_rows()
    run.write_csv("lr_sweep.csv", sweep_rows)
    long_rows, gaps = [], []
    figures, tables = [], []
    for ffn in cfg.ffns:
        run.write_csv(
            f"tail_table_{ffn}.csv",
            summary.tail_table(plan, ffn, cfg.table_fracs, cfg.tail_offsets, m),
        )
        long_rows += summary.tail_table_long(plan, ffn, cfg.table_fracs, cfg.tail_offsets, m)
        gaps += summary.gap_rows(plan, ffn, cfg.head_groups)
        figures += [
            run.save_report_figure(
                plots.fta_by_group_figure(plan, ffn, chance),
                f"fta_by_group_{ffn}",
                f"FTA per frequency group over training, {ffn} FFN, mean ± std over "
                f"{cfg.n_seeds} seed(s) (paper Fig. 3); dashed: chance {chance:.3f}",
            ),
            run.save_report_figure(
                plots.final_fta_figure(plan, ffn, chance),
                f"fta_final_{ffn}",
                f"FTA at the last step by frequency group, {ffn} FFN",
            ),
            run.save_report_figure(
                plots.sweep_figure(sweep_rows, ffn),
                f"lr_sweep_{ffn}",
                f"LR sweep, {ffn} FFN: mean FTA over all people per learning rate",
            ),
        ]
        tables.append(
            {
                "file": f"tail_table_{ffn}.csv",
                "caption": f"Tail groups (m = {m}) at 20/50/100% of {cfg.steps} steps, "
                f"{ffn} FFN, mean ± std over {cfg.n_seeds} seed(s); 'paper' "
                "columns: the published m = 15 value of the group at the same "
                "distance from the rarest (— where not published)",
            }
        )
    run.write_csv("tail_table_long.csv", long_rows)
    run.write_csv("head_tail_gap.csv", gaps)
    tables += [
        {
            "file": "head_tail_gap.csv",
            "caption": f"Head (groups 0..{cfg.head_groups - 1}) vs rarest group at the end: the "
            "head–tail gap, mean and std over seeds",
        },
        {"file": "lr_sweep.csv", "caption": "LR sweep (score: mean FTA over all people)"},
    ]
    claims = summary.claims(plan, m, cfg.head_groups)
    write_claims(run, claims)
    results = {
        "data": data_summary,
        "chance_fta": chance,
        "best_lr": {f"{ffn}/{arm}": lrs for (ffn, arm), lrs in plan.best.items()},
        "runs": [plan.results[s] for specs in plan.seed_runs.values() for s in specs],
        "head_tail_gap": gaps,
        "tail_table": long_rows,
        "config_model": dataclasses.asdict(cfg.model),
    }
    run.write_json("results.json", results)
    run.write_json(
        "report.json",
        {
            "title": "Knowledge QA: FTA of rare facts by optimiser (paper A, Sec. 4.3)",
            "summary": report_summary(cfg, gaps, claims, sweep_rows, data_summary, chance),
            "figures": figures,
            "tables": tables,
        },
    )


def report_summary(
    cfg: Config,
    gaps: list[dict[str, Any]],
    claims: list[Any],
    sweep_rows: list[dict[str, Any]],
    data_summary: dict[str, Any],
    chance: float,
) -> str:
    """One paragraph: the setting, the final rarest-group FTA per arm and the verdicts."""
    model = cfg.model.fields(cfg.seq_len)
    parts = [
        f"{model['n_layer']} layers × d={model['d_model']} (d_ff {model['d_ff']}), "
        f"m = {cfg.data.m} ({data_summary['n_people']} people, "
        f"{data_summary['n_train_items']} QA samples per epoch), {cfg.steps} steps of "
        f"{cfg.batch_size}×{cfg.seq_len} tokens, {cfg.n_seeds} seed(s), chance FTA {chance:.3f}."
    ]
    for ffn in cfg.ffns:
        finals = ", ".join(
            f"{ARMS[g['arm']].label} {g['rarest_mean']:.3f}±{g['rarest_std']:.3f}"
            for g in gaps
            if g["ffn"] == ffn
        )
        parts.append(f"Rarest group (group {cfg.data.m}) at the end, {ffn} FFN: {finals}.")
    counts: dict[str, int] = {}
    for c in claims:
        counts[c.verdict] = counts.get(c.verdict, 0) + 1
    parts.append("Claims: " + ", ".join(f"{n} {v}" for v, n in counts.items()) + ".")
    edges = [f"{r['ffn']}/{r['arm']}" for r in sweep_rows if r["chosen"] and r["grid_edge"]]
    if edges:
        parts.append(
            f"Chosen LR at the end of its grid (may not be the optimum): {', '.join(edges)}."
        )
    if cfg.note:
        parts.append(cfg.note.strip())
    return " ".join(parts)
