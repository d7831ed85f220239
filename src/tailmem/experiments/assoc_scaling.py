"""Experiment ``assoc-scaling``: paper B's training dynamics and scaling laws (PAPERS.md B).

Hierarchical power-law frequencies (M groups of C facts, group mass ∝ i^(−β)), random orthonormal
embeddings, exact population loss. Paper B's rates come from secondary sources; this experiment
simulates the setting faithfully and lets the fits speak.

1. Noiseless per-group loss curves for GD, Muon, SignGD and TRA-SignGD; GD's total loss against
   K/(ηt) and Muon's against K·e^(−ηt); TRA-SignGD(η) against Muon(2η), and plain SignGD over a
   grid of step sizes, refined between the best grid point's neighbours, against the same Muon
   run; each group's first step at half its initial loss under GD and Muon.
2. Label noise: excess loss L(W_T) − L* after T steps over a sweep of horizons T — GD at the
   stable step η = gd_lr_p1 / p_max (one run, read at every T), Muon with η = c·log K / T (one
   run per T) — fitted exponents against −(1 − 1/β) and −2 for each β.
3. Steps until the excess loss settles below a target, GD over Muon, against the group size C
   (the Ω(C) claim), each optimiser at its best step size from a grid (GD also at η·p_max = 1).
4. GD's stability threshold in η·p_max, for two group sizes.
5. Whether Muon from W₀ = 0 keeps the block-symmetric structure: a dense run with random
   orthonormal embeddings, projected onto the exchangeable algebra at every step.

GD, Muon and TRA-SignGD run on the structured backend in the task basis, which is exact for any
orthonormal embedding (they are basis-invariant; see :mod:`tailmem.assoc.memory`); plain SignGD
depends on the basis and runs dense. The Muon horizon sweep uses ``muon_groups`` groups (its exact
polar factor costs an SVD of an M×M matrix per step) with the same K as the GD sweep.
"""

from __future__ import annotations

import math
import time
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

import torch

import tailmem.assoc as A
from tailmem import progress
from tailmem.assoc.fits import exponential_rate, loglog_slope
from tailmem.assoc.memory import loss_floor
from tailmem.assoc.optimizers import label as optimizer_label
from tailmem.assoc.structure import Layout, project
from tailmem.assoc.theory import MUON_NOISY_EXPONENT, gd_noisy_exponent, gd_stability_threshold
from tailmem.claims.b import BInputs
from tailmem.claims.b_measured import (
    BlockSymmetry,
    Matching,
    Noiseless,
    NoisyFit,
    NoisyFitRow,
    Settings,
    StabilityRow,
    TargetFit,
    TargetRow,
)
from tailmem.claims.core import grid_edge
from tailmem.claims.registry import evaluate
from tailmem.columns import column, column_docs, records
from tailmem.errors import ConfigError
from tailmem.outputs import Figure, Outputs, Report, Table, write
from tailmem.plotting import pyplot, style_loglog
from tailmem.resources import require_largest, rows_bytes, trajectory_bytes
from tailmem.rundir import RunDir
from tailmem.studies import Preset, Provenance, Study
from tailmem.typecheck import check_range

if TYPE_CHECKING:
    from matplotlib.figure import Figure as PlotFigure

NAME = "assoc-scaling"
COLORS = {"gd": "tab:blue", "muon": "tab:green", "signgd": "tab:orange", "tra_signgd": "tab:purple"}


@dataclass(frozen=True)
class Config:
    """Scales of the five parts (see the module docstring)."""

    seed: int = 0
    # 1. noiseless curves
    curve_groups: int = 10
    curve_group_size: int = 20
    curve_exponent: float = 2.0
    curve_steps: int = 3000
    curve_record_every: int = 10
    gd_lr_p1: float = 1.0
    muon_lr: float = 0.01
    sign_lr: float = 0.005
    match_steps: int = 600
    signgd_grid: list[float] = field(default_factory=lambda: [1e-4, 3e-4, 1e-3, 3e-3, 1e-2])
    signgd_refine: int = 8  # step sizes between the best grid point's neighbours
    # 2. noisy horizon sweep
    label_noise: float = 0.1
    exponents: list[float] = field(default_factory=lambda: [1.5, 2.0, 3.0])
    gd_groups: int = 200
    gd_group_size: int = 50
    muon_groups: int = 50
    muon_group_size: int = 200
    horizons: list[int] = field(default_factory=lambda: [25, 50, 100, 200, 400, 800, 1600])
    muon_c: float = 2.0
    # 3. steps to target against C
    target_groups: int = 10
    target_exponent: float = 2.0
    target_group_sizes: list[int] = field(default_factory=lambda: [4, 16, 64, 256])
    target_excess: float = 1e-4
    target_max_steps: int = 3000
    gd_lr_grid_p1: list[float] = field(
        default_factory=lambda: [1.0, 2.0, 4.0, 8.0, 16.0, 32.0]
    )  # 32 is past GD's stable step (≈ 22 at label noise 0.1): the grid brackets GD's best
    muon_lr_grid: list[float] = field(
        default_factory=lambda: [0.003, 0.006, 0.0125, 0.025, 0.05, 0.1, 0.2, 0.4]
    )
    # 4. GD stability
    stability_lr_p1: list[float] = field(
        default_factory=lambda: [0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0]
    )
    stability_group_sizes: list[int] = field(default_factory=lambda: [4, 64])
    stability_steps: int = 1500
    # 5. block symmetry
    symmetry_groups: int = 4
    symmetry_group_size: int = 10
    symmetry_steps: int = 30

    def validate(self) -> None:
        check_range(
            "label_noise", self.label_noise, gt=0.0, lt=1.0, why="the noisy sweep needs noise"
        )
        for name in ("curve_exponent", "target_exponent", "gd_lr_p1", "muon_lr", "sign_lr"):
            check_range(name, getattr(self, name), gt=0.0)
        for name in ("muon_c", "target_excess"):
            check_range(name, getattr(self, name), gt=0.0)
        for name in ("signgd_grid", "gd_lr_grid_p1", "muon_lr_grid", "stability_lr_p1"):
            for i, lr in enumerate(getattr(self, name)):
                check_range(f"{name}[{i}]", lr, gt=0.0)
        for i, beta in enumerate(self.exponents):
            check_range(f"exponents[{i}]", beta, gt=1.0, why="paper B's theory needs β > 1")
        if len(self.horizons) < 2 or any(T < 1 for T in self.horizons):
            raise ConfigError("horizons: expected at least two positive step counts")
        if len(self.target_group_sizes) < 2:
            raise ConfigError("target_group_sizes: expected at least two group sizes to fit")
        positive_ints = (
            "curve_groups",
            "curve_group_size",
            "curve_steps",
            "curve_record_every",
            "match_steps",
            "signgd_refine",
            "gd_groups",
            "gd_group_size",
            "muon_groups",
            "muon_group_size",
            "target_groups",
            "target_max_steps",
            "stability_steps",
            "symmetry_groups",
            "symmetry_group_size",
            "symmetry_steps",
        )
        for name in positive_ints:
            if getattr(self, name) < 1:
                raise ConfigError(f"{name}: got {getattr(self, name)}; expected a positive integer")
        if self.match_steps > self.curve_steps:
            raise ConfigError("match_steps: must not exceed curve_steps")
        if self.gd_groups * self.gd_group_size != self.muon_groups * self.muon_group_size:
            raise ConfigError(
                "gd_groups·gd_group_size must equal muon_groups·muon_group_size (same K)"
            )


def preflight(cfg: Config) -> None:
    """Refuse, before the run directory is written, a curve cadence that records nothing but
    the start, and sizes that cannot fit in memory. What each part surely allocates (float64):

    - the curve and symmetry parts draw Haar-orthogonal K × K embeddings (QR of a Gaussian: at
      least four K × K matrices at once);
    - the noiseless curves: the loss and the per-group statistics of every step of its four
      optimisers (kept for the fits and the half-loss times) with their schedules and the step
      axis, and a row of ``4 + curve_groups`` numbers per recorded step and optimiser;
    - the matching part: the loss of every step of each SignGD step size (the grid, then its
      refinement);
    - the noisy sweep: a schedule and the loss of every step up to the longest horizon, and
      the frequencies and groups of both spectra (K = ``gd_groups × gd_group_size``);
    - steps to target and GD stability: per step size the loss of every step, its excess and
      a comparison, and the spectrum of the largest group size;
    - block symmetry: a schedule, and at every step the loss and per-group statistics."""
    if cfg.curve_record_every > cfg.curve_steps:
        raise ConfigError(
            f"curve_record_every: got {cfg.curve_record_every}; expected at most curve_steps "
            f"({cfg.curve_steps}), so the curves record more than their start"
        )
    K = max(cfg.curve_groups * cfg.curve_group_size, cfg.symmetry_groups * cfg.symmetry_group_size)
    T, groups = cfg.curve_steps, cfg.curve_groups
    records = T // cfg.curve_record_every + 1
    curves = 4 * trajectory_bytes(T) + 16 * T + rows_bytes(4 * records, 4 + groups)
    curves += 4 * (T + 1) * (16 * groups + 24)  # every step's group and extreme statistics
    horizon = max(cfg.horizons)
    noisy = 8 * horizon + trajectory_bytes(horizon) + 32 * cfg.gd_groups * cfg.gd_group_size

    def per_lr(steps: int, sizes: list[int], grid: int) -> int:
        excess = 9 * (steps + 1) * grid  # the excess loss (float64) and a comparison (bool)
        return trajectory_bytes(steps, grid) + excess + 16 * cfg.target_groups * max(sizes)

    grids = max(len(cfg.gd_lr_grid_p1), len(cfg.muon_lr_grid))
    symmetry = 8 * cfg.symmetry_steps + 8 * (cfg.symmetry_steps + 1) * (4 + 2 * cfg.symmetry_groups)
    require_largest(
        {
            f"an orthonormal embedding of K={K} facts": 8 * 4 * K * K,
            f"the noiseless curves of curve_steps={T}": curves,
            f"the matching of match_steps={cfg.match_steps}": trajectory_bytes(
                cfg.match_steps, max(len(cfg.signgd_grid), cfg.signgd_refine)
            ),
            f"the noisy sweep (horizons up to {horizon}, K={cfg.gd_groups * cfg.gd_group_size})": (
                noisy
            ),
            f"steps to target (target_max_steps={cfg.target_max_steps})": per_lr(
                cfg.target_max_steps, cfg.target_group_sizes, grids
            ),
            f"GD stability (stability_steps={cfg.stability_steps})": per_lr(
                cfg.stability_steps, cfg.stability_group_sizes, len(cfg.stability_lr_p1)
            ),
            f"block symmetry (symmetry_steps={cfg.symmetry_steps})": symmetry,
        }
    )


@dataclass(frozen=True)
class CurveRow:
    """One recorded step of a noiseless run (``noiseless_curves.csv``)."""

    optimizer: str = column("the update rule")
    lr: float = column("its constant step size")
    step: int = column("the step")
    loss: float = column("the total loss")
    group_loss: tuple[float, ...] = column(
        "the group's mean loss per fact (group 1 the most frequent)", each="group_{}", first=1
    )


@dataclass(frozen=True)
class SweepRow:
    """One (β, horizon T) of the noisy sweep (``noisy_sweep.csv``)."""

    spectrum_exponent: float = column("β of the group masses i^(−β)")
    T: int = column("the horizon")
    K: int = column("number of facts")
    gd_excess: float = column("GD's excess loss L(W_T) − L* at the stable step")
    muon_excess: float = column("Muon's excess loss at its last iterate, η = c·log K / T")
    muon_excess_envelope: float = column("the larger of Muon's last two iterates")
    muon_bound_constant: float = column("that envelope · (T/log K)²")


@dataclass(frozen=True)
class Results:
    """What the five parts measured (see the module docstring), and the seconds they took."""

    curves: list[CurveRow]
    noiseless: Noiseless
    matching: Matching
    sweep: list[SweepRow]
    sweep_fits: list[NoisyFit]
    target_rows: list[TargetRow]
    target_fit: TargetFit
    stability: list[StabilityRow]
    symmetry: BlockSymmetry
    wall_seconds: float


def run(cfg: Config, run: RunDir, provenance: Provenance) -> None:
    """Run the five parts, then write their tables, figures, claims and report."""
    write(run, outputs(cfg, measure(cfg)))


def measure(cfg: Config) -> Results:
    """Run the five parts (see the module docstring)."""
    started = time.perf_counter()
    progress.plan(5, "phases")  # three sweeps, the matching check, the rest
    curves, noiseless = _noiseless(cfg)
    matching = _matching(cfg)
    progress.advance(1)
    sweep, sweep_fits = _noisy_sweep(cfg)
    target_rows, target_fit = _steps_to_target(cfg)
    stability = _stability(cfg)
    symmetry = _block_symmetry(cfg)
    return Results(
        curves,
        noiseless,
        matching,
        sweep,
        sweep_fits,
        target_rows,
        target_fit,
        stability,
        symmetry,
        time.perf_counter() - started,
    )


def outputs(cfg: Config, found: Results) -> Outputs:
    """The tables, figures, claims, ``results.json`` and report of the five parts."""
    results: dict[str, Any] = {
        "experiment": NAME,
        "config": asdict(cfg),
        "noiseless": asdict(found.noiseless),
        "matching": found.matching.to_json(),
        "noisy_fits": [f.to_json() for f in found.sweep_fits],
        "steps_to_target": {"rows": records(found.target_rows), "fit": asdict(found.target_fit)},
        "gd_stability": records(found.stability),
        "block_symmetry": asdict(found.symmetry),
    }
    fits = [f.row for f in found.sweep_fits]  # the per-horizon lists are in noisy_sweep.csv
    tables = (
        Table("noiseless_curves.csv", records(found.curves),
              columns=column_docs(CurveRow, found.curves)),
        Table("noisy_sweep.csv", records(found.sweep), columns=column_docs(SweepRow)),
        Table("noisy_fits.csv", records(fits), "fitted exponents against the claims",
              column_docs(NoisyFitRow)),
        Table("steps_to_target.csv", records(found.target_rows), "steps to target against C",
              column_docs(TargetRow)),
        Table("gd_stability.csv", records(found.stability), "GD stability against η·p_max",
              column_docs(StabilityRow)),
    )  # fmt: skip
    figures = (
        Figure(
            "noiseless_group_curves",
            _figure_curves(cfg, found.curves, found.noiseless),
            "noiseless per-group loss curves",
        ),
        Figure(
            "noisy_scaling",
            _figure_sweep(cfg, found.sweep, fits),
            "excess loss against the horizon T",
        ),
        Figure(
            "steps_to_target",
            _figure_target(cfg, found.target_rows, found.target_fit),
            "steps to target, GD over Muon, vs C",
        ),
    )
    return Outputs(
        tables,
        figures,
        {"results.json": {**results, "wall_seconds": found.wall_seconds}},
        tuple(evaluate(NAME, claim_inputs(cfg, found))),
        _report(cfg),
    )


def claim_inputs(cfg: Config, found: Results) -> BInputs:
    """What the B checks read: the settings they need and the parts' results as measured."""
    settings = Settings(
        curve_steps=cfg.curve_steps,
        gd_groups=cfg.gd_groups,
        gd_lr_p1=cfg.gd_lr_p1,
        horizons=cfg.horizons,
        gd_lr_grid_p1=cfg.gd_lr_grid_p1,
        muon_lr_grid=cfg.muon_lr_grid,
        target_excess=cfg.target_excess,
        target_max_steps=cfg.target_max_steps,
        symmetry_steps=cfg.symmetry_steps,
    )
    return BInputs(
        settings=settings,
        noiseless=found.noiseless,
        matching=found.matching,
        noisy_fits=found.sweep_fits,
        target_rows=found.target_rows,
        target_fit=found.target_fit,
        gd_stability=found.stability,
        block_symmetry=found.symmetry,
    )


# --------------------------------------------------------------------------- 1. noiseless


def _curve_spectrum(cfg: Config) -> A.FrequencySpectrum:
    return A.hierarchical(cfg.curve_groups, cfg.curve_group_size, cfg.curve_exponent)


def _noiseless(cfg: Config) -> tuple[list[CurveRow], Noiseless]:
    spectrum = _curve_spectrum(cfg)
    K = spectrum.K
    emb = A.orthonormal(K, seed=cfg.seed)
    p_max = float(spectrum.p.max())
    lrs = {
        "gd": cfg.gd_lr_p1 / p_max,
        "muon": cfg.muon_lr,
        "signgd": cfg.sign_lr,
        "tra_signgd": cfg.sign_lr,
    }
    T = cfg.curve_steps
    record = list(range(0, T + 1, cfg.curve_record_every))
    rows: list[CurveRow] = []
    trajs = {}
    for opt, lr in progress.iterate(lrs.items(), "noiseless curves"):
        memory = A.build_memory(spectrum, emb, opt)
        traj = A.train(memory, opt, A.lr_schedule("constant", T, K, lr=lr))  # every step
        trajs[opt] = traj
        for step in record:
            groups = tuple(float(traj.group_loss[step, g]) for g in range(spectrum.n_groups))
            rows.append(CurveRow(opt, lr, step, float(traj.loss[step]), groups))
    steps = torch.tensor(record, dtype=torch.float64)
    per_item_p = spectrum.group_mass() / torch.as_tensor(
        spectrum.group_sizes(), dtype=torch.float64
    )
    # GD: per-item loss ≈ 1/(η p_j t), total ≈ K/(η t)
    gd = trajs["gd"]
    eta = lrs["gd"]
    t_all = torch.arange(T + 1, dtype=torch.float64)
    late = t_all >= T / 2
    final = gd.group_loss[-1] * eta * per_item_p * T
    learned = eta * per_item_p * T >= 100
    # Muon: total ≈ K e^{-η t}; per-group rates
    mu = trajs["muon"]
    sel = (mu.loss < 0.1) & (mu.loss > 1e-12)
    rate, pref = exponential_rate(t_all[sel], mu.loss[sel])
    group_rates = []
    for g in range(spectrum.n_groups):
        y = mu.group_loss[record, g]
        ok = (y < 0.1) & (y > 1e-12)
        group_rates.append(exponential_rate(steps[ok], y[ok])[0] / cfg.muon_lr)
    gd_rates = []
    for g in range(spectrum.n_groups):
        y = gd.group_loss[record, g]
        gd_rates.append(loglog_slope(steps[steps >= T / 2], y[steps >= T / 2]))
    return rows, Noiseless(
        K=K,
        lrs=lrs,
        gd_total_ratio=float((gd.loss[late] * eta * t_all[late] / K).mean()),
        gd_total_slope=loglog_slope(t_all[late], gd.loss[late]),
        gd_group_ratio=final.tolist(),
        gd_group_eta_p_t=(eta * per_item_p * T).tolist(),
        gd_group_ratio_learned=final[learned].tolist(),
        muon_rate_over_eta=rate / cfg.muon_lr,
        muon_prefactor_over_k=pref / K,
        muon_group_rates_over_eta=group_rates,
        gd_group_slopes=gd_rates,
        muon_final_gap=float(mu.gap[-1]),
        gd_final_gap=float(gd.gap[-1]),
        # B.preconditioner: how each group's speed depends on its frequency
        group_item_p=per_item_p.tolist(),
        gd_group_half_times=half_loss_times(gd.group_loss),
        muon_group_half_times=half_loss_times(mu.group_loss),
    )


def half_loss_times(group_loss: torch.Tensor) -> list[int | None]:
    """Per group (columns of ``group_loss``, one row per step from 0), the first step at which
    its loss is at most half its loss at step 0 (None: not within the run)."""
    out: list[int | None] = []
    for g in range(group_loss.shape[1]):
        hit = (group_loss[:, g] <= 0.5 * group_loss[0, g]).nonzero()
        out.append(int(hit[0]) if len(hit) else None)
    return out


def _matching(cfg: Config) -> Matching:
    """TRA-SignGD(η) and plain SignGD (grid) against Muon(2η), noiseless and noisy."""
    spectrum = _curve_spectrum(cfg)
    K = spectrum.K
    emb = A.orthonormal(K, seed=cfg.seed)
    T = cfg.match_steps
    tra_mismatch = []  # noiseless, noisy
    for noise in (0.0, cfg.label_noise):
        mu = A.train(
            A.build_memory(spectrum, emb, "muon", noise),
            "muon",
            A.lr_schedule("constant", T, K, lr=2 * cfg.sign_lr),
            record=[0],
        )
        tra = A.train(
            A.build_memory(spectrum, emb, "tra_signgd", noise),
            "tra_signgd",
            A.lr_schedule("constant", T, K, lr=cfg.sign_lr),
            record=[0],
        )
        floor = loss_floor(K, noise)
        ref = mu.loss - floor

        def mismatch(loss: torch.Tensor, ref: torch.Tensor = ref, floor: float = floor) -> float:
            return float(((loss - floor - ref).abs() / ref.clamp(min=1e-300)).max())

        tra_mismatch.append(mismatch(tra.loss))
    mu = A.train(
        A.build_memory(spectrum, emb, "muon"),
        "muon",
        A.lr_schedule("constant", T, K, lr=2 * cfg.sign_lr),
        record=[0, T],
    )

    def signgd(lrs: list[float], desc: str) -> tuple[torch.Tensor, torch.Tensor]:
        """Plain SignGD at every step size of ``lrs`` (one batched run): its largest relative
        loss difference from Muon(2η) over the steps, and its final Δ, per step size."""
        batch = torch.tensor(lrs, dtype=torch.float64)
        sg = A.train(A.build_memory(spectrum, emb, "signgd"), "signgd",
                     batch[None, :].expand(T, -1), record=[0, T], progress=True,
                     desc=desc)  # fmt: skip
        return ((sg.loss - mu.loss[:, None]).abs() / mu.loss[:, None]).amax(dim=0), sg.gap[-1]

    grid = cfg.signgd_grid
    mism, final_gap = signgd(grid, "signgd grid")
    # The grid's best is only an upper bound on the best over all step sizes: refine between
    # its neighbours, so that 'no step size matches' rests on the step sizes in between too.
    i = int(mism.argmin())
    lo, hi = math.log(grid[max(i - 1, 0)]), math.log(grid[min(i + 1, len(grid) - 1)])
    fine = [math.exp(lo + (hi - lo) * k / (cfg.signgd_refine + 1))
            for k in range(1, cfg.signgd_refine + 1)] if hi > lo else []  # fmt: skip
    fine_mism = signgd(fine, "signgd refined")[0].tolist() if fine else []
    tried = sorted(zip([*grid, *fine], [*mism.tolist(), *fine_mism], strict=True))
    best_lr, best_mismatch = min(tried, key=lambda item: item[1])
    return Matching(
        tra_noiseless=tra_mismatch[0],
        tra_noisy=tra_mismatch[1],
        signgd_grid=grid,
        signgd_vs_muon_2eta=mism.tolist(),
        refined_lrs=fine,
        refined_mismatch=fine_mism,
        best_lr=best_lr,
        best_mismatch=best_mismatch,
        signgd_final_gap=final_gap.tolist(),
        muon_final_gap=float(mu.gap[-1]),
        steps=T,
    )


# --------------------------------------------------------------------------- 2. noisy sweep


def _noisy_sweep(cfg: Config) -> tuple[list[SweepRow], list[NoisyFit]]:
    rows: list[SweepRow] = []
    fits: list[NoisyFit] = []
    horizons = sorted(cfg.horizons)
    T_max = horizons[-1]
    for beta in progress.iterate(cfg.exponents, "noisy sweep"):
        gd_spec = A.hierarchical(cfg.gd_groups, cfg.gd_group_size, beta)
        K = gd_spec.K
        floor = loss_floor(K, cfg.label_noise)
        emb = A.decoupled(K)  # = any orthonormal embedding for GD and Muon (basis invariance)
        memory = A.build_memory(gd_spec, emb, "gd", cfg.label_noise)
        eta = cfg.gd_lr_p1 / float(gd_spec.p.max())
        traj = A.train(memory, "gd", A.lr_schedule("constant", T_max, K, lr=eta), record=[0])
        gd_excess = [float(traj.loss[T] - floor) for T in horizons]
        mu_spec = A.hierarchical(cfg.muon_groups, cfg.muon_group_size, beta)
        mu_mem = A.build_memory(mu_spec, emb, "muon", cfg.label_noise)
        mu_excess, mu_envelope = [], []
        for T in horizons:
            lrs = A.lr_schedule("log_k_over_t", T, K, c=cfg.muon_c)
            mu_traj = A.train(mu_mem, "muon", lrs, record=[T])
            last_two = mu_traj.loss[-2:] - floor
            mu_excess.append(float(last_two[-1]))
            mu_envelope.append(float(last_two.max()))
        for T, g, m, e in zip(horizons, gd_excess, mu_excess, mu_envelope, strict=True):
            rows.append(SweepRow(beta, T, K, g, m, e, e * (T / math.log(K)) ** 2))
        row = NoisyFitRow(
            spectrum_exponent=beta,
            K=K,
            gd_slope=loglog_slope(horizons, gd_excess),
            gd_predicted=gd_noisy_exponent(beta),
            muon_slope_last=loglog_slope(horizons, [max(m, 1e-300) for m in mu_excess]),
            muon_slope=loglog_slope(horizons, [max(e, 1e-300) for e in mu_envelope]),
            muon_predicted=MUON_NOISY_EXPONENT,
            muon_max_bound_constant=max(
                e * (T / math.log(K)) ** 2 for T, e in zip(horizons, mu_envelope, strict=True)
            ),
            gd_lr=eta,
            muon_c=cfg.muon_c,
        )
        fits.append(NoisyFit(row, horizons, gd_excess, mu_envelope))
    return rows, fits


# --------------------------------------------------------------------------- 3. steps to target


def _settled_below(excess: torch.Tensor, target: float) -> list[int | None]:
    """Per column, the first step from which ``excess ≤ target`` holds to the end (None if never).

    "Stays below" rather than "first touches": constant-step Muon oscillates around the optimum,
    and a transient crossing would reward a step size that cannot hold the target.
    """
    above = ~(excess <= target)  # a non-finite (diverged) excess never counts as below
    out: list[int | None] = []
    for j in range(excess.shape[1]):
        idx = torch.nonzero(above[:, j])
        if not idx.numel():
            out.append(0)
        elif int(idx[-1]) == excess.shape[0] - 1:
            out.append(None)
        else:
            out.append(int(idx[-1]) + 1)
    return out


def _steps_to_target(cfg: Config) -> tuple[list[TargetRow], TargetFit]:
    rows: list[TargetRow] = []
    T = cfg.target_max_steps
    for C in progress.iterate(cfg.target_group_sizes, "steps to target"):
        spectrum = A.hierarchical(cfg.target_groups, C, cfg.target_exponent)
        K = spectrum.K
        emb = A.decoupled(K)
        floor = loss_floor(K, cfg.label_noise)
        p_max = float(spectrum.p.max())

        lr_grids = {
            "gd": torch.tensor(cfg.gd_lr_grid_p1, dtype=torch.float64) / p_max,
            "muon": torch.tensor(cfg.muon_lr_grid, dtype=torch.float64),
        }
        steps = {}  # per optimiser and step size: steps until the excess stays below target
        for optimizer, lrs in lr_grids.items():
            memory = A.build_memory(spectrum, emb, optimizer, cfg.label_noise)
            result = A.train(memory, optimizer, lrs[None, :].expand(T, -1), record=[0])
            steps[optimizer] = _settled_below(result.loss - floor, cfg.target_excess)
        gd_steps, mu_steps = steps["gd"], steps["muon"]
        tuned_gd = [s for s in gd_steps if s is not None]
        tuned_mu = [s for s in mu_steps if s is not None]
        at_one = gd_steps[cfg.gd_lr_grid_p1.index(1.0)] if 1.0 in cfg.gd_lr_grid_p1 else None
        best_gd = min(tuned_gd) if tuned_gd else None
        best_mu = min(tuned_mu) if tuned_mu else None
        gd_lr = cfg.gd_lr_grid_p1[gd_steps.index(best_gd)] if best_gd else None
        mu_lr = cfg.muon_lr_grid[mu_steps.index(best_mu)] if best_mu else None
        rows.append(
            TargetRow(
                group_size=C,
                K=K,
                gd_best_steps=best_gd,
                gd_best_lr_p1=gd_lr,
                gd_lr_p1_1_steps=at_one,
                muon_best_steps=best_mu,
                muon_best_lr=mu_lr,
                ratio_tuned=best_gd / best_mu if best_gd and best_mu else None,
                ratio_gd_lr_p1_1=at_one / best_mu if at_one and best_mu else None,
                gd_lr_grid_edge=_edge(gd_lr, cfg.gd_lr_grid_p1),
                muon_lr_grid_edge=_edge(mu_lr, cfg.muon_lr_grid),
            )
        )
    tuned = [(r.group_size, r.ratio_tuned) for r in rows if r.ratio_tuned]
    at_p1 = [(r.group_size, r.ratio_gd_lr_p1_1) for r in rows if r.ratio_gd_lr_p1_1]
    return rows, TargetFit(_slope(tuned), _slope(at_p1), all(r.ratio_tuned for r in rows))


def _slope(points: list[tuple[int, float]]) -> float | None:
    """The log-log slope through ``points`` (C, ratio); None under two."""
    return loglog_slope(*zip(*points, strict=True)) if len(points) >= 2 else None


def _edge(value: float | None, grid: list[float]) -> str:
    """``"lowest"``/``"highest"`` where a sweep's best value is an end of its grid, else ``""``."""
    return (grid_edge(value, grid) or "") if value is not None else ""


# --------------------------------------------------------------------------- 4. stability


def _stability(cfg: Config) -> list[StabilityRow]:
    rows: list[StabilityRow] = []
    T = cfg.stability_steps
    for C in cfg.stability_group_sizes:
        spectrum = A.hierarchical(cfg.target_groups, C, cfg.target_exponent)
        K = spectrum.K
        mults = torch.tensor(cfg.stability_lr_p1, dtype=torch.float64)
        lrs = (mults / float(spectrum.p.max()))[None, :].expand(T, -1)
        traj = A.train(
            A.build_memory(spectrum, A.decoupled(K), "gd", cfg.label_noise),
            "gd",
            lrs,
            record=[0],
        )
        loss = traj.loss
        second = loss[T // 2 :]
        increases = (second[1:] > second[:-1] * (1 + 1e-12)).double().mean(dim=0)
        stable = torch.isfinite(loss).all(dim=0) & (loss[-1] < loss[0]) & (increases <= 0.01)
        for j, m in enumerate(cfg.stability_lr_p1):
            rows.append(
                StabilityRow(
                    group_size=C,
                    K=K,
                    lr_p1=m,
                    stable=bool(stable[j]),
                    final_excess=float(loss[-1, j] - loss_floor(K, cfg.label_noise)),
                    late_increase_fraction=float(increases[j]),
                    predicted_threshold=gd_stability_threshold(K, cfg.label_noise),
                )
            )
    return rows


# --------------------------------------------------------------------------- 5. symmetry


def _block_symmetry(cfg: Config) -> BlockSymmetry:
    spectrum = A.hierarchical(cfg.symmetry_groups, cfg.symmetry_group_size, cfg.curve_exponent)
    K = spectrum.K
    emb = A.orthonormal(K, seed=cfg.seed + 1)
    layout = Layout.from_frequencies(spectrum.p, spectrum.group, 1)
    out = {}
    for opt, lr in (("muon", 0.2), ("signgd", 0.02)):
        memory = A.DenseMemory(spectrum, emb, cfg.label_noise)
        worst = [0.0]

        def deviation(
            t: int, W: torch.Tensor, worst: list[float] = worst, memory: A.DenseMemory = memory
        ) -> None:
            Z = memory.to_task(W)
            norm = float(Z.norm())
            if norm > 0:
                worst[0] = max(worst[0], float((Z - project(Z, layout).dense()).norm()) / norm)

        lrs = A.lr_schedule("constant", cfg.symmetry_steps, K, lr=lr)
        A.train(memory, opt, lrs, callback=deviation)
        out[opt] = worst[0]
    return BlockSymmetry(muon=out["muon"], signgd=out["signgd"], K=K)


# --------------------------------------------------------------------------- figures


def _figure_curves(cfg: Config, rows: list[CurveRow], fits: Noiseless) -> PlotFigure:
    plt = pyplot()
    opts = ["gd", "muon", "signgd", "tra_signgd"]
    fig, axes = plt.subplots(1, 5, figsize=(22, 4.2))
    cmap = plt.get_cmap("viridis")
    K = fits.K
    for ax, opt in zip(axes[:4], opts, strict=True):
        sel = [r for r in rows if r.optimizer == opt]
        steps = [max(r.step, 1) for r in sel]
        for g in range(cfg.curve_groups):
            ax.plot(
                steps,
                [max(r.group_loss[g], 1e-16) for r in sel],
                color=cmap(g / max(1, cfg.curve_groups - 1)),
                label=f"group {g + 1}" if g in (0, cfg.curve_groups - 1) else None,
            )
        style_loglog(
            ax,
            xlabel="step t",
            ylabel="mean loss per fact in group",
            title=f"{optimizer_label(opt)} (η = {sel[0].lr:.3g})",
            ylim=(1e-14, 20),
        )
    ax = axes[4]
    for opt in opts:
        sel = [r for r in rows if r.optimizer == opt and r.step > 0]
        ax.plot(
            [r.step for r in sel],
            [max(r.loss, 1e-16) for r in sel],
            color=COLORS[opt],
            label=optimizer_label(opt),
        )
    t = torch.logspace(0, math.log10(cfg.curve_steps), 100, dtype=torch.float64)
    eta = fits.lrs["gd"]
    ax.plot(t, K / (eta * t), "k:", label="K/(ηt) (GD claim)")
    ax.plot(t, K * torch.exp(-cfg.muon_lr * t), "k--", label="K e^(−ηt) (Muon claim)")
    style_loglog(
        ax, xlabel="step t", ylabel="total loss", title=f"total loss, K = {K}", ylim=(1e-14, 50)
    )
    return fig


def _figure_sweep(cfg: Config, rows: list[SweepRow], fits: list[NoisyFitRow]) -> PlotFigure:
    plt = pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.4))
    cmap = plt.get_cmap("plasma")
    for i, f in enumerate(fits):
        beta = f.spectrum_exponent
        sel = [r for r in rows if r.spectrum_exponent == beta]
        Ts = [r.T for r in sel]
        color = cmap(i / max(1, len(fits)))
        for ax, excess, slope, pred in (
            (axes[0], [r.gd_excess for r in sel], f.gd_slope, f.gd_predicted),
            (axes[1], [r.muon_excess_envelope for r in sel], f.muon_slope, f.muon_predicted),
        ):
            ys = [max(e, 1e-16) for e in excess]
            ax.plot(Ts, ys, "o-", color=color, label=f"β = {beta}: fit {slope:.2f}")
            ref = [ys[0] * (T / Ts[0]) ** pred for T in Ts]
            ax.plot(Ts, ref, ":", color=color, label=f"claim T^({pred:.2f})")
        last = [max(r.muon_excess, 1e-16) for r in sel]
        axes[1].plot(Ts, last, "x--", color=color, alpha=0.6, label=f"β = {beta}: last iterate")
    K = fits[0].K if fits else 2
    Ts_all = sorted({r.T for r in rows})
    axes[1].plot(Ts_all, [(math.log(K) / T) ** 2 for T in Ts_all], "k-", lw=1, label="(log K / T)²")
    axes[0].set_title(f"GD, η·p_max = {cfg.gd_lr_p1}, label noise {cfg.label_noise}")
    axes[1].set_title(f"Muon, η = {cfg.muon_c}·log K / T (o: worse of last two iterates)")
    for ax in axes:
        style_loglog(ax, xlabel="horizon T", ylabel="excess loss L(W_T) − L*")
    return fig


def _figure_target(cfg: Config, rows: list[TargetRow], fit: TargetFit) -> PlotFigure:
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6.5, 4.4))
    Cs = [r.group_size for r in rows]
    for ratios, slope, label in (
        ([r.ratio_tuned for r in rows], fit.ratio_tuned, "GD tuned / Muon tuned"),
        ([r.ratio_gd_lr_p1_1 for r in rows], fit.ratio_gd_lr_p1_1,
         "GD (η·p_max = 1) / Muon tuned"),
    ):  # fmt: skip
        pts = [(c, ratio) for c, ratio in zip(Cs, ratios, strict=True) if ratio]
        if pts:  # one C alone has no slope
            shown = "—" if slope is None else f"{slope:.2f}"
            ax.plot(*zip(*pts, strict=True), "o-", label=f"{label} (slope {shown})")
    ax.plot(Cs, [Cs[0] and c / Cs[0] for c in Cs], "k:", label="∝ C (the Ω(C) claim)")
    style_loglog(
        ax,
        xlabel="group size C",
        ylabel="steps to target, GD / Muon",
        title=f"excess ≤ {cfg.target_excess}, M = {cfg.target_groups}",
    )
    return fig


def _report(cfg: Config) -> Report:
    return Report(
        "Paper B: training dynamics and scaling laws of the associative memory",
        "Hierarchical power-law spectrum, random orthonormal embeddings, exact population "
        f"loss. Label noise {cfg.label_noise} for the scaling sweep. Paper B's rates come from "
        "secondary sources; verdicts say where our simulation disagrees.",
    )


STUDY = Study(
    name=NAME,
    config=Config,
    run=run,
    preflight=preflight,
    reproduces="paper B: per-group loss curves, noisy scaling laws, TRA-SignGD",
    presets=(
        Preset("smoke", "", 4.6),
        Preset("cpu", "K = 10^4", 61.0),
        Preset("paper", "K = 10^5", None),
    ),
    on_results_page=True,
)
"""This study's record (:class:`~tailmem.studies.Study`)."""
