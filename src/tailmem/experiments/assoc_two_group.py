"""Experiment ``assoc-two-group``: paper A's one-layer associative-memory theory (PAPERS.md A4).

Two-group frequencies (head mass ``head_mass`` on the first ``L ≈ head_fraction·K`` facts),
decoupled and coupled embeddings, GD / SignGD / Muon without momentum, exact population loss.

(a) one-step balance ``ϱ^ε`` over a K list with fitted log-log slopes beside Theorem 5.3, plus the
    same slopes over a much larger K list (``asymptotic_ks``: the theorem is a K → ∞ statement and
    the structured backend makes K = 3·10⁶ cheap);
(b) Δ(W) against L(W) after one step (a sweep of step sizes) and along multi-step runs at
    ``figure_k`` — paper A's Figure 4(b, c);
(c) σ_min/σ_max of every first update;
(d) the printed numbers of the coupled construction.

How ``ϱ^ε`` is computed: :mod:`tailmem.assoc.balance`. How ``L = βK`` is rounded:
:mod:`tailmem.assoc.spectra` (``head_rounding``; the ``nearest`` rule is also run for coupled
SignGD as a sensitivity check, because a 3×3 block straddling the boundary changes the result).
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, fields
from typing import TYPE_CHECKING, Any

import torch

import tailmem.assoc as A
from tailmem import progress
from tailmem.assoc import theory
from tailmem.assoc.balance import one_step_balance, one_step_curve, update_spectrum
from tailmem.assoc.fits import loglog_slope
from tailmem.assoc.optimizers import check_names
from tailmem.assoc.optimizers import label as optimizer_label
from tailmem.assoc.spectra import HEAD_ROUNDINGS
from tailmem.claims.a4 import A4Inputs
from tailmem.claims.a4_measured import (
    CoupledReadings,
    MultiKRow,
    MultiRow,
    RateExponents,
    RhoRow,
    SlopeRow,
    SpectrumRow,
    SweepRow,
)
from tailmem.claims.registry import evaluate
from tailmem.columns import column_docs, records
from tailmem.errors import ConfigError
from tailmem.outputs import Figure, Outputs, Report, Table, write
from tailmem.plotting import legend_outside, pyplot, style_loglog
from tailmem.resources import require_largest, rows_bytes, trajectory_bytes
from tailmem.rundir import RunDir
from tailmem.studies import Preset, Provenance, Study
from tailmem.typecheck import check_range

if TYPE_CHECKING:
    from matplotlib.figure import Figure as PlotFigure

NAME = "assoc-two-group"

EMBEDDING_CHOICES = ("decoupled", "coupled")
MARKERS = {"gd": "o", "signgd": "s", "muon": "^", "muon_ns5": "v", "tra_signgd": "D", "adam": "x"}
COLORS = {
    "gd": "tab:blue",
    "signgd": "tab:orange",
    "muon": "tab:green",
    "muon_ns5": "tab:olive",
    "tra_signgd": "tab:purple",
    "adam": "tab:red",
}
STYLES = {"decoupled": "-", "coupled": "--"}


@dataclass(frozen=True)
class Config:
    """Paper A's simulation settings (defaults are the paper's: K = 999, α = 0.8, β = 0.2)."""

    seed: int = 0
    ks: list[int] = field(default_factory=lambda: [99, 300, 999, 3000])
    asymptotic_ks: list[int] = field(default_factory=lambda: [30_000, 300_000, 3_000_000])
    eps: float = 0.1
    head_mass: float = 0.8
    head_fraction: float = 0.2
    head_rounding: str = "block_aligned"
    embeddings: list[str] = field(default_factory=lambda: list(EMBEDDING_CHOICES))
    optimizers: list[str] = field(default_factory=lambda: ["gd", "signgd", "muon"])
    figure_k: int = 999
    sweep_points: int = 160
    multi_steps: int = 1000
    multi_lr: dict[str, float] = field(
        default_factory=lambda: {"gd": 200.0, "signgd": 0.01, "muon": 0.02}
    )
    record_every: int = 5

    def validate(self) -> None:
        for name in ("head_mass", "head_fraction", "eps"):
            check_range(name, getattr(self, name), gt=0.0, lt=1.0)
        if self.head_rounding not in HEAD_ROUNDINGS:
            raise ConfigError(
                f"head_rounding: got {self.head_rounding!r}; expected one of "
                + ", ".join(HEAD_ROUNDINGS)
            )
        for name in self.embeddings:
            if name not in EMBEDDING_CHOICES:
                raise ConfigError(
                    f"embeddings: got {name!r}; expected names from {', '.join(EMBEDDING_CHOICES)}"
                )
        check_names("optimizers", self.optimizers)
        check_names("multi_lr", self.multi_lr)
        for name in self.optimizers:
            if name not in self.multi_lr:
                raise ConfigError(f"multi_lr: needs a positive step size for optimizer {name!r}")
            check_range(f"multi_lr.{name}", self.multi_lr[name], gt=0.0)
        all_ks = [*self.ks, *self.asymptotic_ks, self.figure_k]
        for K in all_ks:
            if not isinstance(K, int) or K < 6:
                raise ConfigError(f"ks: got K={K!r}; expected integers ≥ 6")
            if "coupled" in self.embeddings and K % 3:
                raise ConfigError(
                    f"ks: K={K} is not divisible by 3, as the coupled embedding needs"
                )
        if len(self.ks) < 2:
            raise ConfigError("ks: expected at least two values of K to fit a slope")
        if self.asymptotic_ks and len(self.asymptotic_ks) < 2:
            raise ConfigError("asymptotic_ks: expected none or at least two values of K")
        if self.multi_steps < 1 or self.record_every < 1 or self.sweep_points < 2:
            raise ConfigError(
                "multi_steps, record_every and sweep_points must be positive (sweep_points ≥ 2)"
            )


def preflight(cfg: Config) -> None:
    """Refuse, before the run directory is written, a recording cadence that records nothing
    but the start, and sizes that cannot fit in memory. What each part surely allocates:

    - the block-structured memories: a few float64 K-vectors (frequencies, groups, the K
      singular values of an update, their sorted copy) for the largest K;
    - the update-spectra figure at ``figure_k``: those vectors, and for each of its lines (one
      per embedding and optimiser) the index and value of every one of the K singular values,
      which matplotlib keeps until the figure is saved, as given and as float64 pairs;
    - the one-step sweep: ``sweep_points`` rows of 7 numbers per line;
    - the multi-step runs: a schedule and the loss of every one of ``multi_steps`` steps, and a
      row of 10 numbers per recorded step and line."""
    if cfg.record_every > cfg.multi_steps:
        raise ConfigError(
            f"record_every: got {cfg.record_every}; expected at most multi_steps "
            f"({cfg.multi_steps}), so the runs record more than their start"
        )
    K = max([*cfg.ks, *cfg.asymptotic_ks, cfg.figure_k])
    lines = len(cfg.embeddings) * len(cfg.optimizers)
    records = cfg.multi_steps // cfg.record_every + 1
    steps = 8 * cfg.multi_steps + trajectory_bytes(cfg.multi_steps)
    require_largest(
        {
            f"the memory of K={K} facts": 8 * 4 * K,
            f"the update-spectra figure at figure_k={cfg.figure_k}": (
                (8 * 4 + 32 * lines) * cfg.figure_k
            ),
            f"the one-step sweep of sweep_points={cfg.sweep_points}": (
                rows_bytes(lines * cfg.sweep_points, 7) + 8 * 6 * cfg.sweep_points
            ),
            f"the multi-step runs of multi_steps={cfg.multi_steps}": (
                steps + rows_bytes(lines * records, 10)
            ),
        }
    )


def run(cfg: Config, run: RunDir, provenance: Provenance) -> None:
    """Run all four parts, then write results, CSVs, figures, claims and the report."""
    started = time.perf_counter()
    progress.plan(3, "phases")  # the rho table, the other measurements, the outputs
    measured = measure(cfg)
    write(run, outputs(cfg, measured, time.perf_counter() - started))


@dataclass(frozen=True)
class Measured:
    """What the four parts measure: the typed rows of the CSVs (``rho``, ``slopes``, ``spectra``,
    ``sweep``, ``multi``, ``multi_k``), the coupled construction's printed numbers
    (``coupled``), the ``figure_k`` spectrum's description and, per (embedding, optimiser),
    the non-zero singular values of the first update at ``figure_k`` (largest first)."""

    rho: list[RhoRow]
    slopes: list[SlopeRow]
    spectra: list[SpectrumRow]
    sweep: list[SweepRow]
    multi: list[MultiRow]
    multi_k: list[MultiKRow]
    coupled: theory.CoupledCheck
    spectrum_info: dict[str, Any]
    singular_values: dict[tuple[str, str], torch.Tensor]


def measure(cfg: Config) -> Measured:
    """Every part's numbers (:class:`Measured`)."""
    rho_rows = _rho_table(cfg)
    slopes = _slopes(cfg, rho_rows)
    spectra_rows = _update_spectra(cfg)
    sweep = _one_step_sweep(cfg)
    multi = _multi_step(cfg)
    multi_k = _muon_multistep_over_k(cfg)
    progress.advance(1)
    check = theory.coupled_construction_check(cfg.figure_k, cfg.head_mass, cfg.head_fraction)
    spectrum = A.two_group(cfg.figure_k, cfg.head_mass, cfg.head_fraction, cfg.head_rounding)
    return Measured(
        rho_rows, slopes, spectra_rows, sweep, multi, multi_k, check,
        spectrum.info, _singular_values(cfg),
    )  # fmt: skip


# --------------------------------------------------------------------------- (a) rho table


def _rho_table(cfg: Config) -> list[RhoRow]:
    jobs = [
        (K, emb, opt, cfg.head_rounding, "main")
        for K in cfg.ks
        for emb in cfg.embeddings
        for opt in cfg.optimizers
    ]
    jobs += [
        (K, emb, opt, cfg.head_rounding, "asymptotic")
        for K in cfg.asymptotic_ks
        for emb in cfg.embeddings
        for opt in cfg.optimizers
    ]
    if (
        "coupled" in cfg.embeddings
        and "signgd" in cfg.optimizers
        and cfg.head_rounding != "nearest"
    ):
        jobs += [(K, "coupled", "signgd", "nearest", "rounding") for K in cfg.ks]
    rows = []
    for K, emb, opt, rounding, kind in progress.iterate(jobs, "one-step rho"):
        spectrum = A.two_group(K, cfg.head_mass, cfg.head_fraction, rounding)
        memory = A.build_memory(spectrum, A.make_embedding(emb, K), opt)
        with A.small_op_threads(memory):
            U = A.first_direction(memory, opt)
            deviation = update_spectrum(memory, U).identity_deviation if opt == "muon" else None
        bal = one_step_balance(memory, U, cfg.eps)
        rows.append(
            RhoRow(
                set=kind,
                K=K,
                embedding=emb,
                optimizer=opt,
                head_rounding=rounding,
                head_size=spectrum.info["head_size"],
                rho=bal.rho,
                rho_literal_inf=bal.rho_literal,
                monotone=bal.monotone,
                eta_star=bal.eta,
                gap=bal.gap,
                head_prob=bal.group_prob[0],
                tail_prob=bal.group_prob[1],
                muon_deficit_constant=(1 - cfg.eps - bal.rho) / (cfg.eps * math.log(K) / K),
                gd_theory_exact=theory.gd_one_step_rho(
                    K, cfg.head_mass, cfg.head_fraction, cfg.eps, rounding
                ),
                gd_min_step_theorem=theory.gd_min_step(
                    K, cfg.head_mass, cfg.head_fraction, cfg.eps
                ),
                backend=memory.backend,
                k_identity_deviation=None if deviation is None else K * deviation,
            )
        )
    return rows


def _slopes(cfg: Config, rows: list[RhoRow]) -> list[SlopeRow]:
    r_gd = theory.gd_rate_exponent(cfg.head_mass, cfg.head_fraction)
    r_sign = theory.signgd_coupled_rate_exponent()
    out = []
    for kind in ("main", "asymptotic"):
        for emb in cfg.embeddings:
            for opt in cfg.optimizers:
                sel = [r for r in rows if (r.set, r.embedding, r.optimizer) == (kind, emb, opt)]
                if len(sel) < 2:
                    continue
                ks = [r.K for r in sel]
                rhos = [r.rho for r in sel]
                deficits = [max(1 - cfg.eps - r.rho, 1e-300) for r in sel]
                predicted, source = _predicted_slope(opt, emb, r_gd, r_sign)
                out.append(
                    SlopeRow(
                        set=kind,
                        embedding=emb,
                        optimizer=opt,
                        k_min=min(ks),
                        k_max=max(ks),
                        slope_rho=loglog_slope(ks, rhos),
                        slope_gap=loglog_slope(ks, deficits),
                        predicted_slope_rho=predicted,
                        prediction=source,
                    )
                )
    return out


def _predicted_slope(opt: str, emb: str, r_gd: float, r_sign: float) -> tuple[float, str]:
    if opt == "gd":
        return r_gd - 1, "Theorem 5.3: r(α,β) − 1"
    if opt == "muon" or (opt == "signgd" and emb == "decoupled"):
        return 0.0, "ϱ → 1 − ε (slope 0)"
    if opt == "signgd":
        return (
            theory.SIGNGD_COUPLED_SLOPE,
            f"paper: −0.3 (our construction's r − 1 = {r_sign - 1:.3f})",
        )
    return float("nan"), "no prediction"


# --------------------------------------------------------------------------- (c) spectra


def _update_spectra(cfg: Config) -> list[SpectrumRow]:
    rows = []
    K = cfg.figure_k
    spectrum = A.two_group(K, cfg.head_mass, cfg.head_fraction, cfg.head_rounding)
    for emb in cfg.embeddings:
        for opt in cfg.optimizers:
            memory = A.build_memory(spectrum, A.make_embedding(emb, K), opt)
            with A.small_op_threads(memory):
                U = A.first_direction(memory, opt)
            stats = update_spectrum(memory, U)
            rows.append(
                SpectrumRow(
                    K=K,
                    embedding=emb,
                    optimizer=opt,
                    sigma_max=stats.sigma_max,
                    sigma_min_nonzero=stats.sigma_min_nonzero,
                    rank=stats.rank,
                    ratio=stats.ratio,
                    block_ratio=stats.block_ratio,
                    identity_deviation=stats.identity_deviation,
                )
            )
    return rows


# --------------------------------------------------------------------------- (b) Figure 4


def _one_step_sweep(cfg: Config) -> list[SweepRow]:
    K = cfg.figure_k
    spectrum = A.two_group(K, cfg.head_mass, cfg.head_fraction, cfg.head_rounding)
    rows = []
    for emb in cfg.embeddings:
        for opt in cfg.optimizers:
            memory = A.build_memory(spectrum, A.make_embedding(emb, K), opt)
            with A.small_op_threads(memory):
                U = A.first_direction(memory, opt)
                # from a barely-moved memory to one with every fact at ≥ 1 − 1e-4 (or 1e4 η*)
                eta_star = one_step_balance(memory, U, cfg.eps).eta
                etas = eta_star * torch.logspace(-3, 4, cfg.sweep_points, dtype=torch.float64)
                curve = one_step_curve(memory, U, etas)
            for i in range(len(etas)):
                rows.append(
                    SweepRow(
                        embedding=emb,
                        optimizer=opt,
                        eta=float(curve.eta[i]),
                        loss=float(curve.loss[i]),
                        gap=float(curve.gap[i]),
                        min_prob=float(curve.min_prob[i]),
                        max_prob=float(curve.max_prob[i]),
                    )
                )
    return rows


def _multi_step(cfg: Config) -> list[MultiRow]:
    K = cfg.figure_k
    spectrum = A.two_group(K, cfg.head_mass, cfg.head_fraction, cfg.head_rounding)
    record = list(range(0, cfg.multi_steps + 1, cfg.record_every))
    rows = []
    for emb in cfg.embeddings:
        for opt in cfg.optimizers:
            memory = A.build_memory(spectrum, A.make_embedding(emb, K), opt)
            lrs = A.lr_schedule("constant", cfg.multi_steps, K, lr=cfg.multi_lr[opt])
            traj = A.train(memory, opt, lrs, record=record, progress=True, desc=f"{emb} {opt}")
            for i, step in enumerate(traj.steps):
                rows.append(
                    MultiRow(
                        embedding=emb,
                        optimizer=opt,
                        lr=cfg.multi_lr[opt],
                        step=step,
                        loss=float(traj.loss[step]),
                        gap=float(traj.gap[i]),
                        min_prob=float(traj.min_prob[i]),
                        max_prob=float(traj.max_prob[i]),
                        head_loss=float(traj.group_loss[i, 0]),
                        tail_loss=float(traj.group_loss[i, 1]),
                    )
                )
    return rows


def _muon_multistep_over_k(cfg: Config) -> list[MultiKRow]:
    """Theorem 5.4 over the K list: Muon runs read at the first step with ε_t ≤ ε, per ε.

    The theorem fixes ε and lets K grow, so Δ_t/(ε_t log K / K) is compared across K at (about)
    the same ε_t; ε and ε/10 are both read. Runs that never reach an ε give no row for it.
    """
    if "muon" not in cfg.optimizers:
        return []
    targets = (cfg.eps, cfg.eps / 10)
    record = list(range(0, cfg.multi_steps + 1, cfg.record_every))
    rows = []
    for K in progress.iterate(cfg.ks, "Muon multi-step over K"):
        spectrum = A.two_group(K, cfg.head_mass, cfg.head_fraction, cfg.head_rounding)
        for emb in cfg.embeddings:
            memory = A.build_memory(spectrum, A.make_embedding(emb, K), "muon")
            lrs = A.lr_schedule("constant", cfg.multi_steps, K, lr=cfg.multi_lr["muon"])
            traj = A.train(memory, "muon", lrs, record=record)
            eps_t = [1 - float(p) for p in traj.max_prob]
            for target in targets:
                i = next((i for i, e in enumerate(eps_t) if e <= target), None)
                if i is not None:
                    gap = float(traj.gap[i])
                    rows.append(
                        MultiKRow(
                            K=K,
                            embedding=emb,
                            eps_target=target,
                            step=traj.steps[i],
                            eps_t=eps_t[i],
                            gap=gap,
                            constant_log_k=gap / (eps_t[i] * math.log(K) / K),
                        )
                    )
    return rows


# --------------------------------------------------------------------------- (d) printed numbers

READING = (
    "A+B is the diagonal 3x3 block of -sign(grad L(W0)) with W of shape d_o x d_s and "
    "grad L = E~ (S - Q) diag(p) E^T (PAPERS.md orientation); A+B = sign(R_obj R_key^T). "
    "'literal' is R_key^T (A+B) R_obj; 'transposed' is R_key^T (A+B)^T R_obj, i.e. the same "
    "product with W stored as d_s x d_o; it equals the transpose of our task-basis block "
    "E~^T(-sign grad L)E, whose first column holds the logits query 0 gives the three objects "
    "of its block."
)
"""How the coupled construction's two readings come about (``coupled_check.json``)."""


def _check_json(check: theory.CoupledCheck) -> dict[str, object]:
    """``coupled_check.json``: the check's numbers (tensors as nested lists) and how to read
    them."""

    def listify(x: object) -> object:
        return x.tolist() if isinstance(x, torch.Tensor) else x

    out = {f.name: listify(getattr(check, f.name)) for f in fields(check)}
    out["reading"] = READING
    return out


def _readings(check: theory.CoupledCheck) -> CoupledReadings:
    """The first rows the printed-row claim compares, from the check."""
    return CoupledReadings(
        transposed=tuple(check.transposed[0].tolist()),
        literal=tuple(check.literal[0].tolist()),
        printed=tuple(check.printed_row.tolist()),
        transposed_error=check.transposed_error,
        literal_error=check.literal_error,
        reading=READING,
    )


# --------------------------------------------------------------------------- figures


def _figure_rho(cfg: Config, rows: list[RhoRow]) -> PlotFigure:
    """ϱ^ε and Δ = 1 − ε − ϱ^ε against K with the theorem's lines."""
    plt = pyplot()

    fig, axes = plt.subplots(1, 2, figsize=(12, 4.6))
    main = [r for r in rows if r.set in ("main", "asymptotic")]
    for emb in cfg.embeddings:
        for opt in cfg.optimizers:
            sel = sorted(
                (r for r in main if r.embedding == emb and r.optimizer == opt), key=lambda r: r.K
            )
            ks = [r.K for r in sel]
            kw = {
                "color": COLORS.get(opt),
                "marker": MARKERS.get(opt, "o"),
                "linestyle": STYLES[emb],
                "label": f"{optimizer_label(opt)}, {emb}",
            }
            axes[0].plot(ks, [r.rho for r in sel], **kw)
            gaps = [(k, 1 - cfg.eps - r.rho) for k, r in zip(ks, sel, strict=True)]
            gaps = [(k, g) for k, g in gaps if g > 1e-12]  # SignGD decoupled: Δ = 0 exactly
            if gaps:
                axes[1].plot([k for k, _ in gaps], [g for _, g in gaps], **kw)
    all_k = sorted({r.K for r in main})
    kk = torch.logspace(math.log10(all_k[0]), math.log10(all_k[-1]), 100, dtype=torch.float64)
    gd_line = [
        theory.gd_one_step_rho_asymptotic(int(k), cfg.head_mass, cfg.head_fraction, cfg.eps)
        for k in kk
    ]
    axes[0].plot(kk, gd_line, color="black", lw=1, label="GD theory (K−1)^(r−1)(1/ε−1)^r")
    r_sign = theory.signgd_coupled_rate_exponent()
    anchor = [r for r in main if r.embedding == "coupled" and r.optimizer == "signgd"]
    if anchor:
        big = max(anchor, key=lambda r: r.K)
        line = [big.rho * (float(k) / big.K) ** (r_sign - 1) for k in kk]
        axes[0].plot(kk, line, color="gray", lw=1, ls=":", label=f"∝ K^(r−1), r = {r_sign:.3f}")
        line3 = [big.rho * (float(k) / big.K) ** -0.3 for k in kk]
        axes[0].plot(kk, line3, color="gray", lw=1, ls="-.", label="paper: ∝ K^(−0.3)")
    axes[0].axhline(1 - cfg.eps, color="black", lw=0.8, ls="--", label="1 − ε")
    muon_line = [cfg.eps * math.log(float(k)) / float(k) for k in kk]
    axes[1].plot(kk, muon_line, color="black", lw=1, label="Muon bound ε·log K / K")
    axes[0].set(xscale="log", yscale="log", xlabel="K (facts)", ylabel="ϱ^ε (one step)")
    axes[1].set(xscale="log", yscale="log", xlabel="K (facts)", ylabel="Δ = 1 − ε − ϱ^ε")
    axes[0].set_title(f"One-step balance ϱ^ε, ε = {cfg.eps}")
    axes[1].set_title("Gap between best and worst fact at η*")
    for ax in axes:
        ax.grid(True, which="both", alpha=0.3)
    axes[0].legend(loc="upper center", bbox_to_anchor=(0.5, -0.18), ncol=2)
    axes[1].legend(loc="upper center", bbox_to_anchor=(0.5, -0.18), ncol=1)
    return fig


def _figure_delta_loss(cfg: Config, sweep: list[SweepRow], multi: list[MultiRow]) -> PlotFigure:
    """Paper A's Figure 4(b, c): Δ(W) against L(W), one step and along the runs."""
    plt = pyplot()

    fig, axes = plt.subplots(1, 2, figsize=(12, 4.6), sharey=True)
    panels: tuple[tuple[Any, Sequence[SweepRow | MultiRow], str], ...] = (
        (axes[0], sweep, f"(b) one step, step-size sweep, K = {cfg.figure_k}"),
        (axes[1], multi, f"(c) {cfg.multi_steps} steps, K = {cfg.figure_k}"),
    )
    for ax, rows, title in panels:
        for emb in cfg.embeddings:
            for opt in cfg.optimizers:
                sel = [r for r in rows if r.embedding == emb and r.optimizer == opt]
                sel = [r for r in sel if r.loss > 1e-8]
                ax.plot(
                    [r.loss for r in sel],
                    [r.gap for r in sel],
                    color=COLORS.get(opt),
                    linestyle=STYLES[emb],
                    label=f"{optimizer_label(opt)}, {emb}",
                )
        ax.set(xscale="log", xlabel="loss L(W)", title=title)
        ax.invert_xaxis()
        ax.grid(True, which="both", alpha=0.3)
    axes[0].set_ylabel("maximal probability gap Δ(W)")
    legend_outside(axes[1])
    return fig


def _singular_values(cfg: Config) -> dict[tuple[str, str], torch.Tensor]:
    """Per (embedding, optimiser), the singular values of the first update at ``figure_k``
    above the float64 noise floor."""
    K = cfg.figure_k
    spectrum = A.two_group(K, cfg.head_mass, cfg.head_fraction, cfg.head_rounding)
    out = {}
    for emb in cfg.embeddings:
        for opt in cfg.optimizers:
            memory = A.build_memory(spectrum, A.make_embedding(emb, K), opt)
            with A.small_op_threads(memory):
                U = A.first_direction(memory, opt)
                s = memory.singular_values(U)
            out[emb, opt] = s[s > K * 1e-16 * s[0]]
    return out


def _figure_spectra(
    cfg: Config, singular_values: dict[tuple[str, str], torch.Tensor]
) -> PlotFigure:
    """σ_i / σ_max of every first update at ``figure_k``, on log-log axes."""
    plt = pyplot()

    fig, ax = plt.subplots(figsize=(6.5, 4.4))
    for (emb, opt), s in singular_values.items():
        ax.plot(
            torch.arange(1, len(s) + 1),
            s / s[0],
            color=COLORS.get(opt),
            linestyle=STYLES[emb],
            label=f"{optimizer_label(opt)}, {emb}",
        )
    style_loglog(
        ax,
        xlabel="index",
        ylabel="σ_i / σ_max",
        title=f"Singular values of the first update, K = {cfg.figure_k}",
    )
    return fig


# --------------------------------------------------------------------------- outputs


def outputs(cfg: Config, measured: Measured, wall_seconds: float) -> Outputs:
    """The CSVs, ``coupled_check.json``, the three figures, ``results.json``, the claims and
    the report of the measured parts."""
    m = measured
    results = _results(cfg, m)
    claims = evaluate(NAME, claim_inputs(cfg, m))
    tables = (
        Table("rho.csv", records(m.rho), columns=column_docs(RhoRow)),
        Table("rho_slopes.csv", records(m.slopes), "fitted slopes of ϱ^ε against K",
              column_docs(SlopeRow)),
        Table("update_spectra.csv", records(m.spectra), "σ_min/σ_max of the first updates",
              column_docs(SpectrumRow)),
        Table("delta_vs_loss_one_step.csv", records(m.sweep), columns=column_docs(SweepRow)),
        Table("delta_vs_loss_multi_step.csv", records(m.multi), columns=column_docs(MultiRow)),
        Table("muon_multistep_k.csv", records(m.multi_k),
              "Theorem 5.4 over K: Muon runs read at the first step with ε_t ≤ ε",
              column_docs(MultiKRow)),
    )  # fmt: skip
    figures = (
        Figure("rho_vs_k", _figure_rho(cfg, m.rho),
               "ϱ^ε and Δ against K with the theorem's lines"),
        Figure("delta_vs_loss", _figure_delta_loss(cfg, m.sweep, m.multi),
               "Figure 4(b, c): Δ(W) against L(W)"),
        Figure("update_spectra", _figure_spectra(cfg, m.singular_values),
               "singular values of the first updates"),
    )  # fmt: skip
    files = {
        "coupled_check.json": _check_json(m.coupled),
        "results.json": {**results, "wall_seconds": wall_seconds},
    }
    return Outputs(tables, figures, files, tuple(claims), _report(cfg))


def _rate_exponents() -> RateExponents:
    """Our coupled construction's SignGD rate exponent, three ways (:class:`RateExponents`)."""
    return RateExponents(
        ours_papers_md_orientation=theory.signgd_coupled_rate_exponent(),
        transposed_orientation=theory.signgd_coupled_rate_exponent(
            theory.PAPER_OBJECT_ANGLES, theory.PAPER_KEY_ANGLES
        ),
        same_position_only=theory.signgd_coupled_rate_exponent(same_position_only=True),
    )


def claim_inputs(cfg: Config, m: Measured) -> A4Inputs:
    """What the A4 checks read: the config's ε, α and β and the measured rows as they are."""
    return A4Inputs(
        eps=cfg.eps,
        head_mass=cfg.head_mass,
        head_fraction=cfg.head_fraction,
        rho=m.rho,
        slopes=m.slopes,
        update_spectra=m.spectra,
        coupled_check=_readings(m.coupled),
        signgd_coupled_rate_exponent=_rate_exponents(),
        sweep=m.sweep,
        multi=m.multi,
        muon_multistep_k=m.multi_k,
    )


def _results(cfg: Config, m: Measured) -> dict[str, Any]:
    """``results.json`` without its wall time."""
    return {
        "experiment": NAME,
        "config": asdict(cfg),
        "head_rounding": cfg.head_rounding,
        "figure_k_spectrum": m.spectrum_info,
        "rho": records(m.rho),
        "slopes": records(m.slopes),
        "update_spectra": records(m.spectra),
        "coupled_check": _check_json(m.coupled),
        "muon_multistep_k": records(m.multi_k),
        "signgd_coupled_rate_exponent": {**asdict(_rate_exponents()), "paper": 0.675},
    }


def _report(cfg: Config) -> Report:
    return Report(
        "Paper A: one-layer associative memory (two-group frequencies)",
        f"One-step balance ϱ^ε (ε = {cfg.eps}, α = {cfg.head_mass}, β = {cfg.head_fraction}, "
        f"L = βK rounded '{cfg.head_rounding}') for GD, SignGD and Muon with decoupled and "
        "coupled embeddings, exact population loss; Δ–L curves at "
        f"K = {cfg.figure_k}.",
    )


STUDY = Study(
    name=NAME,
    config=Config,
    run=run,
    preflight=preflight,
    reproduces="paper A Sec. 5 (Thm 5.3, Fig. 4): one-step balance, Δ–L",
    presets=(
        Preset("smoke", "", 3.6),
        Preset("cpu", "K ≤ 3000", 12.0),
        Preset("paper", "K ≤ 30000", None),
    ),
    on_results_page=True,
)
"""This study's record (:class:`~tailmem.studies.Study`)."""
