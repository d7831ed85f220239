"""The benchmark's leaderboard: tail learning against cost, one row per optimiser and level.

Everything is read from the finished QA points (:class:`~.knowledge_qa.grid.PointResult`) and
the memory result (:func:`.memory.run_memory`). The verdict-style placement of an optimiser X
reads two exposure-lag ratios at the headline level τ (all groups pooled, mean ± SE over
seeds): X behind Muon (``lag_vs_muon``: exposures X needs ÷ Muon's) and Adam behind X
(``lag_vs_adam``: Adam's ÷ X's). X *shares Muon's tail edge* when the first is within 2 SE of 1
and the second is not; is *like Adam* when the second is within 2 SE of 1 and the first is not;
*between* when neither is (and it trails Muon while leading Adam); *ahead of Muon* or *behind
Adam* beyond 2 SE; *inconclusive* when it is within 2 SE of both or a ratio was not measured in
every seed (a seed whose ratio is only a bound cannot be averaged).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from tailmem.claims.core import ClaimResult, mean_se
from tailmem.diagnose import diagnose
from tailmem.errors import DataError
from tailmem.experiments.knowledge_qa import grid, tables
from tailmem.experiments.optim_bench.memory import MemoryRun, memory_rows, tail_head_ratio
from tailmem.metrics.qa_gaps import POOLED, TAUS
from tailmem.optim.registry import get_kind, source
from tailmem.plotting import legend_outside, pyplot
from tailmem.rundir import RunDir
from tailmem.train import read_metrics

HEADLINE_TAU = 0.5
"""The FTA level whose pooled lag ratios place each optimiser (the middle of the paper's three)."""
ISOTROPY = {"v": "v", "o": "o", "ffn": ("w_in", "w_gate", "w_out")}
"""The matrices whose isotropy the board reports (FFN: the mean over its matrices)."""
FAMILY_COLOURS = {
    "orthogonalised": "tab:blue",
    "whitening": "tab:green",
    "sign": "tab:red",
    "elementwise": "tab:orange",
    "plain": "tab:grey",
    "yours": "tab:purple",
}


def _pooled(measures: Mapping[str, Any], lead: str, lag: str) -> dict[float, dict[str, Any]]:
    """The pooled lag-ratio rows of ``lag`` behind ``lead``, by τ (empty: not measured)."""
    for pair in measures.get("pairs", []):
        if (pair["lead"], pair["lag"]) == (lead, lag) and pair["status"] == "measured":
            return {row["tau"]: row for row in pair["lag_ratio"] if row["group"] == POOLED}
    return {}


def _ratio(row: Mapping[str, Any] | None) -> tuple[float | None, float | None]:
    """Mean and SE of a lag-ratio row measured in every seed (else None, None)."""
    if not row or row["mean"] is None or row["n_measured"] < row["n_seeds"]:
        return None, None
    return row["mean"], row["se"]


def placement(vs_muon: Mapping[str, Any] | None, vs_adam: Mapping[str, Any] | None) -> str:
    """Where an optimiser sits between Muon and Adam (module docstring)."""
    (m, m_se), (a, a_se) = _ratio(vs_muon), _ratio(vs_adam)
    if m is None or a is None or m_se is None or a_se is None:
        return "inconclusive (a ratio is not measured in every seed)"
    like_muon = abs(m - 1) <= 2.0 * m_se
    like_adam = abs(a - 1) <= 2.0 * a_se
    if like_muon and like_adam:
        return "inconclusive (within 2 SE of both Muon and Adam)"
    if like_muon:
        return "shares Muon's tail edge"
    if like_adam:
        return "like Adam"
    if m < 1:
        return "ahead of Muon"
    if a < 1:
        return "behind Adam"
    return "between Muon and Adam"


def _final(results: Sequence[Any], steps: int, metric: str, group: int) -> tuple[float, float]:
    values = tables.fta_at(results, steps, metric)[:, group]
    stats = mean_se(values.tolist())
    return round(stats.mean, 4), round(stats.se or 0.0, 4)


def isotropy(path: Path) -> dict[str, float | None]:
    """eRank and entropy of V, O and the FFN matrices of the model saved under ``path`` (a
    sub-run folder with its final checkpoint), averaged over layers; None without one."""
    try:
        _, rows = diagnose(path)
    except DataError:
        return {f"{m}_{name}": None for name in ISOTROPY for m in ("erank", "entropy")}
    out: dict[str, float | None] = {}
    for name, matrices in ISOTROPY.items():
        chosen = (matrices,) if isinstance(matrices, str) else matrices
        for metric, key in (("erank", "erank"), ("entropy", "svd_entropy")):
            values = [r[key] for r in rows if r["matrix"] in chosen and r.get(key) is not None]
            out[f"{metric}_{name}"] = round(statistics.fmean(values), 4) if values else None
    return out


def step_seconds(paths: Sequence[Path], tokens_per_step: int) -> float | None:
    """Median training-step time over the logged windows of the runs under ``paths``."""
    rates = [
        row["tokens_per_s"]
        for path in paths
        for row in read_metrics(path / "metrics.jsonl")
        if row.get("tokens_per_s")
    ]
    return tokens_per_step / statistics.median(rates) if rates else None


def level_rows(
    point: grid.PointResult,
    root: Path,
    labels: Mapping[str, str],
    memory: Mapping[str, Mapping[str, Any]],
) -> list[dict[str, Any]]:
    """The leaderboard rows of one QA level."""
    cfg, plan = point.config, point.plan
    ffn = cfg.ffns[0]
    measures = point.measures.get(ffn, {})
    level_root = root / "points" / grid.slug(point.point.label)
    tokens = cfg.train.batch_size * cfg.train.seq_len
    times = {}
    for arm in plan.arms:
        runs = [level_root / spec.key for spec in plan.seed_runs.get((ffn, arm), [])]
        times[arm] = step_seconds([p for p in runs if (p / "metrics.jsonl").is_file()], tokens)
    rows = []
    for arm in plan.arms:
        kind = get_kind(arm, cfg.optim.kinds())
        results = tables.seed_results(plan, ffn, arm)
        best = plan.best.get((ffn, arm), {})
        edge = grid.chosen_edge(plan, ffn, arm)
        row: dict[str, Any] = {
            "level": point.point.label, "optimizer": arm, "label": labels.get(arm, arm),
            "family": kind.family, "source": source(kind), "lr": best.get(arm),
            "lr_grid": "interior" if edge is None else f"{edge} edge", "n_seeds": len(results),
        }  # fmt: skip
        vs_adam = _pooled(measures, arm, "adam") if arm != "adam" else {}
        vs_muon = _pooled(measures, "muon", arm) if arm not in ("muon", "adam") else {}
        for tau in TAUS:
            for name, rows_by_tau in (("lag_vs_adam", vs_adam), ("lag_vs_muon", vs_muon)):
                mean, se = _ratio(rows_by_tau.get(tau))
                row[f"{name}_{tau:g}"] = None if mean is None else round(mean, 4)
                row[f"{name}_{tau:g}_se"] = None if se is None else round(se, 4)
        if results:
            for metric in tables.METRICS:
                for name, group in (("rarest", -1), ("second", -2)):
                    row[f"{name}_{metric}"], row[f"{name}_{metric}_se"] = _final(
                        results, plan.steps, metric, group
                    )
        peak = next((p["peak_gap"]["overall"] for p in measures.get("pairs", [])
                     if (p["lead"], p["lag"]) == (arm, "adam") and p["status"] == "measured"),
                    None)  # fmt: skip
        row["peak_gap_vs_adam"] = None if peak is None else round(peak["gap"], 4)
        row["peak_gap_vs_adam_se"] = (
            None if peak is None or peak["se"] is None else round(peak["se"], 4)
        )
        first = plan.seed_runs.get((ffn, arm), [])
        row.update(isotropy(level_root / first[0].key) if first else isotropy(level_root / "none"))
        base, mine = times.get("adam"), times[arm]
        row["step_seconds"] = None if mine is None else round(mine, 4)
        row["step_time_vs_adam"] = None if mine is None or not base else round(mine / base, 3)
        row.update(memory.get(arm, {}))
        row["placement"] = (
            "reference"
            if arm in ("muon", "adam")
            else placement(vs_muon.get(HEADLINE_TAU), vs_adam.get(HEADLINE_TAU))
        )
        rows.append(row)
    return rows


def memory_summary(result: Mapping[str, Any], steps: int) -> dict[str, dict[str, Any]]:
    """Per optimiser, the memory's numbers the board shows: the steps the most frequent and
    the rarest group take to halve their loss (mean over draws; ``≥`` where censored), their
    ratio and ϱ^ε."""
    out: dict[str, dict[str, Any]] = {}
    runs: list[MemoryRun] = list(result["runs"])
    for name in dict.fromkeys(r.optimizer for r in runs):
        mine = [r for r in runs if r.optimizer == name]
        tails = [steps if r.times[-1] is None else r.times[-1] for r in mine]
        heads = [r.times[0] for r in mine if r.times[0] is not None]
        ratios = [tail_head_ratio(r, steps)[0] for r in mine]
        rhos = [r.rho for r in mine if r.rho is not None]
        censored = any(r.times[-1] is None for r in mine)
        out[name] = {
            "memory_lr": mine[0].lr,
            "memory_head_steps": round(statistics.fmean(heads), 2) if heads else None,
            "memory_tail_steps": round(statistics.fmean(tails), 2),
            "memory_tail_censored": censored,
            "memory_tail_head_ratio": round(statistics.fmean(ratios), 3)
            if all(math.isfinite(x) for x in ratios) else None,
            "memory_rho": round(statistics.fmean(rhos), 4) if len(rhos) == len(mine) else None,
        }  # fmt: skip
    return out


def build(
    cfg: Any,
    run: RunDir,
    points: Mapping[str, grid.PointResult],
    memory: Mapping[str, Any],
    labels: Mapping[str, str],
) -> dict[str, Any]:
    """Every table of the benchmark (written by :func:`write`)."""
    summary = memory_summary(memory, cfg.memory.steps)
    board = [row for p in points.values() for row in level_rows(p, run.path, labels, summary)]
    ratios = []
    for label, point in points.items():
        measures = point.measures.get(point.config.ffns[0], {})
        for pair in measures.get("pairs", []):
            for row in pair.get("lag_ratio", []):
                ratios.append({
                    "level": label, "lead": pair["lead"], "lag": pair["lag"],
                    "group": row["group"], "tau": row["tau"], "mean": row["mean"],
                    "se": row["se"], "n_measured": row["n_measured"], "n_seeds": row["n_seeds"],
                })  # fmt: skip
    sweep = [{"optimizer": name, **r} for name, rows in memory["sweeps"].items() for r in rows]
    return {"board": board, "ratios": ratios, "memory": memory_rows(memory, cfg.memory.steps),
            "memory_sweep": sweep, "memory_edges": memory["edges"]}  # fmt: skip


def claim_inputs(cfg: Any, memory: Mapping[str, Any]) -> Any:
    """The memory's times per optimiser and draw, for :mod:`tailmem.claims.related`."""
    from tailmem.claims.related import BenchMemory

    runs: list[MemoryRun] = list(memory["runs"])
    times = {name: [r.times for r in runs if r.optimizer == name] for name in cfg.optimizers}
    return BenchMemory(steps=cfg.memory.steps, times=times)


def figure(rows: Sequence[Mapping[str, Any]], level: str) -> Any:
    """Tail learning (Adam's lag behind each optimiser, pooled, τ 0.5, ± SE) against cost (its
    step time ÷ Adam's), one point per optimiser coloured by family."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    key = f"lag_vs_adam_{HEADLINE_TAU:g}"
    points: list[tuple[float, float, str]] = []
    for row in rows:
        y = 1.0 if row["optimizer"] == "adam" else row.get(key)
        x = row.get("step_time_vs_adam")
        if y is None or x is None:
            continue
        se = 0.0 if row["optimizer"] == "adam" else row.get(f"{key}_se") or 0.0
        colour = FAMILY_COLOURS.get(row["family"], "black")
        ax.errorbar([x], [y], yerr=[2.0 * se], fmt="o", color=colour, capsize=3,
                    label=row["family"])  # fmt: skip
        points.append((x, y, row["label"]))
    ax.axhline(1.0, color="grey", linestyle=":", linewidth=1)
    ax.margins(x=0.15)  # room for the rightmost point's name
    handles, names = ax.get_legend_handles_labels()
    unique = dict(zip(names, handles, strict=True))
    ax.set(xlabel="step time ÷ Adam's (same run)",
           ylabel=f"Adam's exposures ÷ the optimiser's (τ {HEADLINE_TAU:g}, pooled)",
           title=f"Which optimisers learn the tail ({level}); bars ± 2 SE")  # fmt: skip
    ax.grid(alpha=0.3)
    if unique:
        legend_outside(ax, handles=list(unique.values()), labels=list(unique))
    fig.tight_layout()
    _label_points(ax, points)
    return fig


def _label_points(ax: Any, points: Sequence[tuple[float, float, str]], size: float = 7) -> None:
    """Name each point beside it; a label that would cover one already placed moves down a line
    (with a leader line to its point), so a cluster of optimisers at the same cost stays
    readable. Placement is in points on the page, after the axes' limits are final."""
    to_page = ax.transData.transform
    line, char = size * 1.25, size * 0.55
    placed: list[tuple[float, float, float]] = []  # left, bottom, right, in page points
    for x, y, label in sorted(points, key=lambda p: -p[1]):
        px, py = to_page((x, y)) * 72.0 / ax.figure.dpi
        left, bottom, width = px + 5, py + 3, char * len(label)
        while any(
            left < r and left + width > lft and abs(bottom - b) < line for lft, b, r in placed
        ):
            bottom -= line
        placed.append((left, bottom, left + width))
        shifted = bottom != py + 3
        ax.annotate(label, (x, y), textcoords="offset points", xytext=(left - px, bottom - py),
                    fontsize=size, arrowprops={"arrowstyle": "-", "color": "grey", "lw": 0.5}
                    if shifted else None)  # fmt: skip


def summary_text(cfg: Any, rows: Sequence[Mapping[str, Any]], claims: Sequence[ClaimResult]) -> str:
    """The report's paragraph: the setting, each optimiser's placement with its evidence at the
    base level, the memory's tail times and the claims' verdicts."""
    base = cfg.levels[0].label
    key = f"{HEADLINE_TAU:g}"
    parts = [
        f"{len(cfg.optimizers)} optimisers on the hidden matrices (Adam on embedding, head and "
        f"norms), knowledge QA from the {cfg.preset} preset at levels "
        f"{', '.join(level.label for level in cfg.levels)}; the memory: K = {cfg.memory.facts} "
        f"facts in d = {cfg.memory.dim}, Zipf {cfg.memory.exponent:g}."
    ]
    groups: dict[str, list[str]] = {}
    for row in rows:
        if row["level"] != base or row["placement"] == "reference":
            continue
        m, ms = row.get(f"lag_vs_muon_{key}"), row.get(f"lag_vs_muon_{key}_se")
        a, a_se = row.get(f"lag_vs_adam_{key}"), row.get(f"lag_vs_adam_{key}_se")
        evidence = (
            f"{row['label']} (behind Muon {m:.2f} ± {ms:.2f}, Adam behind it {a:.2f} ± {a_se:.2f})"
            if None not in (m, ms, a, a_se) else f"{row['label']}"
        )  # fmt: skip
        groups.setdefault(row["placement"], []).append(evidence)
    for placement_name, names in groups.items():
        parts.append(f"{placement_name[0].upper()}{placement_name[1:]} ({base}, τ {key}): "
                     f"{'; '.join(names)}.")  # fmt: skip
    parts += [f"{c.id}: {c.verdict} — {c.ours}." for c in claims]
    if cfg.note:
        parts.append(cfg.note.strip())
    return " ".join(parts)


BOARD_COLUMNS = {
    "placement": "where the optimiser sits between Muon and Adam (the module docstring's rule)",
    "lag_vs_adam_0.5": "Adam's exposures ÷ this optimiser's to bring the pooled FTA to τ 0.5, "
    "mean over seeds (_se: its SE; 0.3 and 0.8 alike)",
    "lag_vs_muon_0.5": "this optimiser's exposures ÷ Muon's at τ 0.5 (1: Muon's pace)",
    "rarest_fta": "final FTA of the rarest group, mean ± SE over seeds (second: the next group; "
    "_em: whole-answer exact match)",
    "peak_gap_vs_adam": "largest seed-mean FTA gap over Adam, any group and evaluation",
    "erank_v": "effective rank of V at the end (first seed; o, ffn alike; entropy: normalised "
    "singular-value entropy)",
    "step_time_vs_adam": "median training-step time ÷ Adam's, measured in this run",
    "memory_tail_steps": "steps the rarest group of the associative memory takes to halve its "
    "loss (head: the most frequent group; rho: one-step balance)",
    "source": "the implementation and its version",
}


def write(cfg: Any, run: RunDir, tables_: Mapping[str, Any], claims: Sequence[ClaimResult]) -> None:
    """CSVs, figures, ``results.json`` and ``report.json``."""
    board = tables_["board"]
    run.write_csv("leaderboard.csv", board)
    run.write_csv("lag_ratio.csv", tables_["ratios"])
    run.write_csv("memory.csv", tables_["memory"])
    run.write_csv("memory_sweep.csv", tables_["memory_sweep"])
    figures = []
    for level in cfg.levels:
        rows = [r for r in board if r["level"] == level.label]
        stem = f"leaderboard_{grid.slug(level.label)}"
        figures.append(run.save_report_figure(
            figure(rows, level.label), stem,
            f"Tail learning against cost, {level.label}: Adam's exposure lag behind each "
            f"optimiser (pooled, τ {HEADLINE_TAU:g}, mean ± 2 SE over seeds) against its step "
            "time ÷ Adam's; coloured by family",
        ))  # fmt: skip
    run.write_json("results.json", {
        "optimizers": list(cfg.optimizers), "levels": [lv.label for lv in cfg.levels],
        "leaderboard": board, "memory_edges": tables_["memory_edges"],
        "memory": tables_["memory"], "memory_sweep": tables_["memory_sweep"],
    })  # fmt: skip
    run.write_json("report.json", {
        "title": "Which optimisers learn the tail? (a benchmark beyond the papers)",
        "summary": summary_text(cfg, board, claims),
        "figures": figures,
        "tables": [
            {"file": "leaderboard.csv", "caption": "The leaderboard: one row per optimiser and "
             "QA level", "columns": BOARD_COLUMNS},
            {"file": "memory.csv", "caption": "The associative memory: steps each frequency "
             "group takes to halve its loss, per optimiser and embedding draw"},
        ],
    })  # fmt: skip
