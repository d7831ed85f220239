"""How ``tailmem diagnose`` shows and writes what it measured (a
:class:`~tailmem.diagnose_study.Diagnosis`), every name the same on screen and in the CSV.

On screen: one model is one table (``layer``, ``matrix``, ``H_norm``, ``eRank``, ``Top10E``,
``Q75/25``, ``rank`` and, where a row has one, ``note``); several models — a run beside its
initialisation, the arms of a study — are one block per metric with a column per model, side by
side. Then the notes and what each column and matrix means (:func:`explain`).

With ``--out``: ``isotropy.csv``, one row per model, layer and matrix, its columns named as on
screen (:class:`IsotropyRow`: ``model``, ``layer``, ``matrix``, the four metrics, ``rank``,
``note``, ``source``; an unmeasured number is an empty cell whose note says why), and
``isotropy.png`` / ``.svg``: for one model each metric against the layer, a line per matrix;
for several each metric's mean over layers per matrix, a marker per model.
"""

from __future__ import annotations

import statistics
import textwrap
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tailmem.columns import column, column_docs, records
from tailmem.diagnose_study import Diagnosis, Model, collect
from tailmem.metrics.role_spectra import ISO_METRICS, MATRICES, metric_label
from tailmem.outputs import Figure, Outputs, Table, write
from tailmem.plotting import integer_ticks, legend_outside, pyplot
from tailmem.rundir import RunDir, claim

SPECS = dict(zip(ISO_METRICS, (".4f", ".2f", ".4f", ".3f"), strict=True))
"""How each metric is printed."""
DIRECTION = {"svd_entropy": "higher", "erank": "higher", "topk_energy": "lower", "q75_25": "lower"}
"""Which way each metric points to a more isotropic matrix."""


def labels(top_k: int) -> dict[str, str]:
    """Each metric's name on screen and in the CSV (H_norm, eRank, Top10E, Q75/25)."""
    return {metric: metric_label(metric, top_k) for metric in ISO_METRICS}


@dataclass(frozen=True)
class IsotropyRow:
    """One model's layer and matrix in ``isotropy.csv``."""

    model: str = column("the model's label (a run, its initialisation 'init', an arm)")
    layer: int = column("the layer (counted from 0)")
    matrix: str = column("the matrix (q k v o vo_head vo_stacked w_in w_gate w_out)")
    metrics: Mapping[str, float | None] = column(
        "the isotropy metric its header names (H_norm, eRank, TopkE, Q75/25; the "
        "explanation under every diagnosis); empty where not measured",
        each="{}",
    )
    rank: float | None = column("numerical rank (for vo_head the heads' mean); empty if skipped")
    note: str = column("why a number is missing or what a mean is over; empty if nothing")
    source: str = column("where the model's weights came from")


def explain(top_k: int, baseline: bool) -> str:
    """What each column and matrix means (printed under every diagnosis; the README says the
    same)."""
    name = labels(top_k)
    lines = [
        "columns (σ_i: the matrix's singular values; energy q_i = σ_i² / Σ σ_j², over its "
        "numerical rank r):",
        f"  {name['svd_entropy']}: normalised entropy of q, -Σ q_i log q_i / log r, in [0, 1]; 1 = "
        "energy spread evenly over every direction (higher = more isotropic)",
        f"  {name['erank']}: effective rank exp(-Σ q_i log q_i), in [1, r]: how many directions "
        "carry the energy (higher = more isotropic)",
        f"  {name['topk_energy']}: share of the energy in the {top_k} largest directions "
        "(lower = more isotropic)",
        f"  {name['q75_25']}: 75th ÷ 25th percentile of σ², at least 1 (lower = more isotropic)",
        "  rank: numerical rank r (singular values above float rounding), in the CSV and the "
        "one-model table",
        "matrices (rows): q k v o: attention's query, key, value and output projections; "
        "vo_head: each head's W_O,h·W_V,h, the metrics averaged over heads; vo_stacked: W_O·W_V, "
        "all heads summed (the d × d map attention applies to values); w_in w_gate w_out: the "
        "FFN's input, gate (gated FFN) and output matrices",
    ]
    if baseline:
        lines.append(
            "init: the same model at initialisation with the run's seed (where training started)"
        )
    return "\n".join(
        textwrap.fill(line, 100, subsequent_indent="    ", break_on_hyphens=False) for line in lines
    )


def _cell(value: float | None, spec: str) -> str:
    return "—" if value is None else format(value, spec)


def _aligned(lines: list[list[str]], left: int = 2) -> list[str]:
    """Columns padded to their widths (the first ``left``, layer and matrix, left-aligned), a
    rule under the header; cells beyond the header's count are appended as they are."""
    widths = [max(len(line[i]) for line in lines) for i in range(len(lines[0]))]
    out = []
    for line in lines:
        cells = [
            c.ljust(w) if i < left else c.rjust(w)
            for i, (c, w) in enumerate(zip(line, widths, strict=False))
        ]
        out.append("  ".join(cells + line[len(widths) :]).rstrip())
    out.insert(1, "  ".join("-" * w for w in widths))
    return out


def format_table(rows: list[dict[str, Any]], top_k: int = 10) -> str:
    """One model: layer, matrix, the four metrics, the numerical rank and, where any row has
    one, the notes (an unmeasured number is "—")."""
    notes = any(row["note"] for row in rows)
    headers = ["layer", "matrix", *labels(top_k).values(), "rank"]
    lines = [headers + (["note"] if notes else [])]
    for row in rows:
        values = [_cell(row[m], SPECS[m]) for m in ISO_METRICS]
        line = [str(row["layer"]), row["matrix"], *values, _cell(row["rank"], "g")]
        lines.append(line + ([row["note"]] if notes else []))
    return "\n".join(_aligned(lines))


def _keys(models: Sequence[Model]) -> list[tuple[int, str]]:
    """Every (layer, matrix) of any model, by layer then matrix."""
    keys = {(row["layer"], row["matrix"]) for model in models for row in model.rows}
    return sorted(keys, key=lambda k: (k[0], MATRICES.index(k[1])))


def format_side_by_side(models: Sequence[Model], top_k: int = 10) -> str:
    """One block per metric: a row per (layer, matrix), a column per model ("—": not measured,
    its note says why; blank: the model has no such matrix), then the notes."""
    by_model = [{(r["layer"], r["matrix"]): r for r in m.rows} for m in models]
    blocks = []
    for metric, label in labels(top_k).items():
        lines = [["layer", "matrix", *(m.label for m in models)]]
        for key in _keys(models):
            cells = [
                _cell(rows[key][metric], SPECS[metric]) if key in rows else "" for rows in by_model
            ]
            lines.append([str(key[0]), key[1], *cells])
        title = f"{label} ({DIRECTION[metric]} = more isotropic)"
        blocks.append("\n".join([title, *_aligned(lines)]))
    notes = [
        f"  {model.label}, layer {row['layer']} {row['matrix']}: {row['note']}"
        for model in models
        for row in model.rows
        if row["note"]
    ]
    if notes:
        blocks.append("\n".join(["notes:", *notes]))
    return "\n\n".join(blocks)


def format_diagnosis(diagnosis: Diagnosis, top_k: int = 10) -> str:
    """The whole screen: where each model came from, its table(s), the notes, the legend."""
    models = diagnosis.models
    if len(models) == 1:
        parts = [models[0].source, format_table(models[0].rows, top_k)]
    else:
        width = max(len(m.label) for m in models)
        sources = [f"  {m.label.ljust(width)}  {m.source}" for m in models]
        header = f"{len(models)} models of {diagnosis.path}:"
        parts = ["\n".join([header, *sources]), format_side_by_side(models, top_k)]
    parts += diagnosis.notes
    parts.append(explain(top_k, any(m.baseline for m in models)))
    return "\n\n".join(parts)


def csv_rows(diagnosis: Diagnosis, top_k: int = 10) -> list[IsotropyRow]:
    """The rows of ``isotropy.csv``, every model's in turn."""
    names = labels(top_k)
    return [
        IsotropyRow(
            model=model.label,
            layer=row["layer"],
            matrix=row["matrix"],
            metrics={names[m]: row[m] for m in ISO_METRICS},
            rank=row["rank"],
            note=row["note"],
            source=model.source,
        )
        for model in diagnosis.models
        for row in model.rows
    ]


def outputs(diagnosis: Diagnosis, top_k: int = 10) -> Outputs:
    """``isotropy.csv`` and the ``isotropy`` figure (module docstring)."""
    plt = pyplot()
    fig, axes = plt.subplots(1, 4, figsize=(16, 3.8))
    if len(diagnosis.models) == 1:
        _by_layer(axes, diagnosis.models[0].rows)
    else:
        _by_model(axes, diagnosis.models)
    for ax, label in zip(axes, labels(top_k).values(), strict=True):
        ax.set_title(label)
        ax.grid(alpha=0.3)
    if axes[-1].get_legend_handles_labels()[0]:  # a model of zero matrices has no points
        legend_outside(axes[-1])
    title = diagnosis.models[0].source if len(diagnosis.models) == 1 else str(diagnosis.path)
    fig.suptitle(title)
    fig.tight_layout()
    rows = csv_rows(diagnosis, top_k)
    table = Table("isotropy.csv", records(rows), columns=column_docs(IsotropyRow, rows))
    return Outputs(tables=(table,), figures=(Figure("isotropy", fig),))


def write_outputs(out: str | Path, diagnosis: Diagnosis, top_k: int = 10) -> RunDir:
    """:func:`outputs` written into folder ``out``."""
    folder = RunDir(out)
    write(folder, outputs(diagnosis, top_k))
    return folder


def _by_layer(axes: Any, rows: list[dict[str, Any]]) -> None:
    """One model: each metric against the layer, a line per matrix (unmeasured points left
    out)."""
    for ax, metric in zip(axes, ISO_METRICS, strict=True):
        for matrix in MATRICES:
            points = [
                (r["layer"], r[metric])
                for r in rows
                if r["matrix"] == matrix and r[metric] is not None
            ]
            if points:
                ax.plot(*zip(*points, strict=True), marker="o", ms=3, label=matrix)
        ax.set_xlabel("layer")
        integer_ticks(ax)


def _by_model(axes: Any, models: Sequence[Model]) -> None:
    """Several models: each metric's mean over layers per matrix, a marker per model (the
    baselines hollow), side by side within each matrix."""
    present = [m for m in MATRICES if any(r["matrix"] == m for model in models for r in model.rows)]
    step = 0.8 / len(models)
    for ax, metric in zip(axes, ISO_METRICS, strict=True):
        for index, model in enumerate(models):
            points = []
            for x, matrix in enumerate(present):
                values = [r[metric] for r in model.rows if r["matrix"] == matrix]
                if values and None not in values:
                    points.append((x - 0.4 + step * (index + 0.5), statistics.fmean(values)))
            if points:
                face = "none" if model.baseline else None
                ax.plot(*zip(*points, strict=True), ls="", marker="o", mfc=face, label=model.label)
        ax.set_xticks(range(len(present)), present, rotation=45, ha="right")
        ax.set_xlabel("matrix (mean over layers)")


def command(path: str | Path, out: str | Path | None, top_k: int = 10) -> int:
    """``tailmem diagnose PATH [--out DIR] [--top-k K]``: measure, print and (with ``out``)
    write under ``out``'s writer lock."""
    diagnosis = collect(path, top_k)
    print(format_diagnosis(diagnosis, top_k))
    if out:
        with claim(out, ("diagnose",), "diagnose"):
            folder = write_outputs(out, diagnosis, top_k)
        print(f"wrote {folder.path / 'isotropy.csv'} and isotropy.png/.svg")
    return 0
