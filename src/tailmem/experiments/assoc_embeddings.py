"""Experiment ``assoc-embeddings``: the mechanism in the one-layer memory (PAPERS.md D, A4, B).

Paper A's theory says the balance of Adam's idealisation (SignGD, Adam with β1 = β2 = 0) depends
on the embeddings — ``ϱ = 1 − ε`` with decoupled ``E = Ẽ = I``, ``O(ε^(−0.7) K^(−0.3))`` on its
coupled construction — while Muon's does not (Theorem 5.3: ``ϱ ≥ 1 − ε(1 + O(log K/K))`` for any
orthonormal embeddings). Paper B says a coordinate-wise sign matches Muon only with oracle access
to the task's basis (TRA-SignGD, ``U = Ẽ sign(Ẽᵀ∇L E) Eᵀ``). So a random rotation of the
embeddings should hurt Adam and SignGD, not Muon. This experiment measures it.

The memory is paper A's (``f_W(E_k) = softmax(Ẽᵀ W E_k)``, exact population loss from
``W_0 = 0``, :mod:`tailmem.assoc`) with ``E = Ẽ`` (every fact's key and object embedded alike, as in
the decoupled case) on a Zipf (or paper A's two-group) spectrum, at two dimensions: ``d ≥ K``
(orthonormal embeddings exist) and ``d < K`` (facts interfere). Three geometries per draw:

* ``aligned``: the identity at ``d ≥ K`` (``E = I_{d×K}``, every fact on its own coordinate); at
  ``d < K``, where K facts cannot each have an axis, the nearest aligned code
  (:func:`coordinate_codes`: every fact on two coordinates, entries ``±1/√2``);
* ``rotated``: the same embeddings turned by a Haar-random ``Q`` (``E = Ẽ = Q·aligned``): the same
  Gram matrix, so the same problem for a rotation-equivariant optimiser, no longer aligned with
  the coordinates;
* ``correlated``: non-orthogonal — the rotated embeddings mixed by ``Σ_ρ^{1/2}``
  (:func:`mixing`), so that at ``d ≥ K`` the Gram matrix is exactly ``(1 − ρ)I + ρ11ᵀ``: against
  ``rotated``, the cost of correlation alone.

Families, each the lab's direction map (:mod:`tailmem.assoc.optimizers`): Muon (orthogonalised),
SignGD (sign), Adam (element-wise, β1 0.9, β2 0.999), GD (plain) and TRA-SignGD (paper B's oracle,
the positive control; run only where the embeddings are orthonormal, the only case where its task
basis is one). Step sizes follow optim-bench's memory protocol
(:mod:`tailmem.experiments.optim_bench.memory`): each family's step on each geometry is the one of
the grid ``lrs`` at which its most frequent group halves its loss closest to a head pace of P
steps, matched on a tuning draw (``seed + seeds``) apart from the evaluation draws; every run at
pace P lasts ``steps · P / head_steps``; the verdicts must hold at every pace of ``paces``. Per
draw and frequency group the time to learn is the first step at which the group's loss is at
most half its initial loss (:func:`~tailmem.experiments.assoc_scaling.half_loss_times`), and the
measure is rarest ÷ most frequent group's time, each against the arm's own head.

Claims (:data:`tailmem.claims.related.MECHANISM_CLAIMS`): ``A4.beyond.muon_rotation_invariant``,
``A4.beyond.adam_embedding_dependent``, ``B.beyond.sign_needs_alignment``, one verdict per regime.
Outputs: ``ratios.csv`` (family × geometry × regime at the head pace: geometric mean of rarest ÷
head over draws with its 95 % t interval, censored draws), ``ratios_all_paces.csv``,
``runs.csv`` (every draw's times), ``ratios.png``, ``results.json``, ``claims.json`` and
``report.json`` with ``answers``.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING

import torch

from tailmem import progress
from tailmem.assoc import build_memory, custom, lr_schedule, train, two_group, zipf
from tailmem.assoc.embeddings import Embedding, haar_orthogonal
from tailmem.assoc.optimizers import OptimizerSpec
from tailmem.assoc.optimizers import label as optimizer_label
from tailmem.assoc.spectra import FrequencySpectrum
from tailmem.claims.core import (
    Bound,
    ClaimResult,
    floored_se,
    mean_se,
    t_quantile,
)
from tailmem.claims.registry import evaluate
from tailmem.claims.related import (
    ALIGNED,
    MECHANISM,
    ORACLE,
    ROTATED,
    BenchMemory,
    EmbeddingsInputs,
    MemoryPace,
    arm,
    lag_resolution,
    log_lag,
)
from tailmem.columns import column, column_docs, records
from tailmem.errors import ConfigError
from tailmem.experiments.assoc_scaling import half_loss_times
from tailmem.outputs import Answer, Figure, Outputs, Report, Table, write
from tailmem.plotting import pyplot
from tailmem.rundir import RunDir
from tailmem.studies import Preset, Provenance, Study
from tailmem.typecheck import check_range

if TYPE_CHECKING:
    from matplotlib.figure import Figure as PlotFigure

NAME = MECHANISM
GEOMETRIES = (ALIGNED, ROTATED, "correlated")
FAMILIES = ("muon", "signgd", "adam", "gd", ORACLE)
REGIMES = ("d_ge_k", "d_lt_k")
SPECTRA = ("zipf", "two_group")
COLORS = {ALIGNED: "tab:green", ROTATED: "tab:red", "correlated": "tab:purple"}


@dataclass(frozen=True)
class Config:
    """``facts`` K; ``dim_ge_k`` (≥ K) and ``dim_lt_k`` (< K) the two regimes' d; the
    ``spectrum`` (``zipf``: ``exponent`` over ``groups`` log-spaced rank groups; ``two_group``:
    paper A's ``head_mass`` α and ``head_fraction`` β); ``correlation`` ρ of the correlated
    geometry; the ``families``; ``steps`` per run at the head pace ``head_steps`` (the pace the
    table and figure show), the ``paces`` every verdict must hold at, the step-size grid
    ``lrs`` and the ``seeds`` evaluation draws (module docstring)."""

    seed: int = 0
    facts: int = 64
    dim_ge_k: int = 64
    dim_lt_k: int = 24
    spectrum: str = "zipf"
    exponent: float = 1.0
    groups: int = 4
    head_mass: float = 0.8
    head_fraction: float = 0.2
    correlation: float = 0.5
    families: list[str] = field(default_factory=lambda: list(FAMILIES))
    steps: int = 300
    head_steps: int = 15
    paces: list[int] = field(default_factory=lambda: [5, 15, 50])
    lrs: list[float] = field(default_factory=lambda: [10 ** (k / 4) for k in range(-16, 9)])
    seeds: int = 8

    def dims(self) -> dict[str, int]:
        """Each regime's embedding dimension."""
        return {"d_ge_k": self.dim_ge_k, "d_lt_k": self.dim_lt_k}

    def run_steps(self, pace: int) -> int:
        """The length of a run at head pace ``pace``: ``steps`` in units of ``head_steps``."""
        return max(pace + 1, round(self.steps * pace / self.head_steps))

    def all_paces(self) -> list[int]:
        """The paces run: ``paces`` and the table's ``head_steps``, ascending."""
        return sorted({*self.paces, self.head_steps})

    def validate(self) -> None:
        if not isinstance(self.facts, int) or self.facts < 4:
            raise ConfigError(f"facts: got {self.facts}; expected an integer >= 4")
        if self.dim_ge_k < self.facts:
            raise ConfigError(f"dim_ge_k: got {self.dim_ge_k}; expected >= facts = {self.facts}")
        if not 3 <= self.dim_lt_k < self.facts:
            raise ConfigError(
                f"dim_lt_k: got {self.dim_lt_k}; expected 3..facts-1 = {self.facts - 1}"
            )
        if 2 * self.dim_lt_k * (self.dim_lt_k - 1) < self.facts:
            raise ConfigError(
                f"dim_lt_k: got {self.dim_lt_k}; its 2·d·(d−1) distinct 2-sparse codes are fewer "
                f"than facts = {self.facts}"
            )
        if self.spectrum not in SPECTRA:
            raise ConfigError(f"spectrum: got {self.spectrum!r}; expected one of {SPECTRA}")
        check_range("exponent", self.exponent, gt=0)
        check_range("head_mass", self.head_mass, gt=0, lt=1)
        check_range("head_fraction", self.head_fraction, gt=0, lt=1)
        check_range("correlation", self.correlation, ge=0, lt=1)
        unknown = [f for f in self.families if f not in FAMILIES]
        if unknown or not self.families:
            raise ConfigError(f"families: got {self.families}; expected names from {FAMILIES}")
        for name in ("groups", "steps", "seeds"):
            if getattr(self, name) < 1:
                raise ConfigError(f"{name}: got {getattr(self, name)}; expected >= 1")
        if not 1 <= self.head_steps < self.steps:
            raise ConfigError(
                f"head_steps: got {self.head_steps}; expected 1..steps-1 = {self.steps - 1}"
            )
        if not self.paces or any(pace < 1 for pace in self.paces):
            raise ConfigError(f"paces: got {self.paces}; expected positive step counts")
        if not self.lrs or any(not lr > 0 for lr in self.lrs):
            raise ConfigError(f"lrs: got {self.lrs}; expected positive step sizes")


# --------------------------------------------------------------------------- geometries


def coordinate_codes(d: int, K: int, generator: torch.Generator) -> torch.Tensor:
    """``K`` distinct 2-sparse unit vectors of ``R^d`` as columns (``d × K``), drawn without
    replacement from the ``4·C(d, 2)`` vectors ``(±e_i ± e_j)/√2``: the embeddings closest to the
    identity that ``d < K`` allows — every fact on two coordinates, so each fact's outer product
    ``Ẽ_k E_kᵀ`` touches four entries of ``W`` — with overlaps ``0`` or ``±1/2`` between facts
    that share a coordinate (the interference of ``d < K``)."""
    pairs = torch.triu_indices(d, d, offset=1)
    pick = torch.randperm(4 * pairs.shape[1], generator=generator)[:K]
    pair, signs = pick // 4, pick % 4
    codes = torch.zeros(d, K, dtype=torch.float64)
    cols = torch.arange(K)
    codes[pairs[0, pair], cols] = (1 - 2 * (signs // 2)).to(torch.float64) / math.sqrt(2)
    codes[pairs[1, pair], cols] = (1 - 2 * (signs % 2)).to(torch.float64) / math.sqrt(2)
    return codes


def mixing(K: int, correlation: float) -> torch.Tensor:
    """``Σ_ρ^{1/2} = √(1 − ρ) I + a 11ᵀ``, the symmetric square root of ``Σ_ρ = (1 − ρ)I + ρ11ᵀ``
    (``a = (√(1 − ρ + ρK) − √(1 − ρ)) / K``): embeddings ``X Σ_ρ^{1/2}`` share the component
    ``a·X1`` and, for orthonormal ``X``, have the Gram matrix ``Σ_ρ`` exactly."""
    rho = correlation
    a = (math.sqrt(1.0 - rho + rho * K) - math.sqrt(1.0 - rho)) / K
    return math.sqrt(1.0 - rho) * torch.eye(K, dtype=torch.float64) + a * torch.ones(
        K, K, dtype=torch.float64
    )


def embeddings(cfg: Config, regime: str, draw: int) -> dict[str, Embedding]:
    """The three geometries of draw ``draw`` in ``regime`` (module docstring), ``E = Ẽ``. The
    draw seeds the coordinate codes (``d < K``) and the rotation ``Q``; the identity
    (``aligned`` at ``d ≥ K``) is the same in every draw."""
    d, K = cfg.dims()[regime], cfg.facts
    gen = torch.Generator().manual_seed(draw)
    aligned = torch.eye(d, K, dtype=torch.float64) if d >= K else coordinate_codes(d, K, gen)
    rotated = haar_orthogonal(d, gen) @ aligned
    mats = {ALIGNED: aligned, ROTATED: rotated, "correlated": rotated @ mixing(K, cfg.correlation)}
    return {name: custom(X, X, name) for name, X in mats.items()}


def orthonormal(emb: Embedding) -> bool:
    """Whether the key and object embeddings have orthonormal columns (``EᵀE = ẼᵀẼ = I``)."""
    E, Et = emb.dense()
    eye = torch.eye(emb.K, dtype=torch.float64)
    return bool(
        torch.allclose(E.T @ E, eye, atol=1e-10) and torch.allclose(Et.T @ Et, eye, atol=1e-10)
    )


def spectrum_of(cfg: Config) -> FrequencySpectrum:
    """The frequency spectrum: Zipf over ``groups`` rank groups, or paper A's two groups."""
    if cfg.spectrum == "two_group":
        return two_group(cfg.facts, cfg.head_mass, cfg.head_fraction)
    return zipf(cfg.facts, cfg.exponent, n_buckets=cfg.groups)


def frequency_ratio(spectrum: FrequencySpectrum) -> float:
    """Per-fact frequency of the most frequent group over the rarest's (group means): GD's
    rarest ÷ head time is about this."""
    mean = spectrum.group_mass() / spectrum.group_sizes().to(torch.float64)
    return float(mean[0] / mean[-1])


# --------------------------------------------------------------------------- runs


@dataclass(frozen=True)
class SweepPoint:
    """One step of the grid on the tuning draw: how far (in log steps) the most frequent group's
    half-loss time missed the pace (None: it never halved, or the run was not finite)."""

    lr: float
    head_miss: float | None


def tune(
    spectrum: FrequencySpectrum, emb: Embedding, family: str, lrs: Sequence[float], pace: int
) -> tuple[float, tuple[SweepPoint, ...]]:
    """The step of ``lrs`` at which the most frequent group halves its loss closest to ``pace``
    steps (in log steps; the smaller step on a tie), all steps run at once for ``4·pace``
    steps; with each step's miss (None: the head never halved, or the run was not finite —
    where no step reaches the pace the choice is an end of the grid, which leaves the pace
    undecided for the claims)."""
    spec = OptimizerSpec(family)
    memory = build_memory(spectrum, emb, spec, backend="dense")
    grid = torch.tensor(lrs, dtype=torch.float64)
    trajectory = train(memory, spec, grid[None, :].expand(4 * pace, -1))
    scored = []
    for i, lr in enumerate(lrs):
        head = half_loss_times(trajectory.group_loss[:, i, :1])[0]
        finite = bool(torch.isfinite(trajectory.loss[:, i]).all())
        miss = abs(math.log(max(head, 1) / pace)) if finite and head is not None else math.inf
        scored.append((miss, lr))
    sweep = tuple(SweepPoint(lr, miss if math.isfinite(miss) else None) for miss, lr in scored)
    return min(scored)[1], sweep


def learn_times(
    spectrum: FrequencySpectrum, emb: Embedding, family: str, lr: float, steps: int
) -> tuple[list[int | None], float]:
    """Per frequency group, the first step with loss ≤ half the initial (None: not within
    ``steps``), and the final loss, of ``family`` at step ``lr``."""
    spec = OptimizerSpec(family)
    memory = build_memory(spectrum, emb, spec, backend="dense")
    trajectory = train(memory, spec, lr_schedule("constant", steps, spectrum.K, lr=lr))
    return half_loss_times(trajectory.group_loss), float(trajectory.loss[-1])


@dataclass(frozen=True)
class ArmRun:
    """One arm's run on one evaluation draw at its matched step: per frequency group (most
    frequent first) the first step with loss ≤ half the initial (None: not within the run),
    and the final loss."""

    arm: str
    draw: int
    lr: float
    times: tuple[int | None, ...]
    final_loss: float


@dataclass(frozen=True)
class PaceResult:
    """Every arm of one regime at head pace ``pace``: the run length ``steps``, each arm's
    ``chosen`` step, the ``edges`` (arms whose step is an end of the grid), each arm's
    ``sweeps`` on the tuning draw and its ``runs`` on the evaluation draws."""

    pace: int
    steps: int
    chosen: Mapping[str, float]
    edges: tuple[str, ...]
    sweeps: Mapping[str, tuple[SweepPoint, ...]]
    runs: tuple[ArmRun, ...]

    def times(self) -> dict[str, list[Sequence[int | None]]]:
        """Arm → per evaluation draw (in run order) → its times per group."""
        out: dict[str, list[Sequence[int | None]]] = {}
        for run in self.runs:
            out.setdefault(run.arm, []).append(run.times)
        return out


@dataclass(frozen=True)
class RegimeResult:
    """One regime: its embedding dimension ``d`` and every pace run, ascending."""

    d: int
    paces: tuple[PaceResult, ...]


@dataclass(frozen=True)
class NotRun:
    """An arm left out of a regime, and why."""

    regime: str
    arm: str
    reason: str


@dataclass(frozen=True)
class Measured:
    """A :func:`measure` result: the evaluation ``draws`` and the ``tuning_draw``, every
    regime's runs, the arms ``not_run``, the frequency ``groups`` (most frequent first) and
    the spectrum's head ÷ rarest per-fact :func:`frequency_ratio` (``results.json`` holds it
    as it stands)."""

    draws: tuple[int, ...]
    tuning_draw: int
    regimes: Mapping[str, RegimeResult]
    not_run: tuple[NotRun, ...]
    groups: tuple[str, ...]
    frequency_ratio: float


def measure(cfg: Config) -> Measured:
    """Every family on every geometry of both regimes at every pace (module docstring)."""
    spectrum = spectrum_of(cfg)
    draws = list(range(cfg.seed, cfg.seed + cfg.seeds))
    tuning = cfg.seed + cfg.seeds
    ends = (min(cfg.lrs), max(cfg.lrs))
    regimes: dict[str, RegimeResult] = {}
    not_run = []
    plan = []
    for regime in REGIMES:
        embs = {draw: embeddings(cfg, regime, draw) for draw in [*draws, tuning]}
        arms = []
        for family in cfg.families:
            for geometry in GEOMETRIES:
                if family == ORACLE and not orthonormal(embs[tuning][geometry]):
                    reason = "the embeddings are not orthonormal: no task basis"
                    not_run.append(NotRun(regime, arm(family, geometry), reason))
                    continue
                arms.append((family, geometry))
        plan.append((regime, embs, arms))
    progress.plan(sum(len(arms) for *_, arms in plan) * len(cfg.all_paces()), "arms")
    for regime, embs, arms in plan:
        d = cfg.dims()[regime]
        paces = []
        for pace in cfg.all_paces():
            steps = cfg.run_steps(pace)
            chosen: dict[str, float] = {}
            sweeps: dict[str, tuple[SweepPoint, ...]] = {}
            runs: list[ArmRun] = []
            for family, geometry in progress.iterate(arms, f"{regime} pace {pace}", len(arms)):
                name = arm(family, geometry)
                lr, sweeps[name] = tune(spectrum, embs[tuning][geometry], family, cfg.lrs, pace)
                chosen[name] = lr
                # The identity is the same in every draw: run once.
                ran = draws[:1] if geometry == ALIGNED and d >= cfg.facts else draws
                found = {draw: learn_times(spectrum, embs[draw][geometry], family, lr, steps)
                         for draw in ran}  # fmt: skip
                for draw in draws:
                    times, loss = found.get(draw, found[draws[0]])
                    runs.append(ArmRun(name, draw, lr, tuple(times), loss))
            edges = tuple(name for name, lr in chosen.items() if lr in ends)
            paces.append(PaceResult(pace, steps, chosen, edges, sweeps, tuple(runs)))
        regimes[regime] = RegimeResult(d, tuple(paces))
    return Measured(tuple(draws), tuning, regimes, tuple(not_run),
                    tuple(spectrum.group_names), frequency_ratio(spectrum))  # fmt: skip


def claim_inputs(measured: Measured) -> EmbeddingsInputs:
    """The claims' inputs from a :func:`measure` result: per regime, a
    :class:`~tailmem.claims.related.BenchMemory` whose arms are ``family/geometry``."""
    regimes = {}
    for regime, entry in measured.regimes.items():
        paces = [MemoryPace(pace=p.pace, steps=p.steps, times=p.times(), edges=list(p.edges))
                 for p in entry.paces]  # fmt: skip
        regimes[regime] = BenchMemory(seeds=list(measured.draws), paces=paces)
    return EmbeddingsInputs(regimes=regimes)


# --------------------------------------------------------------------------- summaries


@dataclass(frozen=True)
class RatioStats:
    """Rarest ÷ head time over draws (:func:`ratio_row`): the draws, how many are censored
    and how many have no head, the geometric mean and its 95 % interval (None: no draw
    measured)."""

    draws: int
    censored: int
    no_head: int
    ratio: float | None
    ratio_low: float | None
    ratio_high: float | None


def ratio_row(times: Sequence[Sequence[int | None]], steps: int) -> RatioStats:
    """Rarest ÷ head time over draws: its geometric mean with the 95 % t interval of the mean
    log ratio (SE floored by one step's resolution, df n − 1), how many draws are censored (the
    rarest group not learned within ``steps``: their ratio counts at its lower bound, so the
    mean is one too) and how many learned nothing (no head: left out)."""
    lags = [log_lag(t, steps) for t in times]
    values = [x.value if isinstance(x, Bound) else x for x in lags if x is not None]
    censored = sum(isinstance(x, Bound) for x in lags)
    no_head = sum(x is None for x in lags)
    if not values:
        return RatioStats(len(times), censored, no_head, None, None, None)
    stats = mean_se(values)
    resolution = max(lag_resolution(t, steps) for t in times if t[0] is not None)
    half = t_quantile(max(stats.n - 1, 1)) * floored_se(stats, resolution)
    return RatioStats(len(times), censored, no_head, math.exp(stats.mean),
                      math.exp(stats.mean - half), math.exp(stats.mean + half))  # fmt: skip


@dataclass(frozen=True)
class RatioRow:
    """A row of ``ratios.csv`` and ``ratios_all_paces.csv``: one arm of one regime at one
    pace (:func:`ratio_rows`)."""

    regime: str = column("d_ge_k (d ≥ K: orthonormal embeddings possible) or d_lt_k (d < K)")
    d: int = column("the embedding dimension")
    K: int = column("the number of facts")
    pace: int = column("the head pace P the step was matched to")
    family: str = column("the optimiser family")
    geometry: str = column("aligned (identity / 2-sparse codes), rotated (Haar Q), correlated")
    lr: float = column("the step matched on the tuning draw")
    lr_at_grid_edge: bool = column("the matched step is an end of the grid (the pace not reached)")
    head_time: float | None = column("mean step at which the most frequent group halves its loss")
    draws: int = column("the evaluation draws of the embeddings")
    censored: int = column(
        "draws whose rarest group was not learned within the run (counted at the bound)"
    )
    no_head: int = column("draws whose head was never learned (left out)")
    ratio: float | None = column(
        "geometric mean over draws of rarest ÷ head time (a lower bound if censored > 0)"
    )
    ratio_low: float | None = column(
        "95 % t interval of the mean log ratio, low end (SE floored by one step)"
    )
    ratio_high: float | None = column("its high end")


def ratio_rows(cfg: Config, measured: Measured) -> list[RatioRow]:
    """One row per regime, pace, family and geometry run (:func:`ratio_row`), with the step."""
    rows = []
    for regime, entry in measured.regimes.items():
        for pace in entry.paces:
            times = pace.times()
            for family in cfg.families:
                for geometry in GEOMETRIES:
                    name = arm(family, geometry)
                    if name not in times:
                        continue
                    heads = [t[0] for t in times[name] if t[0] is not None]
                    stats = ratio_row(times[name], pace.steps)
                    rows.append(RatioRow(
                        regime=regime, d=cfg.dims()[regime], K=cfg.facts, pace=pace.pace,
                        family=family, geometry=geometry, lr=pace.chosen[name],
                        lr_at_grid_edge=name in pace.edges,
                        head_time=sum(heads) / len(heads) if heads else None,
                        draws=stats.draws, censored=stats.censored, no_head=stats.no_head,
                        ratio=stats.ratio, ratio_low=stats.ratio_low, ratio_high=stats.ratio_high,
                    ))  # fmt: skip
    return rows


REGIME_LABELS = {"d_ge_k": "d ≥ K", "d_lt_k": "d < K"}
WORDS = {"reproduced": "yes", "not reproduced": "no", "inconclusive": "not decided",
         "not measured": "not measured"}  # fmt: skip


def shown(row: RatioRow | None) -> str:
    """A table row's ratio as ``×1.00 [0.95, 1.05]`` (``≥`` where a draw is censored)."""
    if row is None or row.ratio is None:
        return "—"
    bound = "≥" if row.censored else ""
    return f"{bound}×{row.ratio:.2f} [{row.ratio_low:.2f}, {row.ratio_high:.2f}]"


def answers(cfg: Config, results: Sequence[ClaimResult], rows: Sequence[RatioRow]) -> list[Answer]:
    """The experiment's questions answered from its claims' verdicts (per regime) and the
    head-pace ratios (``rows``) behind them; the correlated geometry, which no published
    statement covers, descriptively."""
    verdicts = {r.id: r.verdict for r in results}

    def row(family: str, geometry: str, regime: str) -> RatioRow | None:
        return next((r for r in rows if (r.family, r.geometry, r.regime)
                     == (family, geometry, regime)), None)  # fmt: skip

    def evidence(families: Sequence[str], geometries: Sequence[str]) -> str:
        parts = []
        for regime in REGIMES:
            cells = [f"{f} {g} {shown(row(f, g, regime))}" for f in families for g in geometries
                     if row(f, g, regime) is not None]  # fmt: skip
            shown_cells = ", ".join(cells) or "not run"
            parts.append(f"{REGIME_LABELS[regime]} (d = {cfg.dims()[regime]}): {shown_cells}")
        return (f"rarest ÷ head time to halve the group loss at head pace {cfg.head_steps}, "
                f"geometric mean [95 % interval] over {cfg.seeds} draws, K = {cfg.facts}; "
                + "; ".join(parts))  # fmt: skip

    out = []
    for claim_id, question, families, geometries in (
        ("A4.beyond.muon_rotation_invariant",
         "Is Muon's balance independent of the embeddings' orientation?", ["muon"],
         [ALIGNED, ROTATED]),
        ("B.beyond.sign_needs_alignment",
         "Does sign descent need the facts aligned with the coordinates (and, where the "
         "embeddings are orthonormal, does the sign in the task basis, the oracle, remove the "
         "need)?", ["signgd", ORACLE], [ALIGNED, ROTATED]),
        ("A4.beyond.adam_embedding_dependent",
         "Does Adam's balance depend on the embeddings?", ["adam"], [ALIGNED, ROTATED]),
    ):  # fmt: skip
        found = {regime: verdicts.get(f"{claim_id}.{regime}", "not measured") for regime in REGIMES}
        if all(v == "reproduced" for v in found.values()):
            overall = "yes"
        elif "not reproduced" in found.values():
            overall = "no"
        else:
            overall = "not decided everywhere"
        answer = (
            f"{overall} ("
            + "; ".join(f"{REGIME_LABELS[r]}: {WORDS[v]}" for r, v in found.items())
            + f"; {claim_id})"
        )
        out.append(
            Answer(
                question,
                answer,
                evidence(families, geometries),
                "; ".join(f"{r}: {v}" for r, v in found.items()),
            )
        )
    # Beyond the intervals: the correlated one above the rotated one, which must be a value,
    # not a bound (a censored rotated ratio could be any larger number).
    slower = [f"{f} ({REGIME_LABELS[regime]})" for regime in REGIMES for f in cfg.families
              if (a := row(f, ROTATED, regime)) and (b := row(f, "correlated", regime))
              and a.ratio_high is not None and b.ratio_low is not None
              and not a.censored and b.ratio_low > a.ratio_high]  # fmt: skip
    out.append(Answer(
        question="What do correlated (non-orthogonal) embeddings do to each family's balance?",
        answer=(f"correlation (off-diagonal ρ = {cfg.correlation:g}) slows the tail, beyond "
                "the 95 % intervals of the rotated embeddings' ratio, of "
                + (", ".join(slower) or "no family")),
        evidence=evidence(cfg.families, [ROTATED, "correlated"]),
        verdict="descriptive: no published statement covers non-orthogonal embeddings",
    ))  # fmt: skip
    return out


def figure(cfg: Config, rows: Sequence[RatioRow]) -> PlotFigure:
    """Rarest ÷ head time per family and geometry (points with 95 % intervals, log scale), one
    panel per regime, at the head pace; a censored mean (a lower bound) drawn as a triangle."""
    plt = pyplot()
    fig, axes = plt.subplots(1, len(REGIMES), figsize=(11, 4.2), sharey=True)
    width = 0.25
    for ax, regime in zip(axes, REGIMES, strict=True):
        for j, geometry in enumerate(GEOMETRIES):
            for i, family in enumerate(cfg.families):
                r = next((r for r in rows if (r.regime, r.family, r.geometry)
                          == (regime, family, geometry)), None)  # fmt: skip
                if r is None or r.ratio is None:
                    continue
                assert r.ratio_low is not None and r.ratio_high is not None  # with the ratio
                x = i + (j - 1) * width
                err = [[r.ratio - r.ratio_low], [r.ratio_high - r.ratio]]
                ax.errorbar(x, r.ratio, yerr=err, fmt="^" if r.censored else "o",
                            color=COLORS[geometry], capsize=3,
                            label=geometry if i == 0 else None)  # fmt: skip
        for i, family in enumerate(cfg.families):
            if not any((r.regime, r.family) == (regime, family) for r in rows):
                ax.annotate("not run", (i, 1.0), ha="center", va="bottom", fontsize=8)
        ax.axhline(1.0, color="k", lw=0.8, ls=":")
        ax.set_yscale("log")
        ax.set_xticks(range(len(cfg.families)), [optimizer_label(f) for f in cfg.families])
        ax.set_title(f"{REGIME_LABELS[regime]}: d = {cfg.dims()[regime]}, K = {cfg.facts}")
    axes[0].set_ylabel("rarest ÷ head time to halve the loss")
    axes[0].legend(title="embeddings (▲: lower bound)", fontsize=8)
    return fig


def figure_caption(cfg: Config) -> str:
    """The report's caption of :func:`figure`."""
    return (
        f"rarest ÷ most frequent group's time to halve its loss at head pace {cfg.head_steps} "
        f"(each arm's step matched to it), geometric mean and 95 % interval over {cfg.seeds} "
        "draws of the rotation (and, at d < K, the codes); 1 = every group at once. Aligned: "
        "the identity (d ≥ K) or 2-sparse coordinate codes (d < K); rotated: the same under a "
        f"Haar-random rotation; correlated: rotated and mixed to off-diagonal ρ = "
        f"{cfg.correlation:g}. A triangle is a lower bound (a draw's rarest group not learned)"
    )


def run(cfg: Config, run: RunDir, provenance: Provenance) -> None:
    """Measure every arm, then write the tables, figure, results, claims and report."""
    started = time.perf_counter()
    measured = measure(cfg)
    write(run, outputs(cfg, measured, time.perf_counter() - started))


@dataclass(frozen=True)
class RunRow:
    """One arm's run on one evaluation draw (a row of ``runs.csv``)."""

    regime: str = column("the regime: d_ge_k (d ≥ K) or d_lt_k (d < K)")
    pace: int = column("the head pace P its step was matched to")
    steps: int = column("the run's length (20 P)")
    arm: str = column("the update rule and the embeddings' geometry")
    draw: int = column("the evaluation draw")
    lr: float = column("its matched step size")
    final_loss: float = column("the loss at the end of the run")
    times: tuple[int | None, ...] = column(
        "the first step at which the group's loss is at most half its initial loss (group 0 the "
        "most frequent; empty: not within the run)",
        each="steps_group{}",
    )


def run_rows(measured: Measured) -> list[RunRow]:
    """``runs.csv``: every draw's run, its times per frequency group."""
    return [
        RunRow(regime, p.pace, p.steps, r.arm, r.draw, r.lr, r.final_loss, r.times)
        for regime, entry in measured.regimes.items()
        for p in entry.paces
        for r in p.runs
    ]


def summary(cfg: Config, measured: Measured, claims: Sequence[ClaimResult]) -> str:
    """The report's paragraph: the set-up and the claims' verdicts."""
    decided = ", ".join(f"{r.id}: {r.verdict}" for r in claims)
    return (
        f"K = {cfg.facts} facts ({cfg.spectrum} spectrum: the most frequent group "
        f"{measured.frequency_ratio:.0f}× as frequent per fact as the rarest), E = Ẽ at "
        f"d = {cfg.dim_ge_k} (≥ K) and d = {cfg.dim_lt_k} (< K), aligned / rotated / "
        f"correlated, {cfg.seeds} draws; each family's step matched on its own head at "
        f"paces {cfg.all_paces()} on a tuning draw. Claims: {decided}."
    )


def outputs(cfg: Config, measured: Measured, wall_seconds: float) -> Outputs:
    """The tables, figure, ``results.json``, claims and report of a :func:`measure` result
    (``wall_seconds``: how long it took)."""
    inputs = claim_inputs(measured)
    rows = ratio_rows(cfg, measured)
    head = [r for r in rows if r.pace == cfg.head_steps]
    claims = tuple(evaluate(NAME, inputs))
    results = {"experiment": NAME, "config": asdict(cfg), **asdict(measured),
               "table": records(head), "wall_seconds": wall_seconds}  # fmt: skip
    docs = column_docs(RatioRow)
    runs = run_rows(measured)
    tables = (
        Table("ratios.csv", records(head), f"rarest ÷ head time at head pace {cfg.head_steps}, "
              "per regime, family and geometry", docs),
        Table("ratios_all_paces.csv", records(rows), "the same at every pace", docs),
        Table("runs.csv", records(runs), columns=column_docs(RunRow, runs)),
    )  # fmt: skip
    report = Report(
        "Beyond the papers: the mechanism in the one-layer memory (embeddings' orientation)",
        summary(cfg, measured, claims), tuple(answers(cfg, claims, head)),
    )  # fmt: skip
    figures = (Figure("ratios", figure(cfg, head), figure_caption(cfg)),)
    return Outputs(tables, figures, {"results.json": results}, claims, report)


STUDY = Study(
    name=NAME,
    config=Config,
    run=run,
    reproduces="beyond the papers (D): the embeddings' orientation — Muon vs sign, Adam, GD",
    presets=(
        Preset("smoke", "", 0.9),
        Preset("cpu", "K = 64, 5 families × 3 geometries × 2 d × 8 draws", 288.0),
        Preset("paper", "K = 999", None),
    ),  # cpu timed at load 6-7 (137 s of CPU)
    in_reproduce=False,
)
"""This study's record (:class:`~tailmem.studies.Study`)."""
