"""Experiment ``assoc-capacity``: the capacity regime of Cabannes, Dohmatob & Bietti (ICLR 2024).

Beyond the two papers: random Gaussian embeddings in ``R^d`` with ``d`` smaller than the number of
facts, Zipf frequencies ``p(x) ∝ x^(−α)`` and (by default, as in their public setup) labels
``y = x mod M``, so a ``d × d`` memory cannot store every fact. Their scaling law predicts a
top-1 error ``≍ d^(−α+1)`` once training has converged. We train GD, Adam, SignGD and Muon on the
exact population loss (or, with ``batch_size``, on sampled mini-batches as in their experiments),
each at the best step size of a small grid (run in one vectorised batch), and fit the final error
against ``d``.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING

import torch

import tailmem.assoc as A
from tailmem import progress
from tailmem.assoc.fits import loglog_slope
from tailmem.assoc.memory import DenseMemory
from tailmem.assoc.optimizers import check_names
from tailmem.assoc.optimizers import label as optimizer_label
from tailmem.claims.capacity_measured import CapacityRow, Trained
from tailmem.claims.core import grid_edge
from tailmem.claims.registry import evaluate
from tailmem.claims.related import CapacityInputs
from tailmem.columns import column_docs, records
from tailmem.errors import ConfigError
from tailmem.outputs import Figure, Outputs, Report, Table, write
from tailmem.plotting import pyplot, style_loglog
from tailmem.resources import require_memory, trajectory_bytes
from tailmem.rundir import RunDir
from tailmem.studies import Preset, Provenance, Study
from tailmem.typecheck import check_range

if TYPE_CHECKING:
    from matplotlib.figure import Figure as PlotFigure

NAME = "assoc-capacity"
COLORS = {"gd": "tab:blue", "adam": "tab:red", "signgd": "tab:orange", "muon": "tab:green"}


@dataclass(frozen=True)
class Config:
    """N facts, M labels (0: every fact its own object), Zipf exponent α, a list of d."""

    seed: int = 0
    facts: int = 1000
    labels: int = 5
    zipf_exponent: float = 2.0
    dims: list[int] = field(default_factory=lambda: [8, 16, 32, 64, 128])
    steps: int = 500
    batch_size: int | None = None
    optimizers: list[str] = field(default_factory=lambda: ["gd", "adam", "signgd", "muon"])
    lr_grid: dict[str, list[float]] = field(
        default_factory=lambda: {
            "gd": [1.0, 10.0, 100.0, 1000.0],
            "adam": [0.003, 0.03, 0.3, 3.0],
            "signgd": [0.0003, 0.003, 0.03, 0.3],
            "muon": [0.01, 0.1, 1.0, 10.0],
        }
    )

    def validate(self) -> None:
        if self.facts < 2:
            raise ConfigError(f"facts: got {self.facts}; expected an integer ≥ 2")
        if self.labels == 1 or self.labels < 0 or self.labels > self.facts:
            raise ConfigError(
                f"labels: got {self.labels}; expected 0 (one object per fact) or 2..facts"
            )
        check_range("zipf_exponent", self.zipf_exponent, gt=1.0, why="the d^(1−α) law needs α > 1")
        if len(self.dims) < 2 or any(d < 1 for d in self.dims):
            raise ConfigError("dims: expected at least two positive dimensions")
        if self.steps < 1:
            raise ConfigError(f"steps: got {self.steps}; expected a positive integer")
        if self.batch_size is not None and self.batch_size < 1:
            raise ConfigError(f"batch_size: got {self.batch_size}; expected a positive integer")
        check_names("optimizers", self.optimizers)
        check_names("lr_grid", self.lr_grid)
        for name in self.optimizers:
            grid = self.lr_grid.get(name)
            if not grid:
                raise ConfigError(f"lr_grid: needs a list of positive step sizes for {name!r}")
            for i, lr in enumerate(grid):
                check_range(f"lr_grid.{name}[{i}]", lr, gt=0.0)


def preflight(cfg: Config) -> None:
    """Refuse sizes that cannot fit in memory, before the run directory is written: E (d × N,
    drawn then scaled: twice), Ẽ (d × M), per step size a d × d matrix and the N × M logits of
    the final evaluation, and the N-vectors of the spectrum and answers (float64 throughout);
    with them the training loop's loss of every step and step size and, with ``batch_size``,
    the draws of one mini-batch (int64 each)."""
    n_obj = cfg.labels or cfg.facts
    d = max(cfg.dims)
    grid = max(len(cfg.lr_grid[name]) for name in cfg.optimizers)
    floats = 2 * d * cfg.facts + d * n_obj + grid * (d * d + cfg.facts * n_obj) + 3 * cfg.facts
    training = trajectory_bytes(cfg.steps, grid) + 8 * (cfg.batch_size or 0)
    require_memory(
        f"facts={cfg.facts}, labels={cfg.labels}, dims up to {d}, steps={cfg.steps}, "
        f"batch_size={cfg.batch_size}",
        8 * floats + training,
    )


def run(cfg: Config, run: RunDir, provenance: Provenance) -> None:
    """Train every optimiser at every d, then write the table, figure, claims and report."""
    started = time.perf_counter()
    rows = _train(cfg)
    write(run, outputs(cfg, rows, _fits(cfg, rows), time.perf_counter() - started))


def _train(cfg: Config) -> list[Trained]:
    """One per (d, optimiser): the best final error over the step-size grid and its rate."""
    spectrum = A.zipf(cfg.facts, cfg.zipf_exponent)
    n_obj = cfg.labels or cfg.facts
    answers = torch.arange(cfg.facts) % n_obj
    rows: list[Trained] = []
    jobs = [(d, opt) for d in cfg.dims for opt in cfg.optimizers]
    progress.plan(len(jobs), "runs")
    for d, opt in progress.iterate(jobs, "capacity", weight=len(jobs)):
        emb = A.gaussian(cfg.facts, d, seed=cfg.seed + d, n_objects=n_obj)
        memory = DenseMemory(spectrum, emb, 0.0, answers)
        grid = torch.tensor(cfg.lr_grid[opt], dtype=torch.float64)
        lrs = grid[None, :].expand(cfg.steps, -1)
        traj = A.train(
            memory, opt, lrs, record=[cfg.steps], batch_size=cfg.batch_size, seed=cfg.seed
        )
        errors = memory.errors(traj.final)
        best = int(errors.argmin())
        row = CapacityRow(
            d=d,
            optimizer=opt,
            error=float(errors[best]),
            best_lr=float(grid[best]),
            lr_grid_edge=grid_edge(float(grid[best]), cfg.lr_grid[opt]) or "",
            loss=float(traj.loss[-1, best]),
            tail_mass_beyond_d=float(spectrum.p[d:].sum()),
        )
        rows.append(Trained(row, errors.tolist()))
    return rows


def _fits(cfg: Config, trained: list[Trained]) -> dict[str, float | None]:
    """Per optimiser, the log-log slope of the error against d (None under two points)."""
    fits = {}
    for opt in cfg.optimizers:
        sel = [t.row for t in trained if t.row.optimizer == opt and t.row.error > 0]
        fits[opt] = (
            loglog_slope([r.d for r in sel], [r.error for r in sel]) if len(sel) >= 2 else None
        )
    return fits


def outputs(
    cfg: Config,
    trained: list[Trained],
    fits: dict[str, float | None],
    wall_seconds: float,
) -> Outputs:
    """``capacity.csv``, the capacity figure, ``results.json``, the claims and the report."""
    n_obj = cfg.labels or cfg.facts
    inputs = claim_inputs(cfg, trained)
    results = {
        "experiment": NAME,
        "config": asdict(cfg),
        "rows": [t.record() for t in trained],
        "fits": fits,
        "predicted_exponent": 1.0 - cfg.zipf_exponent,
        "objects": n_obj,
        "chance_error": inputs.chance_error,
        "sampling": "population" if cfg.batch_size is None else f"batch {cfg.batch_size}",
    }
    rows = [t.row for t in trained]
    summary = (
        f"{cfg.facts} facts with Zipf({cfg.zipf_exponent}) frequencies, {n_obj} objects, "
        f"random embeddings in R^d, {cfg.steps} steps; best final top-1 error over a "
        "step-size grid against d, beside the d^(1−α) law."
    )
    table = Table(
        "capacity.csv", records(rows), "best final error per optimiser", column_docs(CapacityRow)
    )
    return Outputs(
        tables=(table,),
        figures=(Figure("capacity", _figure(cfg, rows, fits), "final error against d"),),
        records={"results.json": {**results, "wall_seconds": wall_seconds}},
        claims=tuple(evaluate(NAME, inputs)),
        report=Report("Beyond the papers: the capacity regime (Cabannes et al.)", summary),
    )


def claim_inputs(cfg: Config, trained: list[Trained]) -> CapacityInputs:
    """What ``cabannes.capacity`` reads: the config's α, optimisers and step-size grids, the
    trained rows as they are and the chance error."""
    n_obj = cfg.labels or cfg.facts
    return CapacityInputs(
        zipf_exponent=cfg.zipf_exponent,
        optimizers=cfg.optimizers,
        lr_grid=cfg.lr_grid,
        rows=trained,
        chance_error=1.0 - 1.0 / n_obj,
    )


def _figure(cfg: Config, rows: list[CapacityRow], fits: dict[str, float | None]) -> PlotFigure:
    """The best final error against d per optimiser, the d^(1−α) law and the mass beyond d."""
    plt = pyplot()

    fig, ax = plt.subplots(figsize=(6.5, 4.4))
    for opt in cfg.optimizers:
        sel = [r for r in rows if r.optimizer == opt]
        slope = fits.get(opt)
        name = optimizer_label(opt)
        label = f"{name} (fit {slope:.2f})" if slope is not None else name
        ax.plot(
            [r.d for r in sel],
            [max(r.error, 1e-6) for r in sel],
            "o-",
            color=COLORS.get(opt),
            label=label,
        )
    ds = sorted(cfg.dims)
    first = [r for r in rows if r.d == ds[0]]
    anchor = max(r.error for r in first) if first else 1.0
    ax.plot(
        ds,
        [anchor * (d / ds[0]) ** (1 - cfg.zipf_exponent) for d in ds],
        "k:",
        label=f"d^(1−α), α = {cfg.zipf_exponent}",
    )
    tail = [
        float(sum(r.tail_mass_beyond_d for r in rows if r.d == d) / max(1, len(cfg.optimizers)))
        for d in ds
    ]
    ax.plot(ds, tail, "k--", lw=1, label="mass beyond rank d")
    style_loglog(
        ax,
        xlabel="embedding dimension d",
        ylabel="final top-1 error",
        title=f"N = {cfg.facts}, M = {cfg.labels or cfg.facts}, {cfg.steps} steps",
    )
    return fig


STUDY = Study(
    name=NAME,
    config=Config,
    run=run,
    preflight=preflight,
    reproduces="beyond the papers: Cabannes et al.'s d < K capacity law",
    presets=(
        Preset("smoke", "", 0.9),
        Preset("cpu", "10^3 facts", 19.0),
        Preset("paper", "10^4 facts", None),
    ),
    on_results_page=True,
)
"""This study's record (:class:`~tailmem.studies.Study`)."""
