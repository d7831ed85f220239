"""Which optimisers learn the tail? A tail-learning benchmark for any optimiser (PAPERS.md C).

Optimiser benchmarks report loss; this one measures whether rare facts are learned. Each
optimiser of ``optimizers`` — a kind of the optimiser registry (:mod:`tailmem.optim.registry`:
ours, torch's, or a well-kept library's) or a user's (``optim.<name>.factory:
package.module:Class``) — trains the hidden matrices (Q, K, V, O, W_in, W_gate, W_out) and Adam
everything else (embedding, head, norms), exactly as paper A's Muon arm does, so only the matrix
optimiser changes; ``adam`` is Adam on everything. Measured on:

- **knowledge QA** (paper A Sec. 4.3; :mod:`tailmem.experiments.knowledge_qa`): at every level
  (``levels``: the base, BPE answers; then one token per answer value), each optimiser at its own
  learning rate — tuned by knowledge-QA's protocol (:mod:`tailmem.lm.tuning`: tuning seeds apart
  from the evaluation seeds, a declared score, one widening rule and budget; or the rates stored
  for exactly this config) — then ``seeds`` evaluation seeds. Per optimiser: the exposure-lag
  ratio of Adam (own rate) behind it and of it behind Muon (τ 0.3/0.5/0.8, pooled as the
  geometric mean over groups, 95 % t intervals over seeds), the final FTA and exact match of the
  rarest and second-rarest groups, the tail gap over Adam (rarest group at the end; the peak gap
  descriptive), the isotropy (eRank, entropy) of its V, O and FFN matrices at the end, its step
  time relative to Adam's in the same run, and its tuning cost;
- **the one-layer associative memory** (:mod:`.memory`): the time each frequency group takes to
  halve its loss, and the one-step balance ϱ^ε, with d < K so that the families can differ.

The leaderboard (:mod:`.board`) puts the tail measure beside the cost — the step-time ratio and
the tuning trials — and places every optimiser by the statistics declared in
:mod:`tailmem.claims.bench` (:mod:`.places`): on the rarest group's final FTA paired by seed (the
primary; the area under its FTA-against-exposures curve the second), ahead of Muon, equivalent
to Muon, between, equivalent to Adam, behind Adam, or not distinguished (t tests and equivalence
tests within a declared FTA margin, Holm across the level), and nothing unless the positive
control — all-Adam against Muon — separates; the pooled lag ratios are descriptive columns.
Whether ``adam_split`` shares Muon's edge is one pre-specified comparison; each level reports
the seeds a difference of the margin needs at its observed seed SD. Claim:
``kunstner.heavy_tail_adam`` (:mod:`tailmem.claims.related`), judged on the memory
(``vasudeva.spectral_gd`` is judged by ``assoc-embeddings``, in its setting).

Outputs: ``leaderboard.csv`` (every number and test; columns documented by
:class:`.board.LeaderboardRow`), ``leaderboard_view.csv`` (the report's curated table),
``leaderboard_<level>`` (ranked intervals) and ``cost_<level>`` figures, ``lag_ratio.csv``
(every optimiser, level, pair, group and τ), ``memory.csv``, ``memory_sweep.csv``,
``results.json``, ``claims.json``, ``report.json``; each level's runs (and its tuning tables)
under ``points/<level>/``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from tailmem.claims.registry import evaluate
from tailmem.errors import ConfigError
from tailmem.experiments import knowledge_qa as kqa
from tailmem.experiments.knowledge_qa import grid
from tailmem.experiments.optim_bench import board
from tailmem.experiments.optim_bench.memory import MemorySection, run_memory
from tailmem.lm.arms import Arm, matrix_recipe
from tailmem.lm.config import OptimSection
from tailmem.lm.plan import TrainedPlan
from tailmem.lm.sweeps import gathered_outputs
from tailmem.optim.registry import OptimizerSetting, get_kind
from tailmem.outputs import write
from tailmem.rundir import RunDir
from tailmem.studies import Preset, Provenance, Study
from tailmem.train import distributed as D

NAME = "optim-bench"
REFERENCES = ("muon", "adam_split", "adam")
"""The optimisers every run needs: the two every other is placed between (Muon; Adam on the
hidden matrices at its own rate) and Adam everywhere (it lends the rest its rate)."""


@dataclass(frozen=True)
class Level:
    """One level of the QA part: its label, the dotted-key overrides of the knowledge-QA
    config that make it (the first level is the base) and its learning rates: ``sweep`` (each
    optimiser tunes its own, as at the base) or ``base`` (every optimiser at the rates it chose
    at the base level, trained once the base is done: a second look at the same optimisers for
    a third of the runs)."""

    label: str
    overrides: dict[str, Any] = field(default_factory=dict)
    rates: Literal["sweep", "base"] = "sweep"


@dataclass(frozen=True)
class Config:
    """The benchmark (see the module docstring). ``optimizers``: kinds of the registry or of
    ``optim`` (muon and adam among them); ``optim``: each kind's learning-rate grid and
    hyper-parameters (a user's kind: ``factory`` too); ``preset`` + ``common``: the knowledge-QA
    config every level starts from; ``workers``: runs trained at once, over all levels."""

    seed: int = 0
    optimizers: list[str] = field(default_factory=lambda: ["muon", "adam_split", "adam", "sgd"])
    optim: OptimSection = field(default_factory=OptimSection)
    preset: str = "cpu"
    common: dict[str, Any] = field(default_factory=dict)
    levels: list[Level] = field(default_factory=lambda: [Level("bpe")])
    memory: MemorySection = field(default_factory=MemorySection)
    workers: int = 2
    note: str = ""
    tune_only: bool = False
    """Train the tuning trials of the levels that tune, write their choices, and stop
    (``tailmem tune``): every level's ``tuning.rates`` is then ``sweep``."""

    def validate(self) -> None:
        """One-line :class:`ConfigError` for a bad optimiser, level or knowledge-QA key."""
        if self.workers < 1:
            raise ConfigError(f"workers: got {self.workers}; expected >= 1")
        missing = [name for name in REFERENCES if name not in self.optimizers]
        if missing:
            raise ConfigError(
                f"optimizers: got {self.optimizers}; expected {', '.join(REFERENCES)} among "
                "them (every optimiser is placed between Muon and Adam at its own rate; Adam "
                "everywhere lends the rest its rate)"
            )
        missing = [name for name in self.optimizers if name not in self.optim]
        if missing:
            raise ConfigError(
                f"optim: no section for {', '.join(missing)}; expected the normal form "
                "(normalized()), one section per optimiser"
            )
        labels = [level.label for level in self.levels]
        if not labels or len(set(labels)) != len(labels):
            raise ConfigError(f"levels: got {labels}; expected distinct labels, at least one")
        if self.levels[0].rates != "sweep":
            raise ConfigError(
                f"levels[0].rates: got {self.levels[0].rates!r}; expected 'sweep' (the base level "
                "chooses the rates the other levels may reuse)"
            )
        grid.refuse_owned(self.common, ("seed", "workers", "arms", "optim"), NAME)
        self.memory.validate()
        self.qa_configs()
        self.qa_configs("base")

    def normalized(self) -> Config:
        """This config with exactly one optimiser section per optimiser, in their order (the
        registry's defaults where ``optim`` gives none; sections of optimisers not run are
        left out); an optimiser neither registered nor defined is refused."""
        for name in self.optimizers:
            try:
                get_kind(name, self.optim.kinds())
            except ConfigError as exc:
                raise ConfigError(f"optimizers: {exc}") from None
        run = {name: section for name, section in self.optim.items() if name in self.optimizers}
        return replace(self, optim=OptimSection(run).with_kinds(self.optimizers))

    def check_overrides(self, keys: Sequence[str]) -> None:
        """Refuse an ``optim.<kind>`` override for a kind not in ``optimizers`` (it would reach
        no run; a preset's section of such a kind is left out of the run's config)."""
        for key in keys:
            parts = key.split(".")
            if parts[0] == "optim" and len(parts) > 1 and parts[1] not in self.optimizers:
                raise ConfigError(
                    f"{key}: {parts[1]} is not in optimizers {self.optimizers}; expected an "
                    f"optimiser the benchmark runs (add it: optimizers=[..., {parts[1]}])"
                )

    def arms(self) -> list[str]:
        """Each optimiser as a knowledge-QA arm: on the hidden matrices, Adam on the rest
        (``adam``: Adam on everything)."""
        return [f"{name}:*" if name == "adam" else matrix_recipe(name) for name in self.optimizers]

    def qa_configs(
        self, rates: str = "sweep", chosen: Mapping[str, float] | None = None
    ) -> dict[str, tuple[grid.Point, kqa.Config]]:
        """The validated knowledge-QA configs (:func:`.knowledge_qa.grid.configure`) of the
        levels whose ``rates`` are ``rates``: the preset, ``common``, then the benchmark's
        seed, workers, arms and optimiser sections, then the level's overrides. Levels that
        reuse the base's rates get every optimiser's ``chosen`` rate as one number (before the
        base has run, the first point of its grid stands in, so that the check is the same)
        and none of ``common``'s ``tuning.*`` keys (they would tune nothing)."""
        points = [grid.Point(lv.label, lv.overrides) for lv in self.levels if lv.rates == rates]
        if not points:
            return {}
        common = grid.dotted(self.common)
        if rates == "base":
            if chosen is None:
                chosen = {name: section.grid[0] for name, section in self.optim.items()}
            common = {k: v for k, v in common.items() if not k.startswith("tuning.")}

        def settle(qa: kqa.Config) -> kqa.Config:
            optim = qa.optim.updated(self.optim)
            qa = replace(qa, seed=self.seed, workers=self.workers, arms=self.arms(), optim=optim)
            if chosen is not None:
                return replace(qa, optim=optim.with_rates(chosen))
            if self.tune_only:  # refused, as a user's tuning.rates is, where nothing is tuned
                qa = replace(qa, tuning=replace(qa.tuning, rates="sweep", only=True))
                qa.check_overrides(["tuning.rates"])
            return qa

        return grid.configure(points, self.preset, common, settle)

    def memory_settings(self) -> dict[str, OptimizerSetting]:
        """Each optimiser's setting for the memory (its QA hyper-parameters, weight decay off:
        the lab scales each step by its own step size)."""
        out = {}
        for name in self.optimizers:
            section = self.optim[name]
            hparams = section.hparams
            if getattr(hparams, "weight_decay", 0.0):
                hparams = replace(hparams, weight_decay=0.0)  # type: ignore[call-arg]
            out[name] = OptimizerSetting(section.kind, 1.0, hparams)
        return out


def preflight(cfg: Config) -> None:
    """Knowledge-QA's checks for every level, before anything is written."""
    grid.preflight({**cfg.qa_configs(), **cfg.qa_configs("base")}, cfg.common)


def bench_pairs(plan: TrainedPlan) -> list[tuple[str, str]]:
    """The pairs measured per level: every optimiser against Adam at its own rate (the
    optimiser leads) and against Muon (Muon leads): ``lag`` needs ``ratio`` times ``lead``'s
    exposures."""
    arms = plan.arms
    against_adam = [(arm, "adam_split") for arm in arms if arm != "adam_split"]
    against_muon = [("muon", arm) for arm in arms if arm != "muon"]
    return against_muon + [p for p in against_adam if p not in against_muon]


def chosen_rates(point: grid.PointResult) -> dict[str, float]:
    """Every optimiser's chosen rate at a level (its own kind's, from its own arm)."""
    ffn = point.config.ffns[0]
    return {arm: point.plan.best[(ffn, arm)][arm] for arm in point.plan.arms}


def run(cfg: Config, run: RunDir, provenance: Provenance) -> None:
    """The sweeping QA levels on one pool, then those reusing the base's rates, then the
    memory, then the leaderboard, claims and report."""
    points = grid.run_points(
        cfg.qa_configs(), run.path, cfg.workers, pairs=bench_pairs, provenance=provenance
    )
    if cfg.tune_only:
        if D.is_main_process():
            write(run, gathered_outputs(run.path))
        return
    reuse = cfg.qa_configs("base", chosen_rates(points[cfg.levels[0].label]))
    if reuse:
        points |= grid.run_points(
            reuse, run.path, cfg.workers, pairs=bench_pairs, more=True, provenance=provenance
        )
    points = {level.label: points[level.label] for level in cfg.levels}
    grid.prune_points(run.path, list(points))
    if not D.is_main_process():
        return
    memory = run_memory(cfg.memory, cfg.memory_settings(), cfg.seed)
    labels = {name: _arm(cfg, name).label for name in cfg.optimizers}
    tables = board.build(cfg, run, points, memory, labels)
    claims = evaluate(NAME, board.claim_inputs(cfg, memory))
    write(run, board.outputs(cfg, tables, claims))


def _arm(cfg: Config, name: str) -> Arm:
    return Arm.of_recipe(cfg.arms()[cfg.optimizers.index(name)])


def level_names(levels: Sequence[Level]) -> list[str]:
    return [level.label for level in levels]


STUDY = Study(
    name=NAME,
    config=Config,
    run=run,
    preflight=preflight,
    reproduces="beyond the papers (C): which optimisers learn the tail",
    presets=(
        Preset("smoke", "", 37.9),
        Preset("cpu", "14 optimisers × 19 seeds at stored rates", None),  # not timed from scratch
        Preset("paper", "160M GPT", None),
    ),
    question="which optimisers learn the tail?",
    in_reproduce=False,
    on_results_page=True,
    tune_overrides=("tune_only=true",),  # the tuning levels' trials only
)
"""This study's record (:class:`~tailmem.studies.Study`)."""
