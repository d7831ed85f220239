"""Paper A2 (Sec. 4.2, Fig. 2) and Table 2: spectral isotropy of the weights under Muon vs Adam.

Two arms train the same GPT on the same batches for each of ``seeds`` seeds: ``muon`` (Muon on
every hidden matrix q k v o w_in w_gate w_out; Adam on embedding, head and norms) and ``adam``
(Adam on everything), with the A1 optimiser settings. At step 0 and at every evaluation, for
every layer, the four isotropy metrics (H_norm, eRank, Top10E, Q75/25; ``top_k`` sets the k of
TopE_k) of Q, K, V, O, W_in, W_gate, W_out and of the VO circuit in two forms — ``vo_head``
(per-head W_O,h·W_V,h, metrics averaged over heads) and ``vo_stacked`` (W_O·W_V) — are logged,
and the per-layer maximum attention logit on ``logit_rows`` fixed validation rows (Table 2).
Both VO forms get an isotropy claim; ``vo_form`` chooses which one the main figure and the
seed-spread claim use, the other is plotted in the attention figure and tabulated.

Outputs: ``isotropy_main.png`` (VO and W_out, paper Fig. 2), ``isotropy_ffn_in.png`` (W_in,
W_gate), ``isotropy_attention.png`` (Q, K, V, O, the other VO form) — per matrix and metric the
mean over layers of each seed's value, lines the mean over seeds, bands ±1 seed SD —
``isotropy_by_layer.png`` (final values per layer), ``max_logit.png`` (per layer over training,
and the validation loss); ``spectra_curves.csv`` (every logged value: optimiser, seed, step,
layer, matrix, metric), ``spectra_final.csv`` (final step per layer), ``spectra_summary.csv``
(layer mean), ``max_logit.csv``, ``results.json`` and ``claims.json``.

Claims: the study collects per-seed numbers (final-step metric averaged over layers, peak
attention logits) into :class:`tailmem.claims.a2.A2Inputs`; the rules and their numbers live in
:mod:`tailmem.claims.a2` and in :mod:`tailmem.claims.a1` (``A1.table2.logit_bounded``), listed by
``tailmem claims --experiment spectra``. In short: Muon is more isotropic than Adam in every
metric beyond the 95 % two-sided t interval over ≥ 3 seeds; Muon's seed variance of the
normalised SVD entropy is smaller than Adam's for VO and W_out (F-test); under Muon the largest
attention logit stays below the paper's largest, a multiple of √d_head (QK-norm models).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, Literal, cast

import numpy as np
import torch
from torch import Tensor, nn

from tailmem.claims.a2 import A2Inputs, isotropy_comparison
from tailmem.claims.core import ClaimResult, mean_se
from tailmem.claims.registry import evaluate
from tailmem.columns import column, column_docs, records
from tailmem.errors import ConfigError
from tailmem.lm.arms import Arm, matrix_recipe
from tailmem.lm.config import LMConfig
from tailmem.lm.corpus import CorpusData, CorpusSection, DataProvenance, LMData, corpus_preflight
from tailmem.lm.entries import Entry
from tailmem.lm.plan import Plan, run_plan, tidy
from tailmem.lm.rates import rate_entries
from tailmem.lm.spec import BatchShape, RunResult, diverged_runs, number, step_of
from tailmem.lm.subrun import RunContext, template
from tailmem.metrics.role_spectra import (
    HIGHER_IS_ISOTROPIC,
    ISO_METRICS,
    metric_label,
    model_isotropy,
)
from tailmem.models.gpt import GPT, GPTConfig
from tailmem.models.roles import resolve_roles
from tailmem.outputs import Figure, Outputs, Report, Table, write
from tailmem.plotting import integer_ticks, legend_outside, pyplot
from tailmem.rundir import RunDir
from tailmem.studies import Preset, Provenance, Study
from tailmem.train import EvalHook, describe_scalars
from tailmem.train import distributed as D

if TYPE_CHECKING:
    from matplotlib.figure import Figure as PlotFigure

NAME = "spectra"

ARMS = (Arm.of_recipe(matrix_recipe("muon")), Arm.of_recipe("adam:*"))


@dataclass(frozen=True)
class Config(LMConfig):
    """Spectra config; see the module docstring."""

    seeds: int = 3
    ffn: Literal["plain", "gated"] = "plain"
    vo_form: Literal["per_head", "stacked"] = "per_head"
    top_k: int = 10
    logit_rows: int = 8
    data: CorpusSection = field(default_factory=CorpusSection)

    def run_arms(self) -> list[Arm]:
        return list(ARMS)

    def entries(self) -> list[Entry]:
        """One entry per arm, at the given rates (spectra tunes none)."""
        return rate_entries([self.ffn], ARMS, self.optim, self.tuning, self.seed, self.train.steps,
                            self.tuning_scores())  # fmt: skip

    def validate(self) -> None:
        super().validate()
        self.fixed_rates("spectra trains Muon and Adam at one given rate each, as paper A2")
        if self.top_k < 1:
            raise ConfigError(f"top_k: got {self.top_k}; expected >= 1")
        if not 1 <= self.logit_rows <= self.train.eval_batch_size:
            raise ConfigError(
                f"logit_rows: got {self.logit_rows}; expected 1..train.eval_batch_size "
                f"({self.train.eval_batch_size})"
            )

    @property
    def vo_matrix(self) -> str:
        return "vo_head" if self.vo_form == "per_head" else "vo_stacked"


def spectra_hook(cfg: GPTConfig, top_k: int, logit_x: Tensor, ctx: D.DistContext) -> EvalHook:
    """Eval hook (rank 0 only): ``iso/<matrix>/<layer>/<metric>`` and ``logit_max/<layer>``."""

    def hook(step: int, model: nn.Module) -> dict[str, float]:
        if not ctx.is_main:
            return {}
        device = next(model.parameters()).device
        weights = {name: p.detach() for name, p in model.named_parameters()}
        with torch.autocast(device.type, enabled=False):  # fp32 products even under bf16 runs
            rows = model_isotropy(weights, resolve_roles(model), cfg.n_head, k=top_k)
        out = {
            f"iso/{row['matrix']}/{row['layer']}/{metric}": row[metric]
            for row in rows
            for metric in ISO_METRICS
        }
        logit_max = cast(GPT, model).attention_logit_max(logit_x.to(device)).amax(dim=-1)
        out |= {f"logit_max/{i}": float(v) for i, v in enumerate(logit_max.tolist())}
        return out

    return hook


@dataclass
class SpectraMaterials:
    """The corpus data plus the isotropy and max-logit hook (a
    :class:`~tailmem.lm.subrun.Materials`)."""

    data: LMData
    top_k: int
    logit_rows: int

    @property
    def vocab_size(self) -> int:
        return self.data.vocab_size

    @property
    def identity(self) -> dict[str, Any]:
        return {**self.data.identity, "top_k": self.top_k, "logit_rows": self.logit_rows}

    def batches(self, seed: int, batch: BatchShape) -> Any:
        return self.data.batches(seed, batch)

    def hooks(self, model_cfg: GPTConfig, ctx: D.DistContext) -> list[EvalHook]:
        logit_x = self.data.val[0][0][: self.logit_rows]
        return [*self.data.hooks(model_cfg, ctx), spectra_hook(model_cfg, self.top_k, logit_x, ctx)]


@dataclass(frozen=True)
class SpectraData:
    """Picklable description of the study's data (:class:`~tailmem.lm.subrun.DataSpec`)."""

    corpus: CorpusData
    top_k: int
    logit_rows: int

    def load(self, ctx: D.DistContext) -> SpectraMaterials:
        return SpectraMaterials(self.corpus.load(ctx), self.top_k, self.logit_rows)


def preflight(cfg: Config) -> None:
    """The corpus, model and batch checks before anything is written (:func:`corpus_preflight`)."""
    corpus_preflight(cfg)


def run(cfg: Config, run: RunDir, provenance: Provenance) -> None:
    """Train Muon and Adam for every seed (reusing finished runs), then write figures and claims."""
    ctx, _ = D.init_distributed(cfg.train.device)
    corpus = CorpusData(cfg.data, cfg.train.seq_len, cfg.train.eval_batch_size)
    spec = SpectraData(corpus, cfg.top_k, cfg.logit_rows)
    data = spec.load(ctx)
    context = RunContext(
        str(run.path), spec, show_progress=cfg.workers == 1, threads=cfg.train.threads
    )
    runs = template(data, cfg.model, cfg.train, cfg.optim, [cfg.ffn], initial_eval=True)
    entries = tuple(cfg.entries())
    plan = Plan(entries, tuple(cfg.seed_list), cfg.train.steps, runs, val_loss_score,
                cfg.stored_rates())  # fmt: skip
    trained = run_plan(plan, context, cfg.workers, _summary)
    tidy(trained, context.root, cfg.train.keep_checkpoints)
    results = {arm.name: trained.seed_results((cfg.ffn, arm.name)) for arm in ARMS}
    model_cfg = cfg.model.build(data.vocab_size, cfg.ffn, cfg.train.seq_len)
    if ctx.is_main:
        write(run, outputs(cfg, model_cfg, results, data.data.provenance()))
    D.barrier(ctx)


def val_loss_score(result: RunResult) -> float | None:
    """The tuning score of a run whose rates are given as a grid: minus its final validation
    loss (None when not finite)."""
    value = result.final.get("val_loss")
    if not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return -float(value)


def _summary(result: RunResult) -> str:
    return describe_scalars({"val_loss": result.final.get("val_loss", math.nan)})


# ----------------------------------------------------------------------------------------------
# series


@dataclass
class Series:
    """Evaluation steps and every logged number of the complete runs of one optimiser."""

    steps: list[int]
    runs: list[dict[str, list[float]]]
    seeds: list[int] = field(default_factory=list)

    @classmethod
    def of(cls, results: Sequence[RunResult]) -> Series:
        complete = [r for r in results if r.ok]
        if not complete:
            return cls([], [])
        steps = [step_of(e) for e in complete[0].evals]
        runs = []
        for r in complete:
            keys = {k for e in r.evals for k in e if k != "step"}
            runs.append({k: [number(e, k) for e in r.evals[: len(steps)]] for k in sorted(keys)})
        return cls(steps, runs, [r.seed for r in complete])

    @property
    def n(self) -> int:
        return len(self.runs)

    def on(self, seeds: Sequence[int]) -> Series:
        """The runs of ``seeds``, in that order (the arms' seeds paired for the claims)."""
        index = {seed: i for i, seed in enumerate(self.seeds)}
        return Series(self.steps, [self.runs[index[s]] for s in seeds], list(seeds))

    def layers(self, matrix: str) -> list[int]:
        prefix = f"iso/{matrix}/"
        found = {
            int(k.split("/")[2])
            for k in (self.runs[0] if self.runs else {})
            if k.startswith(prefix)
        }
        return sorted(found)

    def per_seed(self, key: str) -> np.ndarray:
        """``(seeds, steps)`` of one logged key (NaN where missing)."""
        return np.array([r.get(key, [math.nan] * len(self.steps)) for r in self.runs], float)

    def layer_mean(self, matrix: str, metric: str) -> np.ndarray:
        """``(seeds, steps)``: the metric averaged over the layers of each seed."""
        stack = [self.per_seed(f"iso/{matrix}/{layer}/{metric}") for layer in self.layers(matrix)]
        return np.mean(stack, axis=0) if stack else np.empty((self.n, len(self.steps)))


# ----------------------------------------------------------------------------------------------
# claims


@dataclass(frozen=True)
class LogitSummary:
    """One optimiser's max attention logit per layer: the final value (mean over seeds) and
    the largest value any seed reached during training, in ``layers`` order."""

    layers: list[int]
    final_mean: list[float]
    max_over_training: list[float]


def logit_summary(series: Series) -> LogitSummary:
    """Per-layer final max logit (mean over seeds) and the largest value seen anywhere."""
    layers = sorted(
        int(k.split("/")[1])
        for k in (series.runs[0] if series.runs else {})
        if k.startswith("logit_max/")
    )
    final = [float(np.mean(series.per_seed(f"logit_max/{layer}")[:, -1])) for layer in layers]
    peak = [float(np.nanmax(series.per_seed(f"logit_max/{layer}"))) for layer in layers]
    return LogitSummary(layers, final, peak)


def claim_inputs(cfg: Config, model_cfg: GPTConfig, muon: Series, adam: Series) -> A2Inputs:
    """The inputs of the A2 claims and of A1.table2.logit_bounded
    (:class:`~tailmem.claims.a2.A2Inputs`): per-seed final layer means and per-seed peak
    logits, on the seeds both arms completed (in seed order: the comparisons are paired)
    where both ran."""
    if muon.n and adam.n:
        both = sorted(set(muon.seeds) & set(adam.seeds))
        muon, adam = muon.on(both), adam.on(both)
    arms = {name: s for name, s in (("muon", muon), ("adam", adam)) if s.n}
    matrices = [m for m in MATRIX_LABELS if all(s.layers(m) for s in arms.values())]
    isotropy = {
        name: {m: {k: s.layer_mean(m, k)[:, -1].tolist() for k in ISO_METRICS} for m in matrices}
        for name, s in arms.items()
    }
    peaks = {}
    for name, s in arms.items():
        layers = logit_summary(s).layers
        if layers:
            stack = np.stack([s.per_seed(f"logit_max/{layer}") for layer in layers], axis=1)
            peaks[name] = np.nanmax(stack.reshape(s.n, -1), axis=1).tolist()
    return A2Inputs(
        seeds=sorted(set(muon.seeds) & set(adam.seeds)),
        isotropy=isotropy if len(arms) == 2 else {},
        higher_is_isotropic=dict(HIGHER_IS_ISOTROPIC),
        vo_matrix=cfg.vo_matrix,
        ffn_in=["w_in", "w_gate"] if cfg.ffn == "gated" else ["w_in"],
        qk_norm=model_cfg.qk_norm,
        head_dim=model_cfg.head_dim,
        logit_peak=peaks,
    )


def claims(cfg: Config, model_cfg: GPTConfig, muon: Series, adam: Series) -> list[ClaimResult]:
    """Every claim the spectra study measures, checked by the claims registry."""
    return evaluate(NAME, claim_inputs(cfg, model_cfg, muon, adam))


# ----------------------------------------------------------------------------------------------
# outputs


MATRIX_LABELS = {
    "q": "Q",
    "k": "K",
    "v": "V",
    "o": "O",
    "vo_head": "VO (per head)",
    "vo_stacked": "VO (stacked)",
    "w_in": "W_in",
    "w_gate": "W_gate",
    "w_out": "W_out",
}


@dataclass(frozen=True)
class FinalRow:
    """One layer, matrix and metric of ``spectra_final.csv``: its final-step value."""

    layer: int = column("the block")
    matrix: str = column("the weight matrix")
    metric: str = column("the isotropy metric")
    muon_mean: float | None = column("Muon: mean over seeds (empty: every Muon run diverged)")
    muon_sd: float | None = column("Muon: SD over seeds (empty for one seed)")
    adam_mean: float | None = column("Adam: the same")
    adam_sd: float | None = column("Adam: the same")


def _final_rows(muon: Series, adam: Series, matrices: Sequence[str]) -> list[FinalRow]:
    """Final-step value per layer, matrix and metric: mean and seed SD per optimiser."""

    def final(series: Series, key: str) -> tuple[float | None, float | None]:
        if not series.n:  # every run of this optimiser diverged
            return None, None
        values = series.per_seed(key)[:, -1]
        return _r(np.mean(values)), _r(np.std(values, ddof=1)) if series.n > 1 else None

    rows = []
    for matrix in matrices:
        for metric in ISO_METRICS:
            for layer in muon.layers(matrix) or adam.layers(matrix):
                key = f"iso/{matrix}/{layer}/{metric}"
                rows.append(FinalRow(layer, matrix, metric, *final(muon, key), *final(adam, key)))
    return rows


@dataclass(frozen=True)
class SummaryRow:
    """One matrix and metric of ``spectra_summary.csv``: the layer-mean final value."""

    matrix: str = column("the weight matrix")
    metric: str = column("the isotropy metric")
    muon_mean: float = column(
        "Muon: mean over seeds of the layer-mean metric (shown ± its SE, muon_se)"
    )
    muon_se: float | None = column("its SE over seeds (empty for one seed)")
    adam_mean: float = column("Adam: the same")
    adam_se: float | None = column("its SE")
    muon_more_isotropic: str = column(
        "the claims' per-metric verdict: Muon more isotropic beyond the 95 % two-sided t "
        "interval over ≥ 3 seeds (inconclusive within)"
    )


def _summary_rows(
    muon: Series, adam: Series, matrices: Sequence[str], top_k: int
) -> list[SummaryRow]:
    """Layer-mean final value per matrix and metric — mean and SE over seeds in numeric
    columns (SE empty for one seed) — with the claims' per-metric verdict."""
    rows: list[SummaryRow] = []
    if not (muon.n and adam.n):
        return rows
    both = sorted(set(muon.seeds) & set(adam.seeds))  # paired by seed, as the claims are
    muon, adam = muon.on(both), adam.on(both)
    for matrix in matrices:
        for metric in ISO_METRICS:
            m, a = muon.layer_mean(matrix, metric)[:, -1], adam.layer_mean(matrix, metric)[:, -1]
            c = isotropy_comparison(m.tolist(), a.tolist(), HIGHER_IS_ISOTROPIC[metric])
            ms, as_ = mean_se(m.tolist()), mean_se(a.tolist())
            rows.append(
                SummaryRow(
                    matrix=matrix,
                    metric=metric_label(metric, top_k),
                    muon_mean=_r(ms.mean),
                    muon_se=None if ms.se is None else _r(ms.se),
                    adam_mean=_r(as_.mean),
                    adam_se=None if as_.se is None else _r(as_.se),
                    muon_more_isotropic=c.verdict,
                )
            )
    return rows


def outputs(
    cfg: Config,
    model_cfg: GPTConfig,
    results: dict[str, list[RunResult]],
    provenance: DataProvenance,
) -> Outputs:
    """The tables, figures, ``results.json``, claims and report of the finished runs."""
    muon, adam = Series.of(results["muon"]), Series.of(results["adam"])
    matrices = [m for m in MATRIX_LABELS if muon.layers(m) or adam.layers(m)]
    logits = {name: logit_summary(s) for name, s in (("muon", muon), ("adam", adam)) if s.n}
    tables = (
        Table("spectra_final.csv", records(_final_rows(muon, adam, matrices))),
        Table("spectra_curves.csv", records(_long_rows(results))),
        Table("spectra_summary.csv", records(_summary_rows(muon, adam, matrices, cfg.top_k)),
              "Final-step isotropy, layer mean", column_docs(SummaryRow),
              {"muon": ["muon_mean", "muon_se"], "adam": ["adam_mean", "adam_se"]}),
        Table("max_logit.csv", records(_logit_rows(logits)),
              "Max attention logit per layer (Table 2)", column_docs(LogitRow)),
    )  # fmt: skip
    record = {
        "seeds": cfg.seed_list,
        "data": provenance.to_json(),
        "vo_form_plotted": cfg.vo_form,
        "steps": muon.steps or adam.steps,
        "head_dim": model_cfg.head_dim,
        "status": {name: [r.status for r in rs] for name, rs in results.items()},
        "final_val_loss": {
            name: [r.final.get("val_loss") for r in rs] for name, rs in results.items()
        },
        "max_logit": {name: asdict(summary) for name, summary in logits.items()},
        "runs": {name: [r.key for r in rs] for name, rs in results.items()},
        "diverged": [
            d.to_json() for d in diverged_runs([r for rs in results.values() for r in rs])
        ],
    }
    return Outputs(
        tables,
        _figures(cfg, model_cfg, muon, adam),
        {"results.json": record},
        tuple(claims(cfg, model_cfg, muon, adam)),
        _report(cfg, provenance),
    )


@dataclass(frozen=True)
class LogitRow:
    """One layer of ``max_logit.csv`` (paper Table 2)."""

    layer: int = column("the block")
    muon_final: float | None = column(
        "Muon: the final max attention logit, mean over seeds (empty: every Muon run diverged)"
    )
    muon_max_during_training: float | None = column(
        "Muon: the largest max attention logit any seed reached during training"
    )
    adam_final: float | None = column("Adam: the same as muon_final")
    adam_max_during_training: float | None = column("Adam: the same as muon_max_during_training")


def _logit_rows(logits: dict[str, LogitSummary]) -> list[LogitRow]:
    """Per layer: each optimiser's final and peak max attention logit (``max_logit.csv``)."""

    def at(name: str, i: int) -> tuple[float | None, float | None]:
        summary = logits.get(name)
        if summary is None:  # every run of this optimiser diverged
            return None, None
        return _r(summary.final_mean[i]), _r(summary.max_over_training[i])

    layers = next(iter(logits.values())).layers if logits else []
    return [LogitRow(layer, *at("muon", i), *at("adam", i)) for i, layer in enumerate(layers)]


def _report(cfg: Config, provenance: DataProvenance) -> Report:
    summary = (
        f"{cfg.seeds} seed(s), {cfg.model.size} model ({cfg.ffn} FFN), "
        f"{cfg.train.steps} steps. Curves: mean over seeds of the layer-averaged metric, "
        f"bands ±1 seed SD. The main figure's VO is the {cfg.vo_form.replace('_', '-')} "
        "form (per head: W_O,h·W_V,h averaged over heads; stacked: W_O·W_V)."
    )
    return Report("A2 spectral isotropy: Muon vs Adam", summary, data=provenance.to_json())


@dataclass(frozen=True)
class CurvePoint:
    """One logged isotropy value (``spectra_curves.csv``)."""

    optimizer: str = column("the optimiser arm")
    seed: int = column("the run's seed")
    step: int = column("the training step")
    layer: int = column("the block")
    matrix: str = column("the weight matrix")
    metric: str = column("the isotropy metric")
    value: float | None = column("its value (empty: not finite)")


def _long_rows(results: dict[str, list[RunResult]]) -> list[CurvePoint]:
    """Every logged isotropy value: optimizer, seed, step, layer, matrix, metric, value."""
    rows = []
    for name, runs in results.items():
        for r in runs:
            for e in r.evals:
                for key, value in e.items():
                    if key.startswith("iso/"):
                        _, matrix, layer, metric = key.split("/")
                        scalar = cast("float | None", value)  # an isotropy value: a scalar
                        step = step_of(e)
                        rows.append(
                            CurvePoint(name, r.seed, step, int(layer), matrix, metric, scalar)
                        )
    return rows


def _r(value: float) -> float:
    return round(float(value), 5)


FIG_WIDTH = 8.5
"""Inches: with the legend outside, a figure stays under ~10 in, so at the report's width
(~1100 px) its 10 pt tick labels still read at ≥ 9 pt."""


COLORS = {"muon": "tab:blue", "adam": "tab:orange"}
"""Each arm's colour in every spectra figure."""


def _figures(cfg: Config, model_cfg: GPTConfig, muon: Series, adam: Series) -> tuple[Figure, ...]:
    """Every figure of the study: isotropy over training (three groups of matrices), final
    isotropy per layer, and the attention logits with the validation loss."""
    return (
        *_isotropy_over_training(cfg, muon, adam),
        Figure("isotropy_by_layer", _isotropy_by_layer(cfg, muon, adam),
               "Final-step isotropy per layer"),
        Figure("max_logit", _logits_and_loss(model_cfg, muon, adam),
               "Max attention logit per layer (paper Table 2) and validation loss"),
    )  # fmt: skip


def _isotropy_over_training(cfg: Config, muon: Series, adam: Series) -> list[Figure]:
    """Each isotropy metric over training, Muon against Adam, per group of matrices."""
    plt = pyplot()
    other_vo = "vo_stacked" if cfg.vo_form == "per_head" else "vo_head"
    ffn_in = ["w_in", "w_gate"] if cfg.ffn == "gated" else ["w_in"]
    groups = [
        (
            "isotropy_main",
            [cfg.vo_matrix, "w_out"],
            f"Isotropy of VO ({cfg.vo_form.replace('_', '-')}) and W_out (paper Fig. 2)",
        ),
        ("isotropy_ffn_in", ffn_in, "Isotropy of the FFN input matrices (paper appendix)"),
        (
            "isotropy_attention",
            ["q", "k", "v", "o", other_vo],
            "Isotropy of Q, K, V, O and the other VO form",
        ),
    ]
    figures = []
    for stem, matrices, caption in groups:
        rows = len(matrices)
        fig, axes = plt.subplots(rows, 4, figsize=(FIG_WIDTH, 2.4 * rows), squeeze=False)
        for r, matrix in enumerate(matrices):
            for c, metric in enumerate(ISO_METRICS):
                ax = axes[r][c]
                for name, series in (("muon", muon), ("adam", adam)):
                    if not series.n or not series.layers(matrix):
                        continue
                    values = series.layer_mean(matrix, metric)
                    mean, sd = values.mean(axis=0), values.std(axis=0)
                    ax.plot(series.steps, mean, color=COLORS[name], label=name.capitalize())
                    ax.fill_between(
                        series.steps, mean - sd, mean + sd, color=COLORS[name], alpha=0.2
                    )
                ax.set_title(f"{MATRIX_LABELS[matrix]}: {metric_label(metric, cfg.top_k)}")
                ax.grid(alpha=0.3)
                if r == len(matrices) - 1:
                    ax.set_xlabel("step")
        fig.tight_layout()
        legend_outside(axes[0][-1])
        figures.append(Figure(stem, fig, f"{caption} — mean ± SD over {cfg.seeds} seeds"))
    return figures


def _isotropy_by_layer(cfg: Config, muon: Series, adam: Series) -> PlotFigure:
    """Each isotropy metric at the last step per layer, for VO and W_out."""
    plt = pyplot()
    fig, axes = plt.subplots(2, 4, figsize=(FIG_WIDTH, 5), squeeze=False)
    for r, matrix in enumerate([cfg.vo_matrix, "w_out"]):
        for c, metric in enumerate(ISO_METRICS):
            ax = axes[r][c]
            for name, series in (("muon", muon), ("adam", adam)):
                layers = series.layers(matrix) if series.n else []
                if not layers:
                    continue
                finals = np.array(
                    [series.per_seed(f"iso/{matrix}/{layer}/{metric}")[:, -1] for layer in layers]
                )
                ax.errorbar(
                    layers,
                    finals.mean(axis=1),
                    yerr=finals.std(axis=1),
                    marker="o",
                    color=COLORS[name],
                    label=name.capitalize(),
                    capsize=2,
                )
            ax.set_title(f"{MATRIX_LABELS[matrix]}: {metric_label(metric, cfg.top_k)}")
            ax.set_xlabel("layer")
            integer_ticks(ax)
            ax.grid(alpha=0.3)
    fig.tight_layout()
    legend_outside(axes[0][-1])
    return fig


def _logits_and_loss(model_cfg: GPTConfig, muon: Series, adam: Series) -> PlotFigure:
    """The max attention logit per layer over training (paper Table 2), and the validation loss."""
    plt = pyplot()
    fig, axes = plt.subplots(3, 1, figsize=(7, 9), sharex=True, layout="constrained")
    for ax, (name, series) in zip(axes[:2], (("muon", muon), ("adam", adam)), strict=True):
        layers = logit_summary(series).layers if series.n else []
        cmap = plt.get_cmap("viridis")
        for layer in layers:
            values = series.per_seed(f"logit_max/{layer}").mean(axis=0)
            ax.plot(
                series.steps,
                values,
                color=cmap(layer / max(1, len(layers) - 1)),
                label=f"layer {layer}",
            )
        ax.axhline(math.sqrt(model_cfg.head_dim), color="grey", ls="--", lw=0.8, label="√d_head")
        ax.set_title(f"{name.capitalize()}: max attention logit per layer")
        ax.grid(alpha=0.3)
        legend_outside(ax)
    ax = axes[2]
    for name, series in (("muon", muon), ("adam", adam)):
        if series.n:
            values = series.per_seed("val_loss")
            ax.plot(
                series.steps[1:],
                values.mean(axis=0)[1:],
                color=COLORS[name],
                label=name.capitalize(),
            )
    ax.set_title("validation loss (mean over seeds)")
    ax.set_xlabel("step")
    ax.grid(alpha=0.3)
    legend_outside(ax)
    return fig


STUDY = Study(
    name=NAME,
    config=Config,
    run=run,
    preflight=preflight,
    reproduces="paper A Sec. 4.2 (Fig. 2, Table 2): weight isotropy, logits",
    presets=(
        Preset("smoke", "", 16.1),
        Preset("cpu", "2 arms × 10 seeds", 540.0),  # bf16 alone; fp32 steps as fast here
        Preset("paper", "160M GPT", None),
    ),
    on_results_page=True,
)
"""This study's record (:class:`~tailmem.studies.Study`)."""
